/*
 * CRC32C (Castagnoli, the iSCSI/ext4 polynomial 0x1EDC6F41, reflected 0x82F63B78).
 *
 * zinf_crc32c uses the SSE4.2 crc32 instruction when the CPU has it (checked once at run
 * time) and a slicing table otherwise; both give the same values. Thread-safe.
 * The check value of "123456789" is 0xE3069283.
 */
#ifndef ZINF_CRC32C_H
#define ZINF_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Continue crc over len bytes at data. Start with crc = 0; the result of one call can
 * be passed as crc to the next to checksum a buffer in parts. */
uint32_t zinf_crc32c(uint32_t crc, const void *data, size_t len);
/* The same with the table implementation only (tests compare the two). */
uint32_t zinf_crc32c_sw(uint32_t crc, const void *data, size_t len);
/* The same with the SSE4.2 instruction; only valid when zinf_crc32c_hw_available(). */
uint32_t zinf_crc32c_hw(uint32_t crc, const void *data, size_t len);
/* 1 when the CPU has the crc32 instruction, else 0. */
int zinf_crc32c_hw_available(void);
/* The CRC32C of A followed by B from crc_a = zinf_crc32c(0, A, ...), crc_b =
 * zinf_crc32c(0, B, ...) and len_b, B's length: parts checksummed apart (in any order,
 * on any thread) give the whole's checksum without reading it again. O(log len_b). */
uint32_t zinf_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_CRC32C_H */

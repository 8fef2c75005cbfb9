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

#ifdef __cplusplus
}
#endif
#endif /* ZINF_CRC32C_H */

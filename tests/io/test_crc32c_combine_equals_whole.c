/*
 * zinf_crc32c_combine gives the CRC32C of two parts together from the parts' CRCs: for
 * every split of random data (empty parts included), for a buffer cut in many pieces
 * combined left to right, and for a 48 MiB part of zeros (the long shift).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "zinf/crc32c.h"

int main(void)
{
	enum { N = 4099 };
	unsigned char *buf = malloc(N), *zeros = calloc(48u << 20, 1);
	uint64_t x = 0x9E3779B97F4A7C15ull;
	uint32_t whole, acc = 0;
	size_t at = 0;

	T_CHECK(buf && zeros, "out of memory");
	for (int i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
	whole = zinf_crc32c(0, buf, N);
	for (size_t cut = 0; cut <= N; cut++) {
		uint32_t a = zinf_crc32c(0, buf, cut), b = zinf_crc32c(0, buf + cut, N - cut);
		T_CHECK(zinf_crc32c_combine(a, b, N - cut) == whole,
			"split at %zu: combined %08x, whole %08x", cut,
			zinf_crc32c_combine(a, b, N - cut), whole);
	}
	/* pieces of 1, 2, 3, ... bytes, combined as they come */
	for (size_t len = 1; at < N; len++) {
		size_t n = len < N - at ? len : N - at;
		acc = zinf_crc32c_combine(acc, zinf_crc32c(0, buf + at, n), n);
		at += n;
	}
	T_CHECK(acc == whole, "pieces: %08x, whole %08x", acc, whole);
	{
		uint32_t head = zinf_crc32c(0, buf, 100), z = zinf_crc32c(0, zeros, 48u << 20);
		uint32_t direct = zinf_crc32c(head, zeros, 48u << 20);
		T_CHECK(zinf_crc32c_combine(head, z, 48u << 20) == direct,
			"48 MiB of zeros: combined %08x, direct %08x",
			zinf_crc32c_combine(head, z, 48u << 20), direct);
	}
	free(buf);
	free(zeros);
	return T_EXIT_PASS;
}

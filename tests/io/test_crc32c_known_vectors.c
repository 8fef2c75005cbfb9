/*
 * CRC32C gives the published check values with both the table and the SSE4.2 code, the
 * two agree on random data at every alignment and length, and chaining equals one call.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "zinf/crc32c.h"

int main(void)
{
	static const unsigned char zeros[32], ones[32] = {[0 ... 31] = 0xff};
	unsigned char inc[32], *buf;
	size_t n = 200000;

	for (int i = 0; i < 32; i++)
		inc[i] = (unsigned char)i;
	/* RFC 3720 B.4 vectors and the classic check value */
	T_CHECK(zinf_crc32c_sw(0, "123456789", 9) == 0xE3069283u, "sw check value");
	T_CHECK(zinf_crc32c_sw(0, zeros, 32) == 0x8A9136AAu, "sw 32 zeros");
	T_CHECK(zinf_crc32c_sw(0, ones, 32) == 0x62A8AB43u, "sw 32 0xff");
	T_CHECK(zinf_crc32c_sw(0, inc, 32) == 0x46DD794Eu, "sw 0..31");
	T_CHECK(zinf_crc32c(0, "123456789", 9) == 0xE3069283u, "dispatch check value");
	T_CHECK(zinf_crc32c_sw(0, "", 0) == 0, "empty");
	if (!zinf_crc32c_hw_available())
		T_SKIP("no SSE4.2 crc32 instruction: table path checked only");
	T_CHECK(zinf_crc32c_hw(0, "123456789", 9) == 0xE3069283u, "hw check value");
	T_CHECK(zinf_crc32c_hw(0, zeros, 32) == 0x8A9136AAu, "hw 32 zeros");
	T_CHECK(zinf_crc32c_hw(0, ones, 32) == 0x62A8AB43u, "hw 32 0xff");
	T_CHECK(zinf_crc32c_hw(0, inc, 32) == 0x46DD794Eu, "hw 0..31");

	buf = malloc(n + 8);
	T_CHECK(buf != NULL, "malloc");
	srand(1);
	for (size_t i = 0; i < n + 8; i++)
		buf[i] = (unsigned char)rand();
	for (size_t len = 0; len < n; len = len * 3 + 1) {
		for (int off = 0; off < 8; off++) {
			uint32_t s = zinf_crc32c_sw(0x1234, buf + off, len);
			uint32_t h = zinf_crc32c_hw(0x1234, buf + off, len);

			T_CHECK(s == h, "len %zu off %d: sw %08x hw %08x", len, off, s, h);
		}
	}
	/* covers the 3-stream loop (>= 24 KiB) and its combination */
	T_CHECK(zinf_crc32c_hw(0, buf, n) == zinf_crc32c_sw(0, buf, n), "large buffer");
	T_CHECK(zinf_crc32c(zinf_crc32c(0, buf, 77777), buf + 77777, n - 77777) ==
			zinf_crc32c(0, buf, n),
		"chaining");
	free(buf);
	return 0;
}

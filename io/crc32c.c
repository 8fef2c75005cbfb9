/*
 * CRC32C: a slicing-by-8 table implementation and an SSE4.2 one, chosen at run time.
 *
 * The hardware path is compiled with a function-level target attribute so the rest of
 * the build needs no -march flag; it runs three independent crc32 streams over thirds
 * of each large block to hide the instruction's 3-cycle latency, and combines them with
 * the zero-extension operator (a 32x32 GF(2) matrix applied by table lookups).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "zinf/crc32c.h"

#define CRC32C_POLY 0x82F63B78u

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_have_hw;

/* Shift operators for the 3-way hardware loop: x^(8*BLOCK) mod P applied per byte. */
#define HW_BLOCK 8192 /* bytes per stream in one round */
static uint32_t shift_table[4][256];

static uint32_t gf2_mul_vec(const uint32_t *mat, uint32_t vec)
{
	uint32_t sum = 0;

	for (int i = 0; vec; i++, vec >>= 1) {
		if (vec & 1)
			sum ^= mat[i];
	}
	return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
	for (int i = 0; i < 32; i++)
		sq[i] = gf2_mul_vec(mat, mat[i]);
}

/* Build the operator that appends nbytes zero bytes to a (raw, unconditioned) CRC. */
static void crc_zeros_operator(uint32_t *op, uint64_t nbytes)
{
	uint32_t odd[32], even[32], tmp[32];

	/* operator for one zero bit */
	odd[0] = CRC32C_POLY;
	for (int i = 1; i < 32; i++)
		odd[i] = 1u << (i - 1);
	gf2_square(even, odd); /* 2 bits */
	gf2_square(odd, even); /* 4 bits */
	/* odd now appends 4 zero bits; square to bytes and beyond */
	for (int i = 0; i < 32; i++)
		op[i] = 1u << i; /* identity */
	gf2_square(even, odd);	 /* 8 bits = 1 byte */
	/* even: one byte. Build op = even^nbytes by square-and-multiply. */
	memcpy(tmp, even, sizeof(tmp));
	while (nbytes) {
		if (nbytes & 1) {
			uint32_t next[32];

			for (int i = 0; i < 32; i++)
				next[i] = gf2_mul_vec(tmp, op[i]);
			memcpy(op, next, sizeof(next));
		}
		nbytes >>= 1;
		if (nbytes) {
			gf2_square(even, tmp);
			memcpy(tmp, even, sizeof(tmp));
		}
	}
}

static void crc_init(void)
{
	uint32_t op[32];

	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_table[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = crc_table[0][n];

		for (int k = 1; k < 8; k++) {
			c = crc_table[0][c & 0xff] ^ (c >> 8);
			crc_table[k][n] = c;
		}
	}
	crc_zeros_operator(op, HW_BLOCK);
	for (int b = 0; b < 4; b++) {
		for (uint32_t n = 0; n < 256; n++)
			shift_table[b][n] = gf2_mul_vec(op, n << (8 * b));
	}
	__builtin_cpu_init();
	crc_have_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

static uint32_t crc_shift(uint32_t crc)
{
	return shift_table[0][crc & 0xff] ^ shift_table[1][(crc >> 8) & 0xff] ^
	       shift_table[2][(crc >> 16) & 0xff] ^ shift_table[3][crc >> 24];
}

static uint32_t crc_sw_raw(uint32_t c, const unsigned char *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		len--;
	}
	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		w ^= c;
		c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
		    crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
		    crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
		    crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

uint32_t zinf_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_sw_raw(~crc, data, len);
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw_raw(uint32_t c, const unsigned char *p,
							     size_t len)
{
	uint64_t c0 = c;

	while (len && ((uintptr_t)p & 7)) {
		c0 = __builtin_ia32_crc32qi((uint32_t)c0, *p++);
		len--;
	}
	while (len >= 3 * HW_BLOCK) {
		uint64_t c1 = 0, c2 = 0;

		for (size_t i = 0; i < HW_BLOCK; i += 8) {
			uint64_t a, b, d;

			memcpy(&a, p + i, 8);
			memcpy(&b, p + HW_BLOCK + i, 8);
			memcpy(&d, p + 2 * HW_BLOCK + i, 8);
			c0 = __builtin_ia32_crc32di(c0, a);
			c1 = __builtin_ia32_crc32di(c1, b);
			c2 = __builtin_ia32_crc32di(c2, d);
		}
		/* crc(A|B|C) = shift(shift(cA) ^ cB) ^ cC with zero-initialised B and C */
		c0 = crc_shift(crc_shift((uint32_t)c0) ^ (uint32_t)c1) ^ (uint32_t)c2;
		p += 3 * HW_BLOCK;
		len -= 3 * HW_BLOCK;
	}
	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c0 = __builtin_ia32_crc32di(c0, w);
		p += 8;
		len -= 8;
	}
	while (len--)
		c0 = __builtin_ia32_crc32qi((uint32_t)c0, *p++);
	return (uint32_t)c0;
}

uint32_t zinf_crc32c_hw(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return ~crc_hw_raw(~crc, data, len);
}

int zinf_crc32c_hw_available(void)
{
	pthread_once(&crc_once, crc_init);
	return crc_have_hw;
}

uint32_t zinf_crc32c(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&crc_once, crc_init);
	if (crc_have_hw)
		return ~crc_hw_raw(~crc, data, len);
	return ~crc_sw_raw(~crc, data, len);
}

/* ---- combining: CRCs as polynomials over GF(2), reflected ---------------------------- */

#define CRC32C_POLY 0x82F63B78u

/* a * b modulo the polynomial (bit 31 is x^0 in the reflected form). */
static uint32_t gf2_mulmod(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

	for (;;) {
		if (a & m) {
			p ^= b;
			if (!(a & (m - 1)))
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ CRC32C_POLY : b >> 1;
	}
	return p;
}

/* x^(8 * len) modulo the polynomial: the shift appending len zero bytes applies. */
static uint32_t gf2_x8n(uint64_t len)
{
	uint32_t x2k = 1u << 30; /* x^1, squared each round: x^(2^k) */
	uint32_t r = 1u << 31;	 /* x^0 */
	uint64_t n = len << 3;

	for (; n; n >>= 1) {
		if (n & 1)
			r = gf2_mulmod(x2k, r);
		x2k = gf2_mulmod(x2k, x2k);
	}
	return r;
}

uint32_t zinf_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	/* The pre- and post-inversions cancel: shifting crc_a past len_b bytes of B and
	 * adding crc_b is the CRC of A then B (the construction zlib's crc32_combine uses). */
	return gf2_mulmod(gf2_x8n(len_b), crc_a) ^ crc_b;
}

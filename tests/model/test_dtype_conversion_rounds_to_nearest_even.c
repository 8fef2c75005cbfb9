/*
 * fp32 -> bf16 and fp32 -> fp16 round to nearest, ties to even, against an independent
 * reference that picks the nearer of the two neighbouring representable values in double
 * precision; every fp16 and bf16 value converts to fp32 and back unchanged; overflow goes
 * to infinity, NaN stays NaN, subnormal halves are exact; a 16-bit -> 16-bit conversion
 * rounds once.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "safetensors.h"
#include "test.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t next_u32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

static float from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Sorted finite non-negative halves, as doubles, for the reference. */
static double halves[0x7c00];

/* Reference fp16 rounding: nearest of the sorted finite halves, ties to the even code;
 * beyond 65504 + half an ulp, infinity. */
static uint16_t ref_f16(float f)
{
	double a = fabs((double)f);
	uint16_t sign = signbit(f) ? 0x8000 : 0;
	int lo = 0, hi = 0x7bff;

	if (a >= 65520.0)
		return sign | 0x7c00;
	while (lo < hi) { /* largest code with value <= a */
		int mid = (lo + hi + 1) / 2;

		if (halves[mid] <= a)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (lo < 0x7bff) {
		double dl = a - halves[lo], dh = halves[lo + 1] - a;

		if (dh < dl || (dh == dl && (lo & 1)))
			lo++;
	}
	return sign | (uint16_t)lo;
}

/* Reference bf16 rounding from the two truncation neighbours. */
static uint16_t ref_bf16(float f)
{
	uint32_t u;
	uint16_t lo;
	double a, vl, vh;

	memcpy(&u, &f, 4);
	lo = (uint16_t)(u >> 16);
	if ((u & 0xffff) == 0)
		return lo;
	vl = (double)zinf_st_bf16_to_f32(lo);
	vh = (double)zinf_st_bf16_to_f32((uint16_t)(lo + 1)); /* next away from zero (may be inf) */
	a = (double)f;
	if (isinf(vh)) { /* halfway to 2^128 (as if the exponent continued) decides */
		vh = copysign(ldexp(1.0, 128), a);
	}
	if (fabs(vh - a) < fabs(a - vl) || (fabs(vh - a) == fabs(a - vl) && (lo & 1)))
		return (uint16_t)(lo + 1);
	return lo;
}

int main(void)
{
	for (int h = 0; h < 0x7c00; h++)
		halves[h] = (double)zinf_st_f16_to_f32((uint16_t)h);
	/* Every half and every bf16 converts exactly and back. */
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = zinf_st_f16_to_f32((uint16_t)h), g = zinf_st_bf16_to_f32((uint16_t)h);

		if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
			T_CHECK(isnan(f) && (zinf_st_f32_to_f16(f) & 0x7fff) > 0x7c00, "f16 NaN %x",
				h);
		} else {
			T_CHECK(zinf_st_f32_to_f16(f) == h, "f16 %04x -> %g -> %04x", h, f,
				zinf_st_f32_to_f16(f));
		}
		if ((h & 0x7f80) == 0x7f80 && (h & 0x7f))
			T_CHECK(isnan(g) && isnan(zinf_st_bf16_to_f32(zinf_st_f32_to_bf16(g))),
				"bf16 NaN");
		else
			T_CHECK(zinf_st_f32_to_bf16(g) == h, "bf16 %04x round trip", h);
	}
	/* Subnormal halves are exact multiples of 2^-24. */
	T_CHECK(zinf_st_f16_to_f32(0x0001) == 0x1p-24f &&
			zinf_st_f16_to_f32(0x03ff) == 1023 * 0x1p-24f,
		"subnormal halves");
	/* Midpoints between neighbouring halves go to the even code. */
	for (int h = 0; h < 0x7bff; h++) {
		double mid = (halves[h] + halves[h + 1]) / 2;
		float f = (float)mid; /* exact: a half midpoint has <= 12 significant bits */
		uint16_t want = (uint16_t)((h & 1) ? h + 1 : h);

		T_CHECK((double)f == mid, "midpoint not exact");
		T_CHECK(zinf_st_f32_to_f16(f) == want, "tie %04x/%04x: got %04x", h, h + 1,
			zinf_st_f32_to_f16(f));
		T_CHECK(zinf_st_f32_to_f16(-f) == (0x8000 | want), "negative tie");
	}
	/* Overflow and specials. */
	T_CHECK(zinf_st_f32_to_f16(65504.0f) == 0x7bff, "max half");
	T_CHECK(zinf_st_f32_to_f16(65519.996f) == 0x7bff, "below the overflow tie");
	T_CHECK(zinf_st_f32_to_f16(65520.0f) == 0x7c00, "overflow tie goes to inf");
	T_CHECK(zinf_st_f32_to_f16(-1e30f) == 0xfc00, "-inf");
	T_CHECK(zinf_st_f32_to_f16(0x1p-25f) == 0, "2^-25 ties to 0");
	T_CHECK(zinf_st_f32_to_f16(0x1.000002p-25f) == 1, "just above 2^-25 rounds up");
	T_CHECK(zinf_st_f32_to_bf16(from_bits(0x7f7fffff)) == 0x7f80,
		"FLT_MAX rounds to inf in bf16");
	T_CHECK(zinf_st_f32_to_bf16(from_bits(0x3f808000)) == 0x3f80, "bf16 tie to even (down)");
	T_CHECK(zinf_st_f32_to_bf16(from_bits(0x3f818000)) == 0x3f82, "bf16 tie to even (up)");
	T_CHECK(zinf_st_f32_to_bf16(from_bits(0x3f808001)) == 0x3f81, "bf16 above the tie");
	/* Random floats of every magnitude against the references. */
	for (int i = 0; i < 2000000; i++) {
		uint32_t u = next_u32() | ((next_u32() & 1u) << 31);
		float f = from_bits(u);

		if (isnan(f))
			continue;
		T_CHECK(zinf_st_f32_to_bf16(f) == ref_bf16(f), "bf16(%a): %04x, want %04x", f,
			zinf_st_f32_to_bf16(f), ref_bf16(f));
		T_CHECK(zinf_st_f32_to_f16(f) == ref_f16(f), "f16(%a): %04x, want %04x", f,
			zinf_st_f32_to_f16(f), ref_f16(f));
	}
	/* Values near 1 (dense in the interesting range) as well. */
	for (int i = 0; i < 500000; i++) {
		float f = from_bits(0x3c000000u + (next_u32() % 0x8000000u));

		T_CHECK(zinf_st_f32_to_f16(f) == ref_f16(f), "f16(%a)", f);
		T_CHECK(zinf_st_f32_to_bf16(f) == ref_bf16(f), "bf16(%a)", f);
	}
	/* bf16 -> f16 through zinf_st_convert rounds once (exact fp32 in between). */
	{
		uint16_t src[4] = {0x3f81, 0x4780, 0x0001, 0xc2f7}, dst[4];

		zinf_st_convert(dst, ZINF_ST_F16, src, ZINF_ST_BF16, 4);
		for (int i = 0; i < 4; i++)
			T_CHECK(dst[i] == ref_f16(zinf_st_bf16_to_f32(src[i])), "convert %d", i);
		zinf_st_convert(src, ZINF_ST_BF16, dst, ZINF_ST_F16, 4);
		for (int i = 0; i < 4; i++)
			T_CHECK(src[i] == ref_bf16(zinf_st_f16_to_f32(dst[i])), "convert back %d",
				i);
	}
	return T_EXIT_PASS;
}

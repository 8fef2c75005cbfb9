/*
 * The scalar fp16 conversions (optim.h) match the F16C instructions bit for bit:
 * every one of the 65536 fp16 values widened, and fp32 values narrowed with round to
 * nearest even, including ties, overflow to infinity, subnormals, underflow to zero and
 * NaN payloads. Skips (77) on a CPU without F16C.
 */
#include <immintrin.h>
#include <math.h>

#include "optim.h"
#include "test.h"

__attribute__((target("f16c"))) static float hw_f16_to_f32(uint16_t h)
{
	return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

__attribute__((target("f16c"))) static uint16_t hw_f32_to_f16(float x)
{
	return (uint16_t)_mm_extract_epi16(
		_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), 0);
}

static void check_narrow(uint32_t u)
{
	float x;
	uint16_t want, got;

	memcpy(&x, &u, sizeof(x));
	want = hw_f32_to_f16(x);
	got = zinf_f32_to_f16(x);
	T_CHECK(got == want, "f32 0x%08x (%a): scalar 0x%04x, F16C 0x%04x", u, x, got, want);
}

int main(void)
{
	if (!zinf_cpu_has_f16c())
		T_SKIP("no F16C on this CPU");
	for (uint32_t h = 0; h < 65536; h++) {
		float want = hw_f16_to_f32((uint16_t)h), got = zinf_f16_to_f32((uint16_t)h);
		uint32_t uw, ug;

		memcpy(&uw, &want, 4);
		memcpy(&ug, &got, 4);
		T_CHECK(uw == ug, "f16 0x%04x: scalar 0x%08x, F16C 0x%08x", h, ug, uw);
		/* round trip is exact */
		T_CHECK(zinf_f32_to_f16(got) == (uint16_t)h || isnan(got), "round trip of 0x%04x",
			h);
	}
	/* Every exponent, with mantissas around each rounding boundary (ties included). */
	for (uint32_t sign = 0; sign < 2; sign++)
		for (uint32_t e = 0; e < 256; e++)
			for (uint32_t k = 0; k < 4096; k++) {
				uint32_t base = (sign << 31) | (e << 23);
				uint32_t mant = (k * 0x2000u) & 0x7fffffu;

				check_narrow(base | mant);
				check_narrow(base | ((mant + 0x1000u) & 0x7fffffu));
				check_narrow(base | ((mant + 0x0fffu) & 0x7fffffu));
				check_narrow(base | ((mant + 0x1001u) & 0x7fffffu));
				check_narrow(base | ((k * 2654435761u) & 0x7fffffu));
			}
	return T_EXIT_PASS;
}

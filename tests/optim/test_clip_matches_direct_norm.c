/*
 * Global-norm clipping: per-shard sums of squares (fp32, bf16 and fp16 shards) add up
 * to the norm computed directly over all elements; the coefficient is torch's
 * clip_grad_norm_ (max_norm / (norm + 1e-6), at most 1); the loss scale is divided out;
 * grads scaled by the resulting factor have norm max_norm; an inf or nan in any shard
 * is reported as overflow. The scalar, AVX2 and AVX-512 sums agree bit for bit.
 */
#include <math.h>

#include "cast.h"
#include "clip.h"
#include "optim.h"
#include "test.h"

#define N32 1000
#define NB 777
#define NH 513

static float g32[N32];
static uint16_t gb[NB], gh[NH];

static double rel(double a, double b)
{
	return fabs(a - b) / fmax(fabs(b), 1e-300);
}

int main(void)
{
	const double S = 1024.0; /* loss scale: a power of 2, so scaling is exact */
	double direct = 0, sumsq, clipped = 0;
	struct zinf_grad_clip c;
	uint32_t r = 12345;

	for (int i = 0; i < N32; i++) {
		r = r * 1664525u + 1013904223u;
		g32[i] = (float)((double)(r >> 8) / 16777216.0 - 0.5) * (float)S;
	}
	for (int i = 0; i < NB; i++) {
		r = r * 1664525u + 1013904223u;
		gb[i] = zinf_f32_to_bf16((float)((double)(r >> 8) / 16777216.0 - 0.5) * 3.0f *
					 (float)S);
	}
	for (int i = 0; i < NH; i++) {
		r = r * 1664525u + 1013904223u;
		gh[i] = zinf_f32_to_f16((float)((double)(r >> 8) / 16777216.0 - 0.5) * 0.1f *
					(float)S);
	}
	for (int i = 0; i < N32; i++)
		direct += (double)g32[i] / S * ((double)g32[i] / S);
	for (int i = 0; i < NB; i++)
		direct +=
			(double)zinf_bf16_to_f32(gb[i]) / S * ((double)zinf_bf16_to_f32(gb[i]) / S);
	for (int i = 0; i < NH; i++)
		direct += (double)zinf_f16_to_f32(gh[i]) / S * ((double)zinf_f16_to_f32(gh[i]) / S);
	direct = sqrt(direct);

	sumsq = zinf_grad_sumsq(g32, ZINF_DTYPE_F32, N32) +
		zinf_grad_sumsq(gb, ZINF_DTYPE_BF16, NB) + zinf_grad_sumsq(gh, ZINF_DTYPE_F16, NH);

	/* every loop gives the same bits, at every length (tails included) */
	for (int isa = ZINF_ADAM_ISA_SCALAR; isa <= ZINF_ADAM_ISA_AVX512; isa++)
		for (uint64_t n = 0; n <= 100; n += 7) {
			double a = zinf_grad_sumsq_isa(g32 + 3, ZINF_DTYPE_F32, N32 - 3 - n, isa);
			double b = zinf_grad_sumsq_isa(gb + 1, ZINF_DTYPE_BF16, NB - 1 - n, isa);
			double h = zinf_grad_sumsq_isa(gh, ZINF_DTYPE_F16, NH - n, isa);

			T_CHECK(a == zinf_grad_sumsq_isa(g32 + 3, ZINF_DTYPE_F32, N32 - 3 - n,
							 ZINF_ADAM_ISA_SCALAR),
				"fp32 sumsq isa %d n %llu differs from scalar", isa,
				(unsigned long long)n);
			T_CHECK(b == zinf_grad_sumsq_isa(gb + 1, ZINF_DTYPE_BF16, NB - 1 - n,
							 ZINF_ADAM_ISA_SCALAR),
				"bf16 sumsq isa %d differs from scalar", isa);
			T_CHECK(h == zinf_grad_sumsq_isa(gh, ZINF_DTYPE_F16, NH - n,
							 ZINF_ADAM_ISA_SCALAR),
				"fp16 sumsq isa %d differs from scalar", isa);
		}

	/* clipping active: max_norm below the norm */
	zinf_grad_clip_compute(sumsq, S, direct / 4, &c);
	T_CHECK(!c.overflow, "finite grads reported as overflow");
	T_CHECK(rel(c.norm, direct) < 1e-12, "norm %.17g direct %.17g", c.norm, direct);
	T_CHECK(rel(c.coef, (direct / 4) / (direct + 1e-6)) < 1e-7, "coef %.9g", c.coef);
	T_CHECK(rel(c.grad_scale, c.coef / S) < 1e-7, "grad_scale %.9g", c.grad_scale);
	for (int i = 0; i < N32; i++)
		clipped += pow((double)(g32[i] * c.grad_scale), 2);
	for (int i = 0; i < NB; i++)
		clipped += pow((double)(zinf_bf16_to_f32(gb[i]) * c.grad_scale), 2);
	for (int i = 0; i < NH; i++)
		clipped += pow((double)(zinf_f16_to_f32(gh[i]) * c.grad_scale), 2);
	T_CHECK(rel(sqrt(clipped), direct / 4) < 1e-6, "clipped norm %.9g want %.9g", sqrt(clipped),
		direct / 4);

	/* max_norm above the norm, or 0 (off): coefficient 1, only the loss scale divides */
	zinf_grad_clip_compute(sumsq, S, direct * 2, &c);
	T_CHECK(c.coef == 1.0f && c.grad_scale == (float)(1.0 / S), "coef %g scale %g", c.coef,
		c.grad_scale);
	zinf_grad_clip_compute(sumsq, S, 0.0, &c);
	T_CHECK(c.coef == 1.0f, "clipping off but coef %g", c.coef);

	/* one inf in the bf16 shard, or a nan in the fp16 shard: overflow */
	gb[100] = 0x7f80;
	sumsq = zinf_grad_sumsq(gb, ZINF_DTYPE_BF16, NB);
	zinf_grad_clip_compute(sumsq, S, 1.0, &c);
	T_CHECK(c.overflow, "inf not reported (sumsq %g)", sumsq);
	gh[3] = 0x7e00;
	T_CHECK(isnan(zinf_grad_sumsq(gh, ZINF_DTYPE_F16, NH)), "nan not propagated");
	g32[999] = -INFINITY;
	T_CHECK(isinf(zinf_grad_sumsq(g32, ZINF_DTYPE_F32, N32)), "-inf not propagated");
	return T_EXIT_PASS;
}

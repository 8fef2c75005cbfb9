/*
 * The gradients' sum of squares over many blocks (fp32, bf16, fp16; several rounds of
 * blocks, a short last block) is the same bits on 1 to 4 threads of a pool, without a
 * pool, and on every instruction-set loop; it matches a long double sum taken directly;
 * an inf in the last block or a nan in the first reaches the sum on any thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cast.h"
#include "clip.h"
#include "optim.h"
#include "pool.h"
#include "test.h"

#define BLOCK 65536ull

static uint32_t rng = 2024;

static float next(float scale)
{
	rng = rng * 1664525u + 1013904223u;
	return (float)((double)(rng >> 8) / 16777216.0 - 0.5) * scale;
}

static double as_f32(const void *g, enum zinf_dtype dt, uint64_t i)
{
	if (dt == ZINF_DTYPE_F32)
		return ((const float *)g)[i];
	if (dt == ZINF_DTYPE_BF16)
		return zinf_bf16_to_f32(((const uint16_t *)g)[i]);
	return zinf_f16_to_f32(((const uint16_t *)g)[i]);
}

static void check(const void *g, enum zinf_dtype dt, uint64_t n, struct zinf_pool **pools)
{
	double want = zinf_grad_sumsq(g, dt, n), got;
	long double direct = 0;

	for (uint64_t i = 0; i < n; i++)
		direct += (long double)as_f32(g, dt, i) * as_f32(g, dt, i);
	T_CHECK(fabs(want - (double)direct) <= 1e-12 * (double)direct,
		"dtype %d n %llu: %.17g, directly %.17Lg", (int)dt, (unsigned long long)n, want,
		direct);
	for (int isa = ZINF_ADAM_ISA_SCALAR; isa <= ZINF_ADAM_ISA_AVX512; isa++) {
		got = zinf_grad_sumsq_isa(g, dt, n, (enum zinf_adam_isa)isa);
		T_CHECK(memcmp(&got, &want, sizeof(got)) == 0,
			"dtype %d n %llu isa %d: %.17g, not %.17g", (int)dt, (unsigned long long)n,
			isa, got, want);
	}
	got = zinf_grad_sumsq_pool(NULL, g, dt, n);
	T_CHECK(memcmp(&got, &want, sizeof(got)) == 0, "dtype %d n %llu, no pool: %.17g, not %.17g",
		(int)dt, (unsigned long long)n, got, want);
	for (int t = 0; t < 4; t++) {
		got = zinf_grad_sumsq_pool(pools[t], g, dt, n);
		T_CHECK(memcmp(&got, &want, sizeof(got)) == 0,
			"dtype %d n %llu on %d threads: %.17g, not %.17g", (int)dt,
			(unsigned long long)n, t + 1, got, want);
	}
}

int main(void)
{
	/* 2 rounds of 64 blocks and a short block; a round and one element; 3 blocks */
	const uint64_t n32 = 129 * BLOCK + 4097, nb = 64 * BLOCK + 1, nh = 3 * BLOCK;
	float *g32 = malloc(n32 * 4);
	uint16_t *gb = malloc(nb * 2), *gh = malloc(nh * 2);
	struct zinf_pool *pools[4];
	double s;

	T_CHECK(g32 && gb && gh, "out of memory");
	for (uint64_t i = 0; i < n32; i++)
		g32[i] = next(1e3f);
	for (uint64_t i = 0; i < nb; i++)
		gb[i] = zinf_f32_to_bf16(next(3.0f));
	for (uint64_t i = 0; i < nh; i++)
		gh[i] = zinf_f32_to_f16(next(0.1f));
	for (int t = 0; t < 4; t++)
		T_CHECK(zinf_pool_create((unsigned)t + 1, &pools[t]) == 0, "pool of %d", t + 1);
	check(g32, ZINF_DTYPE_F32, n32, pools);
	check(g32 + 5, ZINF_DTYPE_F32, n32 - 5, pools); /* unaligned */
	check(gb, ZINF_DTYPE_BF16, nb, pools);
	check(gh, ZINF_DTYPE_F16, nh, pools);
	check(g32, ZINF_DTYPE_F32, BLOCK - 1, pools); /* one block */

	g32[n32 - 1] = INFINITY;
	gh[0] = 0x7e00; /* nan */
	for (int t = 0; t < 4; t++) {
		s = zinf_grad_sumsq_pool(pools[t], g32, ZINF_DTYPE_F32, n32);
		T_CHECK(isinf(s), "an inf in the last block on %d threads: %g", t + 1, s);
		s = zinf_grad_sumsq_pool(pools[t], gh, ZINF_DTYPE_F16, nh);
		T_CHECK(isnan(s), "a nan in the first block on %d threads: %g", t + 1, s);
	}
	for (int t = 0; t < 4; t++)
		zinf_pool_destroy(pools[t]);
	free(g32);
	free(gb);
	free(gh);
	return T_EXIT_PASS;
}

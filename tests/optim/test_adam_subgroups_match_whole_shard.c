/*
 * Stepping a shard one sub-group at a time (as the pipelined NVMe step does, over its
 * own buffers) gives the same bits as stepping it whole: sub-groups of odd sizes, each
 * copied into separate buffers, updated there and copied back, on 1 and 2 threads, for
 * three steps. This is what makes the pipelined step bit-identical to the in-memory one.
 */
#include <stdlib.h>

#include "optim.h"
#include "test.h"

#define N 300001

static float wp[N], wm[N], wv[N], sp[N], sm[N], sv[N];
static uint16_t g[N], wout[N], sout[N];

int main(void)
{
	static const uint64_t groups[] = {1, 15, 16, 17, 4096, 65537, 200000};
	struct zinf_adam_opts o;
	struct zinf_adam *whole, *sub;
	float *bp = malloc(N * 4), *bm = malloc(N * 4), *bv = malloc(N * 4);
	uint16_t *bg = malloc(N * 2), *bout = malloc(N * 2);
	uint32_t r = 3;

	T_CHECK(bp && bm && bv && bg && bout, "malloc");
	for (uint32_t i = 0; i < N; i++) {
		r = r * 1664525u + 1013904223u;
		wp[i] = sp[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
		wm[i] = sm[i] = 0;
		wv[i] = sv[i] = 0;
		g[i] = (uint16_t)(0x3a00u + (r >> 20)); /* bf16 grads around 5e-4 .. 1e-2 */
	}
	zinf_adam_opts_init(&o);
	o.threads = 2;
	T_CHECK_RC(zinf_adam_create(&whole, &o));
	o.threads = 1;
	T_CHECK_RC(zinf_adam_create(&sub, &o));
	for (uint64_t step = 1; step <= 3; step++) {
		struct zinf_adam_shard sh = {wp, wm, wv, g, wout, ZINF_DTYPE_BF16, ZINF_DTYPE_BF16,
					     N};
		struct zinf_adam_step_info info = {step, 1e-3, 0.75f};
		uint64_t group = groups[step * 2 % 7], next = 0;

		T_CHECK_RC(zinf_adam_step(whole, &sh, &info));
		for (uint64_t at = 0; at < N; at = next) {
			uint64_t n = N - at < group ? N - at : group;
			struct zinf_adam_shard b = {
				bp, bm, bv, bg, bout, ZINF_DTYPE_BF16, ZINF_DTYPE_BF16, n};

			next = at + n;
			memcpy(bp, sp + at, n * 4);
			memcpy(bm, sm + at, n * 4);
			memcpy(bv, sv + at, n * 4);
			memcpy(bg, g + at, n * 2);
			T_CHECK_RC(zinf_adam_step(n > 100000 ? whole : sub, &b, &info));
			memcpy(sp + at, bp, n * 4);
			memcpy(sm + at, bm, n * 4);
			memcpy(sv + at, bv, n * 4);
			memcpy(sout + at, bout, n * 2);
			group = groups[(at / 7 + step) % 7]; /* vary the size along the shard */
		}
		T_CHECK(memcmp(wp, sp, sizeof(wp)) == 0, "step %llu: master differs",
			(unsigned long long)step);
		T_CHECK(memcmp(wm, sm, sizeof(wm)) == 0, "step %llu: exp_avg differs",
			(unsigned long long)step);
		T_CHECK(memcmp(wv, sv, sizeof(wv)) == 0, "step %llu: exp_avg_sq differs",
			(unsigned long long)step);
		T_CHECK(memcmp(wout, sout, sizeof(wout)) == 0, "step %llu: param copy differs",
			(unsigned long long)step);
	}
	zinf_adam_destroy(whole);
	zinf_adam_destroy(sub);
	free(bp);
	free(bm);
	free(bv);
	free(bg);
	free(bout);
	return T_EXIT_PASS;
}

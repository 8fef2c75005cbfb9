/*
 * Every SIMD Adam loop this CPU supports (AVX2, AVX-512) produces the same bits as the
 * scalar reference for master, m, v and the param copy: every grad dtype x param dtype
 * x Adam/AdamW x bias correction on/off, grad_scale != 1, unaligned starts and odd
 * tails, inputs spanning zeros, subnormals, huge values, inf and nan (NaNs compare equal
 * whatever their payload). The bar is <= 1 ulp; the loops promise 0. The
 * multithreaded public step is checked against the scalar loop too.
 */
#include <math.h>
#include <stdint.h>

#include "cast.h"
#include "optim.h"
#include "test.h"

#define N 1013
#define BIG_N 300007

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_u32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static float rand_float(float lo, float hi)
{
	return lo + (hi - lo) * (float)(next_u32() & 0xffffff) / 16777216.0f;
}

/* A grad of any magnitude, with a few specials mixed in. */
static float rand_grad(void)
{
	uint32_t r = next_u32() % 64;

	if (r == 0)
		return 0.0f;
	if (r == 1)
		return 1e-40f; /* subnormal */
	if (r == 2)
		return 3e4f;
	if (r == 3)
		return INFINITY;
	if (r == 4)
		return NAN;
	return rand_float(-1, 1) * powf(10.0f, (float)(int)(next_u32() % 12) - 8.0f);
}

static bool same_f32(float a, float b)
{
	return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof(a)) == 0;
}

static bool same_h16(uint16_t a, uint16_t b, enum zinf_dtype dt)
{
	float fa = dt == ZINF_DTYPE_BF16 ? zinf_bf16_to_f32(a) : zinf_f16_to_f32(a);
	float fb = dt == ZINF_DTYPE_BF16 ? zinf_bf16_to_f32(b) : zinf_f16_to_f32(b);

	return a == b || (isnan(fa) && isnan(fb));
}

struct state {
	float p[BIG_N], m[BIG_N], v[BIG_N];
	float g32[BIG_N];
	uint16_t g16[BIG_N];
	uint16_t out[BIG_N];
	float out32[BIG_N]; /* the F32 copy */
};

static struct state ref, got;

static void fill(struct state *s, uint64_t n, enum zinf_dtype gdt)
{
	for (uint64_t i = 0; i < n; i++) {
		float g = rand_grad();

		s->p[i] = i % 97 == 0 ? 0.0f : rand_float(-2, 2);
		s->m[i] = rand_float(-1e-2f, 1e-2f);
		s->v[i] = rand_float(0, 1e-4f);
		s->g32[i] = g;
		s->g16[i] = gdt == ZINF_DTYPE_BF16 ? zinf_f32_to_bf16(g) : zinf_f32_to_f16(g);
		s->out[i] = 0;
		s->out32[i] = 0;
	}
	s->p[5] = 1e30f;
	s->p[6] = -1e-40f;
}

static void compare(const char *what, uint64_t n, enum zinf_dtype odt)
{
	for (uint64_t i = 0; i < n; i++) {
		T_CHECK(same_f32(got.p[i], ref.p[i]), "%s: master[%llu] %a vs scalar %a", what,
			(unsigned long long)i, got.p[i], ref.p[i]);
		T_CHECK(same_f32(got.m[i], ref.m[i]), "%s: exp_avg[%llu] %a vs scalar %a", what,
			(unsigned long long)i, got.m[i], ref.m[i]);
		T_CHECK(same_f32(got.v[i], ref.v[i]), "%s: exp_avg_sq[%llu] %a vs scalar %a", what,
			(unsigned long long)i, got.v[i], ref.v[i]);
		if (odt == ZINF_DTYPE_F32)
			T_CHECK(same_f32(got.out32[i], ref.out32[i]) &&
					same_f32(got.out32[i], got.p[i]),
				"%s: param_out[%llu] %a vs scalar %a, master %a", what,
				(unsigned long long)i, got.out32[i], ref.out32[i], got.p[i]);
		else if (odt != ZINF_DTYPE_NONE)
			T_CHECK(same_h16(got.out[i], ref.out[i], odt),
				"%s: param_out[%llu] 0x%04x vs scalar 0x%04x", what,
				(unsigned long long)i, got.out[i], ref.out[i]);
	}
}

static void shard_of(struct state *s, struct zinf_adam_shard *sh, enum zinf_dtype gdt,
		     enum zinf_dtype odt, uint64_t n)
{
	*sh = (struct zinf_adam_shard){
		.master = s->p,
		.exp_avg = s->m,
		.exp_avg_sq = s->v,
		.grad = gdt == ZINF_DTYPE_F32 ? (const void *)s->g32 : s->g16,
		.param_out = odt == ZINF_DTYPE_NONE  ? NULL
			     : odt == ZINF_DTYPE_F32 ? (void *)s->out32
						     : s->out,
		.grad_dtype = gdt,
		.param_dtype = odt,
		.n_elems = n,
	};
}

static void check_kernel(const struct zinf_adam_kernel *k)
{
	static const enum zinf_dtype gdts[] = {ZINF_DTYPE_F32, ZINF_DTYPE_BF16, ZINF_DTYPE_F16};
	static const enum zinf_dtype odts[] = {ZINF_DTYPE_NONE, ZINF_DTYPE_F32, ZINF_DTYPE_BF16,
					       ZINF_DTYPE_F16};
	unsigned combos = 0;

	for (int gi = 0; gi < 3; gi++)
		for (int oi = 0; oi < 4; oi++)
			for (int type = 0; type < 2; type++)
				for (int bc = 0; bc < 2; bc++) {
					struct zinf_adam_opts o;
					struct zinf_adam_shard sr, sg;
					struct zinf_adam_args ar, ag;
					char what[128];

					zinf_adam_opts_init(&o);
					o.type = type ? ZINF_ADAM : ZINF_ADAMW;
					o.bias_correction = bc;
					o.weight_decay = 0.05f;
					fill(&ref, N, gdts[gi]);
					got = ref;
					shard_of(&ref, &sr, gdts[gi], odts[oi], N);
					shard_of(&got, &sg, gdts[gi], odts[oi], N);
					for (uint64_t step = 1; step <= 3; step++) {
						struct zinf_adam_step_info info = {
							step, 1e-3f * (float)step,
							step == 2 ? 0.37f : 1.0f};
						uint64_t begin = step; /* unaligned start */

						zinf_adam_args_init(&ar, &o, &sr, &info);
						zinf_adam_args_init(&ag, &o, &sg, &info);
						zinf_adam_update_scalar(&ar, begin, N);
						k->update(&ag, begin, N);
					}
					snprintf(what, sizeof(what), "%s grad %d param %d %s bc %d",
						 k->name, gdts[gi], odts[oi],
						 type ? "Adam" : "AdamW", bc);
					compare(what, N, odts[oi]);
					combos++;
				}
	fprintf(stderr, "%s: %u combinations bit-identical to scalar\n", k->name, combos);
}

/* The public step (the auto-chosen loop) against the scalar loop, on 2 and 7 threads,
 * for sizes that fill one, three and every thread (a thread takes 64K elements at
 * least), each twice on one handle (threads left without a slice skip a step). */
static void check_threaded(void)
{
	static const unsigned threads[] = {2, 7};
	static const uint64_t sizes[] = {BIG_N, 3 * 65536 + 5, 70000, BIG_N};
	struct zinf_adam_step_info info = {7, 2e-3f, 0.5f};

	for (int t = 0; t < 2; t++) {
		struct zinf_adam_opts o;
		struct zinf_adam *adam;
		zinf_adam_opts_init(&o);
		o.threads = threads[t];
		T_CHECK_RC(zinf_adam_create(&adam, &o));
		for (int i = 0; i < 4; i++) {
			struct zinf_adam_shard sr, sg;
			struct zinf_adam_args ar;
			char what[64];
			fill(&ref, sizes[i], ZINF_DTYPE_BF16);
			got = ref;
			shard_of(&ref, &sr, ZINF_DTYPE_BF16, ZINF_DTYPE_BF16, sizes[i]);
			shard_of(&got, &sg, ZINF_DTYPE_BF16, ZINF_DTYPE_BF16, sizes[i]);
			zinf_adam_args_init(&ar, &o, &sr, &info);
			zinf_adam_update_scalar(&ar, 0, sizes[i]);
			T_CHECK_RC(zinf_adam_step(adam, &sg, &info));
			snprintf(what, sizeof(what), "%s, %u threads, %llu elements",
				 zinf_adam_isa_name(adam), threads[t],
				 (unsigned long long)sizes[i]);
			compare(what, sizes[i], ZINF_DTYPE_BF16);
		}
		zinf_adam_destroy(adam);
	}
}

int main(void)
{
	const struct zinf_adam_kernel *kernels[] = {&zinf_adam_kernel_avx2,
						    &zinf_adam_kernel_avx512};
	int tested = 0;

	for (int i = 0; i < 2; i++) {
		if (!kernels[i]->supported()) {
			fprintf(stderr, "%s: not supported by this CPU, not tested\n",
				kernels[i]->name);
			continue;
		}
		check_kernel(kernels[i]);
		tested++;
	}
	check_threaded();
	if (!tested)
		T_SKIP("no SIMD loop is supported by this CPU");
	return T_EXIT_PASS;
}

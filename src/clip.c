/*
 * Global-norm gradient clipping (clip.h): per-shard sums of squares and the combined
 * grad factor.
 *
 * The sum of squares has one fixed summation order on every instruction set and thread
 * count, so a shard's sum is the same bits whichever loop runs on however many threads:
 * the shard is cut into blocks of SUMSQ_BLOCK elements; in a block, element i goes to
 * accumulator i mod 16 (a double) and the 16 accumulators are added in index order; the
 * blocks' sums are added in block order. Squares of fp32 values are exact in double, so
 * fused and unfused adds agree too. Blocks are what threads share out
 * (zinf_grad_sumsq_pool).
 */
#include <immintrin.h>
#include <math.h>

#include "cast.h"
#include "clip.h"
#include "optim.h"
#include "pool.h"

/* Elements a block holds (a multiple of the 16 lanes); the blocks' sums a round of
 * zinf_grad_sumsq_pool keeps (on the stack). */
#define SUMSQ_BLOCK (1ull << 16)
#define SUMSQ_ROUND_BLOCKS 64u

#define LANES 16

static double lanes_total(const double *acc)
{
	double s = 0;

	for (int l = 0; l < LANES; l++)
		s += acc[l];
	return s;
}

static double load_one(const void *g, enum zinf_dtype dt, uint64_t i)
{
	if (dt == ZINF_DTYPE_BF16)
		return zinf_bf16_to_f32(((const uint16_t *)g)[i]);
	if (dt == ZINF_DTYPE_F16)
		return zinf_f16_to_f32(((const uint16_t *)g)[i]);
	return ((const float *)g)[i];
}

/* Elements [begin, n) into acc[i mod 16]; the tail of every loop. */
static void sumsq_tail(const void *g, enum zinf_dtype dt, uint64_t begin, uint64_t n, double *acc)
{
	for (uint64_t i = begin; i < n; i++) {
		double x = load_one(g, dt, i);

		acc[i % LANES] += x * x;
	}
}

static double sumsq_scalar(const void *g, enum zinf_dtype dt, uint64_t n)
{
	double acc[LANES] = {0};

	sumsq_tail(g, dt, 0, n, acc);
	return lanes_total(acc);
}

__attribute__((target("avx512f"))) static __m512 load16(const void *g, enum zinf_dtype dt,
							uint64_t i)
{
	const __m256i *h = (const __m256i *)((const uint16_t *)g + i);

	if (dt == ZINF_DTYPE_BF16)
		return _mm512_castsi512_ps(
			_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(h)), 16));
	if (dt == ZINF_DTYPE_F16)
		return _mm512_cvtph_ps(_mm256_loadu_si256(h));
	return _mm512_loadu_ps((const float *)g + i);
}

__attribute__((target("avx512f"))) static double sumsq_avx512(const void *g, enum zinf_dtype dt,
							      uint64_t n)
{
	__m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
	double acc[LANES];
	uint64_t i = 0;

	for (; i + LANES <= n; i += LANES) {
		__m512 x = load16(g, dt, i);
		__m512d xl = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
		__m512d xh = _mm512_cvtps_pd(
			_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));

		lo = _mm512_fmadd_pd(xl, xl, lo);
		hi = _mm512_fmadd_pd(xh, xh, hi);
	}
	_mm512_storeu_pd(acc, lo);
	_mm512_storeu_pd(acc + 8, hi);
	/* Leave no dirty upper register state behind: the SSE code that runs next on this
	 * thread (OpenBLAS' kernels, libm) would pay a penalty on every instruction. */
	_mm256_zeroupper();
	sumsq_tail(g, dt, i, n, acc);
	return lanes_total(acc);
}

__attribute__((target("avx2,fma,f16c"))) static __m256 load8(const void *g, enum zinf_dtype dt,
							     uint64_t i)
{
	const __m128i *h = (const __m128i *)((const uint16_t *)g + i);

	if (dt == ZINF_DTYPE_BF16)
		return _mm256_castsi256_ps(
			_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(h)), 16));
	if (dt == ZINF_DTYPE_F16)
		return _mm256_cvtph_ps(_mm_loadu_si128(h));
	return _mm256_loadu_ps((const float *)g + i);
}

__attribute__((target("avx2,fma,f16c"))) static double sumsq_avx2(const void *g, enum zinf_dtype dt,
								  uint64_t n)
{
	__m256d a[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
			_mm256_setzero_pd()};
	double acc[LANES];
	uint64_t i = 0;

	for (; i + LANES <= n; i += LANES) {
		__m256 x0 = load8(g, dt, i), x1 = load8(g, dt, i + 8);
		__m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(x0));
		__m256d d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(x0, 1));
		__m256d d2 = _mm256_cvtps_pd(_mm256_castps256_ps128(x1));
		__m256d d3 = _mm256_cvtps_pd(_mm256_extractf128_ps(x1, 1));

		a[0] = _mm256_fmadd_pd(d0, d0, a[0]);
		a[1] = _mm256_fmadd_pd(d1, d1, a[1]);
		a[2] = _mm256_fmadd_pd(d2, d2, a[2]);
		a[3] = _mm256_fmadd_pd(d3, d3, a[3]);
	}
	for (int k = 0; k < 4; k++)
		_mm256_storeu_pd(acc + 4 * k, a[k]);
	_mm256_zeroupper(); /* as above */
	sumsq_tail(g, dt, i, n, acc);
	return lanes_total(acc);
}

typedef double (*sumsq_fn)(const void *g, enum zinf_dtype dt, uint64_t n);

static sumsq_fn sumsq_loop(enum zinf_adam_isa isa)
{
	__builtin_cpu_init();
	if (isa == ZINF_ADAM_ISA_AUTO)
		isa = __builtin_cpu_supports("avx512f")	  ? ZINF_ADAM_ISA_AVX512
		      : zinf_adam_kernel_avx2.supported() ? ZINF_ADAM_ISA_AVX2
							  : ZINF_ADAM_ISA_SCALAR;
	if (isa == ZINF_ADAM_ISA_AVX512 && __builtin_cpu_supports("avx512f"))
		return sumsq_avx512;
	if (isa == ZINF_ADAM_ISA_AVX2 && zinf_adam_kernel_avx2.supported())
		return sumsq_avx2;
	return sumsq_scalar;
}

/* Block b's sum. */
static double block_sum(sumsq_fn fn, const void *g, enum zinf_dtype dt, uint64_t n, uint64_t b)
{
	uint64_t first = b * SUMSQ_BLOCK, len = n - first < SUMSQ_BLOCK ? n - first : SUMSQ_BLOCK;
	size_t size = dt == ZINF_DTYPE_F32 ? 4 : 2;

	return fn((const char *)g + first * size, dt, len);
}

double zinf_grad_sumsq_isa(const void *grad, enum zinf_dtype dtype, uint64_t n_elems,
			   enum zinf_adam_isa isa)
{
	sumsq_fn fn = sumsq_loop(isa);
	uint64_t blocks = (n_elems + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
	double total = 0;

	if (blocks <= 1)
		return fn(grad, dtype, n_elems);
	for (uint64_t b = 0; b < blocks; b++)
		total += block_sum(fn, grad, dtype, n_elems, b);
	return total;
}

double zinf_grad_sumsq(const void *grad, enum zinf_dtype dtype, uint64_t n_elems)
{
	return zinf_grad_sumsq_isa(grad, dtype, n_elems, ZINF_ADAM_ISA_AUTO);
}

struct sumsq_round {
	sumsq_fn fn;
	const void *g;
	enum zinf_dtype dt;
	uint64_t n, first_block;
	double *sums; /* (the round's blocks) */
};

static void round_slice(void *ctx, uint64_t begin, uint64_t end)
{
	const struct sumsq_round *r = ctx;

	for (uint64_t k = begin; k < end; k++)
		r->sums[k] = block_sum(r->fn, r->g, r->dt, r->n, r->first_block + k);
}

double zinf_grad_sumsq_pool(struct zinf_pool *pool, const void *grad, enum zinf_dtype dtype,
			    uint64_t n_elems)
{
	double sums[SUMSQ_ROUND_BLOCKS], total = 0;
	struct sumsq_round r = {sumsq_loop(ZINF_ADAM_ISA_AUTO), grad, dtype, n_elems, 0, sums};
	uint64_t blocks = (n_elems + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;

	if (blocks < 2 || zinf_pool_threads(pool) < 2)
		return zinf_grad_sumsq(grad, dtype, n_elems);
	for (; r.first_block < blocks; r.first_block += SUMSQ_ROUND_BLOCKS) {
		uint64_t count = blocks - r.first_block < SUMSQ_ROUND_BLOCKS
					 ? blocks - r.first_block
					 : SUMSQ_ROUND_BLOCKS;
		/* a block a thread at least; the blocks' sums added in order, as above */
		zinf_pool_for(pool, count, 1, 1, round_slice, &r);
		for (uint64_t k = 0; k < count; k++)
			total += sums[k];
	}
	return total;
}

void zinf_grad_clip_compute(double total_sumsq, double loss_scale, double max_norm,
			    struct zinf_grad_clip *out)
{
	double coef = 1.0;

	out->overflow = !isfinite(total_sumsq);
	out->norm = sqrt(total_sumsq) / loss_scale;
	if (!out->overflow && max_norm > 0) {
		coef = max_norm / (out->norm + 1e-6);
		if (coef > 1.0)
			coef = 1.0;
	}
	out->coef = (float)coef;
	out->grad_scale = (float)(coef / loss_scale);
}

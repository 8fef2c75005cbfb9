/*
 * The AVX-512F Adam/AdamW loop: 16 elements per iteration, the operation order of the
 * scalar reference (optim.h), so results are bit-identical to it. Compiled for any
 * x86-64 (function-level target attributes) and used only when cpuid reports AVX-512F.
 */
#include <immintrin.h>

#include "optim.h"

#define AVX512 __attribute__((target("avx512f")))
#define AVX512_INLINE __attribute__((target("avx512f"), always_inline)) static inline

AVX512_INLINE __m512 load_grad16(const void *g, uint64_t i, enum zinf_dtype dt)
{
	if (dt == ZINF_DTYPE_BF16) {
		__m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)g + i));

		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
	if (dt == ZINF_DTYPE_F16) {
		__m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)g + i));

		return _mm512_cvtph_ps(h);
	}
	return _mm512_loadu_ps((const float *)g + i);
}

/* Round to nearest even into the upper 16 bits; NaN kept quiet (zinf_f32_to_bf16). */
AVX512_INLINE __m256i f32_to_bf16_16(__m512 x)
{
	__m512i u = _mm512_castps_si512(x);
	__m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
	__mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
	__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
	__m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
	__m512i q = _mm512_or_si512(u, _mm512_set1_epi32(0x400000));

	r = _mm512_mask_mov_epi32(r, nan, q);
	return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

AVX512_INLINE void store_param16(void *out, uint64_t i, __m512 p, enum zinf_dtype dt)
{
	__m256i h;

	if (dt == ZINF_DTYPE_F32) {
		_mm512_storeu_ps((float *)out + i, p);
		return;
	}
	if (dt == ZINF_DTYPE_BF16)
		h = f32_to_bf16_16(p);
	else if (dt == ZINF_DTYPE_F16)
		h = _mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	else
		return;
	_mm256_storeu_si256((__m256i *)((uint16_t *)out + i), h);
}

/* The loop body for one (grad dtype, param dtype) pair, inlined into each instance so
 * the dtype tests fold away. Returns the first element it did not update. */
AVX512_INLINE uint64_t update16(const struct zinf_adam_args *a, uint64_t i, uint64_t end,
				enum zinf_dtype gdt, enum zinf_dtype odt)
{
	const __m512 scale = _mm512_set1_ps(a->grad_scale);
	const __m512 wd = _mm512_set1_ps(a->weight_decay);
	const __m512 b1 = _mm512_set1_ps(a->beta1), b2 = _mm512_set1_ps(a->beta2);
	const __m512 omb1 = _mm512_set1_ps(a->one_minus_beta1);
	const __m512 omb2 = _mm512_set1_ps(a->one_minus_beta2);
	const __m512 rbc2 = _mm512_set1_ps(a->rsqrt_bc2), eps = _mm512_set1_ps(a->eps);
	const __m512 decay = _mm512_set1_ps(a->decay);
	const __m512 nss = _mm512_set1_ps(a->neg_step_size);
	const bool l2 = a->l2, decoupled = a->decoupled;

	for (; i + 16 <= end; i += 16) {
		__m512 p = _mm512_loadu_ps(a->p + i);
		__m512 m = _mm512_loadu_ps(a->m + i);
		__m512 v = _mm512_loadu_ps(a->v + i);
		__m512 g = _mm512_mul_ps(load_grad16(a->g, i, gdt), scale);
		__m512 d;

		if (l2)
			g = _mm512_fmadd_ps(wd, p, g);
		m = _mm512_fmadd_ps(b1, m, _mm512_mul_ps(omb1, g));
		v = _mm512_fmadd_ps(b2, v, _mm512_mul_ps(_mm512_mul_ps(omb2, g), g));
		d = _mm512_fmadd_ps(_mm512_sqrt_ps(v), rbc2, eps);
		if (decoupled)
			p = _mm512_mul_ps(p, decay);
		p = _mm512_fmadd_ps(nss, _mm512_div_ps(m, d), p);
		_mm512_storeu_ps(a->p + i, p);
		_mm512_storeu_ps(a->m + i, m);
		_mm512_storeu_ps(a->v + i, v);
		store_param16(a->out, i, p, odt);
	}
	return i;
}

#define INSTANCE(name, gdt, odt)                                                                   \
	AVX512 static uint64_t name(const struct zinf_adam_args *a, uint64_t i, uint64_t end)      \
	{                                                                                          \
		return update16(a, i, end, gdt, odt);                                              \
	}
INSTANCE(upd_f32_none, ZINF_DTYPE_F32, ZINF_DTYPE_NONE)
INSTANCE(upd_f32_f32, ZINF_DTYPE_F32, ZINF_DTYPE_F32)
INSTANCE(upd_f32_bf16, ZINF_DTYPE_F32, ZINF_DTYPE_BF16)
INSTANCE(upd_f32_f16, ZINF_DTYPE_F32, ZINF_DTYPE_F16)
INSTANCE(upd_bf16_none, ZINF_DTYPE_BF16, ZINF_DTYPE_NONE)
INSTANCE(upd_bf16_f32, ZINF_DTYPE_BF16, ZINF_DTYPE_F32)
INSTANCE(upd_bf16_bf16, ZINF_DTYPE_BF16, ZINF_DTYPE_BF16)
INSTANCE(upd_bf16_f16, ZINF_DTYPE_BF16, ZINF_DTYPE_F16)
INSTANCE(upd_f16_none, ZINF_DTYPE_F16, ZINF_DTYPE_NONE)
INSTANCE(upd_f16_f32, ZINF_DTYPE_F16, ZINF_DTYPE_F32)
INSTANCE(upd_f16_bf16, ZINF_DTYPE_F16, ZINF_DTYPE_BF16)
INSTANCE(upd_f16_f16, ZINF_DTYPE_F16, ZINF_DTYPE_F16)
#undef INSTANCE

/* [grad dtype - F32][param dtype] */
static uint64_t (*const instances[3][4])(const struct zinf_adam_args *, uint64_t, uint64_t) = {
	{upd_f32_none, upd_f32_f32, upd_f32_bf16, upd_f32_f16},
	{upd_bf16_none, upd_bf16_f32, upd_bf16_bf16, upd_bf16_f16},
	{upd_f16_none, upd_f16_f32, upd_f16_bf16, upd_f16_f16},
};

static void update_avx512(const struct zinf_adam_args *a, uint64_t begin, uint64_t end)
{
	uint64_t i = instances[a->g_dtype - ZINF_DTYPE_F32][a->out_dtype](a, begin, end);

	zinf_adam_update_scalar(a, i, end);
}

static bool avx512_supported(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f");
}

const struct zinf_adam_kernel zinf_adam_kernel_avx512 = {
	.name = "avx512",
	.isa = ZINF_ADAM_ISA_AVX512,
	.supported = avx512_supported,
	.update = update_avx512,
};

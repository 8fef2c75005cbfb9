/*
 * The AVX2 + FMA + F16C Adam/AdamW loop: 8 elements per iteration, the operation order
 * of the scalar reference (optim.h), so results are bit-identical to it. Compiled for any
 * x86-64 (function-level target attributes) and used only when cpuid reports all three.
 */
#include <immintrin.h>

#include "optim.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

AVX2_INLINE __m256 load_grad8(const void *g, uint64_t i, enum zinf_dtype dt)
{
	if (dt == ZINF_DTYPE_BF16) {
		__m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)g + i));

		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
	}
	if (dt == ZINF_DTYPE_F16) {
		__m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)g + i));

		return _mm256_cvtph_ps(h);
	}
	return _mm256_loadu_ps((const float *)g + i);
}

/* Round to nearest even into the upper 16 bits; NaN kept quiet (zinf_f32_to_bf16). */
AVX2_INLINE __m128i f32_to_bf16_8(__m256 x)
{
	__m256i u = _mm256_castps_si256(x);
	__m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
	/* abs <= 0x7fffffff, so a signed compare is an unsigned one here */
	__m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	__m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
	__m256i q = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));

	r = _mm256_srli_epi32(_mm256_blendv_epi8(r, q, nan), 16);
	return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

AVX2_INLINE void store_param8(void *out, uint64_t i, __m256 p, enum zinf_dtype dt)
{
	__m128i h;

	if (dt == ZINF_DTYPE_F32) {
		_mm256_storeu_ps((float *)out + i, p);
		return;
	}
	if (dt == ZINF_DTYPE_BF16)
		h = f32_to_bf16_8(p);
	else if (dt == ZINF_DTYPE_F16)
		h = _mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	else
		return;
	_mm_storeu_si128((__m128i *)((uint16_t *)out + i), h);
}

AVX2_INLINE uint64_t update8(const struct zinf_adam_args *a, uint64_t i, uint64_t end,
			     enum zinf_dtype gdt, enum zinf_dtype odt)
{
	const __m256 scale = _mm256_set1_ps(a->grad_scale);
	const __m256 wd = _mm256_set1_ps(a->weight_decay);
	const __m256 b1 = _mm256_set1_ps(a->beta1), b2 = _mm256_set1_ps(a->beta2);
	const __m256 omb1 = _mm256_set1_ps(a->one_minus_beta1);
	const __m256 omb2 = _mm256_set1_ps(a->one_minus_beta2);
	const __m256 rbc2 = _mm256_set1_ps(a->rsqrt_bc2), eps = _mm256_set1_ps(a->eps);
	const __m256 decay = _mm256_set1_ps(a->decay);
	const __m256 nss = _mm256_set1_ps(a->neg_step_size);
	const bool l2 = a->l2, decoupled = a->decoupled;

	for (; i + 8 <= end; i += 8) {
		__m256 p = _mm256_loadu_ps(a->p + i);
		__m256 m = _mm256_loadu_ps(a->m + i);
		__m256 v = _mm256_loadu_ps(a->v + i);
		__m256 g = _mm256_mul_ps(load_grad8(a->g, i, gdt), scale);
		__m256 d;

		if (l2)
			g = _mm256_fmadd_ps(wd, p, g);
		m = _mm256_fmadd_ps(b1, m, _mm256_mul_ps(omb1, g));
		v = _mm256_fmadd_ps(b2, v, _mm256_mul_ps(_mm256_mul_ps(omb2, g), g));
		d = _mm256_fmadd_ps(_mm256_sqrt_ps(v), rbc2, eps);
		if (decoupled)
			p = _mm256_mul_ps(p, decay);
		p = _mm256_fmadd_ps(nss, _mm256_div_ps(m, d), p);
		_mm256_storeu_ps(a->p + i, p);
		_mm256_storeu_ps(a->m + i, m);
		_mm256_storeu_ps(a->v + i, v);
		store_param8(a->out, i, p, odt);
	}
	return i;
}

#define INSTANCE(name, gdt, odt)                                                                   \
	AVX2 static uint64_t name(const struct zinf_adam_args *a, uint64_t i, uint64_t end)        \
	{                                                                                          \
		return update8(a, i, end, gdt, odt);                                               \
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

static void update_avx2(const struct zinf_adam_args *a, uint64_t begin, uint64_t end)
{
	uint64_t i = instances[a->g_dtype - ZINF_DTYPE_F32][a->out_dtype](a, begin, end);

	zinf_adam_update_scalar(a, i, end);
}

static bool avx2_supported(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
	       zinf_cpu_has_f16c();
}

const struct zinf_adam_kernel zinf_adam_kernel_avx2 = {
	.name = "avx2",
	.isa = ZINF_ADAM_ISA_AVX2,
	.supported = avx2_supported,
	.update = update_avx2,
};

/*
 * Internals of the CPU Adam step (include/zinf/optim.h): the per-step scalars, the
 * update loops behind an ops table (scalar reference, AVX2, AVX-512) and the scalar
 * fp16 conversions the loops are checked against.
 *
 * Every loop computes, per element i, in this order and in fp32 (fma = one rounding):
 *
 *     g  = grad[i] * grad_scale
 *     g  = fma(weight_decay, p, g)                      (Adam / L2 only)
 *     m  = fma(beta1, m, one_minus_beta1 * g)
 *     v  = fma(beta2, v, (one_minus_beta2 * g) * g)
 *     d  = fma(sqrt(v), rsqrt_bc2, eps)                 rsqrt_bc2 = 1/sqrt(1 - beta2^t)
 *     p  = p * decay                                    (AdamW only; decay = 1 - lr*wd)
 *     p  = fma(neg_step_size, m / d, p)                 neg_step_size = -lr/(1 - beta1^t)
 *     out[i] = round_to_nearest_even(p) in bf16 or fp16
 *
 * IEEE sqrt and division are correctly rounded on every path, so the SIMD loops are
 * bit-identical to the scalar one, not merely within 1 ulp.
 */
#ifndef ZINF_SRC_OPTIM_H
#define ZINF_SRC_OPTIM_H

#include <cpuid.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "zinf/optim.h"

/* Everything one update loop needs; built once per step by zinf_adam_args_init(). */
struct zinf_adam_args {
	float *p;      /* (n) fp32 master */
	float *m;      /* (n) fp32 exp_avg */
	float *v;      /* (n) fp32 exp_avg_sq */
	const void *g; /* (n) g_dtype */
	void *out;     /* (n) out_dtype, or NULL */
	enum zinf_dtype g_dtype;
	enum zinf_dtype out_dtype;
	bool decoupled; /* AdamW: p *= decay; else Adam: g += wd * p (when wd != 0) */
	bool l2;	/* Adam with weight_decay != 0 */
	float grad_scale;
	float beta1, beta2;
	float one_minus_beta1, one_minus_beta2;
	float neg_step_size; /* -lr / bias_correction1 */
	float rsqrt_bc2;     /* 1 / sqrt(bias_correction2) */
	float eps;
	float weight_decay;
	float decay; /* 1 - lr * weight_decay */
};

/* Compute the per-step scalars (in double, rounded once to float) for step info->step
 * of opts, over the buffers of shard. */
void zinf_adam_args_init(struct zinf_adam_args *a, const struct zinf_adam_opts *opts,
			 const struct zinf_adam_shard *shard,
			 const struct zinf_adam_step_info *info);

/* The same with the options of adam (a handle of zinf_adam_create): the arguments a
 * device runs its own update loop with (zinf_device_adam_update). */
void zinf_adam_args_of(const struct zinf_adam *adam, const struct zinf_adam_shard *shard,
		       const struct zinf_adam_step_info *info, struct zinf_adam_args *a);

/* Run prepared arguments over elements [0, n) on adam's loop and threads, as
 * zinf_adam_step runs a shard (adam's options are not read): the host device backend's
 * update, spread over the cores as a GPU's is over its SMs. Runs from several threads
 * take turns (steps on one handle do not: one at a time). */
void zinf_adam_run(struct zinf_adam *adam, const struct zinf_adam_args *a, uint64_t n);
/* A step's info as zinf_adam_step checks it for adam's options (step from 1; lr >= 0 and
 * a finite fp32; grad_scale finite and > 0; the step size lr / bias correction and the
 * decay 1 - lr * weight_decay finite in fp32): 0, or -EINVAL with the reason in msg. */
int zinf_adam_check_step_info(const struct zinf_adam *adam, const struct zinf_adam_step_info *info,
			      char *msg, size_t len);
struct zinf_pool;
/* zinf_adam_create on with's threads instead of a pool of its own (opts.threads and
 * opts.numa_node are not read): the engine's two handles (weight decay and none) share
 * one pool, whose loops take turns. with must be destroyed after the new handle. */
int zinf_adam_create_sharing(struct zinf_adam **out, const struct zinf_adam_opts *opts,
			     struct zinf_adam *with);
/* adam's threads (NULL for NULL), for other element-wise loops over host memory (the
 * gradient sums): a loop there waits for a run or step of adam in progress, and the
 * other way round. */
struct zinf_pool *zinf_adam_pool(struct zinf_adam *adam);

/* One update loop: elements [begin, end) of a. */
typedef void (*zinf_adam_update_fn)(const struct zinf_adam_args *a, uint64_t begin, uint64_t end);

struct zinf_adam_kernel {
	const char *name;
	enum zinf_adam_isa isa;
	bool (*supported)(void); /* cpuid (and OS state) allow this loop */
	zinf_adam_update_fn update;
};

extern const struct zinf_adam_kernel zinf_adam_kernel_scalar;
extern const struct zinf_adam_kernel zinf_adam_kernel_avx2;
extern const struct zinf_adam_kernel zinf_adam_kernel_avx512;

/* The kernel for isa (AUTO: the widest supported), or NULL if the CPU lacks it. */
const struct zinf_adam_kernel *zinf_adam_kernel_for(enum zinf_adam_isa isa);

/* The scalar reference loop (also used for the SIMD loops' tails). */
void zinf_adam_update_scalar(const struct zinf_adam_args *a, uint64_t begin, uint64_t end);

/* ---- fp16 (IEEE binary16) conversions, scalar; bit-identical to F16C ---------------- */

/* Round to nearest even; overflow goes to infinity, NaN stays NaN with the quiet bit set
 * and the top 9 payload bits kept (as vcvtps2ph does). */
static inline uint16_t zinf_f32_to_f16(float x)
{
	uint32_t u, abs, sign, mant;
	int32_t exp;

	memcpy(&u, &x, sizeof(u));
	sign = (u >> 16) & 0x8000u;
	abs = u & 0x7fffffffu;
	if (abs > 0x7f800000u) /* NaN */
		return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
	if (abs >= 0x477ff000u) /* >= 65520 rounds to infinity (and inf itself) */
		return (uint16_t)(sign | 0x7c00u);
	exp = (int32_t)(abs >> 23) - 127 + 15;
	if (exp >= 1) { /* normal: drop 13 bits with round to nearest even */
		uint32_t h = ((uint32_t)exp << 10) | ((abs >> 13) & 0x3ffu);
		uint32_t rest = abs & 0x1fffu;

		if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
			h++; /* a carry into the exponent is the right result */
		return (uint16_t)(sign | h);
	}
	if (exp < -10) /* below half the smallest subnormal: +-0 */
		return (uint16_t)sign;
	/* subnormal: value = mant * 2^(exp-1-10-13) with the implicit bit */
	mant = (abs & 0x7fffffu) | 0x800000u;
	{
		uint32_t shift = (uint32_t)(14 - exp);
		uint32_t h = mant >> shift;
		uint32_t rest = mant & ((1u << shift) - 1u);
		uint32_t half = 1u << (shift - 1u);

		if (rest > half || (rest == half && (h & 1u)))
			h++;
		return (uint16_t)(sign | h);
	}
}

/* Exact widening (every fp16 value is an fp32 value); NaN gets the quiet bit. */
static inline float zinf_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t mant = h & 0x3ffu;
	uint32_t u;
	float x;

	if (exp == 0x1fu) {
		u = sign | 0x7f800000u | (mant << 13);
		if (mant)
			u |= 0x400000u;
	} else if (exp) {
		u = sign | ((exp + 112u) << 23) | (mant << 13);
	} else if (mant == 0) {
		u = sign;
	} else { /* subnormal: normalise */
		int e = -1;

		do {
			mant <<= 1;
			e++;
		} while (!(mant & 0x400u));
		u = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13);
	}
	memcpy(&x, &u, sizeof(x));
	return x;
}

/* F16C (CPUID leaf 1, ECX bit 29): clang 14's __builtin_cpu_supports does not name it. */
static inline bool zinf_cpu_has_f16c(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

#endif /* ZINF_SRC_OPTIM_H */

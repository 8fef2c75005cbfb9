/*
 * Gradient clipping by global L2 norm (gradient_clipping), as torch's
 * clip_grad_norm_: coefficient = min(1, max_norm / (norm + 1e-6)).
 *
 * The norm is built from per-shard sums of squares, so each shard's sum can be taken
 * while its grads stream past (no extra pass over NVMe) and summed across ranks with one
 * all-reduce of a double. A non-finite sum means some grad is inf or nan: the fp16
 * overflow test comes for free from the same pass.
 *
 * The result is folded into the single factor the Adam step applies to every grad
 * element (zinf_adam_step_info.grad_scale): grads produced under a loss scale S have
 * norm S * true_norm, and the step must use g / S * coefficient.
 */
#ifndef ZINF_SRC_CLIP_H
#define ZINF_SRC_CLIP_H

#include <stdbool.h>
#include <stdint.h>

#include "zinf/optim.h"

struct zinf_pool;

/* Sum of squares of n_elems grads of dtype (F32, BF16, F16), accumulated in double.
 * Returns inf or nan when any element is inf or nan. Thread-safe (pure). */
double zinf_grad_sumsq(const void *grad, enum zinf_dtype dtype, uint64_t n_elems);
/* The same with the loop named (tests); an ISA the CPU lacks falls back to scalar. Every
 * loop returns the same bits (one summation order: blocks of 64Ki elements added in
 * order, 16 double lanes, i mod 16, within each). */
double zinf_grad_sumsq_isa(const void *grad, enum zinf_dtype dtype, uint64_t n_elems,
			   enum zinf_adam_isa isa);
/* zinf_grad_sumsq with the blocks shared out among pool's threads (NULL: the caller's
 * alone): the same bits on any number of threads. */
double zinf_grad_sumsq_pool(struct zinf_pool *pool, const void *grad, enum zinf_dtype dtype,
			    uint64_t n_elems);

struct zinf_grad_clip {
	double norm;	  /* the global L2 norm of the unscaled grads */
	float coef;	  /* clipping coefficient in (0, 1]; 1 = no clipping */
	float grad_scale; /* coef / loss_scale: what the Adam step multiplies grads by */
	bool overflow;	  /* the sum was inf or nan: skip the step */
};

/* From the global sum of squares of the (loss-scaled) grads, the loss scale (> 0; 1 when
 * not scaling) and gradient_clipping (max_norm; <= 0 = no clipping), fill *out. */
void zinf_grad_clip_compute(double total_sumsq, double loss_scale, double max_norm,
			    struct zinf_grad_clip *out);

#endif /* ZINF_SRC_CLIP_H */

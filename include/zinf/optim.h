/*
 * zinf CPU Adam / AdamW: the optimizer step over one shard of fp32 master weights and
 * Adam moments, with gradients in fp32, bf16 or fp16, writing the updated bf16/fp16
 * parameter copy in the same pass.
 *
 * The math is torch.optim.AdamW (decoupled weight decay, p *= 1 - lr*wd before the Adam
 * update) or torch.optim.Adam (L2: grad += wd*p) with bias correction as torch and
 * DeepSpeed's CPU Adam define it. The grad is multiplied on the fly by grad_scale
 * (1/loss_scale times the clipping coefficient). See docs/optim.md for the exact
 * operation order, which every instruction-set path (scalar, AVX2, AVX-512, chosen at run
 * time by cpuid) and the CUDA kernel follow, so that they agree bit for bit.
 *
 * Threading: a struct zinf_adam owns a pool of opts.threads - 1 worker threads (the
 * calling thread is the last one). One zinf_adam_step() at a time per handle; distinct
 * handles are independent. The step allocates nothing.
 */
#ifndef ZINF_OPTIM_H
#define ZINF_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "zinf/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zinf_adam;

/* optimizer.type */
enum zinf_adam_type {
	ZINF_ADAMW = 0, /* "AdamW": decoupled weight decay (torch.optim.AdamW) */
	ZINF_ADAM = 1,	/* "Adam": L2 weight decay added to the grad (torch.optim.Adam) */
};

/* Instruction set of the update loop. AUTO picks the widest this CPU supports. */
enum zinf_adam_isa {
	ZINF_ADAM_ISA_AUTO = 0,
	ZINF_ADAM_ISA_SCALAR = 1, /* the reference; any x86-64 */
	ZINF_ADAM_ISA_AVX2 = 2,	  /* AVX2 + FMA + F16C */
	ZINF_ADAM_ISA_AVX512 = 3, /* AVX-512F */
};

/* Hyper-parameters are doubles, as in the JSON config and in torch: torch keeps betas,
 * eps and weight_decay as Python floats and derives 1 - beta and the bias corrections in
 * double before rounding them once to fp32, and so does zinf. */
struct zinf_adam_opts {
	enum zinf_adam_type type; /* default ZINF_ADAMW */
	double beta1, beta2;	  /* optimizer.params.betas; default 0.9, 0.999 */
	double eps;		  /* default 1e-8 */
	double weight_decay;	  /* default 0.01 (torch.optim.AdamW's default) */
	bool bias_correction;	  /* default true */
	unsigned threads;	  /* threads that share a step, caller included; default 1 */
	/* >= 0: bind worker i to the i-th core of this NUMA node (hwloc), where the shard's
	 * memory lives; -1 (default): leave workers unbound */
	int numa_node;
	enum zinf_adam_isa isa; /* default AUTO; a named ISA the CPU lacks is an error */
};

/* Fill opts with the defaults above. */
void zinf_adam_opts_init(struct zinf_adam_opts *opts);

/* Validate opts, pick the instruction set, start the worker threads. *out is owned by
 * the caller; free with zinf_adam_destroy(). Returns 0, -EINVAL (bad opts; the one-line
 * reason is logged at error level), -ENOTSUP (isa not supported by this CPU), -ENOMEM or
 * a negative errno from thread creation. */
int zinf_adam_create(struct zinf_adam **out, const struct zinf_adam_opts *opts);
/* Stop the workers and free adam. NULL is a no-op. No step may be in progress. */
void zinf_adam_destroy(struct zinf_adam *adam);

/* "scalar", "avx2" or "avx512": the loop adam runs ("none" for NULL). */
const char *zinf_adam_isa_name(const struct zinf_adam *adam);
/* The last error on adam as one line ("" if none). */
const char *zinf_adam_last_error(const struct zinf_adam *adam);

/* One shard or sub-group of optimizer state. All buffers are the caller's, hold n_elems
 * elements each and must not overlap. */
struct zinf_adam_shard {
	float *master;	   /* (n_elems) fp32 master weights, updated in place */
	float *exp_avg;	   /* (n_elems) fp32 first moment m, updated in place */
	float *exp_avg_sq; /* (n_elems) fp32 second moment v, updated in place */
	const void *grad;  /* (n_elems) grad_dtype: F32, BF16 or F16 */
	void *param_out;   /* (n_elems) param_dtype: the new low-precision copy, or NULL */
	enum zinf_dtype grad_dtype;
	enum zinf_dtype param_dtype; /* BF16, F16, or NONE when param_out is NULL */
	uint64_t n_elems;
};

/* Per-step values: the schedule's learning rate, the 1-based step count (torch's
 * state['step'] after its increment, which bias correction uses) and the factor applied
 * to every grad element before anything else (1/loss_scale x clip coefficient; 1 = none). */
struct zinf_adam_step_info {
	uint64_t step;
	double lr;
	float grad_scale;
};

/* Apply one Adam/AdamW step to shard, split across the handle's threads. Returns 0, or
 * -EINVAL with the reason (which field, which value) in zinf_adam_last_error(); on error
 * nothing was written. Not thread-safe per handle. */
int zinf_adam_step(struct zinf_adam *adam, const struct zinf_adam_shard *shard,
		   const struct zinf_adam_step_info *info);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_OPTIM_H */

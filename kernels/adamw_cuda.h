/*
 * Fused Adam/AdamW step on the device (offload_optimizer.device: none): one pass reads
 * fp32 master, m, v and the grad (fp32, bf16 or fp16), writes them back with the
 * bf16/fp16 param copy. Same operation order and roundings as the CPU reference
 * (src/optim.h), so results are bit-identical to zinf_adam_update_scalar().
 *
 * The per-step scalars are computed on the host exactly as zinf_adam_args_init() does
 * (the engine copies them over field by field). C-callable; the stream is a cudaStream_t
 * passed as void * so C callers need no CUDA headers. Returns 0 or ZINF_EDEVICE.
 */
#ifndef ZINF_KERNELS_ADAMW_CUDA_H
#define ZINF_KERNELS_ADAMW_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "zinf/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zinf_cuda_adam_args {
	float *p;      /* (n) fp32 master, device */
	float *m;      /* (n) fp32 exp_avg, device */
	float *v;      /* (n) fp32 exp_avg_sq, device */
	const void *g; /* (n) g_dtype, device */
	void *out;     /* (n) out_dtype, device, or NULL */
	enum zinf_dtype g_dtype;
	enum zinf_dtype out_dtype;
	int decoupled; /* AdamW: p *= decay */
	int l2;	       /* Adam with weight decay: g += weight_decay * p */
	float grad_scale;
	float beta1, beta2;
	float one_minus_beta1, one_minus_beta2;
	float neg_step_size; /* -lr / (1 - beta1^t) */
	float rsqrt_bc2;     /* 1 / sqrt(1 - beta2^t) */
	float eps;
	float weight_decay;
	float decay; /* 1 - lr * weight_decay */
};

int zinf_cuda_adam_update(const struct zinf_cuda_adam_args *args, uint64_t n_elems, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_KERNELS_ADAMW_CUDA_H */

/*
 * The cuda model runtime's internals, shared by llama_cuda.c (errors, memory, lifecycle,
 * copies, the ops table) and llama_cuda_ops.c (the forward and backward ops).
 */
#ifndef ZINF_MODEL_LLAMA_CUDA_INTERNAL_H
#define ZINF_MODEL_LLAMA_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

#include "llama_backend.h"
#include "llama_cuda_blas.h"

struct cuda_rt {
	struct llama_rt base;
	struct zinf_llama_config cfg;
	struct llama_rt_mem mem;
	int B, T, N;
	int ordinal;   /* the CUDA device, made current for each op (crt_set_op) */
	int head_rows; /* rows of logits held at once (N: all) */
	int layer;     /* of the last bind: selects the attention window */
	bool tf32;     /* cuBLAS math mode CUBLAS_TF32_TENSOR_OP_MATH */
	cudaStream_t stream;
	const struct crt_blas_api *blas_api; /* cuBLAS, loaded by the first runtime */
	cublasHandle_t blas;
	void *arena; /* device: the buffers below */
	float *rope_cos, *rope_sin;
	float *wscratch;	 /* fp32 copies of the bound module's bf16/fp16 weights */
	uint64_t wscratch_elems; /* the largest module; 0 when created for fp32 weights */
	float *dh, *dxn, *dact, *dgate, *dup, *dq, *dk, *dv, *dctx, *yscratch;
	int attn_rows;	       /* query rows per block of attention (T: all at once) */
	float *att_p, *att_ds; /* (B, attn_rows, T) scores/probabilities and their gradients */
	float *xf, *rstdf, *logits, *lse;
	double *rowloss; /* (N) per-row loss of the head forward */
	int32_t *tokens, *targets;
	double *h_rowloss; /* host (N) */
	/* embedding backward: the micro-batch's rows grouped by token (set_tokens) */
	int32_t *emb_tok, *emb_start, *emb_rows; /* device: (N), (N + 1), (N) */
	int32_t *h_emb;				 /* host: 3N + 1, the same, uploaded */
	int64_t *h_key;				 /* host (N): token << 32 | row, sorted */
	int n_uniq;
	bool have_targets, head_ready;
	int64_t head_count;
	char op[64]; /* the op running or last queued, for messages */
	char err[512];
};

/* A layer's saved activations (as struct zinf_llama_acts), device memory. */
struct cuda_acts {
	void *arena;
	float *xn1, *rstd1, *q, *k, *v, *lse, *ctx, *h, *xn2, *rstd2, *gate, *up, *act;
};

static inline struct cuda_rt *to_cuda(struct llama_rt *rt)
{
	return (struct cuda_rt *)rt;
}

/* Errors (llama_cuda.c): set m->err to one line and return rc (rt_fail), ZINF_EDEVICE
 * naming the failed CUDA or cuBLAS call, the op and its step (cuda_fail, blas_fail). */
int crt_fail(struct cuda_rt *m, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int crt_cuda_fail(struct cuda_rt *m, cudaError_t e, const char *call, const char *step);
int crt_blas_fail(struct cuda_rt *m, cublasStatus_t st, const char *call, const char *step);
/* Name the op now running (for messages) and clear the last error. */
void crt_set_op(struct cuda_rt *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A copy on the runtime's stream, waited for. */
int crt_copy(struct cuda_rt *m, void *dst, const void *src, uint64_t bytes,
	     enum cudaMemcpyKind kind);

/* CU(fn, (args), step): a CUDA runtime call or a kernel launcher; returns on failure. */
#define CU(fn, args, step)                                                                         \
	do {                                                                                       \
		cudaError_t cu_e_ = fn args;                                                       \
		if (cu_e_ != cudaSuccess)                                                          \
			return crt_cuda_fail(m, cu_e_, #fn, step);                                 \
	} while (0)

/* BLAS(Fn, (args), step): the cuBLAS call cublasFn through m->blas_api; returns on
 * failure. */
#define BLAS(fn, args, step)                                                                       \
	do {                                                                                       \
		cublasStatus_t bl_s_ = m->blas_api->fn args;                                       \
		if (bl_s_ != CUBLAS_STATUS_SUCCESS)                                                \
			return crt_blas_fail(m, bl_s_, "cublas" #fn, step);                        \
	} while (0)

#define TRY(call)                                                                                  \
	do {                                                                                       \
		int try_rc_ = (call);                                                              \
		if (try_rc_)                                                                       \
			return try_rc_;                                                            \
	} while (0)

/* The ops of the table (llama_cuda_ops.c). */
int cuda_bind(struct llama_rt *rt, enum zinf_llama_module_kind kind, int layer,
	      const struct llama_rt_tensor *in, const float **w);
int cuda_set_tokens(struct llama_rt *rt, const int32_t *tokens, const int32_t *targets);
int cuda_embed_forward(struct llama_rt *rt, const float *const *w, float *x);
int cuda_embed_backward(struct llama_rt *rt, const float *dx, float *const *g);
int cuda_layer_forward(struct llama_rt *rt, const float *const *w, const float *x, float *y,
		       struct llama_rt_acts *acts);
int cuda_layer_backward(struct llama_rt *rt, const float *const *w, const float *x,
			struct llama_rt_acts *acts, bool recompute, const float *dy, float *dx,
			float *const *g);
int cuda_head_forward(struct llama_rt *rt, const float *const *w, const float *x, float *loss);
int cuda_head_backward(struct llama_rt *rt, const float *const *w, const float *x, float dloss,
		       float *dx, float *const *g);

#endif /* ZINF_MODEL_LLAMA_CUDA_INTERNAL_H */

/*
 * The cuda model runtime (llama_backend.h): the Llama-family forward and backward of
 * llama.h on a GPU. Matrix products are cuBLAS sgemm calls (fp32, CUBLAS_DEFAULT_MATH, no
 * TF32) on row-major buffers, everything else the kernels of kernels/llama_cuda.h, all
 * queued on the runtime's own stream. The math is the CPU runtime's (llama.c,
 * llama_layer.c, llama_ops.c, llama_attention.c) step for step, so results agree to
 * rounding: attention is computed head by head as full (T, T) score matrices for the B
 * sequences at once (strided-batched sgemm), masked causally (and by the sliding window
 * in layers >= max_window_layers), the probabilities rebuilt from the saved log-sum-exp
 * in backward; the head works through the rows in chunks of head_chunk_bytes of logits.
 *
 * Memory: one device allocation for the runtime (RoPE tables, weight-conversion scratch,
 * backward temporaries, head activations and logits, the attention score matrices,
 * tokens), one per layer's saved activations, and the caller's buffers, all from
 * opts.mem (the engine's budget) or cudaMalloc. The cuBLAS handle's workspace is
 * cuBLAS's own (outside the budget, inside the device's memory_reserve).
 *
 * Every CUDA and cuBLAS call is checked; a failure becomes one line naming the call, the
 * runtime op and its step, e.g. "model runtime (cuda): cublasSgemm_v2 failed in layer 3
 * backward, o_proj: CUBLAS_STATUS_EXECUTION_FAILED".
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_backend.h"
#include "llama_cuda.h"
#include "llama_ops.h"
#include "zinf/error.h"

struct cuda_rt {
	struct llama_rt base;
	struct zinf_llama_config cfg;
	struct llama_rt_mem mem;
	int B, T, N;
	int head_rows; /* rows of logits held at once (N: all) */
	int layer;     /* of the last bind: selects the attention window */
	cudaStream_t stream;
	cublasHandle_t blas;
	void *arena; /* device: the buffers below */
	float *rope_cos, *rope_sin;
	float *wscratch;	 /* fp32 copies of the bound module's bf16/fp16 weights */
	uint64_t wscratch_elems; /* the largest module; 0 when created for fp32 weights */
	float *dh, *dxn, *dact, *dgate, *dup, *dq, *dk, *dv, *dctx, *yscratch;
	float *att_p, *att_ds; /* (B, T, T) scores/probabilities and their gradients */
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

static struct cuda_rt *to_cuda(struct llama_rt *rt)
{
	return (struct cuda_rt *)rt;
}

static int rt_fail(struct cuda_rt *m, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int rt_fail(struct cuda_rt *m, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->err, sizeof(m->err), fmt, ap);
	va_end(ap);
	return rc;
}

static int cuda_fail(struct cuda_rt *m, cudaError_t e, const char *call, const char *step)
{
	(void)cudaGetLastError(); /* clear a non-sticky error */
	return rt_fail(m, e == cudaErrorMemoryAllocation ? -ENOMEM : ZINF_EDEVICE,
		       "model runtime (cuda): %s failed in %s%s%s: %s (%s)", call, m->op,
		       step ? ", " : "", step ? step : "", cudaGetErrorString(e),
		       cudaGetErrorName(e));
}

static int blas_fail(struct cuda_rt *m, cublasStatus_t st, const char *call, const char *step)
{
	return rt_fail(m, ZINF_EDEVICE, "model runtime (cuda): %s failed in %s%s%s: %s", call,
		       m->op, step ? ", " : "", step ? step : "", cublasGetStatusString(st));
}

/* CU(fn, (args), step): a CUDA runtime call or a kernel launcher; returns on failure. */
#define CU(fn, args, step)                                                                         \
	do {                                                                                       \
		cudaError_t cu_e_ = fn args;                                                       \
		if (cu_e_ != cudaSuccess)                                                          \
			return cuda_fail(m, cu_e_, #fn, step);                                     \
	} while (0)

#define BLAS(fn, args, step)                                                                       \
	do {                                                                                       \
		cublasStatus_t bl_s_ = fn args;                                                    \
		if (bl_s_ != CUBLAS_STATUS_SUCCESS)                                                \
			return blas_fail(m, bl_s_, #fn, step);                                     \
	} while (0)

#define TRY(call)                                                                                  \
	do {                                                                                       \
		int try_rc_ = (call);                                                              \
		if (try_rc_)                                                                       \
			return try_rc_;                                                            \
	} while (0)

static void set_op(struct cuda_rt *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Name the op now running (for messages) and clear the last error. */
static void set_op(struct cuda_rt *m, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->op, sizeof(m->op), fmt, ap);
	va_end(ap);
	m->err[0] = '\0';
}

/* ---- memory -------------------------------------------------------------------------------- */

static int dev_alloc(struct cuda_rt *m, uint64_t bytes, void **out, const char *what)
{
	int rc;

	*out = NULL;
	if (!m->mem.alloc) {
		CU(cudaMalloc, (out, bytes), what);
		return 0;
	}
	rc = m->mem.alloc(m->mem.ctx, bytes, out);
	if (rc)
		return rt_fail(m, rc, "model runtime (cuda): %s (%llu bytes): %s", what,
			       (unsigned long long)bytes,
			       m->mem.last_error ? m->mem.last_error(m->mem.ctx) : "no memory");
	return 0;
}

static void dev_free(struct cuda_rt *m, void *p)
{
	if (!p)
		return;
	if (m->mem.alloc)
		m->mem.free(m->mem.ctx, p);
	else
		cudaFree(p);
}

/* Carve bytes at *off of base (NULL: only count), 256-byte aligned. */
static void *carve(void *base, uint64_t *off, uint64_t bytes)
{
	void *p = base ? (char *)base + *off : NULL;

	*off += (bytes + 255) & ~(uint64_t)255;
	return p;
}

#define CARVE_F(base, off, elems) ((float *)carve((base), (off), (uint64_t)(elems) * sizeof(float)))

static uint64_t runtime_layout(struct cuda_rt *m, void *base)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	uint64_t N = m->N, T = m->T, B = m->B, C = cfg->hidden_size, I = cfg->intermediate_size;
	uint64_t V = cfg->vocab_size, half = cfg->head_dim / 2;
	uint64_t qd = (uint64_t)cfg->num_attention_heads * cfg->head_dim;
	uint64_t kvd = (uint64_t)cfg->num_key_value_heads * cfg->head_dim, off = 0;

	m->rope_cos = CARVE_F(base, &off, T * half);
	m->rope_sin = CARVE_F(base, &off, T * half);
	m->wscratch = CARVE_F(base, &off, m->wscratch_elems);
	m->dh = CARVE_F(base, &off, N * C);
	m->dxn = CARVE_F(base, &off, N * C);
	m->dact = CARVE_F(base, &off, N * I);
	m->dgate = CARVE_F(base, &off, N * I);
	m->dup = CARVE_F(base, &off, N * I);
	m->dq = CARVE_F(base, &off, N * qd);
	m->dk = CARVE_F(base, &off, N * kvd);
	m->dv = CARVE_F(base, &off, N * kvd);
	m->dctx = CARVE_F(base, &off, N * qd);
	m->yscratch = CARVE_F(base, &off, N * C);
	m->att_p = CARVE_F(base, &off, B * T * T);
	m->att_ds = CARVE_F(base, &off, B * T * T);
	m->xf = CARVE_F(base, &off, N * C);
	m->rstdf = CARVE_F(base, &off, N);
	m->logits = CARVE_F(base, &off, (uint64_t)m->head_rows * V);
	m->lse = CARVE_F(base, &off, N);
	m->rowloss = carve(base, &off, N * sizeof(double));
	m->tokens = carve(base, &off, N * sizeof(int32_t));
	m->targets = carve(base, &off, N * sizeof(int32_t));
	m->emb_tok = carve(base, &off, (3 * N + 1) * sizeof(int32_t)); /* tok | start | rows */
	m->emb_start = m->emb_tok ? m->emb_tok + N : NULL;
	m->emb_rows = m->emb_tok ? m->emb_tok + 2 * N + 1 : NULL;
	return off;
}

static uint64_t acts_layout(const struct cuda_rt *m, struct cuda_acts *a, void *base)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	uint64_t N = m->N, C = cfg->hidden_size, I = cfg->intermediate_size;
	uint64_t qd = (uint64_t)cfg->num_attention_heads * cfg->head_dim;
	uint64_t kvd = (uint64_t)cfg->num_key_value_heads * cfg->head_dim, off = 0;

	a->xn1 = CARVE_F(base, &off, N * C);
	a->rstd1 = CARVE_F(base, &off, N);
	a->q = CARVE_F(base, &off, N * qd);
	a->k = CARVE_F(base, &off, N * kvd);
	a->v = CARVE_F(base, &off, N * kvd);
	a->lse = CARVE_F(base, &off, N * cfg->num_attention_heads);
	a->ctx = CARVE_F(base, &off, N * qd);
	a->h = CARVE_F(base, &off, N * C);
	a->xn2 = CARVE_F(base, &off, N * C);
	a->rstd2 = CARVE_F(base, &off, N);
	a->gate = CARVE_F(base, &off, N * I);
	a->up = CARVE_F(base, &off, N * I);
	a->act = CARVE_F(base, &off, N * I);
	return off;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static void cuda_destroy(struct llama_rt *rt)
{
	struct cuda_rt *m = to_cuda(rt);

	if (!rt)
		return;
	if (m->stream)
		cudaStreamSynchronize(m->stream);
	dev_free(m, m->arena);
	if (m->blas)
		cublasDestroy(m->blas);
	if (m->stream)
		cudaStreamDestroy(m->stream);
	free(m->h_rowloss);
	free(m->h_emb);
	free(m->h_key);
	free(m);
}

/* Streams, cuBLAS, buffers and the RoPE tables of a new runtime. */
static int cuda_copy(struct cuda_rt *m, void *dst, const void *src, uint64_t bytes,
		     enum cudaMemcpyKind kind);

static int cuda_setup(struct cuda_rt *m, int ordinal)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	int half = cfg->head_dim / 2, ndev = 0;
	uint64_t tbytes = (uint64_t)m->T * half * sizeof(float);
	cudaError_t ce = cudaGetDeviceCount(&ndev);
	float *cos_t, *sin_t, inv_freq[half];
	int rc;

	if (ce != cudaSuccess || ndev == 0) {
		(void)cudaGetLastError();
		return rt_fail(m, -ENODEV, "model runtime: no CUDA device (cudaGetDeviceCount: %s)",
			       ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
	}
	CU(cudaSetDevice, (ordinal < 0 ? 0 : ordinal), NULL);
	CU(cudaStreamCreateWithFlags, (&m->stream, cudaStreamNonBlocking), NULL);
	BLAS(cublasCreate, (&m->blas), NULL);
	BLAS(cublasSetStream, (m->blas, m->stream), NULL);
	/* fp32 products, no TF32: results stay within rounding of the CPU runtime */
	BLAS(cublasSetMathMode, (m->blas, CUBLAS_DEFAULT_MATH), NULL);
	TRY(dev_alloc(m, runtime_layout(m, NULL), &m->arena, "runtime buffers"));
	runtime_layout(m, m->arena);
	m->h_rowloss = malloc((size_t)m->N * sizeof(double));
	m->h_emb = malloc((3 * (size_t)m->N + 1) * sizeof(int32_t));
	m->h_key = malloc((size_t)m->N * sizeof(int64_t));
	cos_t = malloc(tbytes);
	sin_t = malloc(tbytes);
	if (!m->h_rowloss || !m->h_emb || !m->h_key || !cos_t || !sin_t) {
		free(cos_t);
		free(sin_t);
		return rt_fail(m, -ENOMEM, "model runtime (cuda): out of host memory");
	}
	/* the CPU runtime's tables, bit for bit */
	llama_rope_inv_freq(inv_freq, cfg->head_dim, cfg->rope_theta, cfg->rope_llama3,
			    cfg->rope_factor, cfg->rope_low_freq_factor, cfg->rope_high_freq_factor,
			    cfg->rope_original_max_position_embeddings);
	llama_rope_tables(cos_t, sin_t, inv_freq, m->T, cfg->head_dim);
	/* on the runtime's stream, finished before the first kernel can read them */
	rc = cuda_copy(m, m->rope_cos, cos_t, tbytes, cudaMemcpyHostToDevice);
	if (!rc)
		rc = cuda_copy(m, m->rope_sin, sin_t, tbytes, cudaMemcpyHostToDevice);
	free(cos_t);
	free(sin_t);
	return rc;
}

static int cuda_create(const struct zinf_llama_config *cfg, const struct llama_rt_opts *opts, int B,
		       int T, struct llama_rt **out, char *err, size_t errlen)
{
	struct cuda_rt *m;
	uint64_t row_bytes;
	int rc;

	*out = NULL;
	rc = zinf_llama_config_check(cfg, err, errlen);
	if (rc)
		return rc;
	if (B <= 0 || T <= 0 || (int64_t)B * T > INT32_MAX) {
		snprintf(err, errlen,
			 "llama: micro-batch shape B = %d, T = %d must be > 0 with B * T < 2^31", B,
			 T);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "model runtime (cuda): out of host memory");
		return -ENOMEM;
	}
	m->base.ops = &llama_rt_cuda_ops;
	m->cfg = *cfg;
	m->mem = opts->mem;
	m->B = B;
	m->T = T;
	m->N = B * T;
	row_bytes = (uint64_t)cfg->vocab_size * sizeof(float);
	m->wscratch_elems =
		opts->weight_dtype == ZINF_DTYPE_F32 ? 0 : zinf_llama_largest_module_elems(cfg);
	m->head_rows = m->N;
	if (opts->llama.head_chunk_bytes &&
	    (uint64_t)m->N * row_bytes > opts->llama.head_chunk_bytes)
		m->head_rows = opts->llama.head_chunk_bytes / row_bytes
				       ? (int)(opts->llama.head_chunk_bytes / row_bytes)
				       : 1;
	snprintf(m->op, sizeof(m->op), "create");
	rc = cuda_setup(m, opts->cuda_device);
	if (rc) {
		snprintf(err, errlen, "%s", m->err);
		cuda_destroy(&m->base);
		return rc;
	}
	*out = &m->base;
	return 0;
}

static int cuda_acts_create(struct llama_rt *rt, struct llama_rt_acts **out)
{
	struct cuda_rt *m = to_cuda(rt);
	struct cuda_acts *a = calloc(1, sizeof(*a));
	int rc;

	*out = NULL;
	if (!a)
		return rt_fail(m, -ENOMEM, "model runtime (cuda): out of host memory");
	set_op(m, "saved activations");
	rc = dev_alloc(m, acts_layout(m, a, NULL), &a->arena, "saved activations of a layer");
	if (rc) {
		free(a);
		return rc;
	}
	acts_layout(m, a, a->arena);
	*out = (struct llama_rt_acts *)a;
	return 0;
}

static void cuda_acts_destroy(struct llama_rt *rt, struct llama_rt_acts *acts)
{
	struct cuda_rt *m = to_cuda(rt);
	struct cuda_acts *a = (struct cuda_acts *)acts;

	if (!a)
		return;
	cudaStreamSynchronize(m->stream);
	dev_free(m, a->arena);
	free(a);
}

static uint64_t cuda_acts_bytes(const struct llama_rt *rt)
{
	struct cuda_acts a;

	return acts_layout((const struct cuda_rt *)rt, &a, NULL);
}

static int cuda_buf_alloc(struct llama_rt *rt, uint64_t bytes, void **out)
{
	set_op(to_cuda(rt), "buffer");
	return dev_alloc(to_cuda(rt), bytes, out, "activation buffer");
}

static void cuda_buf_free(struct llama_rt *rt, void *ptr)
{
	cudaStreamSynchronize(to_cuda(rt)->stream);
	dev_free(to_cuda(rt), ptr);
}

static int cuda_copy(struct cuda_rt *m, void *dst, const void *src, uint64_t bytes,
		     enum cudaMemcpyKind kind)
{
	CU(cudaMemcpyAsync, (dst, src, bytes, kind, m->stream), NULL);
	CU(cudaStreamSynchronize, (m->stream), NULL);
	return 0;
}

static int cuda_upload(struct llama_rt *rt, void *dst, const void *src, uint64_t bytes)
{
	set_op(to_cuda(rt), "upload");
	return cuda_copy(to_cuda(rt), dst, src, bytes, cudaMemcpyHostToDevice);
}

static int cuda_download(struct llama_rt *rt, void *dst, const void *src, uint64_t bytes)
{
	set_op(to_cuda(rt), "download");
	return cuda_copy(to_cuda(rt), dst, src, bytes, cudaMemcpyDeviceToHost);
}

static int cuda_zero(struct llama_rt *rt, void *dst, uint64_t bytes)
{
	struct cuda_rt *m = to_cuda(rt);

	set_op(m, "zero");
	CU(cudaMemsetAsync, (dst, 0, bytes, m->stream), NULL);
	return 0;
}

static int cuda_sync(struct llama_rt *rt)
{
	struct cuda_rt *m = to_cuda(rt);
	cudaError_t ce = cudaStreamSynchronize(m->stream);

	if (ce != cudaSuccess) {
		char last[sizeof(m->op)];

		/* the failing kernel may be any queued since the last sync */
		memcpy(last, m->op, sizeof(last));
		snprintf(m->op, sizeof(m->op), "sync after %.48s", last);
		return cuda_fail(m, ce, "cudaStreamSynchronize", NULL);
	}
	return 0;
}

static const char *cuda_last_error(const struct llama_rt *rt)
{
	return ((const struct cuda_rt *)rt)->err;
}

/* ---- building blocks ------------------------------------------------------------------------- */

/* Row-major C (M, N) = alpha op(A) op(B) + beta C, batch times with element strides sA,
 * sB, sC: cuBLAS is column-major, so it computes C^T = op(B)^T op(A)^T. */
static int gemm(struct cuda_rt *m, const char *step, bool ta, bool tb, int M, int N, int K,
		float alpha, const float *A, int lda, long long sA, const float *B, int ldb,
		long long sB, float beta, float *C, int ldc, long long sC, int batch)
{
	cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;

	if (batch == 1)
		BLAS(cublasSgemm, (m->blas, ob, oa, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc),
		     step);
	else
		BLAS(cublasSgemmStridedBatched,
		     (m->blas, ob, oa, N, M, K, &alpha, B, ldb, sB, A, lda, sA, &beta, C, ldc, sC,
		      batch),
		     step);
	return 0;
}

/* y (n, out) = x (n, in) w^T + b; w (out, in). */
static int linear_forward(struct cuda_rt *m, const char *step, float *y, const float *x,
			  const float *w, const float *b, int n, int in, int out)
{
	TRY(gemm(m, step, false, true, n, out, in, 1.0f, x, in, 0, w, in, 0, 0.0f, y, out, 0, 1));
	if (b)
		CU(zinf_cuda_llama_bias_add, (y, b, n, out, m->stream), step);
	return 0;
}

/* dx (n, in) = (or += when acc) dy w; dw (out, in) += dy^T x; db += column sums of dy. */
static int linear_backward(struct cuda_rt *m, const char *step, float *dx, float *dw, float *db,
			   const float *dy, const float *x, const float *w, int n, int in, int out,
			   bool acc)
{
	if (dx)
		TRY(gemm(m, step, false, false, n, in, out, 1.0f, dy, out, 0, w, in, 0,
			 acc ? 1.0f : 0.0f, dx, in, 0, 1));
	TRY(gemm(m, step, true, false, out, in, n, 1.0f, dy, out, 0, x, in, 0, 1.0f, dw, in, 0, 1));
	if (db)
		CU(zinf_cuda_llama_column_sums_add, (db, dy, n, out, m->stream), step);
	return 0;
}

/* Keys visible to a query of the bound layer: 0 = all earlier ones (plain causal). */
static int attn_window(const struct cuda_rt *m)
{
	const struct zinf_llama_config *cfg = &m->cfg;

	return cfg->sliding_window > 0 && m->layer >= cfg->max_window_layers ? cfg->sliding_window
									     : 0;
}

static int attention_forward(struct cuda_rt *m, struct cuda_acts *a)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	int B = m->B, T = m->T, nh = cfg->num_attention_heads, hd = cfg->head_dim;
	int rep = nh / cfg->num_key_value_heads, qs = nh * hd, ks = cfg->num_key_value_heads * hd;
	long long tt = (long long)T * T, tq = (long long)T * qs, tk = (long long)T * ks;
	float scale = 1.0f / sqrtf((float)hd);
	int window = attn_window(m);

	for (int h = 0; h < nh; h++) {
		int g = h / rep;

		TRY(gemm(m, "attention scores", false, true, T, T, hd, scale, a->q + h * hd, qs, tq,
			 a->k + g * hd, ks, tk, 0.0f, m->att_p, T, tt, B));
		CU(zinf_cuda_llama_attn_softmax_forward,
		   (m->att_p, a->lse, B, T, nh, h, window, m->stream), "attention softmax");
		TRY(gemm(m, "attention output", false, false, T, hd, T, 1.0f, m->att_p, T, tt,
			 a->v + g * hd, ks, tk, 0.0f, a->ctx + h * hd, qs, tq, B));
	}
	return 0;
}

/* dq (overwritten), dk, dv (zeroed, then summed over each group's query heads). */
static int attention_backward(struct cuda_rt *m, struct cuda_acts *a)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	int B = m->B, T = m->T, nh = cfg->num_attention_heads, hd = cfg->head_dim;
	int rep = nh / cfg->num_key_value_heads, qs = nh * hd, ks = cfg->num_key_value_heads * hd;
	long long tt = (long long)T * T, tq = (long long)T * qs, tk = (long long)T * ks;
	float scale = 1.0f / sqrtf((float)hd);
	int window = attn_window(m);
	size_t kv_bytes = (size_t)m->N * ks * sizeof(float);

	CU(cudaMemsetAsync, (m->dk, 0, kv_bytes, m->stream), "attention dk");
	CU(cudaMemsetAsync, (m->dv, 0, kv_bytes, m->stream), "attention dv");
	for (int h = 0; h < nh; h++) {
		int g = h / rep;
		const float *kg = a->k + g * hd, *vg = a->v + g * hd, *qh = a->q + h * hd;
		float *dout = m->dctx + h * hd;

		TRY(gemm(m, "attention scores", false, true, T, T, hd, scale, qh, qs, tq, kg, ks,
			 tk, 0.0f, m->att_p, T, tt, B));
		TRY(gemm(m, "attention dp", false, true, T, T, hd, 1.0f, dout, qs, tq, vg, ks, tk,
			 0.0f, m->att_ds, T, tt, B));
		CU(zinf_cuda_llama_attn_softmax_backward,
		   (m->att_p, m->att_ds, a->lse, B, T, nh, h, window, scale, m->stream),
		   "attention softmax backward");
		TRY(gemm(m, "attention dq", false, false, T, hd, T, 1.0f, m->att_ds, T, tt, kg, ks,
			 tk, 0.0f, m->dq + h * hd, qs, tq, B));
		TRY(gemm(m, "attention dk", true, false, T, hd, T, 1.0f, m->att_ds, T, tt, qh, qs,
			 tq, 1.0f, m->dk + g * hd, ks, tk, B));
		TRY(gemm(m, "attention dv", true, false, T, hd, T, 1.0f, m->att_p, T, tt, dout, qs,
			 tq, 1.0f, m->dv + g * hd, ks, tk, B));
	}
	return 0;
}

/* ---- ops ------------------------------------------------------------------------------------ */

static int check_device_pointer(struct cuda_rt *m, const void *p, const char *name)
{
	struct cudaPointerAttributes attr;
	cudaError_t ce = cudaPointerGetAttributes(&attr, p);

	if (ce != cudaSuccess)
		return cuda_fail(m, ce, "cudaPointerGetAttributes", name);
	if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
		return rt_fail(m, -EINVAL,
			       "model runtime (cuda): %s: tensor %s at %p is not device memory",
			       m->op, name, p);
	return 0;
}

static int cuda_bind(struct llama_rt *rt, enum zinf_llama_module_kind kind, int layer,
		     const struct llama_rt_tensor *in, const float **w)
{
	struct cuda_rt *m = to_cuda(rt);
	struct zinf_llama_param_info info;
	float *scratch = m->wscratch;
	int n = zinf_llama_module_nparams(kind);

	set_op(m, "bind of layer %d", layer);
	if (n == 0)
		return rt_fail(m, -EINVAL, "llama bind: unknown module kind %d", (int)kind);
	for (int i = 0; i < n; i++) {
		if (zinf_llama_param_info(&m->cfg, kind, layer, i, &info))
			return rt_fail(m, -EINVAL, "llama bind: layer %d is outside [0, %d)", layer,
				       m->cfg.num_hidden_layers);
		w[i] = NULL;
		if (!info.present)
			continue;
		if (!in[i].data)
			return rt_fail(m, -EINVAL, "llama bind: tensor %s (slot %d) is NULL",
				       info.name, i);
		TRY(check_device_pointer(m, in[i].data, info.name));
		if (in[i].dtype != ZINF_DTYPE_F32 && in[i].dtype != ZINF_DTYPE_BF16 &&
		    in[i].dtype != ZINF_DTYPE_F16)
			return rt_fail(m, -EINVAL, "llama bind: tensor %s has unknown dtype %d",
				       info.name, (int)in[i].dtype);
		if (in[i].dtype == ZINF_DTYPE_F32) {
			w[i] = in[i].data;
			continue;
		}
		if (scratch + info.elems > m->wscratch + m->wscratch_elems)
			return rt_fail(
				m, -EINVAL,
				"model runtime (cuda): bind: tensor %s is 16-bit but the runtime was created for fp32 weights (llama_rt_opts.weight_dtype)",
				info.name);
		if (in[i].dtype == ZINF_DTYPE_BF16)
			CU(zinf_cuda_llama_bf16_to_f32,
			   (scratch, in[i].data, info.elems, m->stream), info.name);
		else
			CU(zinf_cuda_llama_f16_to_f32, (scratch, in[i].data, info.elems, m->stream),
			   info.name);
		w[i] = scratch;
		scratch += info.elems;
	}
	m->layer = kind == ZINF_LLAMA_LAYER ? layer : 0;
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The rows of each distinct token, in row order, for the deterministic embedding
 * backward: keys token << 32 | row sorted, then cut where the token changes. */
static int group_rows_by_token(struct cuda_rt *m, const int32_t *tokens)
{
	int32_t *tok = m->h_emb, *start = m->h_emb + m->N, *rows = m->h_emb + 2 * m->N + 1;
	int u = 0;

	for (int n = 0; n < m->N; n++)
		m->h_key[n] = ((int64_t)tokens[n] << 32) | n;
	qsort(m->h_key, (size_t)m->N, sizeof(*m->h_key), cmp_key);
	for (int n = 0; n < m->N; n++) {
		int32_t t = (int32_t)(m->h_key[n] >> 32);
		if (n == 0 || t != tok[u - 1]) {
			tok[u] = t;
			start[u++] = n;
		}
		rows[n] = (int32_t)(m->h_key[n] & 0xffffffff);
	}
	start[u] = m->N;
	m->n_uniq = u;
	/* tok | start | rows as one array: start and rows at fixed offsets N and 2N + 1 */
	return cuda_copy(m, m->emb_tok, m->h_emb, (3 * (size_t)m->N + 1) * sizeof(int32_t),
			 cudaMemcpyHostToDevice);
}

static int cuda_set_tokens(struct llama_rt *rt, const int32_t *tokens, const int32_t *targets)
{
	struct cuda_rt *m = to_cuda(rt);
	int V = m->cfg.vocab_size;
	size_t bytes = (size_t)m->N * sizeof(int32_t);

	set_op(m, "tokens");
	m->head_ready = false;
	m->have_targets = false;
	m->head_count = 0;
	for (int n = 0; n < m->N; n++) {
		if (tokens[n] < 0 || tokens[n] >= V)
			return rt_fail(
				m, -EINVAL,
				"llama embedding: token %d at position %d (row %d, col %d) is outside [0, %d)",
				tokens[n], n, n / m->T, n % m->T, V);
		if (!targets)
			continue;
		if (targets[n] < -1 || targets[n] >= V)
			return rt_fail(
				m, -EINVAL,
				"llama loss: target %d at position %d (row %d, col %d) is outside [0, %d) and not the ignore index -1",
				targets[n], n, n / m->T, n % m->T, V);
		m->head_count += targets[n] != -1;
	}
	TRY(cuda_copy(m, m->tokens, tokens, bytes, cudaMemcpyHostToDevice));
	TRY(group_rows_by_token(m, tokens));
	if (targets)
		TRY(cuda_copy(m, m->targets, targets, bytes, cudaMemcpyHostToDevice));
	m->have_targets = targets != NULL;
	return 0;
}

static int cuda_embed_forward(struct llama_rt *rt, const float *const *w, float *x)
{
	struct cuda_rt *m = to_cuda(rt);

	set_op(m, "embedding forward");
	CU(zinf_cuda_llama_embed_forward,
	   (x, w[ZINF_LLAMA_EMBED_TOKENS], m->tokens, m->N, m->cfg.hidden_size, m->stream), NULL);
	return 0;
}

static int cuda_embed_backward(struct llama_rt *rt, const float *dx, float *const *g)
{
	struct cuda_rt *m = to_cuda(rt);

	set_op(m, "embedding backward");
	CU(zinf_cuda_llama_embed_backward,
	   (g[ZINF_LLAMA_EMBED_TOKENS], dx, m->emb_tok, m->emb_start, m->emb_rows, m->n_uniq,
	    m->cfg.hidden_size, m->stream),
	   NULL);
	return 0;
}

static int layer_forward(struct cuda_rt *m, const float *const *w, const float *x, float *y,
			 struct cuda_acts *a)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	int N = m->N, C = cfg->hidden_size, I = cfg->intermediate_size, hd = cfg->head_dim;
	int nh = cfg->num_attention_heads, nkv = cfg->num_key_value_heads;
	bool ab = cfg->attention_bias, mb = cfg->mlp_bias;
	size_t NC = (size_t)N * C;
	cudaStream_t s = m->stream;

	if (y == x)
		return rt_fail(m, -EINVAL, "llama layer forward: output y aliases input x");
	/* attention block */
	CU(zinf_cuda_llama_rmsnorm_forward,
	   (a->xn1, a->rstd1, x, w[ZINF_LLAMA_INPUT_NORM], N, C, cfg->rms_norm_eps, s),
	   "input_layernorm");
	TRY(linear_forward(m, "q_proj", a->q, a->xn1, w[ZINF_LLAMA_Q],
			   ab ? w[ZINF_LLAMA_Q_BIAS] : NULL, N, C, nh * hd));
	TRY(linear_forward(m, "k_proj", a->k, a->xn1, w[ZINF_LLAMA_K],
			   ab ? w[ZINF_LLAMA_K_BIAS] : NULL, N, C, nkv * hd));
	TRY(linear_forward(m, "v_proj", a->v, a->xn1, w[ZINF_LLAMA_V],
			   ab ? w[ZINF_LLAMA_V_BIAS] : NULL, N, C, nkv * hd));
	CU(zinf_cuda_llama_rope, (a->q, m->rope_cos, m->rope_sin, m->B, m->T, nh, hd, 1.0f, s),
	   "rope q");
	CU(zinf_cuda_llama_rope, (a->k, m->rope_cos, m->rope_sin, m->B, m->T, nkv, hd, 1.0f, s),
	   "rope k");
	TRY(attention_forward(m, a));
	TRY(linear_forward(m, "o_proj", a->h, a->ctx, w[ZINF_LLAMA_O],
			   cfg->attention_out_bias ? w[ZINF_LLAMA_O_BIAS] : NULL, N, nh * hd, C));
	CU(zinf_cuda_llama_add, (a->h, x, NC, s), "attention residual");
	/* MLP block */
	CU(zinf_cuda_llama_rmsnorm_forward,
	   (a->xn2, a->rstd2, a->h, w[ZINF_LLAMA_POST_NORM], N, C, cfg->rms_norm_eps, s),
	   "post_attention_layernorm");
	TRY(linear_forward(m, "gate_proj", a->gate, a->xn2, w[ZINF_LLAMA_GATE],
			   mb ? w[ZINF_LLAMA_GATE_BIAS] : NULL, N, C, I));
	TRY(linear_forward(m, "up_proj", a->up, a->xn2, w[ZINF_LLAMA_UP],
			   mb ? w[ZINF_LLAMA_UP_BIAS] : NULL, N, C, I));
	CU(zinf_cuda_llama_swiglu_forward, (a->act, a->gate, a->up, (size_t)N * I, s), "swiglu");
	TRY(linear_forward(m, "down_proj", y, a->act, w[ZINF_LLAMA_DOWN],
			   mb ? w[ZINF_LLAMA_DOWN_BIAS] : NULL, N, I, C));
	CU(zinf_cuda_llama_add, (y, a->h, NC, s), "mlp residual");
	return 0;
}

static int cuda_layer_forward(struct llama_rt *rt, const float *const *w, const float *x, float *y,
			      struct llama_rt_acts *a)
{
	struct cuda_rt *m = to_cuda(rt);

	set_op(m, "layer %d forward", m->layer);
	return layer_forward(m, w, x, y, (struct cuda_acts *)a);
}

static int cuda_layer_backward(struct llama_rt *rt, const float *const *w, const float *x,
			       struct llama_rt_acts *acts, bool recompute, const float *dy,
			       float *dx, float *const *g)
{
	struct cuda_rt *m = to_cuda(rt);
	struct cuda_acts *a = (struct cuda_acts *)acts;
	const struct zinf_llama_config *cfg = &m->cfg;
	int N = m->N, C = cfg->hidden_size, I = cfg->intermediate_size, hd = cfg->head_dim;
	int nh = cfg->num_attention_heads, nkv = cfg->num_key_value_heads;
	bool ab = cfg->attention_bias, mb = cfg->mlp_bias;
	size_t nc_bytes = (size_t)N * C * sizeof(float);
	cudaStream_t s = m->stream;

	set_op(m, "layer %d backward", m->layer);
	if (recompute)
		TRY(layer_forward(m, w, x, m->yscratch, a));
	/* MLP block; dy is read only here, so dx may alias it */
	TRY(linear_backward(m, "down_proj", m->dact, g[ZINF_LLAMA_DOWN],
			    mb ? g[ZINF_LLAMA_DOWN_BIAS] : NULL, dy, a->act, w[ZINF_LLAMA_DOWN], N,
			    I, C, false));
	CU(cudaMemcpyAsync, (m->dh, dy, nc_bytes, cudaMemcpyDeviceToDevice, s), "mlp residual");
	CU(zinf_cuda_llama_swiglu_backward,
	   (m->dgate, m->dup, m->dact, a->gate, a->up, (size_t)N * I, s), "swiglu");
	TRY(linear_backward(m, "gate_proj", m->dxn, g[ZINF_LLAMA_GATE],
			    mb ? g[ZINF_LLAMA_GATE_BIAS] : NULL, m->dgate, a->xn2,
			    w[ZINF_LLAMA_GATE], N, C, I, false));
	TRY(linear_backward(m, "up_proj", m->dxn, g[ZINF_LLAMA_UP],
			    mb ? g[ZINF_LLAMA_UP_BIAS] : NULL, m->dup, a->xn2, w[ZINF_LLAMA_UP], N,
			    C, I, true));
	CU(zinf_cuda_llama_rmsnorm_backward,
	   (m->dh, g[ZINF_LLAMA_POST_NORM], m->dxn, a->h, w[ZINF_LLAMA_POST_NORM], a->rstd2, N, C,
	    s),
	   "post_attention_layernorm");
	/* attention block */
	TRY(linear_backward(m, "o_proj", m->dctx, g[ZINF_LLAMA_O],
			    cfg->attention_out_bias ? g[ZINF_LLAMA_O_BIAS] : NULL, m->dh, a->ctx,
			    w[ZINF_LLAMA_O], N, nh * hd, C, false));
	TRY(attention_backward(m, a));
	CU(zinf_cuda_llama_rope, (m->dq, m->rope_cos, m->rope_sin, m->B, m->T, nh, hd, -1.0f, s),
	   "rope dq");
	CU(zinf_cuda_llama_rope, (m->dk, m->rope_cos, m->rope_sin, m->B, m->T, nkv, hd, -1.0f, s),
	   "rope dk");
	TRY(linear_backward(m, "q_proj", m->dxn, g[ZINF_LLAMA_Q], ab ? g[ZINF_LLAMA_Q_BIAS] : NULL,
			    m->dq, a->xn1, w[ZINF_LLAMA_Q], N, C, nh * hd, false));
	TRY(linear_backward(m, "k_proj", m->dxn, g[ZINF_LLAMA_K], ab ? g[ZINF_LLAMA_K_BIAS] : NULL,
			    m->dk, a->xn1, w[ZINF_LLAMA_K], N, C, nkv * hd, true));
	TRY(linear_backward(m, "v_proj", m->dxn, g[ZINF_LLAMA_V], ab ? g[ZINF_LLAMA_V_BIAS] : NULL,
			    m->dv, a->xn1, w[ZINF_LLAMA_V], N, C, nkv * hd, true));
	CU(cudaMemcpyAsync, (dx, m->dh, nc_bytes, cudaMemcpyDeviceToDevice, s),
	   "attention residual");
	CU(zinf_cuda_llama_rmsnorm_backward,
	   (dx, g[ZINF_LLAMA_INPUT_NORM], m->dxn, x, w[ZINF_LLAMA_INPUT_NORM], a->rstd1, N, C, s),
	   "input_layernorm");
	return 0;
}

/* logits of rows [r0, r0 + rows) into m->logits */
static int head_logits(struct cuda_rt *m, const float *lm, int r0, int rows)
{
	int C = m->cfg.hidden_size;

	return linear_forward(m, "lm_head", m->logits, m->xf + (size_t)r0 * C, lm, NULL, rows, C,
			      m->cfg.vocab_size);
}

static int cuda_head_forward(struct llama_rt *rt, const float *const *w, const float *x,
			     float *loss)
{
	struct cuda_rt *m = to_cuda(rt);
	int C = m->cfg.hidden_size, V = m->cfg.vocab_size;
	double total = 0.0;

	set_op(m, "head forward");
	m->head_ready = false;
	*loss = 0.0f;
	CU(zinf_cuda_llama_rmsnorm_forward,
	   (m->xf, m->rstdf, x, w[ZINF_LLAMA_FINAL_NORM], m->N, C, m->cfg.rms_norm_eps, m->stream),
	   "norm");
	for (int r0 = 0; r0 < m->N; r0 += m->head_rows) {
		int rows = m->N - r0 < m->head_rows ? m->N - r0 : m->head_rows;

		TRY(head_logits(m, w[ZINF_LLAMA_LM_HEAD], r0, rows));
		CU(zinf_cuda_llama_ce_forward,
		   (m->lse + r0, m->rowloss + r0, m->logits,
		    m->have_targets ? m->targets + r0 : NULL, rows, V, m->stream),
		   "cross-entropy");
	}
	if (!m->have_targets) { /* synchronous either way (llama_backend.h) */
		CU(cudaStreamSynchronize, (m->stream), NULL);
		return 0;
	}
	TRY(cuda_copy(m, m->h_rowloss, m->rowloss, (size_t)m->N * sizeof(double),
		      cudaMemcpyDeviceToHost));
	for (int n = 0; n < m->N; n++)
		total += m->h_rowloss[n]; /* 0 on ignored rows */
	if (m->head_count)
		*loss = (float)(total / (double)m->head_count);
	m->head_ready = true;
	return 0;
}

static int cuda_head_backward(struct llama_rt *rt, const float *const *w, const float *x,
			      float dloss, float *dx, float *const *g)
{
	struct cuda_rt *m = to_cuda(rt);
	int C = m->cfg.hidden_size, V = m->cfg.vocab_size;

	set_op(m, "head backward");
	if (!m->head_ready)
		return rt_fail(m, ZINF_ESTATE,
			       "llama head backward: no head forward with targets precedes it");
	m->head_ready = false;
	CU(cudaMemsetAsync, (dx, 0, (size_t)m->N * C * sizeof(float), m->stream), "dx");
	if (m->head_count == 0)
		return 0; /* every position ignored: the loss is a constant 0 */
	for (int r0 = 0; r0 < m->N; r0 += m->head_rows) {
		int rows = m->N - r0 < m->head_rows ? m->N - r0 : m->head_rows;

		if (m->head_rows < m->N) /* chunked: this chunk's logits are gone, redo them */
			TRY(head_logits(m, w[ZINF_LLAMA_LM_HEAD], r0, rows));
		CU(zinf_cuda_llama_ce_backward,
		   (m->logits, m->lse + r0, m->targets + r0, rows, V, dloss / (float)m->head_count,
		    m->stream),
		   "cross-entropy");
		TRY(linear_backward(m, "lm_head", m->dxn + (size_t)r0 * C, g[ZINF_LLAMA_LM_HEAD],
				    NULL, m->logits, m->xf + (size_t)r0 * C, w[ZINF_LLAMA_LM_HEAD],
				    rows, C, V, false));
	}
	CU(zinf_cuda_llama_rmsnorm_backward,
	   (dx, g[ZINF_LLAMA_FINAL_NORM], m->dxn, x, w[ZINF_LLAMA_FINAL_NORM], m->rstdf, m->N, C,
	    m->stream),
	   "norm");
	return 0;
}

const struct llama_rt_ops llama_rt_cuda_ops = {
	.name = "cuda",
	.create = cuda_create,
	.destroy = cuda_destroy,
	.acts_create = cuda_acts_create,
	.acts_destroy = cuda_acts_destroy,
	.acts_bytes = cuda_acts_bytes,
	.buf_alloc = cuda_buf_alloc,
	.buf_free = cuda_buf_free,
	.upload = cuda_upload,
	.download = cuda_download,
	.zero = cuda_zero,
	.bind = cuda_bind,
	.set_tokens = cuda_set_tokens,
	.embed_forward = cuda_embed_forward,
	.embed_backward = cuda_embed_backward,
	.layer_forward = cuda_layer_forward,
	.layer_backward = cuda_layer_backward,
	.head_forward = cuda_head_forward,
	.head_backward = cuda_head_backward,
	.sync = cuda_sync,
	.last_error = cuda_last_error,
};

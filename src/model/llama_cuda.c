/*
 * The cuda model runtime (llama_backend.h): the Llama-family forward and backward of
 * llama.h on a GPU. Matrix products are cuBLAS sgemm calls (fp32, CUBLAS_DEFAULT_MATH;
 * TF32 tensor cores with opts.tf32) on row-major buffers, everything else the kernels of
 * kernels/llama_cuda.h, all queued on the runtime's own stream. The math is the CPU
 * runtime's (llama.c, llama_layer.c, llama_ops.c, llama_attention.c) step for step, so
 * results agree to rounding: attention is computed head by head as full (T, T) score
 * matrices for the B sequences at once (strided-batched sgemm), masked causally (and by
 * the sliding window in layers >= max_window_layers), the probabilities rebuilt from the
 * saved log-sum-exp in backward; the head works through the rows in chunks of
 * head_chunk_bytes of logits.
 *
 * Memory: one device allocation for the runtime (RoPE tables, weight-conversion scratch,
 * backward temporaries, head activations and logits, the attention score matrices,
 * tokens), one per layer's saved activations, and the caller's buffers, all from
 * opts.mem (the engine's budget) or cudaMalloc. The cuBLAS handle's workspace is
 * cuBLAS's own (outside the budget, inside the device's memory_reserve).
 *
 * Every CUDA and cuBLAS call is checked; a failure becomes one line naming the call, the
 * runtime op and its step, e.g. "model runtime (cuda): cublasSgemm failed in layer 3
 * backward, o_proj: CUBLAS_STATUS_EXECUTION_FAILED".
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_cuda.h"
#include "llama_cuda_internal.h"
#include "llama_ops.h"
#include "zinf/error.h"
#include "zinf/log.h"

int crt_fail(struct cuda_rt *m, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->err, sizeof(m->err), fmt, ap);
	va_end(ap);
	return rc;
}

/* A fault of a kernel (or the device) that leaves the context unusable. The GPU runs
 * ahead of the host, so the call that reports one may come after the op that caused it:
 * any work queued since the last synchronization. */
static bool device_fault(cudaError_t e)
{
	switch (e) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchFailure:
	case cudaErrorMisalignedAddress:
	case cudaErrorIllegalInstruction:
	case cudaErrorHardwareStackError:
	case cudaErrorInvalidPc:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorAssert:
	case cudaErrorLaunchTimeout:
	case cudaErrorECCUncorrectable:
		return true;
	default:
		return false;
	}
}

/* What a message adds after a CUDA error: that a device fault may come from earlier work. */
static const char *fault_note(cudaError_t e)
{
	return device_fault(e) ? "; a device fault, raised by this op or by work queued before it "
				 "since the last synchronization"
			       : "";
}

int crt_cuda_fail(struct cuda_rt *m, cudaError_t e, const char *call, const char *step)
{
	(void)cudaGetLastError(); /* clear a non-sticky error */
	return crt_fail(m, e == cudaErrorMemoryAllocation ? -ENOMEM : ZINF_EDEVICE,
			"model runtime (cuda): %s failed in %s%s%s: %s (%s)%s", call, m->op,
			step ? ", " : "", step ? step : "", cudaGetErrorString(e),
			cudaGetErrorName(e), fault_note(e));
}

int crt_blas_fail(struct cuda_rt *m, cublasStatus_t st, const char *call, const char *step)
{
	cudaError_t e = cudaGetLastError(); /* the CUDA error under cuBLAS's status, cleared */

	return crt_fail(
		m,
		st == CUBLAS_STATUS_ALLOC_FAILED || e == cudaErrorMemoryAllocation ? -ENOMEM
										   : ZINF_EDEVICE,
		"model runtime (cuda): %s failed in %s%s%s: %s%s%s%s%s", call, m->op,
		step ? ", " : "", step ? step : "", m->blas_api->GetStatusString(st),
		e != cudaSuccess ? " (CUDA: " : "", e != cudaSuccess ? cudaGetErrorName(e) : "",
		e != cudaSuccess ? ")" : "", fault_note(e));
}

/* Name the op now running (for messages) and clear the last error. The runtime's device
 * is made current: the calling thread may have used another GPU since (a failure shows in
 * the op's first call). */
void crt_set_op(struct cuda_rt *m, const char *fmt, ...)
{
	va_list ap;

	(void)cudaSetDevice(m->ordinal);
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
		return crt_fail(m, rc, "model runtime (cuda): %s (%llu bytes): %s", what,
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

/* Query rows per block of attention: all T when a (B, T, T) score buffer fits in bytes,
 * else as many as fit (at least 1; a multiple of 64 from 64 up, for the matrix products'
 * tiles). */
static int attn_rows_of(int B, int T, uint64_t bytes)
{
	uint64_t row = (uint64_t)B * T * sizeof(float), rows = bytes / row;

	if (rows >= (uint64_t)T)
		return T;
	return rows >= 64 ? (int)(rows / 64 * 64) : rows ? (int)rows : 1;
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
	m->att_p = CARVE_F(base, &off, B * (uint64_t)m->attn_rows * T);
	m->att_ds = CARVE_F(base, &off, B * (uint64_t)m->attn_rows * T);
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

/* The shape of m's buffers for cfg, opts and B x T (what the layouts read). */
static void cuda_shape(struct cuda_rt *m, const struct zinf_llama_config *cfg,
		       const struct llama_rt_opts *opts, int B, int T)
{
	m->cfg = *cfg;
	m->B = B;
	m->T = T;
	m->N = B * T;
	m->wscratch_elems =
		opts->weight_dtype == ZINF_DTYPE_F32 ? 0 : zinf_llama_largest_module_elems(cfg);
	m->head_rows = llama_head_rows(cfg, &opts->llama, m->N);
	m->attn_rows = attn_rows_of(
		B, T, opts->attn_scores_bytes ? opts->attn_scores_bytes : LLAMA_ATTN_SCORES_BYTES);
}

/* What create and acts_create allocate, without a GPU: the layouts measured. */
static int cuda_sizes(const struct zinf_llama_config *cfg, const struct llama_rt_opts *opts, int B,
		      int T, struct llama_rt_sizes *out)
{
	struct cuda_rt m;
	struct cuda_acts a;

	memset(&m, 0, sizeof(m));
	cuda_shape(&m, cfg, opts, B, T);
	out->runtime_bytes = runtime_layout(&m, NULL);
	out->acts_bytes = acts_layout(&m, &a, NULL);
	/* h_rowloss, h_emb, h_key and the RoPE tables while they are made */
	out->host_bytes = (uint64_t)m.N * (8 + 8) + (3 * (uint64_t)m.N + 1) * 4 +
			  2 * (uint64_t)T * (cfg->head_dim / 2) * sizeof(float);
	return 0;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static void cuda_destroy(struct llama_rt *rt)
{
	struct cuda_rt *m = to_cuda(rt);

	if (!rt)
		return;
	(void)cudaSetDevice(m->ordinal); /* cuBLAS's handle and the stream are that device's */
	if (m->stream)
		cudaStreamSynchronize(m->stream);
	dev_free(m, m->arena);
	if (m->blas)
		m->blas_api->Destroy(m->blas);
	if (m->stream)
		cudaStreamDestroy(m->stream);
	free(m->h_rowloss);
	free(m->h_emb);
	free(m->h_key);
	free(m);
}

/* Streams, cuBLAS, buffers and the RoPE tables of a new runtime. */
static int cuda_setup(struct cuda_rt *m, int ordinal)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	int half = cfg->head_dim / 2, ndev = 0;
	uint64_t tbytes = (uint64_t)m->T * half * sizeof(float);
	cudaError_t ce = cudaGetDeviceCount(&ndev);
	float *cos_t, *sin_t;
	char why[CRT_BLAS_ERR_LEN];
	int rc;

	if (ce != cudaSuccess || ndev == 0) {
		(void)cudaGetLastError();
		return crt_fail(m, -ENODEV,
				"model runtime: no CUDA device (cudaGetDeviceCount: %s)",
				ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
	}
	m->ordinal = ordinal < 0 ? 0 : ordinal;
	CU(cudaSetDevice, (m->ordinal), NULL);
	CU(cudaStreamCreateWithFlags, (&m->stream, cudaStreamNonBlocking), NULL);
	m->blas_api = crt_blas(why, sizeof(why));
	if (!m->blas_api)
		return crt_fail(m, ZINF_EDEVICE, "model runtime (cuda): %s", why);
	BLAS(Create, (&m->blas), NULL);
	BLAS(SetStream, (m->blas, m->stream), NULL);
	/* fp32 products, no TF32 (unless asked): results stay within rounding of the CPU
	 * runtime */
	BLAS(SetMathMode, (m->blas, m->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
	     NULL);
	TRY(dev_alloc(m, runtime_layout(m, NULL), &m->arena, "runtime buffers"));
	runtime_layout(m, m->arena);
	m->h_rowloss = malloc((size_t)m->N * sizeof(double));
	m->h_emb = malloc((3 * (size_t)m->N + 1) * sizeof(int32_t));
	m->h_key = malloc((size_t)m->N * sizeof(int64_t));
	cos_t = malloc(tbytes);
	sin_t = malloc(tbytes);
	/* the CPU runtime's tables, bit for bit */
	if (!m->h_rowloss || !m->h_emb || !m->h_key || !cos_t || !sin_t ||
	    llama_rope_build(cos_t, sin_t, cfg, m->T)) {
		free(cos_t);
		free(sin_t);
		return crt_fail(m, -ENOMEM, "model runtime (cuda): out of host memory");
	}
	/* on the runtime's stream, finished before the first kernel can read them */
	rc = crt_copy(m, m->rope_cos, cos_t, tbytes, cudaMemcpyHostToDevice);
	if (!rc)
		rc = crt_copy(m, m->rope_sin, sin_t, tbytes, cudaMemcpyHostToDevice);
	free(cos_t);
	free(sin_t);
	return rc;
}

static int cuda_create(const struct zinf_llama_config *cfg, const struct llama_rt_opts *opts, int B,
		       int T, struct llama_rt **out, char *err, size_t errlen)
{
	struct cuda_rt *m;
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
	m->mem = opts->mem;
	m->tf32 = opts->tf32;
	cuda_shape(m, cfg, opts, B, T);
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
		return crt_fail(m, -ENOMEM, "model runtime (cuda): out of host memory");
	crt_set_op(m, "saved activations");
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
	crt_set_op(to_cuda(rt), "buffer");
	return dev_alloc(to_cuda(rt), bytes, out, "activation buffer");
}

static void cuda_buf_free(struct llama_rt *rt, void *ptr)
{
	cudaStreamSynchronize(to_cuda(rt)->stream);
	dev_free(to_cuda(rt), ptr);
}

int crt_copy(struct cuda_rt *m, void *dst, const void *src, uint64_t bytes,
	     enum cudaMemcpyKind kind)
{
	CU(cudaMemcpyAsync, (dst, src, bytes, kind, m->stream), NULL);
	CU(cudaStreamSynchronize, (m->stream), NULL);
	return 0;
}

static int cuda_upload(struct llama_rt *rt, void *dst, const void *src, uint64_t bytes)
{
	crt_set_op(to_cuda(rt), "upload");
	return crt_copy(to_cuda(rt), dst, src, bytes, cudaMemcpyHostToDevice);
}

static int cuda_download(struct llama_rt *rt, void *dst, const void *src, uint64_t bytes)
{
	crt_set_op(to_cuda(rt), "download");
	return crt_copy(to_cuda(rt), dst, src, bytes, cudaMemcpyDeviceToHost);
}

static int cuda_host_alloc(struct llama_rt *rt, uint64_t bytes, void **out)
{
	struct cuda_rt *m = to_cuda(rt);
	uint64_t len = (bytes + 4095) / 4096 * 4096;
	cudaError_t e;

	(void)cudaSetDevice(m->ordinal); /* registered with the current device's context */
	if (posix_memalign(out, 4096, len ? len : 4096)) {
		*out = NULL;
		return crt_fail(m, -ENOMEM, "model runtime (cuda): out of host memory (%llu bytes)",
				(unsigned long long)bytes);
	}
	e = cudaHostRegister(*out, len ? len : 4096, cudaHostRegisterDefault);
	if (e != cudaSuccess) { /* pageable copies are right too, only slower */
		(void)cudaGetLastError();
		zinf_logf(ZINF_LOG_WARN,
			  "model runtime (cuda): %llu bytes of host memory not page-locked (%s): "
			  "copies to and from it go through the driver's staging",
			  (unsigned long long)bytes, cudaGetErrorString(e));
	}
	return 0;
}

static void cuda_host_free(struct llama_rt *rt, void *ptr)
{
	if (!ptr)
		return;
	(void)cudaSetDevice(to_cuda(rt)->ordinal);
	cudaStreamSynchronize(to_cuda(rt)->stream); /* queued copies from or into it */
	if (cudaHostUnregister(ptr) != cudaSuccess)
		(void)cudaGetLastError(); /* it was not page-locked */
	free(ptr);
}

static int cuda_upload_queued(struct llama_rt *rt, void *dst, const void *src, uint64_t bytes)
{
	struct cuda_rt *m = to_cuda(rt);

	crt_set_op(m, "upload");
	CU(cudaMemcpyAsync, (dst, src, bytes, cudaMemcpyHostToDevice, m->stream), NULL);
	return 0;
}

static int cuda_download_queued(struct llama_rt *rt, void *dst, const void *src, uint64_t bytes)
{
	struct cuda_rt *m = to_cuda(rt);

	crt_set_op(m, "download");
	CU(cudaMemcpyAsync, (dst, src, bytes, cudaMemcpyDeviceToHost, m->stream), NULL);
	return 0;
}

static int cuda_zero(struct llama_rt *rt, void *dst, uint64_t bytes)
{
	struct cuda_rt *m = to_cuda(rt);

	crt_set_op(m, "zero");
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
		return crt_cuda_fail(m, ce, "cudaStreamSynchronize", NULL);
	}
	return 0;
}

static const char *cuda_last_error(const struct llama_rt *rt)
{
	return ((const struct cuda_rt *)rt)->err;
}

const struct llama_rt_ops llama_rt_cuda_ops = {
	.name = "cuda",
	.create = cuda_create,
	.destroy = cuda_destroy,
	.acts_create = cuda_acts_create,
	.acts_destroy = cuda_acts_destroy,
	.acts_bytes = cuda_acts_bytes,
	.sizes = cuda_sizes,
	.buf_alloc = cuda_buf_alloc,
	.buf_free = cuda_buf_free,
	.upload = cuda_upload,
	.download = cuda_download,
	.host_alloc = cuda_host_alloc,
	.host_free = cuda_host_free,
	.upload_queued = cuda_upload_queued,
	.download_queued = cuda_download_queued,
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

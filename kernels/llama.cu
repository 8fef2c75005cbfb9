// CUDA kernels of the Llama-family decoder (see llama_cuda.h). Simple by design: one
// thread per element for elementwise work, one block per row for row reductions (sums
// in double where the CPU runtime sums in double), and for column sums a block per tile
// of COL_TILE columns whose ROW_LANES rows of threads each sum every ROW_LANES-th row
// (coalesced, and enough blocks to fill the GPU), their partials added in a fixed order.
// Correctness and agreement with the CPU runtime (src/model/llama_ops.c) first.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "launch.h"
#include "llama_cuda.h"

#define ROW_THREADS 256
#define ELEM_THREADS 256
#define COL_TILE 32
#define ROW_LANES 16

static unsigned elem_grid(size_t n)
{
	size_t blocks = (n + ELEM_THREADS - 1) / ELEM_THREADS;
	return (unsigned)(blocks < 65535 ? blocks : 65535);
}

// Sum of v over the block (ROW_THREADS threads); every thread gets the result.
template <typename F> static __device__ F block_sum(F v, F *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int w = ROW_THREADS / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	F r = sh[0];
	__syncthreads();
	return r;
}

static __device__ float block_max(float v, float *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int w = ROW_THREADS / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + w]);
		__syncthreads();
	}
	float r = sh[0];
	__syncthreads();
	return r;
}

#define GRID_STRIDE(i, n)                                                                          \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                    \
	     i += (size_t)gridDim.x * blockDim.x)

// ---- weight conversion ------------------------------------------------------------------

__global__ void bf16_to_f32_kernel(float *dst, const uint16_t *src, size_t n)
{
	GRID_STRIDE(i, n)
	dst[i] = __uint_as_float((uint32_t)src[i] << 16);
}

__global__ void f16_to_f32_kernel(float *dst, const uint16_t *src, size_t n)
{
	GRID_STRIDE(i, n)
	dst[i] = __half2float(__ushort_as_half(src[i]));
}

extern "C" cudaError_t zinf_cuda_llama_bf16_to_f32(float *dst, const uint16_t *src, size_t n,
						   cudaStream_t s)
{
	if (!n)
		return cudaSuccess;
	ZINF_LAUNCH(bf16_to_f32_kernel, elem_grid(n), ELEM_THREADS, s)(dst, src, n);
	return cudaGetLastError();
}

extern "C" cudaError_t zinf_cuda_llama_f16_to_f32(float *dst, const uint16_t *src, size_t n,
						  cudaStream_t s)
{
	if (!n)
		return cudaSuccess;
	ZINF_LAUNCH(f16_to_f32_kernel, elem_grid(n), ELEM_THREADS, s)(dst, src, n);
	return cudaGetLastError();
}

// ---- embedding ---------------------------------------------------------------------------

__global__ void embed_forward_kernel(float *x, const float *table, const int32_t *tokens, int c,
				     size_t total)
{
	GRID_STRIDE(i, total)
	{
		size_t r = i / c, k = i % c;
		x[i] = table[(size_t)tokens[r] * c + k];
	}
}

/* One block per distinct token: its rows are added in row order (as the CPU runtime does),
 * so the result does not depend on scheduling; no two blocks write the same row. */
__global__ void embed_backward_kernel(float *dtable, const float *dx, const int32_t *uniq_tok,
				      const int32_t *start, const int32_t *rows, int c)
{
	float *dst = dtable + (size_t)uniq_tok[blockIdx.x] * c;

	for (int k = threadIdx.x; k < c; k += blockDim.x) {
		float acc = dst[k];
		for (int j = start[blockIdx.x]; j < start[blockIdx.x + 1]; j++)
			acc += dx[(size_t)rows[j] * c + k];
		dst[k] = acc;
	}
}

extern "C" cudaError_t zinf_cuda_llama_embed_forward(float *x, const float *table,
						     const int32_t *tokens, int n, int c,
						     cudaStream_t s)
{
	size_t total = (size_t)n * c;
	if (!total)
		return cudaSuccess;
	ZINF_LAUNCH(embed_forward_kernel, elem_grid(total), ELEM_THREADS, s)
	(x, table, tokens, c, total);
	return cudaGetLastError();
}

extern "C" cudaError_t zinf_cuda_llama_embed_backward(float *dtable, const float *dx,
						      const int32_t *uniq_tok, const int32_t *start,
						      const int32_t *rows, int n_uniq, int c,
						      cudaStream_t s)
{
	if (!n_uniq || !c)
		return cudaSuccess;
	ZINF_LAUNCH(embed_backward_kernel, n_uniq, ROW_THREADS, s)
	(dtable, dx, uniq_tok, start, rows, c);
	return cudaGetLastError();
}

// ---- RMSNorm -----------------------------------------------------------------------------

__global__ void rmsnorm_forward_kernel(float *y, float *rstd, const float *x, const float *w, int c,
				       float eps)
{
	__shared__ double sh[ROW_THREADS];
	const float *xr = x + (size_t)blockIdx.x * c;
	float *yr = y + (size_t)blockIdx.x * c;
	double ss = 0.0;

	for (int i = threadIdx.x; i < c; i += blockDim.x)
		ss += (double)xr[i] * xr[i];
	ss = block_sum(ss, sh);
	float rs = 1.0f / sqrtf((float)(ss / c) + eps);
	if (threadIdx.x == 0)
		rstd[blockIdx.x] = rs;
	for (int i = threadIdx.x; i < c; i += blockDim.x)
		yr[i] = w[i] * (xr[i] * rs);
}

__global__ void rmsnorm_backward_dx_kernel(float *dx, const float *dy, const float *x,
					   const float *w, const float *rstd, int c)
{
	__shared__ double sh[ROW_THREADS];
	size_t off = (size_t)blockIdx.x * c;
	const float *xr = x + off, *dyr = dy + off;
	float *dxr = dx + off;
	float rs = rstd[blockIdx.x];
	double dot = 0.0;

	// dx = rstd * (dxhat - xhat * mean(dxhat * xhat)), dxhat = dy * w, xhat = x * rstd
	for (int i = threadIdx.x; i < c; i += blockDim.x)
		dot += (double)(dyr[i] * w[i]) * (xr[i] * rs);
	dot = block_sum(dot, sh);
	float mean = (float)(dot / c);
	for (int i = threadIdx.x; i < c; i += blockDim.x)
		dxr[i] += rs * (dyr[i] * w[i] - xr[i] * rs * mean);
}

// Add the ROW_LANES partial sums of the block's columns (threadIdx.y's) to dst, in lane
// order, so that the result does not depend on scheduling. Once per kernel: there is no
// barrier after lane 0's reads.
static __device__ void column_tile_add(float *dst, float acc, int col, int ncols)
{
	__shared__ float part[ROW_LANES][COL_TILE];

	part[threadIdx.y][threadIdx.x] = acc;
	__syncthreads();
	if (threadIdx.y == 0 && col < ncols) {
		float s = 0.0f;
		for (int k = 0; k < ROW_LANES; k++)
			s += part[k][threadIdx.x];
		dst[col] += s;
	}
}

__global__ void rmsnorm_backward_dw_kernel(float *dw, const float *dy, const float *x,
					   const float *rstd, int n, int c)
{
	int i = blockIdx.x * COL_TILE + threadIdx.x;
	float acc = 0.0f;

	if (i < c)
		for (int r = threadIdx.y; r < n; r += ROW_LANES)
			acc += dy[(size_t)r * c + i] * (x[(size_t)r * c + i] * rstd[r]);
	column_tile_add(dw, acc, i, c);
}

extern "C" cudaError_t zinf_cuda_llama_rmsnorm_forward(float *y, float *rstd, const float *x,
						       const float *w, int n, int c, float eps,
						       cudaStream_t s)
{
	if (n <= 0 || c <= 0)
		return cudaSuccess;
	ZINF_LAUNCH(rmsnorm_forward_kernel, n, ROW_THREADS, s)(y, rstd, x, w, c, eps);
	return cudaGetLastError();
}

extern "C" cudaError_t zinf_cuda_llama_rmsnorm_backward(float *dx, float *dw, const float *dy,
							const float *x, const float *w,
							const float *rstd, int n, int c,
							cudaStream_t s)
{
	cudaError_t err;

	if (n <= 0 || c <= 0)
		return cudaSuccess;
	ZINF_LAUNCH(rmsnorm_backward_dx_kernel, n, ROW_THREADS, s)(dx, dy, x, w, rstd, c);
	err = cudaGetLastError();
	if (err != cudaSuccess)
		return err;
	ZINF_LAUNCH(rmsnorm_backward_dw_kernel, (c + COL_TILE - 1) / COL_TILE,
		    dim3(COL_TILE, ROW_LANES), s)
	(dw, dy, x, rstd, n, c);
	return cudaGetLastError();
}

// ---- RoPE --------------------------------------------------------------------------------

__global__ void rope_kernel(float *x, const float *cos_t, const float *sin_t, int T, int nheads,
			    int hd, float sign, size_t total)
{
	int hh = hd / 2;
	GRID_STRIDE(idx, total)
	{
		size_t r = idx / ((size_t)nheads * hh);
		size_t rem = idx % ((size_t)nheads * hh);
		int h = (int)(rem / hh), i = (int)(rem % hh);
		int t = (int)(r % T);
		float *v = x + r * nheads * hd + (size_t)h * hd;
		float cr = cos_t[(size_t)t * hh + i], sr = sign * sin_t[(size_t)t * hh + i];
		float a = v[i], b = v[i + hh];

		v[i] = a * cr - b * sr;
		v[i + hh] = b * cr + a * sr;
	}
}

extern "C" cudaError_t zinf_cuda_llama_rope(float *x, const float *cos_t, const float *sin_t, int B,
					    int T, int nheads, int hd, float sign, cudaStream_t s)
{
	size_t total = (size_t)B * T * nheads * (hd / 2);
	if (!total)
		return cudaSuccess;
	ZINF_LAUNCH(rope_kernel, elem_grid(total), ELEM_THREADS, s)
	(x, cos_t, sin_t, T, nheads, hd, sign, total);
	return cudaGetLastError();
}

// ---- bias, residual, SwiGLU --------------------------------------------------------------

__global__ void bias_add_kernel(float *y, const float *b, int out, size_t total)
{
	GRID_STRIDE(i, total)
	y[i] += b[i % out];
}

__global__ void column_sums_add_kernel(float *db, const float *dy, int n, int out)
{
	int c = blockIdx.x * COL_TILE + threadIdx.x;
	float acc = 0.0f;

	if (c < out)
		for (int r = threadIdx.y; r < n; r += ROW_LANES)
			acc += dy[(size_t)r * out + c];
	column_tile_add(db, acc, c, out);
}

__global__ void add_kernel(float *dst, const float *src, size_t n)
{
	GRID_STRIDE(i, n)
	dst[i] += src[i];
}

__global__ void swiglu_forward_kernel(float *act, const float *gate, const float *up, size_t n)
{
	GRID_STRIDE(i, n)
	{
		float g = gate[i];
		act[i] = g / (1.0f + expf(-g)) * up[i];
	}
}

__global__ void swiglu_backward_kernel(float *dgate, float *dup, const float *dact,
				       const float *gate, const float *up, size_t n)
{
	GRID_STRIDE(i, n)
	{
		float g = gate[i];
		float sig = 1.0f / (1.0f + expf(-g));
		dup[i] = dact[i] * (g * sig);
		dgate[i] = dact[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
	}
}

extern "C" cudaError_t zinf_cuda_llama_bias_add(float *y, const float *b, int n, int out,
						cudaStream_t s)
{
	size_t total = (size_t)n * out;
	if (!total)
		return cudaSuccess;
	ZINF_LAUNCH(bias_add_kernel, elem_grid(total), ELEM_THREADS, s)(y, b, out, total);
	return cudaGetLastError();
}

extern "C" cudaError_t zinf_cuda_llama_column_sums_add(float *db, const float *dy, int n, int out,
						       cudaStream_t s)
{
	if (n <= 0 || out <= 0)
		return cudaSuccess;
	ZINF_LAUNCH(column_sums_add_kernel, (out + COL_TILE - 1) / COL_TILE,
		    dim3(COL_TILE, ROW_LANES), s)
	(db, dy, n, out);
	return cudaGetLastError();
}

extern "C" cudaError_t zinf_cuda_llama_add(float *dst, const float *src, size_t n, cudaStream_t s)
{
	if (!n)
		return cudaSuccess;
	ZINF_LAUNCH(add_kernel, elem_grid(n), ELEM_THREADS, s)(dst, src, n);
	return cudaGetLastError();
}

extern "C" cudaError_t zinf_cuda_llama_swiglu_forward(float *act, const float *gate,
						      const float *up, size_t n, cudaStream_t s)
{
	if (!n)
		return cudaSuccess;
	ZINF_LAUNCH(swiglu_forward_kernel, elem_grid(n), ELEM_THREADS, s)(act, gate, up, n);
	return cudaGetLastError();
}

extern "C" cudaError_t zinf_cuda_llama_swiglu_backward(float *dgate, float *dup, const float *dact,
						       const float *gate, const float *up, size_t n,
						       cudaStream_t s)
{
	if (!n)
		return cudaSuccess;
	ZINF_LAUNCH(swiglu_backward_kernel, elem_grid(n), ELEM_THREADS, s)
	(dgate, dup, dact, gate, up, n);
	return cudaGetLastError();
}

// ---- attention softmax -------------------------------------------------------------------

// First key query t sees.
static __device__ int window_lo(int t, int window)
{
	return window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
}

// One thread block per (b, i) row of an attention block's scores (B, rows, nk): query
// t = r0 + i; column u is key k0 + u, seen for u in [lo(t) - k0, t - k0].
__global__ void attn_softmax_forward_kernel(float *p, float *lse, zinf_cuda_attn_block a)
{
	__shared__ float shf[ROW_THREADS];
	int b = blockIdx.x / a.rows, t = a.r0 + blockIdx.x % a.rows;
	int lo = window_lo(t, a.window) - a.k0, hi = t - a.k0;
	float *pr = p + (size_t)blockIdx.x * a.nk;
	float mx = -INFINITY, sum = 0.0f;

	for (int u = lo + threadIdx.x; u <= hi; u += blockDim.x)
		mx = fmaxf(mx, pr[u]);
	mx = block_max(mx, shf);
	for (int u = lo + threadIdx.x; u <= hi; u += blockDim.x)
		sum += expf(pr[u] - mx);
	sum = block_sum(sum, shf);
	for (int u = threadIdx.x; u < a.nk; u += blockDim.x)
		pr[u] = u >= lo && u <= hi ? expf(pr[u] - mx) / sum : 0.0f;
	if (threadIdx.x == 0)
		lse[((size_t)b * a.nh + a.h) * a.T + t] = mx + logf(sum);
}

__global__ void attn_softmax_backward_kernel(float *p, float *ds, const float *lse,
					     zinf_cuda_attn_block a, float scale)
{
	__shared__ double sh[ROW_THREADS];
	int b = blockIdx.x / a.rows, t = a.r0 + blockIdx.x % a.rows;
	int lo = window_lo(t, a.window) - a.k0, hi = t - a.k0;
	float *pr = p + (size_t)blockIdx.x * a.nk, *dr = ds + (size_t)blockIdx.x * a.nk;
	float l = lse[((size_t)b * a.nh + a.h) * a.T + t];
	double dsum = 0.0;

	for (int u = threadIdx.x; u < a.nk; u += blockDim.x) {
		float pv = u >= lo && u <= hi ? expf(pr[u] - l) : 0.0f;
		pr[u] = pv;
		dsum += (double)pv * dr[u];
	}
	dsum = block_sum(dsum, sh);
	float d = (float)dsum;
	for (int u = threadIdx.x; u < a.nk; u += blockDim.x)
		dr[u] = u >= lo && u <= hi ? pr[u] * (dr[u] - d) * scale : 0.0f;
}

extern "C" cudaError_t zinf_cuda_llama_attn_softmax_forward(float *p, float *lse,
							    const zinf_cuda_attn_block *a,
							    cudaStream_t s)
{
	if (a->B <= 0 || a->rows <= 0)
		return cudaSuccess;
	ZINF_LAUNCH(attn_softmax_forward_kernel, a->B * a->rows, ROW_THREADS, s)(p, lse, *a);
	return cudaGetLastError();
}

extern "C" cudaError_t zinf_cuda_llama_attn_softmax_backward(float *p, float *ds, const float *lse,
							     const zinf_cuda_attn_block *a,
							     float scale, cudaStream_t s)
{
	if (a->B <= 0 || a->rows <= 0)
		return cudaSuccess;
	ZINF_LAUNCH(attn_softmax_backward_kernel, a->B * a->rows, ROW_THREADS, s)
	(p, ds, lse, *a, scale);
	return cudaGetLastError();
}

// ---- cross-entropy -----------------------------------------------------------------------

__global__ void ce_forward_kernel(float *lse, double *rowloss, const float *logits,
				  const int32_t *targets, int V)
{
	__shared__ float shf[ROW_THREADS];
	__shared__ double shd[ROW_THREADS];
	const float *lr = logits + (size_t)blockIdx.x * V;
	float mx = -INFINITY;
	double sum = 0.0;

	for (int i = threadIdx.x; i < V; i += blockDim.x)
		mx = fmaxf(mx, lr[i]);
	mx = block_max(mx, shf);
	for (int i = threadIdx.x; i < V; i += blockDim.x)
		sum += exp((double)(lr[i] - mx));
	sum = block_sum(sum, shd);
	if (threadIdx.x == 0) {
		float l = mx + (float)log(sum);
		int32_t tg = targets ? targets[blockIdx.x] : -1;

		lse[blockIdx.x] = l;
		rowloss[blockIdx.x] = tg >= 0 ? (double)l - (double)lr[tg] : 0.0;
	}
}

__global__ void ce_backward_kernel(float *logits, const float *lse, const int32_t *targets, int V,
				   float scale)
{
	float *lr = logits + (size_t)blockIdx.x * V;
	int32_t tg = targets[blockIdx.x];
	float l = lse[blockIdx.x];

	for (int i = threadIdx.x; i < V; i += blockDim.x)
		lr[i] = tg < 0 ? 0.0f : scale * expf(lr[i] - l);
	__syncthreads();
	if (threadIdx.x == 0 && tg >= 0)
		lr[tg] -= scale;
}

extern "C" cudaError_t zinf_cuda_llama_ce_forward(float *lse, double *rowloss, const float *logits,
						  const int32_t *targets, int n, int V,
						  cudaStream_t s)
{
	if (n <= 0 || V <= 0)
		return cudaSuccess;
	ZINF_LAUNCH(ce_forward_kernel, n, ROW_THREADS, s)(lse, rowloss, logits, targets, V);
	return cudaGetLastError();
}

extern "C" cudaError_t zinf_cuda_llama_ce_backward(float *logits, const float *lse,
						   const int32_t *targets, int n, int V,
						   float scale, cudaStream_t s)
{
	if (n <= 0 || V <= 0)
		return cudaSuccess;
	ZINF_LAUNCH(ce_backward_kernel, n, ROW_THREADS, s)(logits, lse, targets, V, scale);
	return cudaGetLastError();
}

/*
 * CUDA kernels of the Llama-family decoder (kernels/llama.cu), the GPU counterparts of the
 * CPU kernels the model runtime uses: weight conversion to fp32, embedding gather and
 * scatter-add, RMSNorm, RoPE (rotate_half convention), bias add and bias gradient,
 * residual add, SwiGLU, the masked softmax of causal (optionally sliding-window)
 * attention, and cross-entropy. Matrix products are cuBLAS sgemm calls made by the
 * caller (src/model/llama_cuda.c).
 *
 * Every launcher is C-callable, takes an explicit stream, queues the work and returns
 * the launch status (cudaSuccess or the error cudaGetLastError reports); n == 0 queues
 * nothing. All buffers are device memory, fp32 and row-major unless said.
 */
#ifndef ZINF_KERNELS_LLAMA_CUDA_H
#define ZINF_KERNELS_LLAMA_CUDA_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst (n) fp32 = src (n) bf16 / fp16 bit patterns, exactly. */
cudaError_t zinf_cuda_llama_bf16_to_f32(float *dst, const uint16_t *src, size_t n, cudaStream_t s);
cudaError_t zinf_cuda_llama_f16_to_f32(float *dst, const uint16_t *src, size_t n, cudaStream_t s);

/* x (n, c) = table rows of tokens (validated by the caller). */
cudaError_t zinf_cuda_llama_embed_forward(float *x, const float *table, const int32_t *tokens,
					  int n, int c, cudaStream_t s);
/* dtable (V, c) += dx rows: distinct token uniq_tok[u] (u < n_uniq) gets the rows
 * rows[start[u] .. start[u + 1]) added in that order (ascending rows: deterministic, the
 * CPU runtime's order). */
cudaError_t zinf_cuda_llama_embed_backward(float *dtable, const float *dx, const int32_t *uniq_tok,
					   const int32_t *start, const int32_t *rows, int n_uniq,
					   int c, cudaStream_t s);

/* y (n, c) = x * rsqrt(mean(x^2) + eps) * w, the mean in double; rstd (n). */
cudaError_t zinf_cuda_llama_rmsnorm_forward(float *y, float *rstd, const float *x, const float *w,
					    int n, int c, float eps, cudaStream_t s);
/* dx (n, c) += d/dx given dy; dw (c) += sum over rows of dy * x * rstd: per column, 16
 * row-strided partial sums added in lane order (deterministic, not the CPU's row order). */
cudaError_t zinf_cuda_llama_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x,
					     const float *w, const float *rstd, int n, int c,
					     cudaStream_t s);

/* In place on x (B*T, nheads*hd): pairs (i, i + hd/2) rotated by the angle of the row's
 * position t = row % T, from cos_t, sin_t (T, hd/2). sign -1 rotates back (backward). */
cudaError_t zinf_cuda_llama_rope(float *x, const float *cos_t, const float *sin_t, int B, int T,
				 int nheads, int hd, float sign, cudaStream_t s);

/* y (n, out) += b (out) on every row. */
cudaError_t zinf_cuda_llama_bias_add(float *y, const float *b, int n, int out, cudaStream_t s);
/* db (out) += column sums of dy (n, out), summed as dw above. */
cudaError_t zinf_cuda_llama_column_sums_add(float *db, const float *dy, int n, int out,
					    cudaStream_t s);
/* dst (n) += src (n). */
cudaError_t zinf_cuda_llama_add(float *dst, const float *src, size_t n, cudaStream_t s);

/* act (n) = silu(gate) * up; backward: dgate, dup (n) from dact. */
cudaError_t zinf_cuda_llama_swiglu_forward(float *act, const float *gate, const float *up, size_t n,
					   cudaStream_t s);
cudaError_t zinf_cuda_llama_swiglu_backward(float *dgate, float *dup, const float *dact,
					    const float *gate, const float *up, size_t n,
					    cudaStream_t s);

/* A block of attention: query rows [r0, r0 + rows) of query head h (of nh) against keys
 * [k0, k0 + nk), for the B sequences of T tokens at once. Query t sees keys j with
 * lo(t) <= j <= t, lo(t) = max(0, t - window + 1) when window > 0, else 0; a block's keys
 * cover those of its rows (k0 <= lo(r0), k0 + nk >= r0 + rows). */
struct zinf_cuda_attn_block {
	int B, T, nh, h, window;
	int r0, rows, k0, nk;
};

/* p (B, rows, nk): the scaled scores q k^T / sqrt(hd) of a block on entry (column u is key
 * k0 + u), the probabilities on return, 0 where a key is not seen. lse (B, nh, T)
 * receives each row's log-sum-exp at [(b * nh + h) * T + t]. */
cudaError_t zinf_cuda_llama_attn_softmax_forward(float *p, float *lse,
						 const struct zinf_cuda_attn_block *a,
						 cudaStream_t s);
/* Backward of the same: p holds the block's scores again on entry (probabilities on
 * return, rebuilt as exp(s - lse)); ds holds dp = dout v^T on entry and receives
 * ds = p * (dp - sum(p * dp)) * scale (0 where masked). */
cudaError_t zinf_cuda_llama_attn_softmax_backward(float *p, float *ds, const float *lse,
						  const struct zinf_cuda_attn_block *a, float scale,
						  cudaStream_t s);

/* Per row r of logits (n, V): lse[r] = logsumexp (sum in double); rowloss[r] =
 * lse - logits[target] (double), or 0 where targets[r] == -1. */
cudaError_t zinf_cuda_llama_ce_forward(float *lse, double *rowloss, const float *logits,
				       const int32_t *targets, int n, int V, cudaStream_t s);
/* In place: logits (n, V) become scale * (softmax - onehot(target)), 0 on ignored rows. */
cudaError_t zinf_cuda_llama_ce_backward(float *logits, const float *lse, const int32_t *targets,
					int n, int V, float scale, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_KERNELS_LLAMA_CUDA_H */

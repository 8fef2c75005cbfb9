/*
 * CPU kernels of the Llama-family decoder (internal to src/model): linear layers and
 * causal GQA attention on OpenBLAS sgemm, and OpenMP loops for RMSNorm, RoPE, SwiGLU,
 * softmax, embedding and cross-entropy, each with its backward. All fp32, row-major.
 *
 * Determinism: every loop is split so that each output element is written by one thread
 * with a fixed summation order, so results do not depend on the thread count schedule.
 * sgemm is called only from the calling thread.
 */
#ifndef ZINF_MODEL_LLAMA_OPS_H
#define ZINF_MODEL_LLAMA_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llama.h"

/* Warn (once per process) when OpenBLAS runs generic kernels on a CPU it did not
 * recognise, naming the OPENBLAS_CORETYPE that would be faster (blas_core.c). */
void blas_core_check(void);

/* y (n, out) = x (n, in) w^T + b; w (out, in), b (out) or NULL. */
void llama_linear_forward(float *y, const float *x, const float *w, const float *b, int n, int in,
			  int out);
/* dx (n, in) = dy w (or += when dx_accumulate; dx NULL skips it); dw (out, in) += dy^T x;
 * db (out) += column sums of dy (db NULL skips it). */
void llama_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
			   const float *w, int n, int in, int out, bool dx_accumulate);

/* y (n, c) = x * rsqrt(mean(x^2) + eps) * w; rstd (n) keeps the reciprocal RMS. */
void llama_rmsnorm_forward(float *y, float *rstd, const float *x, const float *w, int n, int c,
			   float eps);
/* dx (n, c) += d/dx of y given dy (dx is accumulated into: residual branches add up);
 * dw (c) += sum over rows of dy * x * rstd. */
void llama_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
			    const float *rstd, int n, int c);

/* llama_rope.c: the rope settings of cfg checked (0, or ZINF_ECONFIG with a message); the
 * inverse frequencies (hd / 2) of cfg's rotary embedding for sequences of T tokens, returning
 * the factor that scales cos and sin (yarn's attention factor, else 1); cos/sin tables
 * (T, hd / 2) for positions 0..T-1, times scale. */
int llama_rope_check(const struct zinf_llama_config *cfg, char *err, size_t errlen);
float llama_rope_inv_freq(float *inv_freq, const struct zinf_llama_config *cfg, int T);
void llama_rope_tables(float *cos_t, float *sin_t, const float *inv_freq, int T, int hd,
		       float scale);
/* Both in one: cfg's cos/sin tables for T positions (what each runtime uses). 0 or
 * -ENOMEM. */
int llama_rope_build(float *cos_t, float *sin_t, const struct zinf_llama_config *cfg, int T);
/* In place on x (B*T, nheads*hd): each head's vector rotated by position (rotate_half
 * convention: pairs (i, i + hd/2)). backward applies the transpose rotation to gradients. */
void llama_rope_forward(float *x, const float *cos_t, const float *sin_t, int B, int T, int nheads,
			int hd);
void llama_rope_backward(float *dx, const float *cos_t, const float *sin_t, int B, int T,
			 int nheads, int hd);

/* act (n) = silu(gate) * up. */
void llama_swiglu_forward(float *act, const float *gate, const float *up, int64_t n);
/* dgate, dup (n) from dact (n). */
void llama_swiglu_backward(float *dgate, float *dup, const float *dact, const float *gate,
			   const float *up, int64_t n);

/* Causal attention with GQA: q (B*T, nh*hd), k, v (B*T, nkv*hd), out (B*T, nh*hd); query
 * head h reads key/value head h / (nh / nkv). window > 0: query i sees keys j with
 * i - window < j <= i (sliding window); 0: all j <= i. lse (B, nh, T) keeps each row's
 * log-sum-exp of the scaled scores, from which backward rebuilds the probabilities.
 * scratch: llama_attention_scratch_elems(T) floats. */
uint64_t llama_attention_scratch_elems(int T);
void llama_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
			     float *scratch, int B, int T, int nh, int nkv, int hd, int window);
/* dq (B*T, nh*hd), dk, dv (B*T, nkv*hd) are overwritten. dkp, dvp (B*T, nh*hd) are
 * scratch: per-query-head partials of dk, dv, summed per group in a fixed order. */
void llama_attention_backward(float *dq, float *dk, float *dv, float *dkp, float *dvp,
			      const float *dout, const float *q, const float *k, const float *v,
			      const float *lse, float *scratch, int B, int T, int nh, int nkv,
			      int hd, int window);

/* x (n, c) = table rows of tokens (no range check: the caller validates). */
void llama_embedding_forward(float *x, const float *table, const int32_t *tokens, int n, int c);
/* dtable (V, c) += dx rows at tokens. */
void llama_embedding_backward(float *dtable, const float *dx, const int32_t *tokens, int n, int c);

/* Per row n: lse[n] = logsumexp(logits[n]); loss_sum += lse - logits[target] over rows with
 * target != -1 (summed in double); *count = such rows. targets NULL: only lse. */
void llama_crossentropy_forward(float *lse, double *loss_sum, int64_t *count, const float *logits,
				const int32_t *targets, int n, int V);
/* In place: logits (n, V) become dlogits = scale * (softmax - onehot(target)), and 0 on
 * rows whose target is -1. */
void llama_crossentropy_backward(float *logits, const float *lse, const int32_t *targets, int n,
				 int V, float scale);

#endif /* ZINF_MODEL_LLAMA_OPS_H */

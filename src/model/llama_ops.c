/*
 * CPU kernels of the Llama-family decoder, except attention (llama_attention.c): linear
 * layers (OpenBLAS sgemm), RMSNorm, RoPE, SwiGLU, embedding and cross-entropy, forward and
 * backward, fp32. See llama_ops.h for shapes; docs/model.md for the math.
 */
#include "llama_ops.h"

#include <cblas.h>
#include <math.h>
#include <stddef.h>

/* Columns per OpenMP task in column-parallel reductions: each column is summed by one
 * thread in row order, so the result does not depend on the thread count. */
#define COL_BLOCK 64

/* ---- linear ------------------------------------------------------------------------------ */

void llama_linear_forward(float *y, const float *x, const float *w, const float *b, int n, int in,
			  int out)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, 0.0f,
		    y, out);
	if (!b)
		return;
#pragma omp parallel for schedule(static)
	for (int r = 0; r < n; r++) {
		float *yr = y + (size_t)r * out;

		for (int o = 0; o < out; o++)
			yr[o] += b[o];
	}
}

/* db (out) += column sums of dy (n, out). */
static void column_sums_add(float *db, const float *dy, int n, int out)
{
#pragma omp parallel for schedule(static)
	for (int c0 = 0; c0 < out; c0 += COL_BLOCK) {
		int c1 = c0 + COL_BLOCK < out ? c0 + COL_BLOCK : out;
		float acc[COL_BLOCK] = {0};

		for (int r = 0; r < n; r++) {
			const float *dr = dy + (size_t)r * out;

			for (int c = c0; c < c1; c++)
				acc[c - c0] += dr[c];
		}
		for (int c = c0; c < c1; c++)
			db[c] += acc[c - c0];
	}
}

void llama_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
			   const float *w, int n, int in, int out, bool dx_accumulate)
{
	if (dx)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w,
			    in, dx_accumulate ? 1.0f : 0.0f, dx, in);
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 1.0f,
		    dw, in);
	if (db)
		column_sums_add(db, dy, n, out);
}

/* ---- RMSNorm ----------------------------------------------------------------------------- */

void llama_rmsnorm_forward(float *y, float *rstd, const float *x, const float *w, int n, int c,
			   float eps)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < n; r++) {
		const float *xr = x + (size_t)r * c;
		float *yr = y + (size_t)r * c;
		double ss = 0.0;

		for (int i = 0; i < c; i++)
			ss += (double)xr[i] * xr[i];
		float rs = 1.0f / sqrtf((float)(ss / c) + eps);

		rstd[r] = rs;
		for (int i = 0; i < c; i++)
			yr[i] = w[i] * (xr[i] * rs);
	}
}

void llama_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
			    const float *rstd, int n, int c)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < n; r++) {
		const float *xr = x + (size_t)r * c, *dyr = dy + (size_t)r * c;
		float *dxr = dx + (size_t)r * c;
		float rs = rstd[r];
		double dot = 0.0;

		/* dx = rstd * (dxhat - xhat * mean(dxhat * xhat)), dxhat = dy * w, xhat = x * rstd */
		for (int i = 0; i < c; i++)
			dot += (double)(dyr[i] * w[i]) * (xr[i] * rs);
		float mean = (float)(dot / c);

		for (int i = 0; i < c; i++)
			dxr[i] += rs * (dyr[i] * w[i] - xr[i] * rs * mean);
	}
#pragma omp parallel for schedule(static)
	for (int c0 = 0; c0 < c; c0 += COL_BLOCK) {
		int c1 = c0 + COL_BLOCK < c ? c0 + COL_BLOCK : c;
		float acc[COL_BLOCK] = {0};

		for (int r = 0; r < n; r++) {
			const float *xr = x + (size_t)r * c, *dyr = dy + (size_t)r * c;

			for (int i = c0; i < c1; i++)
				acc[i - c0] += dyr[i] * (xr[i] * rstd[r]);
		}
		for (int i = c0; i < c1; i++)
			dw[i] += acc[i - c0];
	}
}

/* ---- RoPE -------------------------------------------------------------------------------- */

/* out = x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1); sign -1 applies the
 * transpose (inverse) rotation, which is the backward of the forward one. */
static void rope_apply(float *x, const float *cos_t, const float *sin_t, int B, int T, int nheads,
		       int hd, float sign)
{
	int half = hd / 2;
	int64_t rows = (int64_t)B * T;

#pragma omp parallel for schedule(static)
	for (int64_t r = 0; r < rows; r++) {
		int t = (int)(r % T);
		const float *cr = cos_t + (size_t)t * half, *sr = sin_t + (size_t)t * half;

		for (int h = 0; h < nheads; h++) {
			float *v = x + (size_t)r * nheads * hd + (size_t)h * hd;

			for (int i = 0; i < half; i++) {
				float a = v[i], b = v[i + half], s = sign * sr[i];

				v[i] = a * cr[i] - b * s;
				v[i + half] = b * cr[i] + a * s;
			}
		}
	}
}

void llama_rope_forward(float *x, const float *cos_t, const float *sin_t, int B, int T, int nheads,
			int hd)
{
	rope_apply(x, cos_t, sin_t, B, T, nheads, hd, 1.0f);
}

void llama_rope_backward(float *dx, const float *cos_t, const float *sin_t, int B, int T,
			 int nheads, int hd)
{
	rope_apply(dx, cos_t, sin_t, B, T, nheads, hd, -1.0f);
}

/* ---- SwiGLU ------------------------------------------------------------------------------ */

void llama_swiglu_forward(float *act, const float *gate, const float *up, int64_t n)
{
#pragma omp parallel for schedule(static)
	for (int64_t i = 0; i < n; i++) {
		float g = gate[i];

		act[i] = g / (1.0f + expf(-g)) * up[i];
	}
}

void llama_swiglu_backward(float *dgate, float *dup, const float *dact, const float *gate,
			   const float *up, int64_t n)
{
#pragma omp parallel for schedule(static)
	for (int64_t i = 0; i < n; i++) {
		float g = gate[i];
		float sig = 1.0f / (1.0f + expf(-g));
		float silu = g * sig;

		dup[i] = dact[i] * silu;
		/* silu'(g) = sig * (1 + g * (1 - sig)) */
		dgate[i] = dact[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
	}
}

/* ---- embedding --------------------------------------------------------------------------- */

void llama_embedding_forward(float *x, const float *table, const int32_t *tokens, int n, int c)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < n; r++) {
		const float *src = table + (size_t)tokens[r] * c;
		float *dst = x + (size_t)r * c;

		for (int i = 0; i < c; i++)
			dst[i] = src[i];
	}
}

void llama_embedding_backward(float *dtable, const float *dx, const int32_t *tokens, int n, int c)
{
	/* Column blocks: a token repeated in the batch is summed by one thread, in row order. */
#pragma omp parallel for schedule(static)
	for (int c0 = 0; c0 < c; c0 += COL_BLOCK) {
		int c1 = c0 + COL_BLOCK < c ? c0 + COL_BLOCK : c;

		for (int r = 0; r < n; r++) {
			float *dst = dtable + (size_t)tokens[r] * c;
			const float *src = dx + (size_t)r * c;

			for (int i = c0; i < c1; i++)
				dst[i] += src[i];
		}
	}
}

/* ---- cross-entropy ----------------------------------------------------------------------- */

void llama_crossentropy_forward(float *lse, double *loss_sum, int64_t *count, const float *logits,
				const int32_t *targets, int n, int V)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < n; r++) {
		const float *lr = logits + (size_t)r * V;
		float mx = lr[0];
		double sum = 0.0;

		for (int i = 1; i < V; i++)
			mx = lr[i] > mx ? lr[i] : mx;
		for (int i = 0; i < V; i++)
			sum += exp((double)(lr[i] - mx));
		lse[r] = mx + (float)log(sum);
	}
	double total = 0.0;
	int64_t cnt = 0;

	for (int r = 0; targets && r < n; r++) {
		if (targets[r] < 0)
			continue;
		total += (double)lse[r] - (double)logits[(size_t)r * V + targets[r]];
		cnt++;
	}
	*loss_sum = total;
	*count = cnt;
}

void llama_crossentropy_backward(float *logits, const float *lse, const int32_t *targets, int n,
				 int V, float scale)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < n; r++) {
		float *lr = logits + (size_t)r * V;

		if (targets[r] < 0) {
			for (int i = 0; i < V; i++)
				lr[i] = 0.0f;
			continue;
		}
		for (int i = 0; i < V; i++)
			lr[i] = scale * expf(lr[i] - lse[r]);
		lr[targets[r]] -= scale;
	}
}

/*
 * Causal grouped-query attention on the CPU, forward and backward, as Hugging Face's
 * eager Llama attention computes it: scores = q k^T / sqrt(hd), causal mask (with a
 * sliding window: key j is visible from query i when i - window < j <= i, as Mistral and
 * Qwen2 mask it), softmax in fp32, out = p v; query head h reads key/value head
 * h / (nh / nkv) (repeat_kv).
 *
 * Every product is an sgemm on one head and a block of query rows [r0, r1): only the
 * keys k0..r1-1 can be visible to it (k0 = 0 without a window, r0 - window + 1 with one),
 * so the masked parts cost at most one block width per row and a window of W keys costs
 * O(T (W + block)), not O(T^2). Memory: only the log-sum-exp of each score row is kept
 * (B, nh, T); backward rebuilds the probabilities p = exp(s - lse) from q and k, so no
 * (T, T) matrix outlives a call.
 */
#include "llama_ops.h"

#include <cblas.h>
#include <math.h>
#include <stddef.h>

/* Query rows per block. */
#define ROW_BLOCK 128

static int row_block(int T)
{
	return T < ROW_BLOCK ? T : ROW_BLOCK;
}

uint64_t llama_attention_scratch_elems(int T)
{
	return 2 * (uint64_t)row_block(T) * T;
}

/* First key visible to query t (0 without a window). */
static int first_key(int t, int window)
{
	return window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
}

/* s (rows, r1 - k0) = scale * q[r0..r1) k[k0..r1)^T for one head. */
static void block_scores(float *s, const float *qh, const float *kg, int r0, int r1, int k0, int qs,
			 int ks, int hd, float scale)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1 - k0, hd, scale,
		    qh + (size_t)r0 * qs, qs, kg + (size_t)k0 * ks, ks, 0.0f, s, r1 - k0);
}

void llama_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
			     float *scratch, int B, int T, int nh, int nkv, int hd, int window)
{
	int rep = nh / nkv, qs = nh * hd, ks = nkv * hd, tb = row_block(T);
	float scale = 1.0f / sqrtf((float)hd);

	for (int bh = 0; bh < B * nh; bh++) {
		int b = bh / nh, h = bh % nh;
		const float *qh = q + (size_t)b * T * qs + (size_t)h * hd;
		const float *kg = k + (size_t)b * T * ks + (size_t)(h / rep) * hd;
		const float *vg = v + (size_t)b * T * ks + (size_t)(h / rep) * hd;

		for (int r0 = 0; r0 < T; r0 += tb) {
			int r1 = r0 + tb < T ? r0 + tb : T, rows = r1 - r0;
			int k0 = first_key(r0, window), nk = r1 - k0;
			float *p = scratch;

			block_scores(p, qh, kg, r0, r1, k0, qs, ks, hd, scale);
			/* masked softmax of each row over its keys [lo, t], in place (columns
			 * are keys k0..r1-1); lse kept for backward */
#pragma omp parallel for schedule(static)
			for (int i = 0; i < rows; i++) {
				float *pr = p + (size_t)i * nk;
				int t = r0 + i - k0, lo = first_key(r0 + i, window) - k0;
				float mx = pr[lo], sum = 0.0f;

				for (int u = 0; u < lo; u++)
					pr[u] = 0.0f;
				for (int u = lo + 1; u <= t; u++)
					mx = pr[u] > mx ? pr[u] : mx;
				for (int u = lo; u <= t; u++) {
					pr[u] = expf(pr[u] - mx);
					sum += pr[u];
				}
				for (int u = lo; u <= t; u++)
					pr[u] /= sum;
				for (int u = t + 1; u < nk; u++)
					pr[u] = 0.0f;
				lse[(size_t)bh * T + r0 + i] = mx + logf(sum);
			}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, nk, 1.0f,
				    p, nk, vg + (size_t)k0 * ks, ks, 0.0f,
				    out + ((size_t)b * T + r0) * qs + (size_t)h * hd, qs);
		}
	}
}

void llama_attention_backward(float *dq, float *dk, float *dv, float *dkp, float *dvp,
			      const float *dout, const float *q, const float *k, const float *v,
			      const float *lse, float *scratch, int B, int T, int nh, int nkv,
			      int hd, int window)
{
	int rep = nh / nkv, qs = nh * hd, ks = nkv * hd, tb = row_block(T);
	float scale = 1.0f / sqrtf((float)hd);
	int64_t rows_all = (int64_t)B * T;

	/* per-query-head partials of dk, dv (laid out like q), summed per group below */
#pragma omp parallel for schedule(static)
	for (int64_t i = 0; i < rows_all * qs; i++) {
		dkp[i] = 0.0f;
		dvp[i] = 0.0f;
	}
	for (int bh = 0; bh < B * nh; bh++) {
		int b = bh / nh, h = bh % nh;
		size_t qo = (size_t)b * T * qs + (size_t)h * hd;
		const float *kg = k + (size_t)b * T * ks + (size_t)(h / rep) * hd;
		const float *vg = v + (size_t)b * T * ks + (size_t)(h / rep) * hd;

		for (int r0 = 0; r0 < T; r0 += tb) {
			int r1 = r0 + tb < T ? r0 + tb : T, rows = r1 - r0;
			int k0 = first_key(r0, window), nk = r1 - k0;
			float *p = scratch, *ds = scratch + (size_t)tb * T;
			const float *dob = dout + qo + (size_t)r0 * qs;

			block_scores(p, q + qo, kg, r0, r1, k0, qs, ks, hd, scale);
			/* dp = dout v^T */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, hd, 1.0f,
				    dob, qs, vg + (size_t)k0 * ks, ks, 0.0f, ds, nk);
			/* p = exp(s - lse); ds = p * (dp - sum(p * dp)) * scale */
#pragma omp parallel for schedule(static)
			for (int i = 0; i < rows; i++) {
				float *pr = p + (size_t)i * nk, *dr = ds + (size_t)i * nk;
				int t = r0 + i - k0, lo = first_key(r0 + i, window) - k0;
				float l = lse[(size_t)bh * T + r0 + i], dsum = 0.0f;

				for (int u = 0; u < lo; u++)
					pr[u] = dr[u] = 0.0f;
				for (int u = lo; u <= t; u++) {
					pr[u] = expf(pr[u] - l);
					dsum += pr[u] * dr[u];
				}
				for (int u = lo; u <= t; u++)
					dr[u] = pr[u] * (dr[u] - dsum) * scale;
				for (int u = t + 1; u < nk; u++)
					pr[u] = dr[u] = 0.0f;
			}
			/* dq = ds k; dk += ds^T q; dv += p^T dout (keys k0..r1-1) */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, nk, 1.0f,
				    ds, nk, kg + (size_t)k0 * ks, ks, 0.0f,
				    dq + qo + (size_t)r0 * qs, qs);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, hd, rows, 1.0f, ds,
				    nk, q + qo + (size_t)r0 * qs, qs, 1.0f,
				    dkp + qo + (size_t)k0 * qs, qs);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, hd, rows, 1.0f, p,
				    nk, dob, qs, 1.0f, dvp + qo + (size_t)k0 * qs, qs);
		}
	}
	/* dk, dv of a key/value head: the sum of its query heads' partials, in head order */
#pragma omp parallel for schedule(static)
	for (int64_t r = 0; r < rows_all; r++) {
		for (int g = 0; g < nkv; g++) {
			float *dkr = dk + (size_t)r * ks + (size_t)g * hd;
			float *dvr = dv + (size_t)r * ks + (size_t)g * hd;
			const float *pk = dkp + (size_t)r * qs + (size_t)g * rep * hd;
			const float *pv = dvp + (size_t)r * qs + (size_t)g * rep * hd;

			for (int d = 0; d < hd; d++) {
				float sk = pk[d], sv = pv[d];

				for (int j = 1; j < rep; j++) {
					sk += pk[(size_t)j * hd + d];
					sv += pv[(size_t)j * hd + d];
				}
				dkr[d] = sk;
				dvr[d] = sv;
			}
		}
	}
}

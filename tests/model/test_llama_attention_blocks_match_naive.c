/*
 * The blocked sgemm attention (query rows in blocks of 128, keys up to the block's end)
 * matches a naive double-precision causal GQA attention, forward (out, lse) and backward
 * (dq, dk, dv), for T = 300: three row blocks, the last one short, so the block edges and
 * the masked corner of each block are covered (the model-level tests use T < 128); and the
 * same with sliding windows (key j visible from query i when i - W < j <= i) of W = 1
 * (each query sees only itself), 50 (inside a block) and 200 (reaching across blocks).
 * Tolerance 1e-5 of each tensor's largest magnitude (fp32 sums of <= 300 terms).
 */
#include "llama_ops.h"
#include "test_llama_net.h"

enum { B = 2, T = 300, NH = 4, NKV = 2, HD = 16 };

static double max_rel(const float *got, const double *want, size_t n)
{
	double maxd = 0.0, maxw = 0.0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs(got[i] - want[i]);

		if (isnan(d))
			return INFINITY; /* a NaN fails the check */
		maxd = d > maxd ? d : maxd;
		maxw = fabs(want[i]) > maxw ? fabs(want[i]) : maxw;
	}
	return maxw > 0 ? maxd / maxw : maxd; /* W = 1: dq is exactly 0 */
}

static void check(int W)
{
	size_t nq = (size_t)B * T * NH * HD, nk = (size_t)B * T * NKV * HD;
	float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *dout = malloc(nq * 4);
	float *out = malloc(nq * 4), *lse = malloc((size_t)B * NH * T * 4);
	float *dq = malloc(nq * 4), *dk = malloc(nk * 4), *dv = malloc(nk * 4);
	float *dkp = malloc(nq * 4), *dvp = malloc(nq * 4);
	float *scratch = malloc(llama_attention_scratch_elems(T) * 4);
	double *rout = calloc(nq, 8), *rlse = calloc((size_t)B * NH * T, 8);
	double *rdq = calloc(nq, 8), *rdk = calloc(nk, 8), *rdv = calloc(nk, 8);
	double *p = malloc(T * 8), *dp = malloc(T * 8);
	uint64_t s = 17;
	double scale = 1.0 / sqrt(HD), e;

	for (size_t i = 0; i < nq; i++) {
		q[i] = 2.0f * rng_uniform(&s);
		dout[i] = rng_uniform(&s);
	}
	for (size_t i = 0; i < nk; i++) {
		k[i] = 2.0f * rng_uniform(&s);
		v[i] = rng_uniform(&s);
	}
	llama_attention_forward(out, lse, q, k, v, scratch, B, T, NH, NKV, HD, W);
	llama_attention_backward(dq, dk, dv, dkp, dvp, dout, q, k, v, lse, scratch, B, T, NH, NKV,
				 HD, W);

	/* naive reference */
	for (int b = 0; b < B; b++) {
		for (int h = 0; h < NH; h++) {
			int g = h / (NH / NKV);

			for (int t = 0; t < T; t++) {
				const float *qt = q + ((size_t)(b * T + t) * NH + h) * HD;
				const float *dot = dout + ((size_t)(b * T + t) * NH + h) * HD;
				double mx = -INFINITY, sum = 0.0, dsum = 0.0;
				int lo = W > 0 && t - W + 1 > 0 ? t - W + 1 : 0;

				for (int u = lo; u <= t; u++) {
					const float *ku = k + ((size_t)(b * T + u) * NKV + g) * HD;
					const float *vu = v + ((size_t)(b * T + u) * NKV + g) * HD;

					p[u] = 0.0;
					dp[u] = 0.0;
					for (int d = 0; d < HD; d++) {
						p[u] += (double)qt[d] * ku[d] * scale;
						dp[u] += (double)dot[d] * vu[d];
					}
					mx = p[u] > mx ? p[u] : mx;
				}
				for (int u = lo; u <= t; u++)
					sum += (p[u] = exp(p[u] - mx));
				rlse[((size_t)b * NH + h) * T + t] = mx + log(sum);
				for (int u = lo; u <= t; u++) {
					p[u] /= sum;
					dsum += p[u] * dp[u];
				}
				for (int u = lo; u <= t; u++) {
					const float *ku = k + ((size_t)(b * T + u) * NKV + g) * HD;
					const float *vu = v + ((size_t)(b * T + u) * NKV + g) * HD;
					double ds = p[u] * (dp[u] - dsum) * scale;
					size_t qi = ((size_t)(b * T + t) * NH + h) * HD;
					size_t ki = ((size_t)(b * T + u) * NKV + g) * HD;

					for (int d = 0; d < HD; d++) {
						rout[qi + d] += p[u] * vu[d];
						rdq[qi + d] += ds * ku[d];
						rdk[ki + d] += ds * qt[d];
						rdv[ki + d] += p[u] * dot[d];
					}
				}
			}
		}
	}
	e = max_rel(out, rout, nq);
	printf("W %d: out rel err %.2e\n", W, e);
	T_CHECK(e <= 1e-5, "W %d: attention output differs from naive: %.2e", W, e);
	e = max_rel(lse, rlse, (size_t)B * NH * T);
	printf("W %d: lse rel err %.2e\n", W, e);
	T_CHECK(e <= 1e-5, "W %d: lse differs from naive: %.2e", W, e);
	e = max_rel(dq, rdq, nq);
	printf("W %d: dq rel err %.2e\n", W, e);
	T_CHECK(e <= 1e-5, "W %d: dq differs from naive: %.2e", W, e);
	e = max_rel(dk, rdk, nk);
	printf("W %d: dk rel err %.2e\n", W, e);
	T_CHECK(e <= 1e-5, "W %d: dk differs from naive: %.2e", W, e);
	e = max_rel(dv, rdv, nk);
	printf("W %d: dv rel err %.2e\n", W, e);
	T_CHECK(e <= 1e-5, "W %d: dv differs from naive: %.2e", W, e);
	free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
	free(dkp), free(dvp), free(scratch), free(rout), free(rlse), free(rdq), free(rdk);
	free(rdv), free(p), free(dp);
}

int main(void)
{
	check(0);
	check(1);
	check(50);
	check(200);
	return T_EXIT_PASS;
}

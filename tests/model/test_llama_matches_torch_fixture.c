/*
 * The CPU Llama forward/backward matches an independent PyTorch implementation
 * (tests/model/gen_llama_fixture.py, evaluated in float64): loss, logits and every
 * parameter's gradient, for each fixture named on the command line (base path without
 * .txt/.bin). Fixtures whose weights are bf16-representable also run with the weights
 * passed as bf16 tensors, which must give the same result as fp32 ones. The fixtures
 * cover plain and Llama-3 RoPE, tied and untied heads, q/k/v/o and MLP biases, and
 * Mistral/Qwen2 sliding windows (every layer, or those from max_window_layers on).
 *
 * Tolerance: the reference is exact to ~1e-15; our fp32 pipeline rounds at ~6e-8 per
 * operation, with dot products of length <= 64 and a depth of ~30 dependent ops, which
 * bounds the error far below 1e-5 of each tensor's largest magnitude (measured: ~1e-6).
 * An error in the math (a wrong sign, index or scale) shows up as O(1) relative error.
 */
#include "test_llama_net.h"

#define RTOL 1e-5

/* max |got - want| / max |want| over n elements. */
static double rel_err(const float *got, const float *want, size_t n)
{
	double maxd = 0.0, maxw = 0.0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]);

		if (isnan(d))
			return INFINITY; /* a NaN fails the check */
		if (d > maxd)
			maxd = d;
		if (fabs(want[i]) > maxw)
			maxw = fabs(want[i]);
	}
	return maxd / (maxw > 0 ? maxw : 1.0);
}

static double check_fixture(const struct fixture *f, const char *base, bool bf16)
{
	struct net n;
	size_t N = (size_t)f->B * f->T, V = f->cfg.vocab_size;
	const int32_t *tokens = fixture_get(f, "tokens", N);
	const int32_t *targets = fixture_get(f, "targets", N);
	const float *want_loss = fixture_get(f, "loss", 1);
	double worst = 0.0, e;
	char name[160];

	net_init(&n, &f->cfg, f->B, f->T);
	for (int mod = 0; mod < n.L + 2; mod++) {
		for (int s = 0; s < zinf_llama_module_nparams(net_kind(&n, mod)); s++) {
			struct zinf_llama_param_info info;

			net_info(&n, mod, s, &info);
			if (!info.present || info.tied)
				continue;
			snprintf(name, sizeof(name), "w.%s", info.name);
			memcpy(n.w[mod][s], fixture_get(f, name, info.elems),
			       info.elems * sizeof(float));
		}
	}
	net_sync_bf16(&n);
	if (bf16) {
		/* the fixture's weights are bf16 values: the bf16 copies are exact */
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
			if (n.w[1][s])
				T_CHECK(zinf_llama_bf16_to_f32(n.wbf[1][s][0]) == n.w[1][s][0],
					"fixture weights are not bf16 values");
		}
	}

	float loss = net_forward(&n, tokens, targets, false, bf16);

	e = fabs((double)loss - want_loss[0]) / fabs(want_loss[0]);
	printf("%s%s: loss %.7f want %.7f rel err %.2e\n", base, bf16 ? " (bf16)" : "", loss,
	       want_loss[0], e);
	T_CHECK(e <= RTOL, "loss %.8f differs from torch %.8f (rel %.2e)", loss, want_loss[0], e);
	e = rel_err(zinf_llama_logits(n.m), fixture_get(f, "logits", N * V), N * V);
	printf("  logits rel err %.2e\n", e);
	T_CHECK(e <= RTOL, "logits differ from torch: rel err %.2e", e);
	worst = e;

	float *(*g)[ZINF_LLAMA_MAX_PARAMS] = net_grads_alloc(&n);

	net_backward(&n, tokens, targets, false, bf16, 1.0f, g);
	for (int mod = 0; mod < n.L + 2; mod++) {
		for (int s = 0; s < zinf_llama_module_nparams(net_kind(&n, mod)); s++) {
			struct zinf_llama_param_info info;

			net_info(&n, mod, s, &info);
			if (!info.present || info.tied)
				continue;
			snprintf(name, sizeof(name), "g.%s", info.name);
			e = rel_err(g[mod][s], fixture_get(f, name, info.elems), info.elems);
			printf("  grad %-48s rel err %.2e\n", info.name, e);
			T_CHECK(e <= RTOL, "gradient of %s differs from torch: rel err %.2e",
				info.name, e);
			worst = e > worst ? e : worst;
		}
	}
	net_grads_free(&n, g);
	net_destroy(&n);
	return worst;
}

int main(int argc, char **argv)
{
	T_CHECK(argc >= 2, "usage: %s FIXTURE_BASE...", argv[0]);
	for (int i = 1; i < argc; i++) {
		struct fixture f;
		double worst;

		fixture_load(argv[i], &f);
		worst = check_fixture(&f, argv[i], false);
		if (f.bf16)
			worst = fmax(worst, check_fixture(&f, argv[i], true));
		printf("%s: worst relative error %.2e (tolerance %.0e)\n", argv[i], worst, RTOL);
		free(f.bin);
	}
	return T_EXIT_PASS;
}

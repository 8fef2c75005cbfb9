/*
 * Parameter gradients are accumulated (+=): backward of micro-batch A then B into one set
 * of buffers equals the sum of A's and B's gradients computed separately, and dloss = 1/2
 * on each gives their mean (gradient accumulation over 2 micro-batches). Equality is up
 * to fp32 rounding of the extra additions: 1e-6 of the tensor's largest |gA| + |gB|.
 */
#include "test_llama_net.h"

typedef float *(*grads_t)[ZINF_LLAMA_MAX_PARAMS];

static void check_sum(const struct net *n, grads_t got, grads_t a, grads_t b, float scale,
		      const char *what)
{
	for (int mod = 0; mod < n->L + 2; mod++) {
		for (int k = 0; k < zinf_llama_module_nparams(net_kind(n, mod)); k++) {
			struct zinf_llama_param_info info;
			double maxd = 0.0, maxs = 0.0;

			net_info(n, mod, k, &info);
			if (!info.present || info.tied)
				continue;
			for (uint64_t i = 0; i < info.elems; i++) {
				double want = scale * ((double)a[mod][k][i] + b[mod][k][i]);
				double d = fabs(got[mod][k][i] - want);

				maxd = d > maxd || isnan(d) ? d : maxd; /* NaN sticks */
				d = scale * (fabs(a[mod][k][i]) + fabs(b[mod][k][i]));
				maxs = d > maxs ? d : maxs;
			}
			T_CHECK(maxs > 0, "%s: zero gradient", info.name);
			T_CHECK(maxd <= 1e-6 * maxs, "%s: %s off by %.3e (scale %.3e)", what,
				info.name, maxd, maxs);
		}
	}
}

int main(void)
{
	struct zinf_llama_config cfg;
	struct net n;
	const int B = 2, T = 12, N = 24;
	int32_t tok[2][24], tgt[2][24];
	uint64_t s = 7;

	zinf_llama_config_init(&cfg);
	cfg.vocab_size = 50;
	cfg.hidden_size = 32;
	cfg.intermediate_size = 48;
	cfg.num_hidden_layers = 2;
	cfg.num_attention_heads = 4;
	cfg.num_key_value_heads = 2;
	cfg.head_dim = 8;
	cfg.tie_word_embeddings = true;
	net_init(&n, &cfg, B, T);
	net_randomize(&n, 3);
	for (int mb = 0; mb < 2; mb++) {
		for (int i = 0; i < N; i++) {
			tok[mb][i] = (int32_t)(rng_next(&s) % 50);
			tgt[mb][i] = (int32_t)(rng_next(&s) % 50);
		}
	}

	grads_t ga = net_grads_alloc(&n), gb = net_grads_alloc(&n);
	grads_t gsum = net_grads_alloc(&n), gmean = net_grads_alloc(&n);

	net_forward(&n, tok[0], tgt[0], false, false);
	net_backward(&n, tok[0], tgt[0], false, false, 1.0f, ga);
	net_forward(&n, tok[1], tgt[1], false, false);
	net_backward(&n, tok[1], tgt[1], false, false, 1.0f, gb);
	for (int mb = 0; mb < 2; mb++) {
		net_forward(&n, tok[mb], tgt[mb], true, false);
		net_backward(&n, tok[mb], tgt[mb], true, false, 1.0f, gsum);
		net_forward(&n, tok[mb], tgt[mb], false, false);
		net_backward(&n, tok[mb], tgt[mb], false, false, 0.5f, gmean);
	}
	check_sum(&n, gsum, ga, gb, 1.0f, "accumulated sum");
	check_sum(&n, gmean, ga, gb, 0.5f, "accumulated mean (dloss 1/2)");
	printf("gradients of 2 micro-batches accumulate to their sum and, with dloss 1/2, mean\n");
	net_grads_free(&n, ga);
	net_grads_free(&n, gb);
	net_grads_free(&n, gsum);
	net_grads_free(&n, gmean);
	net_destroy(&n);
	return T_EXIT_PASS;
}

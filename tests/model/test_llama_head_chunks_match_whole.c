/*
 * A head that works through the rows in chunks (opts.head_chunk_bytes smaller than the
 * N x V logits; logits recomputed per chunk in backward) gives the same loss and
 * gradients as one that holds all logits: within 1e-6 of each tensor's largest magnitude
 * (sgemm on fewer rows may round differently), for chunks of 5 rows (N = 24: a short
 * tail) and of 1 row (a budget below one row); and it offers no logits.
 */
#include "test_llama_net.h"

typedef float *(*grads_t)[ZINF_LLAMA_MAX_PARAMS];

static void check_close(const struct net *n, grads_t got, grads_t want, const char *what)
{
	for (int mod = 0; mod < n->L + 2; mod++) {
		for (int k = 0; k < zinf_llama_module_nparams(net_kind(n, mod)); k++) {
			struct zinf_llama_param_info info;
			double maxd = 0.0, maxw = 0.0;

			net_info(n, mod, k, &info);
			if (!info.present || info.tied)
				continue;
			for (uint64_t i = 0; i < info.elems; i++) {
				double d = fabs((double)got[mod][k][i] - want[mod][k][i]);

				maxd = d > maxd || isnan(d) ? d : maxd; /* NaN sticks */
				maxw = fabs(want[mod][k][i]) > maxw ? fabs(want[mod][k][i]) : maxw;
			}
			T_CHECK(maxw > 0 && maxd <= 1e-6 * maxw, "%s: %s off by %.3e (max %.3e)",
				what, info.name, maxd, maxw);
		}
	}
}

int main(void)
{
	struct zinf_llama_config cfg;
	struct zinf_llama_opts opts;
	struct net whole, chunked;
	const int B = 2, T = 12, N = 24, V = 70;
	int32_t tok[24], tgt[24];
	uint64_t s = 21;
	const uint64_t budgets[2] = {5 * 70 * sizeof(float), 1};

	zinf_llama_config_init(&cfg);
	cfg.vocab_size = V;
	cfg.hidden_size = 16;
	cfg.intermediate_size = 32;
	cfg.num_hidden_layers = 1;
	cfg.num_attention_heads = 2;
	cfg.num_key_value_heads = 1;
	cfg.head_dim = 8;
	cfg.tie_word_embeddings = true;
	for (int i = 0; i < N; i++) {
		tok[i] = (int32_t)(rng_next(&s) % V);
		tgt[i] = i % 7 == 1 ? -1 : (int32_t)(rng_next(&s) % V);
	}
	net_init(&whole, &cfg, B, T);
	net_randomize(&whole, 4);

	grads_t gw = net_grads_alloc(&whole);
	float lw = net_forward(&whole, tok, tgt, false, false);

	T_CHECK(zinf_llama_logits(whole.m) != NULL, "whole head offers no logits");
	net_backward(&whole, tok, tgt, false, false, 1.0f, gw);

	for (int b = 0; b < 2; b++) {
		zinf_llama_opts_init(&opts);
		opts.head_chunk_bytes = budgets[b];
		net_init_opts(&chunked, &cfg, &opts, B, T);
		net_randomize(&chunked, 4);

		grads_t gc = net_grads_alloc(&chunked);
		float lc = net_forward(&chunked, tok, tgt, false, false);

		T_CHECK(zinf_llama_logits(chunked.m) == NULL, "chunked head offers partial logits");
		T_CHECK(fabsf(lc - lw) <= 1e-6f * lw, "loss %.8f chunked vs %.8f whole", lc, lw);
		net_backward(&chunked, tok, tgt, false, false, 1.0f, gc);
		check_close(&chunked, gc, gw, b ? "1-row chunks" : "5-row chunks");
		printf("head budget %llu bytes: loss %.7f (whole %.7f), gradients match\n",
		       (unsigned long long)budgets[b], lc, lw);
		net_grads_free(&chunked, gc);
		net_destroy(&chunked);
	}
	net_grads_free(&whole, gw);
	net_destroy(&whole);
	return T_EXIT_PASS;
}

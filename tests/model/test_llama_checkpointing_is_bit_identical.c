/*
 * Activation checkpointing (one shared acts, each layer's forward recomputed in backward)
 * gives bit-identical gradients to keeping every layer's activations, with fp32 and with
 * bf16 weights; and two identical runs are bit-identical (the ops are deterministic).
 * The config is big enough that the OpenMP loops and sgemm split work across threads.
 */
#include "test_llama_net.h"

static size_t grads_compare(const struct net *n, float *(*a)[ZINF_LLAMA_MAX_PARAMS],
			    float *(*b)[ZINF_LLAMA_MAX_PARAMS], const char *what)
{
	size_t total = 0;

	for (int mod = 0; mod < n->L + 2; mod++) {
		for (int k = 0; k < zinf_llama_module_nparams(net_kind(n, mod)); k++) {
			struct zinf_llama_param_info info;

			net_info(n, mod, k, &info);
			if (!info.present || info.tied)
				continue;
			T_CHECK(memcmp(a[mod][k], b[mod][k], info.elems * sizeof(float)) == 0,
				"%s: gradient of %s differs", what, info.name);
			total += info.elems;
		}
	}
	return total;
}

static void grads_zero(const struct net *n, float *(*g)[ZINF_LLAMA_MAX_PARAMS])
{
	for (int mod = 0; mod < n->L + 2; mod++) {
		for (int k = 0; k < zinf_llama_module_nparams(net_kind(n, mod)); k++) {
			struct zinf_llama_param_info info;

			net_info(n, mod, k, &info);
			if (info.present && !info.tied)
				memset(g[mod][k], 0, info.elems * sizeof(float));
		}
	}
}

int main(void)
{
	struct zinf_llama_config cfg;
	struct net n;
	const int B = 2, T = 48;
	int32_t tokens[2 * 48], targets[2 * 48];
	uint64_t s = 99;
	size_t elems = 0;

	zinf_llama_config_init(&cfg);
	cfg.vocab_size = 200;
	cfg.hidden_size = 96;
	cfg.intermediate_size = 160;
	cfg.num_hidden_layers = 3;
	cfg.num_attention_heads = 6;
	cfg.num_key_value_heads = 2;
	cfg.head_dim = 16;
	cfg.attention_bias = true;
	cfg.rope_type = ZINF_ROPE_LLAMA3;
	cfg.rope_factor = 8.0f;
	cfg.rope_original_max_position_embeddings = 64;
	net_init(&n, &cfg, B, T);
	net_randomize(&n, 5);
	for (int i = 0; i < B * T; i++) {
		tokens[i] = (int32_t)(rng_next(&s) % 200);
		targets[i] = i % 11 == 3 ? -1 : (int32_t)(rng_next(&s) % 200);
	}

	float *(*stored)[ZINF_LLAMA_MAX_PARAMS] = net_grads_alloc(&n);
	float *(*ckpt)[ZINF_LLAMA_MAX_PARAMS] = net_grads_alloc(&n);

	for (int bf16 = 0; bf16 < 2; bf16++) {
		float l1, l2, l3;

		grads_zero(&n, stored);
		grads_zero(&n, ckpt);
		l1 = net_forward(&n, tokens, targets, false, bf16);
		net_backward(&n, tokens, targets, false, bf16, 1.0f, stored);
		l2 = net_forward(&n, tokens, targets, true, bf16);
		net_backward(&n, tokens, targets, true, bf16, 1.0f, ckpt);
		T_CHECK(memcmp(&l1, &l2, sizeof(l1)) == 0, "loss %.9g vs %.9g", l1, l2);
		elems = grads_compare(&n, stored, ckpt,
				      bf16 ? "checkpointed (bf16 weights)" : "checkpointed");

		/* the same run again: deterministic */
		grads_zero(&n, ckpt);
		l3 = net_forward(&n, tokens, targets, false, bf16);
		net_backward(&n, tokens, targets, false, bf16, 1.0f, ckpt);
		T_CHECK(memcmp(&l1, &l3, sizeof(l1)) == 0, "rerun loss %.9g vs %.9g", l1, l3);
		grads_compare(&n, stored, ckpt, "rerun");
		printf("%s weights: loss %.6f; %zu gradient elements bit-identical with and without checkpointing\n",
		       bf16 ? "bf16" : "fp32", l1, elems);
	}
	net_grads_free(&n, stored);
	net_grads_free(&n, ckpt);
	net_destroy(&n);
	return T_EXIT_PASS;
}

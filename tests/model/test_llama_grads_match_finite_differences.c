/*
 * Every parameter tensor's analytic gradient matches central finite differences of the
 * loss, independently of torch: for three small configs (untied with plain RoPE; tied with
 * Llama-3 rope_scaling, q/k/v/o biases, GQA, nh*hd != C and ignored targets) and a third
 * (gate/up/down biases, a sliding window of 3 keys in layers 1 and 2 of 3, YaRN rope
 * scaling, whose cos and sin are scaled), three
 * coordinates of every tensor (its largest gradient and two random ones) are perturbed.
 *
 * The difference quotient is the fourth-order one, (8 (f(+h) - f(-h)) - (f(+2h) - f(-2h)))
 * / 12h with h = 4e-3: its truncation error is O(h^4) (h = 3e-2 is already visibly
 * off on a tied embedding, whose loss is far from linear), and the fp32 rounding of the
 * loss (~3e-7 absolute) contributes up to ~1e-4. So we accept |fd - g| <= 2e-3 * gmax +
 * 1e-4, gmax being the tensor's largest gradient magnitude; measured worst: 30% of that.
 * A wrong term in the math is off by O(gmax).
 */
#include "test_llama_net.h"

static float loss_at(struct net *n, const int32_t *tokens, const int32_t *targets)
{
	return net_forward(n, tokens, targets, false, false);
}

static int check_config(const struct zinf_llama_config *cfg, int B, int T, int ignored,
			uint64_t seed)
{
	struct net n;
	uint64_t s = seed;
	int N = B * T, checked = 0;
	int32_t *tokens = malloc(sizeof(int32_t) * N), *targets = malloc(sizeof(int32_t) * N);

	net_init(&n, cfg, B, T);
	net_randomize(&n, seed);
	for (int i = 0; i < N; i++) {
		tokens[i] = (int32_t)(rng_next(&s) % (uint64_t)cfg->vocab_size);
		targets[i] = (int32_t)(rng_next(&s) % (uint64_t)cfg->vocab_size);
	}
	for (int i = 0; i < ignored; i++)
		targets[(7 * i + 2) % N] = -1;

	float *(*g)[ZINF_LLAMA_MAX_PARAMS] = net_grads_alloc(&n);

	net_forward(&n, tokens, targets, false, false);
	net_backward(&n, tokens, targets, false, false, 1.0f, g);
	for (int mod = 0; mod < n.L + 2; mod++) {
		for (int k = 0; k < zinf_llama_module_nparams(net_kind(&n, mod)); k++) {
			struct zinf_llama_param_info info;
			uint64_t idx[3] = {0};
			float gmax = 0.0f;

			net_info(&n, mod, k, &info);
			if (!info.present || info.tied)
				continue;
			for (uint64_t i = 0; i < info.elems; i++) {
				if (fabsf(g[mod][k][i]) > gmax) {
					gmax = fabsf(g[mod][k][i]);
					idx[0] = i;
				}
			}
			idx[1] = rng_next(&s) % info.elems;
			idx[2] = rng_next(&s) % info.elems;
			T_CHECK(gmax > 0.0f, "%s: gradient is all zero", info.name);
			for (int c = 0; c < 3; c++) {
				float *p = &n.w[mod][k][idx[c]];
				float orig = *p, h = 4e-3f;
				double f[4];
				const float off[4] = {h, -h, 2 * h, -2 * h};

				for (int j = 0; j < 4; j++) {
					*p = orig + off[j];
					f[j] = loss_at(&n, tokens, targets);
				}
				*p = orig;
				double fd = (8.0 * (f[0] - f[1]) - (f[2] - f[3])) / (12.0 * h);
				double an = g[mod][k][idx[c]];
				double tol = 2e-3 * gmax + 1e-4;

				printf("%-44s [%6llu] analytic % .6e fd % .6e diff %.1e (tol %.1e)\n",
				       info.name, (unsigned long long)idx[c], an, fd, fabs(fd - an),
				       tol);
				T_CHECK(fabs(fd - an) <= tol,
					"%s[%llu]: analytic gradient %.6e, finite difference %.6e",
					info.name, (unsigned long long)idx[c], an, fd);
				checked++;
			}
		}
	}
	net_grads_free(&n, g);
	net_destroy(&n);
	free(tokens);
	free(targets);
	return checked;
}

int main(void)
{
	struct zinf_llama_config cfg;
	int checked;

	zinf_llama_config_init(&cfg);
	cfg.vocab_size = 40;
	cfg.hidden_size = 16;
	cfg.intermediate_size = 24;
	cfg.num_hidden_layers = 2;
	cfg.num_attention_heads = 4;
	cfg.num_key_value_heads = 2;
	cfg.head_dim = 4;
	cfg.rms_norm_eps = 1e-5f;
	checked = check_config(&cfg, 2, 6, 0, 11);

	cfg.num_attention_heads = 3;
	cfg.num_key_value_heads = 1;
	cfg.head_dim = 8;
	cfg.attention_bias = true;
	cfg.attention_out_bias = true;
	cfg.tie_word_embeddings = true;
	cfg.rope_type = ZINF_ROPE_LLAMA3;
	cfg.rope_factor = 4.0f;
	cfg.rope_low_freq_factor = 1.0f;
	cfg.rope_high_freq_factor = 8.0f;
	cfg.rope_original_max_position_embeddings = 256;
	checked += check_config(&cfg, 2, 7, 3, 12);

	/* gate/up/down biases; a sliding window of 3 in layers 1 and 2 of 3 (layer 0 full) */
	cfg.num_hidden_layers = 3;
	cfg.num_attention_heads = 4;
	cfg.num_key_value_heads = 2;
	cfg.head_dim = 4;
	cfg.attention_bias = false;
	cfg.attention_out_bias = false;
	cfg.tie_word_embeddings = false;
	/* yarn: dimension 0 kept, 1 interpolated; cos and sin scaled by 0.1 ln 8 + 1 */
	cfg.rope_type = ZINF_ROPE_YARN;
	cfg.rope_factor = 8.0f;
	cfg.rope_original_max_position_embeddings = 64;
	cfg.mlp_bias = true;
	cfg.sliding_window = 3;
	cfg.max_window_layers = 1;
	checked += check_config(&cfg, 2, 8, 1, 13);
	printf("%d coordinates match their finite differences\n", checked);
	return T_EXIT_PASS;
}

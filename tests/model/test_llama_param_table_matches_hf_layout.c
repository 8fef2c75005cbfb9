/*
 * The parameter table names every tensor as Hugging Face's LlamaForCausalLM /
 * Qwen2ForCausalLM state dict does, with its shape, its presence (biases by config:
 * attention_bias, attention_out_bias, mlp_bias), the
 * tied LM head pointing at the embedding, and weight decay on 2-D tensors only; and the
 * table's total equals the model's parameter count computed from the dimensions.
 */
#include "test_llama_net.h"

static uint64_t expected_count(const struct zinf_llama_config *c)
{
	uint64_t C = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
	uint64_t qd = (uint64_t)c->num_attention_heads * c->head_dim;
	uint64_t kvd = (uint64_t)c->num_key_value_heads * c->head_dim;
	uint64_t layer = 2 * C + qd * C + 2 * kvd * C + C * qd + 3 * I * C;

	if (c->attention_bias)
		layer += qd + 2 * kvd;
	if (c->attention_out_bias)
		layer += C;
	if (c->mlp_bias)
		layer += 2 * I + C;
	return V * C + c->num_hidden_layers * layer + C + (c->tie_word_embeddings ? 0 : V * C);
}

static uint64_t table_count(const struct zinf_llama_config *c)
{
	struct zinf_llama_param_info info;
	uint64_t total = 0;

	T_CHECK_RC(zinf_llama_param_info(c, ZINF_LLAMA_EMBED, 0, 0, &info));
	total += info.elems;
	for (int l = 0; l < c->num_hidden_layers; l++) {
		for (int k = 0; k < ZINF_LLAMA_LAYER_NPARAMS; k++) {
			T_CHECK_RC(zinf_llama_param_info(c, ZINF_LLAMA_LAYER, l, k, &info));
			T_CHECK(info.decay == (info.cols != 0), "%s: decay flag", info.name);
			T_CHECK(!!strstr(info.name, "bias") || !!strstr(info.name, "norm") ||
					info.cols != 0,
				"%s is 1-D", info.name);
			if (info.present)
				total += info.elems;
		}
	}
	for (int k = 0; k < ZINF_LLAMA_HEAD_NPARAMS; k++) {
		T_CHECK_RC(zinf_llama_param_info(c, ZINF_LLAMA_HEAD, 0, k, &info));
		if (!info.tied)
			total += info.elems;
	}
	return total;
}

int main(void)
{
	struct zinf_llama_config c;
	struct zinf_llama_param_info info;

	zinf_llama_config_init(&c);
	c.vocab_size = 151936; /* Qwen2-0.5B's shape */
	c.hidden_size = 896;
	c.intermediate_size = 4864;
	c.num_hidden_layers = 24;
	c.num_attention_heads = 14;
	c.num_key_value_heads = 2;
	c.head_dim = 64;
	c.attention_bias = true;
	c.tie_word_embeddings = true;

	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_LAYER, 23, ZINF_LLAMA_K, &info));
	T_CHECK_STR(info.name, "model.layers.23.self_attn.k_proj.weight");
	T_CHECK(info.rows == 128 && info.cols == 896 && info.decay && info.present,
		"k_proj shape %llux%llu", (unsigned long long)info.rows,
		(unsigned long long)info.cols);
	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_LAYER, 0, ZINF_LLAMA_Q_BIAS, &info));
	T_CHECK_STR(info.name, "model.layers.0.self_attn.q_proj.bias");
	T_CHECK(info.present && !info.decay && info.rows == 896 && info.cols == 0 &&
			info.elems == 896,
		"q bias");
	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_LAYER, 0, ZINF_LLAMA_O_BIAS, &info));
	T_CHECK(!info.present, "qwen2 has no o_proj bias");
	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_LAYER, 5, ZINF_LLAMA_INPUT_NORM, &info));
	T_CHECK_STR(info.name, "model.layers.5.input_layernorm.weight");
	T_CHECK(!info.decay, "norm weights are not decayed");
	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_LAYER, 5, ZINF_LLAMA_DOWN, &info));
	T_CHECK_STR(info.name, "model.layers.5.mlp.down_proj.weight");
	T_CHECK(info.rows == 896 && info.cols == 4864, "down_proj shape");
	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_HEAD, 0, ZINF_LLAMA_LM_HEAD, &info));
	T_CHECK(info.tied, "tied lm_head");
	T_CHECK_STR(info.name, "model.embed_tokens.weight");
	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_HEAD, 0, ZINF_LLAMA_FINAL_NORM, &info));
	T_CHECK_STR(info.name, "model.norm.weight");
	T_CHECK(table_count(&c) == expected_count(&c) && table_count(&c) == 494032768ULL,
		"qwen2-0.5b: table %llu, dims %llu", (unsigned long long)table_count(&c),
		(unsigned long long)expected_count(&c));

	c.attention_bias = false; /* llama-style untied, with o_proj bias off */
	c.tie_word_embeddings = false;
	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_HEAD, 0, ZINF_LLAMA_LM_HEAD, &info));
	T_CHECK(!info.tied && info.decay && info.rows == 151936 && info.cols == 896, "lm_head");
	T_CHECK_STR(info.name, "lm_head.weight");
	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_LAYER, 0, ZINF_LLAMA_V_BIAS, &info));
	T_CHECK(!info.present, "no v bias without attention_bias");
	T_CHECK(table_count(&c) == expected_count(&c), "untied count");
	c.attention_bias = c.attention_out_bias = true;
	T_CHECK(table_count(&c) == expected_count(&c), "count with all biases");
	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_LAYER, 0, ZINF_LLAMA_GATE_BIAS, &info));
	T_CHECK(!info.present, "no gate bias without mlp_bias");
	c.mlp_bias = true; /* llama's mlp_bias: gate/up (I) and down (C) biases */
	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_LAYER, 3, ZINF_LLAMA_UP_BIAS, &info));
	T_CHECK(info.present && !info.decay && info.rows == 4864 && info.cols == 0,
		"up bias shape");
	T_CHECK_STR(info.name, "model.layers.3.mlp.up_proj.bias");
	T_CHECK_RC(zinf_llama_param_info(&c, ZINF_LLAMA_LAYER, 3, ZINF_LLAMA_DOWN_BIAS, &info));
	T_CHECK(info.present && info.rows == 896 && info.cols == 0, "down bias shape");
	T_CHECK_STR(info.name, "model.layers.3.mlp.down_proj.bias");
	T_CHECK(table_count(&c) == expected_count(&c), "count with MLP biases");
	printf("parameter table matches the Hugging Face layout (qwen2-0.5b: 494032768)\n");
	return T_EXIT_PASS;
}

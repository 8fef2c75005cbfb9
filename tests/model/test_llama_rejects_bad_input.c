/*
 * Bad dimensions and bad inputs get a one-line error naming the field or the position:
 * nh not divisible by nkv, odd head_dim, non-positive sizes, inverted rope_scaling
 * factors, a negative sliding_window or max_window_layers, a bad micro-batch shape; tokens and targets out of range; a NULL weight; head
 * backward without a forward; a layer output aliasing its input. A head_dim of 2^22 is
 * made, not a crash.
 */
#include <zinf/error.h>

#include "test_llama_net.h"

static void tiny(struct zinf_llama_config *cfg)
{
	zinf_llama_config_init(cfg);
	cfg->vocab_size = 16;
	cfg->hidden_size = 8;
	cfg->intermediate_size = 12;
	cfg->num_hidden_layers = 1;
	cfg->num_attention_heads = 2;
	cfg->num_key_value_heads = 1;
	cfg->head_dim = 4;
}

static void one_line_naming(const char *msg, const char *field)
{
	T_CHECK(msg[0] != '\0', "empty error message (want one naming %s)", field);
	T_CHECK(strchr(msg, '\n') == NULL, "message is not one line: %s", msg);
	T_CHECK(strstr(msg, field) != NULL, "message does not name %s: %s", field, msg);
	printf("ok: %s\n", msg);
}

static void expect_config_error(const struct zinf_llama_config *cfg, const char *field)
{
	char err[256] = "";
	struct zinf_llama *m = (struct zinf_llama *)1;

	T_CHECK(zinf_llama_config_check(cfg, err, sizeof(err)) == ZINF_ECONFIG,
		"config check accepts a bad %s", field);
	one_line_naming(err, field);
	err[0] = '\0';
	T_CHECK(zinf_llama_create(cfg, NULL, 1, 4, &m, err, sizeof(err)) == ZINF_ECONFIG,
		"create accepts a bad %s", field);
	T_CHECK(m == NULL, "create left a handle after failing");
	one_line_naming(err, field);
}

int main(void)
{
	struct zinf_llama_config cfg;
	char err[256];

	tiny(&cfg);
	T_CHECK(zinf_llama_config_check(&cfg, err, sizeof(err)) == 0, "good config refused: %s",
		err);
	cfg.num_key_value_heads = 3;
	cfg.num_attention_heads = 4;
	expect_config_error(&cfg, "num_key_value_heads");
	tiny(&cfg);
	cfg.head_dim = 5;
	expect_config_error(&cfg, "head_dim");
	tiny(&cfg);
	cfg.vocab_size = 0;
	expect_config_error(&cfg, "vocab_size");
	tiny(&cfg);
	cfg.intermediate_size = -4;
	expect_config_error(&cfg, "intermediate_size");
	tiny(&cfg);
	cfg.num_attention_heads = 0;
	expect_config_error(&cfg, "num_attention_heads");
	tiny(&cfg);
	cfg.rms_norm_eps = 0.0f;
	expect_config_error(&cfg, "rms_norm_eps");
	tiny(&cfg);
	cfg.rope_type = ZINF_ROPE_LLAMA3;
	cfg.rope_low_freq_factor = 4.0f;
	cfg.rope_high_freq_factor = 1.0f;
	expect_config_error(&cfg, "high_freq_factor");
	tiny(&cfg);
	cfg.sliding_window = -1;
	expect_config_error(&cfg, "sliding_window = -1");
	tiny(&cfg);
	cfg.sliding_window = 4;
	cfg.max_window_layers = -2;
	expect_config_error(&cfg, "max_window_layers = -2");
	tiny(&cfg);
	T_CHECK(zinf_llama_config_check(&cfg, NULL, 0) == 0, "NULL err buffer refused");

	struct zinf_llama *m = NULL;

	T_CHECK(zinf_llama_create(&cfg, NULL, 0, 4, &m, err, sizeof(err)) == -EINVAL,
		"B = 0 accepted");
	one_line_naming(err, "B = 0");

	/* a head_dim far beyond any model is a valid shape: its RoPE frequencies (8 MiB
	 * here) are no stack array */
	tiny(&cfg);
	cfg.hidden_size = 2;
	cfg.num_attention_heads = 1;
	cfg.head_dim = 1 << 22;
	T_CHECK(zinf_llama_create(&cfg, NULL, 1, 1, &m, err, sizeof(err)) == 0,
		"a head_dim of 2^22: %s", err);
	zinf_llama_destroy(m);
	m = NULL;
	tiny(&cfg);

	/* inputs, on a working model */
	struct net n;
	int32_t tokens[8] = {1, 2, 3, 4, 5, 6, 7, 8}, targets[8] = {2, 3, 4, 5, 6, 7, 8, -1};
	const float *wf[ZINF_LLAMA_MAX_PARAMS];
	float loss;

	net_init(&n, &cfg, 2, 4);
	net_randomize(&n, 1);
	net_bind(&n, 0, false, wf);
	tokens[5] = 16;
	T_CHECK(zinf_llama_embed_forward(n.m, wf, tokens, net_x(&n, 0)) == -EINVAL,
		"token 16 >= vocab accepted");
	one_line_naming(zinf_llama_last_error(n.m), "position 5");
	tokens[5] = -2;
	T_CHECK(zinf_llama_embed_backward(n.m, tokens, n.d, (float *const *)n.w[0]) == -EINVAL,
		"negative token accepted in backward");
	one_line_naming(zinf_llama_last_error(n.m), "position 5");
	tokens[5] = 6;

	net_bind(&n, 2, false, wf);
	T_CHECK(zinf_llama_head_backward(n.m, wf, net_x(&n, 1), targets, 1.0f, n.d,
					 (float *const *)n.w[2]) == ZINF_ESTATE,
		"head backward without forward accepted");
	one_line_naming(zinf_llama_last_error(n.m), "forward");
	targets[2] = -7;
	T_CHECK(zinf_llama_head_forward(n.m, wf, net_x(&n, 1), targets, &loss) == -EINVAL,
		"target -7 accepted");
	one_line_naming(zinf_llama_last_error(n.m), "position 2");
	targets[2] = 16;
	T_CHECK(zinf_llama_head_forward(n.m, wf, net_x(&n, 1), targets, &loss) == -EINVAL,
		"target 16 accepted");
	one_line_naming(zinf_llama_last_error(n.m), "target 16");
	targets[2] = 4;

	struct zinf_llama_tensor in[ZINF_LLAMA_MAX_PARAMS] = {0};

	for (int k = 0; k < ZINF_LLAMA_LAYER_NPARAMS; k++)
		in[k].data = n.w[1][k];
	in[ZINF_LLAMA_UP].data = NULL;
	T_CHECK(zinf_llama_bind(n.m, ZINF_LLAMA_LAYER, 0, in, wf) == -EINVAL,
		"NULL weight accepted");
	one_line_naming(zinf_llama_last_error(n.m), "mlp.up_proj.weight");
	in[ZINF_LLAMA_UP].data = n.w[1][ZINF_LLAMA_UP];
	in[ZINF_LLAMA_UP].dtype = (enum zinf_llama_dtype)7;
	T_CHECK(zinf_llama_bind(n.m, ZINF_LLAMA_LAYER, 0, in, wf) == -EINVAL, "dtype 7 accepted");
	one_line_naming(zinf_llama_last_error(n.m), "dtype");
	in[ZINF_LLAMA_UP].dtype = ZINF_LLAMA_F32;
	T_CHECK(zinf_llama_bind(n.m, ZINF_LLAMA_LAYER, 1, in, wf) == -EINVAL, "layer 1 of 1 bound");
	one_line_naming(zinf_llama_last_error(n.m), "layer 1");
	T_CHECK_RC(zinf_llama_bind(n.m, ZINF_LLAMA_LAYER, 0, in, wf));
	T_CHECK(zinf_llama_layer_forward(n.m, wf, net_x(&n, 0), net_x(&n, 0), n.acts[0]) == -EINVAL,
		"y aliasing x accepted");
	one_line_naming(zinf_llama_last_error(n.m), "aliases");

	struct zinf_llama_param_info info;

	T_CHECK(zinf_llama_param_info(&cfg, ZINF_LLAMA_LAYER, 1, 0, &info) == -EINVAL,
		"layer 1 of 1 described");
	T_CHECK(zinf_llama_param_info(&cfg, ZINF_LLAMA_HEAD, 0, 2, &info) == -EINVAL,
		"head slot 2 described");
	net_destroy(&n);
	zinf_llama_destroy(NULL);
	zinf_llama_acts_destroy(NULL);
	return T_EXIT_PASS;
}

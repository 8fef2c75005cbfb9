/* The cuda model runtime refuses bad input with one line naming what and where: a weight
 * in host memory (the pointer and the tensor named), a NULL weight, a bf16 weight given to
 * a runtime created for fp32 weights, a token or target out
 * of range (its position), a layer output aliasing its input, a head backward without a
 * head forward with targets; and it keeps working after each refusal. Skips (77) without
 * a GPU. */
#include <errno.h>

#include "device.h"
#include "gpu_test.h"
#include "llama_backend.h"
#include "test.h"
#include "zinf/error.h"
#include "zinf/log.h"

#define B 1
#define T 4

static void expect(int rc, int want, const struct llama_rt *rt, const char *needle)
{
	const char *msg = rt->ops->last_error(rt);

	T_CHECK(rc == want, "rc %d, want %d (%s)", rc, want, msg);
	T_CHECK(strstr(msg, needle) && !strchr(msg, '\n'), "message \"%s\" lacks \"%s\"", msg,
		needle);
}

int main(void)
{
	struct zinf_llama_config c;
	struct llama_rt_opts opts;
	struct llama_rt *rt;
	struct llama_rt_tensor in[ZINF_LLAMA_MAX_PARAMS] = {0};
	struct llama_rt_acts *a;
	const float *w[ZINF_LLAMA_MAX_PARAMS];
	float host_table[32 * 16], *x, *y;
	void *table;
	int32_t tokens[B * T] = {1, 2, 3, 4}, targets[B * T] = {2, 3, 4, -1};
	char err[512];

	zinf_log_set_level(ZINF_LOG_ERROR);
	t_require_gpu();
	zinf_llama_config_init(&c);
	c.vocab_size = 32;
	c.hidden_size = 16;
	c.intermediate_size = 24;
	c.num_hidden_layers = 1;
	c.num_attention_heads = 2;
	c.num_key_value_heads = 1;
	c.head_dim = 8;
	llama_rt_opts_init(&opts);
	T_CHECK(llama_rt_cuda_ops.create(&c, &opts, B, T, &rt, err, sizeof(err)) == 0, "%s", err);

	memset(host_table, 0, sizeof(host_table));
	in[ZINF_LLAMA_EMBED_TOKENS].data = host_table;
	in[ZINF_LLAMA_EMBED_TOKENS].dtype = ZINF_DTYPE_F32;
	expect(rt->ops->bind(rt, ZINF_LLAMA_EMBED, 0, in, w), -EINVAL, rt,
	       "tensor model.embed_tokens.weight at");
	T_CHECK(strstr(rt->ops->last_error(rt), "is not device memory"), "%s",
		rt->ops->last_error(rt));
	in[ZINF_LLAMA_EMBED_TOKENS].data = NULL;
	expect(rt->ops->bind(rt, ZINF_LLAMA_EMBED, 0, in, w), -EINVAL, rt,
	       "tensor model.embed_tokens.weight (slot 0) is NULL");
	T_CHECK_RC(rt->ops->buf_alloc(rt, sizeof(host_table), &table));
	T_CHECK_RC(rt->ops->upload(rt, table, host_table, sizeof(host_table)));
	in[ZINF_LLAMA_EMBED_TOKENS].data = table;
	in[ZINF_LLAMA_EMBED_TOKENS].dtype = ZINF_DTYPE_BF16;
	expect(rt->ops->bind(rt, ZINF_LLAMA_EMBED, 0, in, w), -EINVAL, rt,
	       "is 16-bit but the runtime was created for fp32 weights");
	in[ZINF_LLAMA_EMBED_TOKENS].dtype = ZINF_DTYPE_F32;
	T_CHECK(rt->ops->bind(rt, ZINF_LLAMA_EMBED, 0, in, w) == 0, "%s", rt->ops->last_error(rt));

	tokens[2] = 32;
	expect(rt->ops->set_tokens(rt, tokens, targets), -EINVAL, rt,
	       "token 32 at position 2 (row 0, col 2) is outside [0, 32)");
	tokens[2] = 3;
	targets[1] = -2;
	expect(rt->ops->set_tokens(rt, tokens, targets), -EINVAL, rt,
	       "target -2 at position 1 (row 0, col 1) is outside [0, 32)");
	targets[1] = 3;
	T_CHECK(rt->ops->set_tokens(rt, tokens, targets) == 0, "%s", rt->ops->last_error(rt));

	T_CHECK_RC(rt->ops->buf_alloc(rt, B * T * 16 * sizeof(float), (void **)&x));
	T_CHECK_RC(rt->ops->buf_alloc(rt, B * T * 16 * sizeof(float), (void **)&y));
	T_CHECK(rt->ops->embed_forward(rt, w, x) == 0, "%s", rt->ops->last_error(rt));
	T_CHECK_RC(rt->ops->acts_create(rt, &a));
	expect(rt->ops->layer_forward(rt, w, x, x, a), -EINVAL, rt, "output y aliases input x");
	expect(rt->ops->head_backward(rt, w, x, 1.0f, y, NULL), ZINF_ESTATE, rt,
	       "no head forward with targets precedes it");
	T_CHECK(rt->ops->sync(rt) == 0, "%s", rt->ops->last_error(rt));
	rt->ops->acts_destroy(rt, a);
	rt->ops->buf_free(rt, x);
	rt->ops->buf_free(rt, y);
	rt->ops->buf_free(rt, table);
	rt->ops->destroy(rt);
	return T_EXIT_PASS;
}

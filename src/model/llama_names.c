/*
 * Hugging Face tensor names and shapes of a Llama-family model (see llama_names.h), and
 * the check of a checkpoint against them.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "llama_names.h"
#include "zinf/error.h"
#include "zinf/log.h"

/* The tensor kinds of one decoder layer, in state-dict order. */
static const enum zinf_llama_tensor_kind layer_kinds[] = {
	ZINF_LLAMA_T_Q,	   ZINF_LLAMA_T_Q_BIAS,	   ZINF_LLAMA_T_K,	    ZINF_LLAMA_T_K_BIAS,
	ZINF_LLAMA_T_V,	   ZINF_LLAMA_T_V_BIAS,	   ZINF_LLAMA_T_O,	    ZINF_LLAMA_T_O_BIAS,
	ZINF_LLAMA_T_GATE, ZINF_LLAMA_T_GATE_BIAS, ZINF_LLAMA_T_UP,	    ZINF_LLAMA_T_UP_BIAS,
	ZINF_LLAMA_T_DOWN, ZINF_LLAMA_T_DOWN_BIAS, ZINF_LLAMA_T_INPUT_NORM, ZINF_LLAMA_T_POST_NORM,
};
#define N_LAYER_KINDS ((int)(sizeof(layer_kinds) / sizeof(layer_kinds[0])))

static bool kind_present(const struct zinf_hf_config *cfg, enum zinf_llama_tensor_kind kind)
{
	switch (kind) {
	case ZINF_LLAMA_T_Q_BIAS:
	case ZINF_LLAMA_T_K_BIAS:
	case ZINF_LLAMA_T_V_BIAS:
		return cfg->attention_bias;
	case ZINF_LLAMA_T_O_BIAS:
		return cfg->attention_out_bias;
	case ZINF_LLAMA_T_GATE_BIAS:
	case ZINF_LLAMA_T_UP_BIAS:
	case ZINF_LLAMA_T_DOWN_BIAS:
		return cfg->mlp_bias;
	case ZINF_LLAMA_T_LM_HEAD:
		return !cfg->tie_word_embeddings;
	default:
		return true;
	}
}

static int layer_count(const struct zinf_hf_config *cfg)
{
	int n = 0;

	for (int i = 0; i < N_LAYER_KINDS; i++)
		n += kind_present(cfg, layer_kinds[i]);
	return n;
}

int zinf_llama_names_count(const struct zinf_hf_config *cfg)
{
	return 1 + (int)cfg->num_hidden_layers * layer_count(cfg) + 1 +
	       kind_present(cfg, ZINF_LLAMA_T_LM_HEAD);
}

static const char *kind_suffix(enum zinf_llama_tensor_kind kind)
{
	switch (kind) {
	case ZINF_LLAMA_T_Q:
		return "self_attn.q_proj.weight";
	case ZINF_LLAMA_T_Q_BIAS:
		return "self_attn.q_proj.bias";
	case ZINF_LLAMA_T_K:
		return "self_attn.k_proj.weight";
	case ZINF_LLAMA_T_K_BIAS:
		return "self_attn.k_proj.bias";
	case ZINF_LLAMA_T_V:
		return "self_attn.v_proj.weight";
	case ZINF_LLAMA_T_V_BIAS:
		return "self_attn.v_proj.bias";
	case ZINF_LLAMA_T_O:
		return "self_attn.o_proj.weight";
	case ZINF_LLAMA_T_O_BIAS:
		return "self_attn.o_proj.bias";
	case ZINF_LLAMA_T_GATE:
		return "mlp.gate_proj.weight";
	case ZINF_LLAMA_T_GATE_BIAS:
		return "mlp.gate_proj.bias";
	case ZINF_LLAMA_T_UP_BIAS:
		return "mlp.up_proj.bias";
	case ZINF_LLAMA_T_DOWN_BIAS:
		return "mlp.down_proj.bias";
	case ZINF_LLAMA_T_UP:
		return "mlp.up_proj.weight";
	case ZINF_LLAMA_T_DOWN:
		return "mlp.down_proj.weight";
	case ZINF_LLAMA_T_INPUT_NORM:
		return "input_layernorm.weight";
	case ZINF_LLAMA_T_POST_NORM:
		return "post_attention_layernorm.weight";
	case ZINF_LLAMA_T_EMBED:
		return "model.embed_tokens.weight";
	case ZINF_LLAMA_T_FINAL_NORM:
		return "model.norm.weight";
	case ZINF_LLAMA_T_LM_HEAD:
		return "lm_head.weight";
	}
	return "?";
}

static void set_shape(struct zinf_llama_tensor_name *t, uint64_t rows, uint64_t cols)
{
	t->ndim = cols ? 2 : 1;
	t->shape[0] = rows;
	t->shape[1] = cols;
	t->n_elems = rows * (cols ? cols : 1);
}

static void fill(const struct zinf_hf_config *cfg, enum zinf_llama_tensor_kind kind, int layer,
		 struct zinf_llama_tensor_name *t)
{
	uint64_t C = cfg->hidden_size, I = cfg->intermediate_size, V = cfg->vocab_size;
	uint64_t q = cfg->num_attention_heads * cfg->head_dim;
	uint64_t kv = cfg->num_key_value_heads * cfg->head_dim;

	memset(t, 0, sizeof(*t));
	t->kind = kind;
	t->layer = layer;
	if (layer >= 0) {
		snprintf(t->name, sizeof(t->name), "model.layers.%d.%s", layer, kind_suffix(kind));
		t->module = 1 + layer;
	} else {
		snprintf(t->name, sizeof(t->name), "%s", kind_suffix(kind));
		t->module = kind == ZINF_LLAMA_T_EMBED ? 0 : (int)cfg->num_hidden_layers + 1;
	}
	switch (kind) {
	case ZINF_LLAMA_T_EMBED:
	case ZINF_LLAMA_T_LM_HEAD:
		set_shape(t, V, C);
		break;
	case ZINF_LLAMA_T_Q:
		set_shape(t, q, C);
		break;
	case ZINF_LLAMA_T_K:
	case ZINF_LLAMA_T_V:
		set_shape(t, kv, C);
		break;
	case ZINF_LLAMA_T_Q_BIAS:
		set_shape(t, q, 0);
		break;
	case ZINF_LLAMA_T_K_BIAS:
	case ZINF_LLAMA_T_V_BIAS:
		set_shape(t, kv, 0);
		break;
	case ZINF_LLAMA_T_O:
		set_shape(t, C, q);
		break;
	case ZINF_LLAMA_T_GATE:
	case ZINF_LLAMA_T_UP:
		set_shape(t, I, C);
		break;
	case ZINF_LLAMA_T_DOWN:
		set_shape(t, C, I);
		break;
	case ZINF_LLAMA_T_GATE_BIAS:
	case ZINF_LLAMA_T_UP_BIAS:
		set_shape(t, I, 0);
		break;
	case ZINF_LLAMA_T_O_BIAS:
	case ZINF_LLAMA_T_DOWN_BIAS:
	case ZINF_LLAMA_T_INPUT_NORM:
	case ZINF_LLAMA_T_POST_NORM:
	case ZINF_LLAMA_T_FINAL_NORM:
		set_shape(t, C, 0);
		break;
	}
}

int zinf_llama_names_get(const struct zinf_hf_config *cfg, int i,
			 struct zinf_llama_tensor_name *out)
{
	int per_layer = layer_count(cfg), n_layers = (int)cfg->num_hidden_layers;

	if (i < 0 || i >= zinf_llama_names_count(cfg))
		return -EINVAL;
	if (i == 0) {
		fill(cfg, ZINF_LLAMA_T_EMBED, -1, out);
		return 0;
	}
	i--;
	if (i < n_layers * per_layer) {
		int layer = i / per_layer, k = i % per_layer;

		for (int j = 0; j < N_LAYER_KINDS; j++) {
			if (!kind_present(cfg, layer_kinds[j]))
				continue;
			if (k-- == 0) {
				fill(cfg, layer_kinds[j], layer, out);
				return 0;
			}
		}
		return -EINVAL; /* unreachable: k < per_layer */
	}
	i -= n_layers * per_layer;
	fill(cfg, i == 0 ? ZINF_LLAMA_T_FINAL_NORM : ZINF_LLAMA_T_LM_HEAD, -1, out);
	return 0;
}

static void shape_text(char *buf, size_t len, int ndim, const uint64_t *shape)
{
	size_t off = (size_t)snprintf(buf, len, "[");

	for (int d = 0; d < ndim && off < len; d++)
		off += (size_t)snprintf(buf + off, len - off, "%s%llu", d ? ", " : "",
					(unsigned long long)shape[d]);
	if (off < len)
		snprintf(buf + off, len - off, "]");
}

static bool is_expected(const struct zinf_hf_config *cfg, const char *name)
{
	int n = zinf_llama_names_count(cfg);
	struct zinf_llama_tensor_name t;

	/* Linear, but only for the few names the model does not use. */
	for (int i = 0; i < n; i++)
		if (zinf_llama_names_get(cfg, i, &t) == 0 && strcmp(t.name, name) == 0)
			return true;
	return false;
}

int zinf_llama_names_check(const struct zinf_hf_config *cfg, const struct zinf_st_reader *r,
			   char *err, size_t err_bytes)
{
	int n = zinf_llama_names_count(cfg), n_extra = 0;
	char want[64], got[64];

	for (int i = 0; i < n; i++) {
		const struct zinf_st_tensor_info *ti;
		struct zinf_llama_tensor_name t;
		bool same;

		zinf_llama_names_get(cfg, i, &t);
		shape_text(want, sizeof(want), t.ndim, t.shape);
		ti = zinf_st_reader_find(r, t.name);
		if (!ti) {
			if (err_bytes)
				snprintf(err, err_bytes,
					 "%s: tensor %s: missing (expected shape %s)",
					 zinf_st_reader_path(r), t.name, want);
			return ZINF_EFORMAT;
		}
		same = ti->ndim == t.ndim;
		for (int d = 0; same && d < t.ndim; d++)
			same = ti->shape[d] == t.shape[d];
		if (!same) {
			shape_text(got, sizeof(got), ti->ndim, ti->shape);
			if (err_bytes)
				snprintf(err, err_bytes, "%s: tensor %s: shape %s (expected %s)",
					 zinf_st_reader_file_path(r, ti->file), t.name, got, want);
			return ZINF_EFORMAT;
		}
		if (ti->dtype == ZINF_ST_OTHER) { /* (one the model does not use is left) */
			if (err_bytes)
				snprintf(err, err_bytes,
					 "%s: tensor %s: dtype \"%s\" is not supported (expected "
					 "BF16, F16 or F32)",
					 zinf_st_reader_file_path(r, ti->file), t.name,
					 ti->dtype_text);
			return ZINF_EFORMAT;
		}
	}
	if (zinf_st_reader_count(r) > n) {
		for (int i = 0; i < zinf_st_reader_count(r); i++) {
			const struct zinf_st_tensor_info *ti = zinf_st_reader_tensor(r, i);

			if (!is_expected(cfg, ti->name) && n_extra++ < 8)
				zinf_logf(ZINF_LOG_INFO, "%s: tensor %s is not used by the model",
					  zinf_st_reader_path(r), ti->name);
		}
	}
	if (err_bytes)
		err[0] = '\0';
	return 0;
}

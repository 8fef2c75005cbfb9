/*
 * Llama-family model runtime: config validation, the parameter table of each module,
 * create/destroy of the per-micro-batch buffers, binding a module's (fp32 or bf16) weights,
 * and the embedding and head (final norm + LM head + cross-entropy) modules. The decoder
 * layer is in llama_layer.c, the kernels in llama_ops.c and llama_attention.c.
 */
#include "llama.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <zinf/config.h>
#include <zinf/error.h>
#include <zinf/log.h>

#include "llama_internal.h"
#include "llama_ops.h"

int llama_fail(struct zinf_llama *m, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->err, sizeof(m->err), fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- config ------------------------------------------------------------------------------ */

void zinf_llama_config_init(struct zinf_llama_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->rms_norm_eps = 1e-6f;
	cfg->rope_theta = 10000.0f;
	cfg->rope_factor = 8.0f;
	cfg->rope_low_freq_factor = 1.0f;
	cfg->rope_high_freq_factor = 4.0f;
	cfg->rope_original_max_position_embeddings = 8192;
	cfg->rope_beta_fast = 32.0f;
	cfg->rope_beta_slow = 1.0f;
	cfg->rope_truncate = true;
}

#define CHECK_POSITIVE(field)                                                                      \
	do {                                                                                       \
		if (!(cfg->field > 0)) {                                                           \
			snprintf(err, errlen, "llama config: %s = %g must be > 0", #field,         \
				 (double)cfg->field);                                              \
			return ZINF_ECONFIG;                                                       \
		}                                                                                  \
	} while (0)

int zinf_llama_config_check(const struct zinf_llama_config *cfg, char *err, size_t errlen)
{
	char dummy[1];

	if (!err) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	CHECK_POSITIVE(vocab_size);
	CHECK_POSITIVE(hidden_size);
	CHECK_POSITIVE(intermediate_size);
	CHECK_POSITIVE(num_hidden_layers);
	CHECK_POSITIVE(num_attention_heads);
	CHECK_POSITIVE(num_key_value_heads);
	CHECK_POSITIVE(head_dim);
	CHECK_POSITIVE(rms_norm_eps);
	CHECK_POSITIVE(rope_theta);
	if (cfg->num_attention_heads % cfg->num_key_value_heads) {
		snprintf(
			err, errlen,
			"llama config: num_attention_heads = %d is not divisible by num_key_value_heads = %d",
			cfg->num_attention_heads, cfg->num_key_value_heads);
		return ZINF_ECONFIG;
	}
	if (cfg->head_dim % 2) {
		snprintf(err, errlen,
			 "llama config: head_dim = %d must be even (RoPE rotates pairs)",
			 cfg->head_dim);
		return ZINF_ECONFIG;
	}
	if (cfg->sliding_window < 0 || cfg->max_window_layers < 0) {
		snprintf(
			err, errlen,
			"llama config: sliding_window = %d and max_window_layers = %d must be >= 0",
			cfg->sliding_window, cfg->max_window_layers);
		return ZINF_ECONFIG;
	}
	if (llama_rope_check(cfg, err, errlen))
		return ZINF_ECONFIG;
	err[0] = '\0';
	return 0;
}

/* ---- parameter table --------------------------------------------------------------------- */

int zinf_llama_module_nparams(enum zinf_llama_module_kind kind)
{
	switch (kind) {
	case ZINF_LLAMA_EMBED:
		return ZINF_LLAMA_EMBED_NPARAMS;
	case ZINF_LLAMA_LAYER:
		return ZINF_LLAMA_LAYER_NPARAMS;
	case ZINF_LLAMA_HEAD:
		return ZINF_LLAMA_HEAD_NPARAMS;
	}
	return 0;
}

static const char *const layer_names[ZINF_LLAMA_LAYER_NPARAMS] = {
	[ZINF_LLAMA_INPUT_NORM] = "input_layernorm.weight",
	[ZINF_LLAMA_Q] = "self_attn.q_proj.weight",
	[ZINF_LLAMA_K] = "self_attn.k_proj.weight",
	[ZINF_LLAMA_V] = "self_attn.v_proj.weight",
	[ZINF_LLAMA_O] = "self_attn.o_proj.weight",
	[ZINF_LLAMA_Q_BIAS] = "self_attn.q_proj.bias",
	[ZINF_LLAMA_K_BIAS] = "self_attn.k_proj.bias",
	[ZINF_LLAMA_V_BIAS] = "self_attn.v_proj.bias",
	[ZINF_LLAMA_O_BIAS] = "self_attn.o_proj.bias",
	[ZINF_LLAMA_POST_NORM] = "post_attention_layernorm.weight",
	[ZINF_LLAMA_GATE] = "mlp.gate_proj.weight",
	[ZINF_LLAMA_UP] = "mlp.up_proj.weight",
	[ZINF_LLAMA_DOWN] = "mlp.down_proj.weight",
	[ZINF_LLAMA_GATE_BIAS] = "mlp.gate_proj.bias",
	[ZINF_LLAMA_UP_BIAS] = "mlp.up_proj.bias",
	[ZINF_LLAMA_DOWN_BIAS] = "mlp.down_proj.bias",
};

static void set_shape(struct zinf_llama_param_info *info, uint64_t rows, uint64_t cols)
{
	info->rows = rows;
	info->cols = cols;
	info->elems = rows * (cols ? cols : 1);
	info->decay = cols != 0;
	info->present = true;
}

static void layer_shape(const struct zinf_llama_config *cfg, int idx,
			struct zinf_llama_param_info *info)
{
	uint64_t C = cfg->hidden_size, I = cfg->intermediate_size;
	uint64_t qd = (uint64_t)cfg->num_attention_heads * cfg->head_dim;
	uint64_t kvd = (uint64_t)cfg->num_key_value_heads * cfg->head_dim;

	switch (idx) {
	case ZINF_LLAMA_INPUT_NORM:
	case ZINF_LLAMA_POST_NORM:
		set_shape(info, C, 0);
		break;
	case ZINF_LLAMA_Q:
		set_shape(info, qd, C);
		break;
	case ZINF_LLAMA_K:
	case ZINF_LLAMA_V:
		set_shape(info, kvd, C);
		break;
	case ZINF_LLAMA_O:
		set_shape(info, C, qd);
		break;
	case ZINF_LLAMA_Q_BIAS:
		set_shape(info, qd, 0);
		info->present = cfg->attention_bias;
		break;
	case ZINF_LLAMA_K_BIAS:
	case ZINF_LLAMA_V_BIAS:
		set_shape(info, kvd, 0);
		info->present = cfg->attention_bias;
		break;
	case ZINF_LLAMA_O_BIAS:
		set_shape(info, C, 0);
		info->present = cfg->attention_out_bias;
		break;
	case ZINF_LLAMA_GATE:
	case ZINF_LLAMA_UP:
		set_shape(info, I, C);
		break;
	case ZINF_LLAMA_DOWN:
		set_shape(info, C, I);
		break;
	case ZINF_LLAMA_GATE_BIAS:
	case ZINF_LLAMA_UP_BIAS:
		set_shape(info, I, 0);
		info->present = cfg->mlp_bias;
		break;
	case ZINF_LLAMA_DOWN_BIAS:
		set_shape(info, C, 0);
		info->present = cfg->mlp_bias;
		break;
	}
}

int zinf_llama_param_info(const struct zinf_llama_config *cfg, enum zinf_llama_module_kind kind,
			  int layer, int idx, struct zinf_llama_param_info *info)
{
	uint64_t V = cfg->vocab_size, C = cfg->hidden_size;

	if (idx < 0 || idx >= zinf_llama_module_nparams(kind))
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	switch (kind) {
	case ZINF_LLAMA_EMBED:
		set_shape(info, V, C);
		snprintf(info->name, sizeof(info->name), "model.embed_tokens.weight");
		return 0;
	case ZINF_LLAMA_LAYER:
		if (layer < 0 || layer >= cfg->num_hidden_layers)
			return -EINVAL;
		layer_shape(cfg, idx, info);
		snprintf(info->name, sizeof(info->name), "model.layers.%d.%s", layer,
			 layer_names[idx]);
		return 0;
	case ZINF_LLAMA_HEAD:
		if (idx == ZINF_LLAMA_FINAL_NORM) {
			set_shape(info, C, 0);
			snprintf(info->name, sizeof(info->name), "model.norm.weight");
			return 0;
		}
		set_shape(info, V, C);
		info->tied = cfg->tie_word_embeddings;
		snprintf(info->name, sizeof(info->name), "%s",
			 info->tied ? "model.embed_tokens.weight" : "lm_head.weight");
		return 0;
	}
	return -EINVAL;
}

/* fp32 elements of scratch the bf16 weights of the largest module need. */
static uint64_t module_elems(const struct zinf_llama_config *cfg, enum zinf_llama_module_kind kind)
{
	struct zinf_llama_param_info info;
	uint64_t total = 0;

	for (int i = 0; i < zinf_llama_module_nparams(kind); i++) {
		zinf_llama_param_info(cfg, kind, 0, i, &info);
		if (info.present)
			total += info.elems;
	}
	return total;
}

uint64_t zinf_llama_largest_module_elems(const struct zinf_llama_config *cfg)
{
	uint64_t most = 0;

	for (int kind = ZINF_LLAMA_EMBED; kind <= ZINF_LLAMA_HEAD; kind++) {
		uint64_t n = module_elems(cfg, (enum zinf_llama_module_kind)kind);
		most = n > most ? n : most;
	}
	return most;
}

/* ---- runtime ----------------------------------------------------------------------------- */

/* Lay m's buffers out in base (NULL: only measure); returns the floats needed. */
static uint64_t runtime_layout(struct zinf_llama *m, float *base)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	uint64_t N = m->N, T = m->T, C = cfg->hidden_size, I = cfg->intermediate_size;
	uint64_t V = cfg->vocab_size, half = cfg->head_dim / 2;
	uint64_t qd = (uint64_t)cfg->num_attention_heads * cfg->head_dim;
	uint64_t kvd = (uint64_t)cfg->num_key_value_heads * cfg->head_dim;
	uint64_t wel = zinf_llama_largest_module_elems(cfg), off = 0;

	m->rope_cos = llama_carve(base, &off, T * half);
	m->rope_sin = llama_carve(base, &off, T * half);
	m->wscratch = llama_carve(base, &off, wel);
	m->dh = llama_carve(base, &off, N * C);
	m->dxn = llama_carve(base, &off, N * C);
	m->dact = llama_carve(base, &off, N * I);
	m->dgate = llama_carve(base, &off, N * I);
	m->dup = llama_carve(base, &off, N * I);
	m->dq = llama_carve(base, &off, N * qd);
	m->dk = llama_carve(base, &off, N * kvd);
	m->dv = llama_carve(base, &off, N * kvd);
	m->dctx = llama_carve(base, &off, N * qd);
	m->dkp = llama_carve(base, &off, N * qd);
	m->dvp = llama_carve(base, &off, N * qd);
	m->att_scratch = llama_carve(base, &off, llama_attention_scratch_elems(m->T));
	m->yscratch = llama_carve(base, &off, N * C);
	m->xf = llama_carve(base, &off, N * C);
	m->rstdf = llama_carve(base, &off, N);
	m->logits = llama_carve(base, &off, (uint64_t)m->head_rows * V);
	m->lse = llama_carve(base, &off, N);
	return off;
}

/* Rows of logits held at once: all N, or as many as head_chunk_bytes allow (>= 1). */
int llama_head_rows(const struct zinf_llama_config *cfg, const struct zinf_llama_opts *opts, int N)
{
	uint64_t row_bytes = (uint64_t)cfg->vocab_size * sizeof(float);

	if (opts->head_chunk_bytes && (uint64_t)N * row_bytes > opts->head_chunk_bytes)
		return opts->head_chunk_bytes / row_bytes
			       ? (int)(opts->head_chunk_bytes / row_bytes)
			       : 1;
	return N;
}

void zinf_llama_sizes(const struct zinf_llama_config *cfg, const struct zinf_llama_opts *opts,
		      int B, int T, uint64_t *runtime_bytes, uint64_t *acts_bytes)
{
	struct zinf_llama m = {.cfg = *cfg, .B = B, .T = T, .N = B * T};
	struct zinf_llama_opts defaults;

	if (!opts) {
		zinf_llama_opts_init(&defaults);
		opts = &defaults;
	}
	m.head_rows = llama_head_rows(cfg, opts, m.N);
	*runtime_bytes = runtime_layout(&m, NULL) * sizeof(float);
	*acts_bytes = zinf_llama_acts_bytes(&m);
}

void zinf_llama_opts_init(struct zinf_llama_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->head_chunk_bytes = 64ull << 20;
}

int zinf_llama_create(const struct zinf_llama_config *cfg, const struct zinf_llama_opts *opts,
		      int B, int T, struct zinf_llama **out, char *err, size_t errlen)
{
	struct zinf_llama_opts defaults;
	char msg[256];
	int rc = zinf_llama_config_check(cfg, msg, sizeof(msg));

	*out = NULL;
	if (!rc && (B <= 0 || T <= 0 || (int64_t)B * T > INT32_MAX)) {
		snprintf(msg, sizeof(msg),
			 "llama: micro-batch shape B = %d, T = %d must be > 0 with B * T < 2^31", B,
			 T);
		rc = -EINVAL;
	}
	if (rc) {
		if (err)
			snprintf(err, errlen, "%s", msg);
		zinf_logf(ZINF_LOG_ERROR, "%s", msg);
		return rc;
	}

	struct zinf_llama *m = calloc(1, sizeof(*m));

	if (!m) {
		if (err)
			snprintf(err, errlen, "llama: out of host memory for the runtime");
		return -ENOMEM;
	}
	m->cfg = *cfg;
	m->B = B;
	m->T = T;
	m->N = B * T;
	if (!opts) {
		zinf_llama_opts_init(&defaults);
		opts = &defaults;
	}
	m->head_rows = llama_head_rows(cfg, opts, m->N);
	uint64_t bytes = runtime_layout(m, NULL) * sizeof(float);

	m->arena = aligned_alloc(64, bytes);
	if (m->arena)
		runtime_layout(m, m->arena);
	if (!m->arena || llama_rope_build(m->rope_cos, m->rope_sin, cfg, T)) {
		char b[32];
		if (err)
			snprintf(err, errlen,
				 "llama: out of host memory for the runtime's activations and "
				 "buffers: %s for micro-batches of B = %d, T = %d",
				 zinf_format_bytes(bytes, b, sizeof(b)), B, T);
		free(m->arena);
		free(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

void zinf_llama_destroy(struct zinf_llama *m)
{
	if (!m)
		return;
	free(m->arena);
	free(m);
}

const struct zinf_llama_config *zinf_llama_config_of(const struct zinf_llama *m)
{
	return &m->cfg;
}

const char *zinf_llama_last_error(const struct zinf_llama *m)
{
	return m->err;
}

int zinf_llama_bind(struct zinf_llama *m, enum zinf_llama_module_kind kind, int layer,
		    const struct zinf_llama_tensor *in, const float **w)
{
	struct zinf_llama_param_info info;
	uint64_t off = 0;
	int n = zinf_llama_module_nparams(kind);

	if (n == 0)
		return llama_fail(m, -EINVAL, "llama bind: unknown module kind %d", (int)kind);
	/* the window of the layer about to run (llama.h: layers >= max_window_layers) */
	m->window = kind == ZINF_LLAMA_LAYER && layer >= m->cfg.max_window_layers
			    ? m->cfg.sliding_window
			    : 0;
	for (int i = 0; i < n; i++) {
		if (zinf_llama_param_info(&m->cfg, kind, layer, i, &info))
			return llama_fail(m, -EINVAL, "llama bind: layer %d is outside [0, %d)",
					  layer, m->cfg.num_hidden_layers);
		w[i] = NULL;
		if (!info.present)
			continue;
		if (!in[i].data)
			return llama_fail(m, -EINVAL, "llama bind: tensor %s (slot %d) is NULL",
					  info.name, i);
		if (in[i].dtype == ZINF_LLAMA_F32) {
			w[i] = in[i].data;
			continue;
		}
		if (in[i].dtype != ZINF_LLAMA_BF16)
			return llama_fail(m, -EINVAL, "llama bind: tensor %s has unknown dtype %d",
					  info.name, (int)in[i].dtype);

		const uint16_t *src = in[i].data;
		float *dst = m->wscratch + off;
		int64_t elems = (int64_t)info.elems;

#pragma omp parallel for schedule(static)
		for (int64_t e = 0; e < elems; e++)
			dst[e] = zinf_llama_bf16_to_f32(src[e]);
		w[i] = dst;
		off += info.elems;
	}
	return 0;
}

/* ---- embedding --------------------------------------------------------------------------- */

int zinf_llama_embed_forward(struct zinf_llama *m, const float *const *w, const int32_t *tokens,
			     float *x)
{
	for (int n = 0; n < m->N; n++) {
		if (tokens[n] < 0 || tokens[n] >= m->cfg.vocab_size)
			return llama_fail(
				m, -EINVAL,
				"llama embedding: token %d at position %d (row %d, col %d) is outside [0, %d)",
				tokens[n], n, n / m->T, n % m->T, m->cfg.vocab_size);
	}
	llama_embedding_forward(x, w[ZINF_LLAMA_EMBED_TOKENS], tokens, m->N, m->cfg.hidden_size);
	return 0;
}

int zinf_llama_embed_backward(struct zinf_llama *m, const int32_t *tokens, const float *dx,
			      float *const *g)
{
	for (int n = 0; n < m->N; n++) {
		if (tokens[n] < 0 || tokens[n] >= m->cfg.vocab_size)
			return llama_fail(
				m, -EINVAL,
				"llama embedding backward: token %d at position %d is outside [0, %d)",
				tokens[n], n, m->cfg.vocab_size);
	}
	llama_embedding_backward(g[ZINF_LLAMA_EMBED_TOKENS], dx, tokens, m->N, m->cfg.hidden_size);
	return 0;
}

/* ---- head: final norm + LM head + cross-entropy ------------------------------------------ */

static int check_targets(struct zinf_llama *m, const int32_t *targets)
{
	for (int n = 0; n < m->N; n++) {
		if (targets[n] < -1 || targets[n] >= m->cfg.vocab_size)
			return llama_fail(
				m, -EINVAL,
				"llama loss: target %d at position %d (row %d, col %d) is outside [0, %d) and not the ignore index -1",
				targets[n], n, n / m->T, n % m->T, m->cfg.vocab_size);
	}
	return 0;
}

/* logits of rows [r0, r0 + rows) into m->logits */
static void head_logits(struct zinf_llama *m, const float *lm, int r0, int rows)
{
	int C = m->cfg.hidden_size;

	llama_linear_forward(m->logits, m->xf + (size_t)r0 * C, lm, NULL, rows, C,
			     m->cfg.vocab_size);
}

int zinf_llama_head_forward(struct zinf_llama *m, const float *const *w, const float *x,
			    const int32_t *targets, float *loss)
{
	int C = m->cfg.hidden_size, V = m->cfg.vocab_size;
	double total = 0.0;
	int rc;

	m->head_ready = false;
	m->head_count = 0;
	*loss = 0.0f;
	if (targets && (rc = check_targets(m, targets)))
		return rc;
	llama_rmsnorm_forward(m->xf, m->rstdf, x, w[ZINF_LLAMA_FINAL_NORM], m->N, C,
			      m->cfg.rms_norm_eps);
	for (int r0 = 0; r0 < m->N; r0 += m->head_rows) {
		int rows = m->N - r0 < m->head_rows ? m->N - r0 : m->head_rows;
		double sum;
		int64_t count;

		head_logits(m, w[ZINF_LLAMA_LM_HEAD], r0, rows);
		llama_crossentropy_forward(m->lse + r0, &sum, &count, m->logits,
					   targets ? targets + r0 : NULL, rows, V);
		total += sum;
		m->head_count += count;
	}
	if (m->head_count)
		*loss = (float)(total / (double)m->head_count);
	m->head_ready = targets != NULL;
	return 0;
}

const float *zinf_llama_logits(const struct zinf_llama *m)
{
	return m->head_rows == m->N ? m->logits : NULL;
}

int zinf_llama_head_backward(struct zinf_llama *m, const float *const *w, const float *x,
			     const int32_t *targets, float dloss, float *dx, float *const *g)
{
	int C = m->cfg.hidden_size, V = m->cfg.vocab_size;

	if (!m->head_ready)
		return llama_fail(m, ZINF_ESTATE,
				  "llama head backward: no head forward with targets precedes it");
	m->head_ready = false;
	memset(dx, 0, (size_t)m->N * C * sizeof(float));
	if (m->head_count == 0)
		return 0; /* every position ignored: the loss is a constant 0 */
	for (int r0 = 0; r0 < m->N; r0 += m->head_rows) {
		int rows = m->N - r0 < m->head_rows ? m->N - r0 : m->head_rows;

		if (m->head_rows < m->N) /* chunked: this chunk's logits are gone, redo them */
			head_logits(m, w[ZINF_LLAMA_LM_HEAD], r0, rows);
		llama_crossentropy_backward(m->logits, m->lse + r0, targets + r0, rows, V,
					    dloss / (float)m->head_count);
		llama_linear_backward(m->dxn + (size_t)r0 * C, g[ZINF_LLAMA_LM_HEAD], NULL,
				      m->logits, m->xf + (size_t)r0 * C, w[ZINF_LLAMA_LM_HEAD],
				      rows, C, V, false);
	}
	llama_rmsnorm_backward(dx, g[ZINF_LLAMA_FINAL_NORM], m->dxn, x, w[ZINF_LLAMA_FINAL_NORM],
			       m->rstdf, m->N, C);
	return 0;
}

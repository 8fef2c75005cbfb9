/*
 * zinf train: the model as the engine holds it. Reads the Hugging Face config.json,
 * registers one engine module per unit of fetch (the embedding, each decoder layer, the
 * final norm + LM head) with one engine parameter per tensor, and fills them: streamed
 * tensor by tensor from a safetensors checkpoint, or from a seeded random init.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_names.h"
#include "safetensors.h"
#include "train_internal.h"
#include "zinf/error.h"
#include "zinf/log.h"

enum zinf_llama_module_kind train_module_kind(const struct train_model *tm, int mod)
{
	if (mod == 0)
		return ZINF_LLAMA_EMBED;
	return mod == tm->L + 1 ? ZINF_LLAMA_HEAD : ZINF_LLAMA_LAYER;
}

static int module_layer(int mod)
{
	return mod > 0 ? mod - 1 : 0;
}

bool train_model_slot(const struct train_model *tm, int mod, int s,
		      struct zinf_llama_param_info *info)
{
	if (tm->param[mod][s] == TRAIN_NO_PARAM)
		return false;
	zinf_llama_param_info(&tm->lc, train_module_kind(tm, mod), module_layer(mod), s, info);
	return true;
}

static enum zinf_dtype dtype_of_st(enum zinf_st_dtype d)
{
	return d == ZINF_ST_BF16  ? ZINF_DTYPE_BF16
	       : d == ZINF_ST_F16 ? ZINF_DTYPE_F16
				  : ZINF_DTYPE_F32;
}

/* The runtime's config from config.json's fields. */
static void llama_config_from_hf(const struct zinf_hf_config *hf, struct zinf_llama_config *lc)
{
	uint64_t context;

	zinf_llama_config_init(lc);
	lc->vocab_size = (int)hf->vocab_size;
	lc->hidden_size = (int)hf->hidden_size;
	lc->intermediate_size = (int)hf->intermediate_size;
	lc->num_hidden_layers = (int)hf->num_hidden_layers;
	lc->num_attention_heads = (int)hf->num_attention_heads;
	lc->num_key_value_heads = (int)hf->num_key_value_heads;
	lc->head_dim = (int)hf->head_dim;
	lc->rms_norm_eps = (float)hf->rms_norm_eps;
	lc->rope_theta = (float)hf->rope_theta;
	lc->attention_bias = hf->attention_bias;
	lc->attention_out_bias = hf->attention_out_bias;
	lc->mlp_bias = hf->mlp_bias;
	/* a window of at least T keys is no window: clamping keeps the same attention */
	lc->sliding_window = hf->sliding_window > INT_MAX ? INT_MAX : (int)hf->sliding_window;
	lc->max_window_layers =
		hf->max_window_layers > INT_MAX ? INT_MAX : (int)hf->max_window_layers;
	lc->tie_word_embeddings = hf->tie_word_embeddings;
	lc->rope_type = hf->rope_type;
	lc->rope_factor = (float)hf->rope_factor;
	lc->rope_low_freq_factor = (float)hf->rope_low_freq_factor;
	lc->rope_high_freq_factor = (float)hf->rope_high_freq_factor;
	/* dynamic grows theta past max_position_embeddings (clamped to INT_MAX: no sequence
	 * reaches it); yarn's context defaults to it (validated to fit an int) */
	context =
		hf->rope_type == ZINF_ROPE_DYNAMIC || hf->rope_original_max_position_embeddings == 0
			? hf->max_position_embeddings
			: hf->rope_original_max_position_embeddings;
	lc->rope_original_max_position_embeddings = context > INT_MAX ? INT_MAX : (int)context;
	/* yarn's optional keys: transformers' defaults where not given */
	if (hf->rope_beta_fast > 0)
		lc->rope_beta_fast = (float)hf->rope_beta_fast;
	if (hf->rope_beta_slow > 0)
		lc->rope_beta_slow = (float)hf->rope_beta_slow;
	lc->rope_attention_factor = (float)hf->rope_attention_factor;
	lc->rope_mscale = (float)hf->rope_mscale;
	lc->rope_mscale_all_dim = (float)hf->rope_mscale_all_dim;
	lc->rope_truncate = hf->rope_truncate;
}

static int sink_fail(const struct train_sink *sink, int rc, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s", sink->last_error(sink->user));
	return rc;
}

int train_model_config(struct train_model *tm, const struct zinf_train_opts *o, char *err,
		       size_t errlen)
{
	char path[4096];
	int rc, n;

	zinf_hf_config_init(&tm->hf);
	if (o->model_dir || o->resume_dir)
		snprintf(path, sizeof(path), "%s/config.json",
			 o->model_dir ? o->model_dir : o->resume_dir);
	else
		snprintf(path, sizeof(path), "%s", o->init_config);
	rc = zinf_hf_config_load_file(&tm->hf, path);
	if (rc) {
		snprintf(err, errlen, "%s", tm->hf.last_error);
		return rc;
	}
	if (tm->hf.attention_dropout > 0)
		zinf_logf(
			ZINF_LOG_WARN,
			"%s: attention_dropout %g: zinf applies no dropout; training runs as at 0",
			path, tm->hf.attention_dropout);
	llama_config_from_hf(&tm->hf, &tm->lc);
	rc = zinf_llama_config_check(&tm->lc, err, errlen);
	if (rc)
		return rc;
	tm->L = tm->lc.num_hidden_layers;
	tm->source_dtype = ZINF_DTYPE_F32;
	n = zinf_llama_names_count(&tm->hf);
	for (int i = 0; i < n; i++) {
		struct zinf_llama_tensor_name tn;

		if (zinf_llama_names_get(&tm->hf, i, &tn) == 0 &&
		    tn.n_elems > tm->largest_tensor_elems)
			tm->largest_tensor_elems = tn.n_elems;
	}
	return 0;
}

int train_model_describe(struct train_model *tm, const struct train_sink *sink, char *err,
			 size_t errlen)
{
	int rc;

	tm->module = calloc((size_t)tm->L + 2, sizeof(*tm->module));
	tm->param = calloc((size_t)tm->L + 2, sizeof(*tm->param));
	if (!tm->module || !tm->param) {
		snprintf(err, errlen, "model: out of memory for %d layers", tm->L);
		return -ENOMEM;
	}
	for (int mod = 0; mod < tm->L + 2; mod++) {
		enum zinf_llama_module_kind kind = train_module_kind(tm, mod);
		char name[64];

		if (kind == ZINF_LLAMA_EMBED)
			snprintf(name, sizeof(name), "model.embed_tokens");
		else if (kind == ZINF_LLAMA_LAYER)
			snprintf(name, sizeof(name), "model.layers.%d", mod - 1);
		else
			snprintf(name, sizeof(name), "model.norm+lm_head");
		rc = sink->module_add(sink->user, name, &tm->module[mod]);
		if (rc)
			return sink_fail(sink, rc, err, errlen);
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
			struct zinf_llama_param_info info;
			uint64_t shape[2];

			tm->param[mod][s] = TRAIN_NO_PARAM;
			if (s >= zinf_llama_module_nparams(kind))
				continue;
			rc = zinf_llama_param_info(&tm->lc, kind, module_layer(mod), s, &info);
			if (rc) {
				snprintf(err, errlen,
					 "model: module %s slot %d: no parameter table", name, s);
				return rc;
			}
			if (!info.present || info.tied)
				continue;
			shape[0] = info.rows;
			shape[1] = info.cols;
			rc = sink->param_add(sink->user, tm->module[mod], info.name,
					     tm->param_dtype, info.cols ? 2 : 1, shape,
					     &tm->param[mod][s]);
			if (rc)
				return sink_fail(sink, rc, err, errlen);
			tm->param_elems += info.elems;
		}
	}
	return 0;
}

static int engine_module_add(void *user, const char *name, uint32_t *module)
{
	return zinf_module_add(user, name, module);
}

static int engine_param_add(void *user, uint32_t module, const char *name, enum zinf_dtype dtype,
			    int ndim, const uint64_t *shape, uint32_t *param)
{
	return zinf_param_add(user, module, name, dtype, ndim, shape, 0, param);
}

static const char *engine_error(void *user)
{
	return zinf_last_error(user);
}

int train_model_register(struct train_model *tm, struct zinf_engine *e, char *err, size_t errlen)
{
	const struct train_sink sink = {engine_module_add, engine_param_add, engine_error, e};
	int rc = train_model_describe(tm, &sink, err, errlen);

	if (!rc && (rc = zinf_engine_finalize(e)) != 0)
		snprintf(err, errlen, "%s", zinf_last_error(e));
	return rc;
}

/* Open the checkpoint in dir and check it has every tensor the config needs, with the
 * right shape. On success *out is open; the caller destroys it. */
static int open_checkpoint(struct train_model *tm, const char *dir, struct zinf_st_reader **out,
			   char *err, size_t errlen)
{
	struct zinf_st_reader *r;
	int rc = zinf_st_reader_create(&r);

	if (rc) {
		snprintf(err, errlen, "%s: out of memory", dir);
		return rc;
	}
	rc = zinf_st_reader_open(r, dir);
	if (rc)
		snprintf(err, errlen, "%s", zinf_st_reader_last_error(r));
	else
		rc = zinf_llama_names_check(&tm->hf, r, err, errlen);
	if (rc) {
		zinf_st_reader_destroy(r);
		return rc;
	}
	*out = r;
	return 0;
}

int train_model_check_seq_len(const struct zinf_hf_config *hf, uint64_t seq_len, char *err,
			      size_t errlen)
{
	uint64_t max = zinf_hf_config_max_positions(hf);

	if (seq_len > TRAIN_MAX_SEQ_LEN) { /* (zinf plan's too, so it plans what trains) */
		snprintf(err, errlen, "--seq-len %llu: at most %u", (unsigned long long)seq_len,
			 TRAIN_MAX_SEQ_LEN);
		return ZINF_ECONFIG;
	}
	if (seq_len >= 1 && seq_len <= max)
		return 0;
	if (max == hf->max_position_embeddings)
		snprintf(err, errlen,
			 "--seq-len %llu: expected 1 to the model's max_position_embeddings %llu",
			 (unsigned long long)seq_len, (unsigned long long)max);
	else
		snprintf(
			err, errlen,
			"--seq-len %llu: expected 1 to the %llu positions the model's %s rope scaling reaches (max_position_embeddings %llu)",
			(unsigned long long)seq_len, (unsigned long long)max,
			zinf_rope_type_name(hf->rope_type),
			(unsigned long long)hf->max_position_embeddings);
	return ZINF_ECONFIG;
}

int train_model_check_checkpoint(struct train_model *tm, const char *dir, char *err, size_t errlen)
{
	struct zinf_st_reader *r;
	const struct zinf_st_tensor_info *t;
	int rc;

	rc = open_checkpoint(tm, dir, &r, err, errlen);
	if (rc)
		return rc;
	/* The checkpoint's dtype: config.json's torch_dtype, else the embedding's. */
	t = zinf_st_reader_find(r, "model.embed_tokens.weight");
	if (tm->hf.has_torch_dtype)
		tm->source_dtype = dtype_of_st(tm->hf.torch_dtype);
	else if (t && t->dtype != ZINF_ST_OTHER) /* (one is refused when it is read) */
		tm->source_dtype = dtype_of_st(t->dtype);
	zinf_st_reader_destroy(r);
	return 0;
}

/* ---- loading ------------------------------------------------------------------------------ */

/* The checkpoint's tensor for module mod's parameter slot s, checked against the config. */
static int find_tensor(struct train_model *tm, struct zinf_st_reader *r, const char *dir, int mod,
		       int s, const struct zinf_st_tensor_info **out, char *err, size_t errlen)
{
	struct zinf_llama_param_info info;
	const struct zinf_st_tensor_info *t;

	zinf_llama_param_info(&tm->lc, train_module_kind(tm, mod), module_layer(mod), s, &info);
	t = zinf_st_reader_find(r, info.name);
	if (!t || t->n_elems != info.elems) {
		snprintf(err, errlen, "%s: tensor %s: missing or wrong size", dir, info.name);
		return ZINF_EFORMAT;
	}
	if (t->dtype == ZINF_ST_OTHER) {
		snprintf(err, errlen,
			 "%s: tensor %s: dtype \"%s\" is not supported (expected BF16, F16 or F32)",
			 zinf_st_reader_file_path(r, t->file), info.name, t->dtype_text);
		return ZINF_EFORMAT;
	}
	*out = t;
	return 0;
}

/* A module's tensors in the checkpoint, for fill_from_checkpoint. */
struct checkpoint_fill {
	struct zinf_st_reader *r;
	const struct zinf_st_tensor_info *t[ZINF_LLAMA_MAX_PARAMS];
};

static int fill_from_checkpoint(void *user, int s, uint64_t first, uint64_t n, void *src, float *m,
				float *v, char *err, size_t errlen)
{
	struct checkpoint_fill *f = user;
	int rc = zinf_st_reader_read_elems(f->r, f->t[s], first, n, src, f->t[s]->dtype);

	(void)m;
	(void)v;
	if (rc)
		snprintf(err, errlen, "%s", zinf_st_reader_last_error(f->r));
	return rc;
}

/* Module by module, a store chunk at a time (train_load_module): each tensor read in its
 * stored dtype, which the engine converts once into the fp32 master and the parameters'
 * dtype. */
static int load_checkpoint(struct train_model *tm, struct zinf_engine *e, const char *dir,
			   char *err, size_t errlen)
{
	struct train_load_batch b = {0};
	struct checkpoint_fill f = {0};
	int rc;

	rc = open_checkpoint(tm, dir, &f.r, err, errlen);
	if (rc)
		return rc;
	for (int mod = 0; mod < tm->L + 2 && !rc; mod++) {
		enum zinf_dtype dt[ZINF_LLAMA_MAX_PARAMS] = {ZINF_DTYPE_F32};
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS && !rc; s++) {
			f.t[s] = NULL;
			if (tm->param[mod][s] == TRAIN_NO_PARAM)
				continue;
			rc = find_tensor(tm, f.r, dir, mod, s, &f.t[s], err, errlen);
			if (!rc)
				dt[s] = dtype_of_st(f.t[s]->dtype);
		}
		if (!rc)
			rc = train_load_module(tm, e, mod, dt, false, fill_from_checkpoint, &f, &b,
					       err, errlen);
	}
	train_load_batch_free(&b);
	zinf_st_reader_destroy(f.r);
	return rc;
}

#define SPLITMIX64_STEP 0x9e3779b97f4a7c15ull

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += SPLITMIX64_STEP);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1): 53 random bits, never 0. */
static double uniform_open(uint64_t *s)
{
	return ((double)(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0;
}

/* Elements [first, first + n) of tensor k's values, from (seed, k) alone, so the init
 * depends neither on the order of loading nor on the pieces: normal(0, std)
 * (Box-Muller: elements 2j and 2j + 1 from draws 2j and 2j + 1, and splitmix64's state
 * before draw d is the start plus d steps) for matrices and embeddings, 1 for norm
 * weights, 0 for biases. */
static void init_tensor(const struct zinf_llama_param_info *info, double std, uint64_t seed,
			uint64_t k, uint64_t first, uint64_t n, float *out)
{
	uint64_t s0 = seed ^ (0x5851f42d4c957f2dull * (k + 1));

	if (!info->cols) {
		float v = strstr(info->name, "norm") ? 1.0f : 0.0f;

		for (uint64_t i = 0; i < n; i++)
			out[i] = v;
		return;
	}
	for (uint64_t i = first & ~1ull; i < first + n; i += 2) {
		uint64_t s = s0 + i * SPLITMIX64_STEP;
		double r = sqrt(-2.0 * log(uniform_open(&s))), a = 2.0 * M_PI * uniform_open(&s);

		if (i >= first)
			out[i - first] = (float)(std * r * cos(a));
		if (i + 1 < first + n)
			out[i + 1 - first] = (float)(std * r * sin(a));
	}
}

/* The seeded init of one module, for fill_random. */
struct random_fill {
	struct train_model *tm;
	int mod;
	uint64_t seed;
};

static int fill_random(void *user, int s, uint64_t first, uint64_t n, void *src, float *m, float *v,
		       char *err, size_t errlen)
{
	struct random_fill *f = user;
	struct zinf_llama_param_info info;

	(void)m;
	(void)v;
	if (!train_model_slot(f->tm, f->mod, s, &info)) {
		snprintf(err, errlen, "model: module %d has no parameter in slot %d", f->mod, s);
		return ZINF_ESTATE;
	}
	/* tensor k counts every slot of the modules before (present or not) */
	init_tensor(&info, f->tm->hf.initializer_range, f->seed,
		    (uint64_t)f->mod * ZINF_LLAMA_MAX_PARAMS + (uint64_t)s, first, n, src);
	return 0;
}

static int load_random(struct train_model *tm, struct zinf_engine *e, uint64_t seed, char *err,
		       size_t errlen)
{
	struct train_load_batch b = {0};
	struct random_fill f = {.tm = tm, .seed = seed};
	enum zinf_dtype dt[ZINF_LLAMA_MAX_PARAMS];
	int rc = 0;

	for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++)
		dt[s] = ZINF_DTYPE_F32;
	for (int mod = 0; mod < tm->L + 2 && !rc; mod++) {
		f.mod = mod;
		rc = train_load_module(tm, e, mod, dt, false, fill_random, &f, &b, err, errlen);
	}
	train_load_batch_free(&b);
	return rc;
}

int train_model_load(struct train_model *tm, struct zinf_engine *e, const struct zinf_train_opts *o,
		     char *err, size_t errlen)
{
	if (o->model_dir)
		return load_checkpoint(tm, e, o->model_dir, err, errlen);
	return load_random(tm, e, o->seed, err, errlen);
}

void train_model_free(struct train_model *tm)
{
	zinf_hf_config_free(&tm->hf);
	free(tm->module);
	free(tm->param);
	tm->module = NULL;
	tm->param = NULL;
}

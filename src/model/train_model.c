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

static enum zinf_dtype dtype_of_st(enum zinf_st_dtype d)
{
	return d == ZINF_ST_BF16  ? ZINF_DTYPE_BF16
	       : d == ZINF_ST_F16 ? ZINF_DTYPE_F16
				  : ZINF_DTYPE_F32;
}

/* The runtime's config from config.json's fields. */
static void llama_config_from_hf(const struct zinf_hf_config *hf, struct zinf_llama_config *lc)
{
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
	lc->rope_llama3 = hf->rope_llama3;
	if (hf->rope_llama3) {
		lc->rope_factor = (float)hf->rope_factor;
		lc->rope_low_freq_factor = (float)hf->rope_low_freq_factor;
		lc->rope_high_freq_factor = (float)hf->rope_high_freq_factor;
		lc->rope_original_max_position_embeddings =
			(int)hf->rope_original_max_position_embeddings;
	}
}

int train_model_config(struct train_model *tm, const struct zinf_train_opts *o, char *err,
		       size_t errlen)
{
	char path[4096];
	int rc, n;

	zinf_hf_config_init(&tm->hf);
	if (o->model_dir)
		snprintf(path, sizeof(path), "%s/config.json", o->model_dir);
	else
		snprintf(path, sizeof(path), "%s", o->init_config);
	rc = zinf_hf_config_load_file(&tm->hf, path);
	if (rc) {
		snprintf(err, errlen, "%s", tm->hf.last_error);
		return rc;
	}
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

int train_model_register(struct train_model *tm, struct zinf_engine *e, char *err, size_t errlen)
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
		rc = zinf_module_add(e, name, &tm->module[mod]);
		if (rc)
			goto out_engine;
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
			rc = zinf_param_add(e, tm->module[mod], info.name, tm->param_dtype,
					    info.cols ? 2 : 1, shape, 0, &tm->param[mod][s]);
			if (rc)
				goto out_engine;
			tm->param_elems += info.elems;
		}
	}
	rc = zinf_engine_finalize(e);
	if (rc)
		goto out_engine;
	return 0;
out_engine:
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
	else if (t)
		tm->source_dtype = dtype_of_st(t->dtype);
	zinf_st_reader_destroy(r);
	return 0;
}

/* ---- loading ------------------------------------------------------------------------------ */

static int load_checkpoint(struct train_model *tm, struct zinf_engine *e, const char *dir,
			   void *buf, char *err, size_t errlen)
{
	struct zinf_st_reader *r;
	int rc;

	rc = open_checkpoint(tm, dir, &r, err, errlen);
	if (rc)
		return rc;
	for (int mod = 0; mod < tm->L + 2; mod++) {
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
			struct zinf_llama_param_info info;
			const struct zinf_st_tensor_info *t;
			uint32_t p = tm->param[mod][s];

			if (p == TRAIN_NO_PARAM)
				continue;
			zinf_llama_param_info(&tm->lc, train_module_kind(tm, mod),
					      module_layer(mod), s, &info);
			t = zinf_st_reader_find(r, info.name);
			if (!t || t->n_elems != info.elems) {
				snprintf(err, errlen, "%s: tensor %s: missing or wrong size", dir,
					 info.name);
				rc = ZINF_EFORMAT;
				goto out_reader;
			}
			/* Read in the stored dtype: the engine converts once into fp32 master
			 * and the parameter's dtype. */
			rc = zinf_st_reader_read(r, t, buf, t->dtype);
			if (rc) {
				snprintf(err, errlen, "%s", zinf_st_reader_last_error(r));
				goto out_reader;
			}
			rc = zinf_param_load(e, p, buf, dtype_of_st(t->dtype));
			if (rc) {
				snprintf(err, errlen, "%s", zinf_last_error(e));
				goto out_reader;
			}
		}
	}
out_reader:
	zinf_st_reader_destroy(r);
	return rc;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1): 53 random bits, never 0. */
static double uniform_open(uint64_t *s)
{
	return ((double)(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0;
}

/* Tensor k's values from (seed, k) alone, so the init does not depend on the order of
 * loading: normal(0, 0.02) (Box-Muller) for matrices and embeddings, 1 for norm weights, 0
 * for biases. */
static void init_tensor(const struct zinf_llama_param_info *info, uint64_t seed, uint64_t k,
			float *out)
{
	uint64_t s = seed ^ (0x5851f42d4c957f2dull * (k + 1));

	if (!info->cols) {
		float v = strstr(info->name, "norm") ? 1.0f : 0.0f;

		for (uint64_t i = 0; i < info->elems; i++)
			out[i] = v;
		return;
	}
	for (uint64_t i = 0; i < info->elems; i += 2) {
		double r = sqrt(-2.0 * log(uniform_open(&s))), a = 2.0 * M_PI * uniform_open(&s);

		out[i] = (float)(0.02 * r * cos(a));
		if (i + 1 < info->elems)
			out[i + 1] = (float)(0.02 * r * sin(a));
	}
}

static int load_random(struct train_model *tm, struct zinf_engine *e, uint64_t seed, float *buf,
		       char *err, size_t errlen)
{
	uint64_t k = 0;
	int rc;

	for (int mod = 0; mod < tm->L + 2; mod++) {
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++, k++) {
			struct zinf_llama_param_info info;
			uint32_t p = tm->param[mod][s];

			if (p == TRAIN_NO_PARAM)
				continue;
			zinf_llama_param_info(&tm->lc, train_module_kind(tm, mod),
					      module_layer(mod), s, &info);
			init_tensor(&info, seed, k, buf);
			rc = zinf_param_load(e, p, buf, ZINF_DTYPE_F32);
			if (rc) {
				snprintf(err, errlen, "%s", zinf_last_error(e));
				return rc;
			}
		}
	}
	return 0;
}

int train_model_load(struct train_model *tm, struct zinf_engine *e, const struct zinf_train_opts *o,
		     char *err, size_t errlen)
{
	void *buf = malloc(tm->largest_tensor_elems * sizeof(float));
	int rc;

	if (!buf) {
		snprintf(err, errlen, "model: out of memory for a tensor of %llu elements",
			 (unsigned long long)tm->largest_tensor_elems);
		return -ENOMEM;
	}
	if (o->model_dir)
		rc = load_checkpoint(tm, e, o->model_dir, buf, err, errlen);
	else
		rc = load_random(tm, e, o->seed, buf, err, errlen);
	free(buf);
	return rc;
}

void train_model_free(struct train_model *tm)
{
	zinf_hf_config_free(&tm->hf);
	free(tm->module);
	free(tm->param);
	tm->module = NULL;
	tm->param = NULL;
}

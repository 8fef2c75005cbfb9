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

/* One module's tensors, gathered for zinf_module_load: the sources in registration
 * order, carved out of one buffer sized for the largest module. */
struct module_srcs {
	char *buf;
	uint64_t used;
	uint32_t n;
	const void *src[ZINF_LLAMA_MAX_PARAMS];
	enum zinf_dtype dtype[ZINF_LLAMA_MAX_PARAMS];
};

static void *module_srcs_add(struct module_srcs *ms, uint64_t bytes, enum zinf_dtype dtype)
{
	void *p = ms->buf + ms->used;

	ms->src[ms->n] = p;
	ms->dtype[ms->n++] = dtype;
	ms->used += (bytes + 63) / 64 * 64;
	return p;
}

static int module_srcs_load(struct module_srcs *ms, struct zinf_engine *e, uint32_t module,
			    char *err, size_t errlen)
{
	int rc = zinf_module_load(e, module, ms->n, ms->src, ms->dtype);

	if (rc)
		snprintf(err, errlen, "%s", zinf_last_error(e));
	ms->n = 0;
	ms->used = 0;
	return rc;
}

uint64_t train_load_piece_elems = UINT64_MAX;

bool train_module_loads_whole(const struct train_model *tm, int mod)
{
	uint64_t elems = 0, esize = tm->param_dtype == ZINF_DTYPE_F32 ? 4 : 2;

	for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
		struct zinf_llama_param_info info;
		if (train_model_slot(tm, mod, s, &info))
			elems += info.elems;
	}
	return elems * esize <= tm->chunk_bytes && elems <= train_load_piece_elems;
}

uint64_t train_load_piece(const struct zinf_engine *e, uint32_t param, uint64_t first_elem)
{
	uint64_t n = zinf_param_chunk_elems(e, param, first_elem);

	return n < train_load_piece_elems ? n : train_load_piece_elems;
}

/* Grow *buf to hold bytes. */
static int load_room(char **buf, uint64_t *have, uint64_t bytes, char *err, size_t errlen)
{
	char *nb;

	if (bytes <= *have)
		return 0;
	nb = realloc(*buf, bytes);
	if (!nb) {
		snprintf(err, errlen, "model: out of memory for %llu bytes of weights to load",
			 (unsigned long long)bytes);
		return -ENOMEM;
	}
	*buf = nb;
	*have = bytes;
	return 0;
}

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
	*out = t;
	return 0;
}

/* Tensor t (engine parameter pid) in pieces of train_load_piece() elements, each read in
 * its stored dtype and handed to the engine (zinf_param_load_range, zero moments). */
static int load_tensor_pieces(struct zinf_st_reader *r, struct zinf_engine *e, uint32_t pid,
			      const struct zinf_st_tensor_info *t, char **buf, uint64_t *have,
			      char *err, size_t errlen)
{
	uint64_t esize = t->nbytes / t->n_elems;

	for (uint64_t first = 0; first < t->n_elems;) {
		uint64_t n = train_load_piece(e, pid, first);
		int rc = load_room(buf, have, n * esize, err, errlen);
		if (!rc && !n) {
			snprintf(err, errlen, "model: parameter %u has no element %llu", pid,
				 (unsigned long long)first);
			rc = ZINF_ESTATE;
		}
		if (!rc) {
			rc = zinf_st_reader_read_elems(r, t, first, n, *buf, t->dtype);
			if (rc)
				snprintf(err, errlen, "%s", zinf_st_reader_last_error(r));
		}
		if (!rc) {
			rc = zinf_param_load_range(e, pid, first, n, *buf, dtype_of_st(t->dtype),
						   NULL, NULL);
			if (rc)
				snprintf(err, errlen, "%s", zinf_last_error(e));
		}
		if (rc)
			return rc;
		first += n;
	}
	return 0;
}

/* Module by module: a module that loads whole has its tensors read in their stored dtype
 * and handed to the engine at once, which converts them once into the fp32 master and
 * the parameters' dtype; a larger one goes tensor by tensor, in pieces. */
static int load_checkpoint(struct train_model *tm, struct zinf_engine *e, const char *dir,
			   char *err, size_t errlen)
{
	struct module_srcs ms = {0};
	struct zinf_st_reader *r;
	uint64_t have = 0;
	int rc;

	rc = open_checkpoint(tm, dir, &r, err, errlen);
	if (rc)
		return rc;
	for (int mod = 0; mod < tm->L + 2 && !rc; mod++) {
		const struct zinf_st_tensor_info *t[ZINF_LLAMA_MAX_PARAMS] = {NULL};
		bool whole = train_module_loads_whole(tm, mod);
		uint64_t bytes = 0;
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS && !rc; s++) {
			if (tm->param[mod][s] == TRAIN_NO_PARAM)
				continue;
			rc = find_tensor(tm, r, dir, mod, s, &t[s], err, errlen);
			if (!rc)
				bytes += (t[s]->nbytes + 63) / 64 * 64;
		}
		if (!rc && whole)
			rc = load_room(&ms.buf, &have, bytes, err, errlen);
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS && !rc; s++) {
			if (!t[s])
				continue;
			if (!whole) {
				rc = load_tensor_pieces(r, e, tm->param[mod][s], t[s], &ms.buf,
							&have, err, errlen);
				continue;
			}
			rc = zinf_st_reader_read(
				r, t[s],
				module_srcs_add(&ms, t[s]->nbytes, dtype_of_st(t[s]->dtype)),
				t[s]->dtype);
			if (rc)
				snprintf(err, errlen, "%s", zinf_st_reader_last_error(r));
		}
		if (!rc && whole)
			rc = module_srcs_load(&ms, e, tm->module[mod], err, errlen);
	}
	free(ms.buf);
	zinf_st_reader_destroy(r);
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
 * depends neither on the order of loading nor on the pieces: normal(0, 0.02)
 * (Box-Muller: elements 2j and 2j + 1 from draws 2j and 2j + 1, and splitmix64's state
 * before draw d is the start plus d steps) for matrices and embeddings, 1 for norm
 * weights, 0 for biases. */
static void init_tensor(const struct zinf_llama_param_info *info, uint64_t seed, uint64_t k,
			uint64_t first, uint64_t n, float *out)
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
			out[i - first] = (float)(0.02 * r * cos(a));
		if (i + 1 < first + n)
			out[i + 1 - first] = (float)(0.02 * r * sin(a));
	}
}

/* Parameter pid (tensor k) initialised in pieces of train_load_piece() elements. */
static int random_pieces(struct zinf_engine *e, uint32_t pid,
			 const struct zinf_llama_param_info *info, uint64_t seed, uint64_t k,
			 char **buf, uint64_t *have, char *err, size_t errlen)
{
	for (uint64_t first = 0; first < info->elems;) {
		uint64_t n = train_load_piece(e, pid, first);
		int rc = load_room(buf, have, n * sizeof(float), err, errlen);
		if (!rc && !n) {
			snprintf(err, errlen, "model: parameter %u has no element %llu", pid,
				 (unsigned long long)first);
			rc = ZINF_ESTATE;
		}
		if (rc)
			return rc;
		init_tensor(info, seed, k, first, n, (float *)*buf);
		rc = zinf_param_load_range(e, pid, first, n, *buf, ZINF_DTYPE_F32, NULL, NULL);
		if (rc) {
			snprintf(err, errlen, "%s", zinf_last_error(e));
			return rc;
		}
		first += n;
	}
	return 0;
}

static int load_random(struct train_model *tm, struct zinf_engine *e, uint64_t seed, char *err,
		       size_t errlen)
{
	struct module_srcs ms = {0};
	uint64_t have = 0, k = 0;
	int rc = 0;

	for (int mod = 0; mod < tm->L + 2 && !rc; mod++) {
		bool whole = train_module_loads_whole(tm, mod);
		uint64_t bytes = 0;
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
			struct zinf_llama_param_info info;
			if (train_model_slot(tm, mod, s, &info))
				bytes += (info.elems * sizeof(float) + 63) / 64 * 64;
		}
		if (whole)
			rc = load_room(&ms.buf, &have, bytes, err, errlen);
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS && !rc; s++, k++) {
			struct zinf_llama_param_info info;
			if (!train_model_slot(tm, mod, s, &info))
				continue;
			if (!whole) {
				rc = random_pieces(e, tm->param[mod][s], &info, seed, k, &ms.buf,
						   &have, err, errlen);
				continue;
			}
			init_tensor(
				&info, seed, k, 0, info.elems,
				module_srcs_add(&ms, info.elems * sizeof(float), ZINF_DTYPE_F32));
		}
		if (!rc && whole)
			rc = module_srcs_load(&ms, e, tm->module[mod], err, errlen);
	}
	free(ms.buf);
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

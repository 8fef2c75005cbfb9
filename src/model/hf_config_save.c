/*
 * Hugging Face config.json saved (see hf_config.h): the fields zinf reads, in the form
 * they were read in, over the loaded JSON so that keys zinf does not interpret survive,
 * with the save's torch_dtype; written through a temporary file, fsync and rename.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "hf_config_internal.h"
#include "safetensors_internal.h"
#include "zinf/config.h" /* zinf_strtod */
#include "zinf/error.h"

static bool set_item(cJSON *obj, const char *key, cJSON *item)
{
	if (!item)
		return false;
	if (cJSON_GetObjectItemCaseSensitive(obj, key))
		return cJSON_ReplaceItemInObjectCaseSensitive(obj, key, item);
	return cJSON_AddItemToObject(obj, key, item);
}

/* key = v: a number the loaded file wrote as v keeps its text (hf_config.c keeps each
 * number's as read); another written as a float (32.0, 1e-05) stays one (older
 * transformers releases refuse an integer rope factor). */
static bool set_num(cJSON *obj, const char *key, double v)
{
	const cJSON *was = cJSON_GetObjectItemCaseSensitive(obj, key);
	char text[40];

	if (cJSON_IsRaw(was) && zinf_strtod(was->valuestring, NULL) == v)
		return true;
	if (cJSON_IsRaw(was) && strpbrk(was->valuestring, ".eE") && isfinite(v) && v == floor(v) &&
	    fabs(v) < 1e15) {
		snprintf(text, sizeof(text), "%.0f.0", v); /* (no decimal point of the locale's) */
		return set_item(obj, key, cJSON_CreateRaw(text));
	}
	return set_item(obj, key, cJSON_CreateNumber(v));
}

/* yarn's optional keys, written where they were given (0: not given) */
static bool set_yarn(cJSON *r, const struct zinf_hf_config *cfg)
{
	const struct {
		const char *key;
		double v;
	} opt[] = {
		{"original_max_position_embeddings",
		 (double)cfg->rope_original_max_position_embeddings},
		{"beta_fast", cfg->rope_beta_fast},
		{"beta_slow", cfg->rope_beta_slow},
		{"attention_factor", cfg->rope_attention_factor},
		{"mscale", cfg->rope_mscale},
		{"mscale_all_dim", cfg->rope_mscale_all_dim},
	};
	bool ok = true;

	/* the struct says what holds: a key read earlier but no longer set goes */
	for (size_t i = 0; ok && i < sizeof(opt) / sizeof(opt[0]); i++) {
		if (opt[i].v > 0)
			ok = set_num(r, opt[i].key, opt[i].v);
		else
			cJSON_DeleteItemFromObjectCaseSensitive(r, opt[i].key);
	}
	cJSON_DeleteItemFromObjectCaseSensitive(r, "truncate");
	if (ok && !cfg->rope_truncate)
		ok = set_item(r, "truncate", cJSON_CreateFalse());
	return ok;
}

/* The rotary settings in the form they were read in: transformers 5's rope_parameters
 * (with rope_theta), or rope_scaling (null without scaling). Written over the object they
 * were read from, so keys zinf does not read survive, and under the type key it used: a
 * legacy "type" stays "type" (older transformers releases read only that key). */
static cJSON *rope_json(const struct zinf_hf_config *cfg)
{
	const char *key = cfg->rope_parameters ? "rope_parameters" : "rope_scaling";
	const cJSON *old = cfg->json ? cJSON_GetObjectItemCaseSensitive(cfg->json, key) : NULL;
	const char *type_key;
	cJSON *r;
	bool ok;

	if (!cfg->rope_parameters && cfg->rope_type == ZINF_ROPE_DEFAULT)
		return cJSON_CreateNull();
	r = cJSON_IsObject(old) ? cJSON_Duplicate(old, 1) : cJSON_CreateObject();
	if (!r)
		return NULL;
	type_key = cJSON_GetObjectItemCaseSensitive(r, "type") &&
				   !cJSON_GetObjectItemCaseSensitive(r, "rope_type")
			   ? "type"
			   : "rope_type";
	ok = set_item(r, type_key, cJSON_CreateString(zinf_rope_type_name(cfg->rope_type)));
	if (cfg->rope_parameters)
		ok = ok && set_num(r, "rope_theta", cfg->rope_theta);
	if (cfg->rope_type != ZINF_ROPE_DEFAULT)
		ok = ok && set_num(r, "factor", cfg->rope_factor);
	if (cfg->rope_type == ZINF_ROPE_LLAMA3) {
		ok = ok && set_num(r, "high_freq_factor", cfg->rope_high_freq_factor);
		ok = ok && set_num(r, "low_freq_factor", cfg->rope_low_freq_factor);
		ok = ok && set_num(r, "original_max_position_embeddings",
				   (double)cfg->rope_original_max_position_embeddings);
	}
	if (cfg->rope_type == ZINF_ROPE_YARN)
		ok = ok && set_yarn(r, cfg);
	if (!ok) {
		cJSON_Delete(r);
		return NULL;
	}
	return r;
}

static cJSON *config_json(const struct zinf_hf_config *cfg, enum zinf_st_dtype dtype)
{
	cJSON *o = cfg->json ? cJSON_Duplicate(cfg->json, 1) : cJSON_CreateObject();
	bool ok;

	if (!o)
		return NULL;
	ok = set_item(o, "model_type",
		      cJSON_CreateString(zinf_hf_model_type_name(cfg->model_type)));
	if (ok && !cJSON_GetObjectItemCaseSensitive(o, "architectures")) {
		const char *arch = hf_architecture(cfg->model_type);

		ok = set_item(o, "architectures", cJSON_CreateStringArray(&arch, 1));
	}
	ok = ok && set_num(o, "vocab_size", (double)cfg->vocab_size);
	ok = ok && set_num(o, "hidden_size", (double)cfg->hidden_size);
	ok = ok && set_num(o, "intermediate_size", (double)cfg->intermediate_size);
	ok = ok && set_num(o, "num_hidden_layers", (double)cfg->num_hidden_layers);
	ok = ok && set_num(o, "num_attention_heads", (double)cfg->num_attention_heads);
	ok = ok && set_num(o, "num_key_value_heads", (double)cfg->num_key_value_heads);
	ok = ok && set_num(o, "head_dim", (double)cfg->head_dim);
	ok = ok && set_num(o, "max_position_embeddings", (double)cfg->max_position_embeddings);
	ok = ok && set_num(o, "rms_norm_eps", cfg->rms_norm_eps);
	/* the rotary settings in the form they were read in */
	if (cfg->rope_parameters) {
		ok = ok && set_item(o, "rope_parameters", rope_json(cfg));
	} else {
		ok = ok && set_num(o, "rope_theta", cfg->rope_theta);
		ok = ok && set_item(o, "rope_scaling", rope_json(cfg));
	}
	ok = ok && set_item(o, "tie_word_embeddings", cJSON_CreateBool(cfg->tie_word_embeddings));
	ok = ok && set_item(o, "hidden_act", cJSON_CreateString("silu"));
	if (cfg->model_type == ZINF_HF_LLAMA) {
		ok = ok && set_item(o, "attention_bias", cJSON_CreateBool(cfg->attention_bias));
		ok = ok && set_item(o, "mlp_bias", cJSON_CreateBool(cfg->mlp_bias));
	}
	/* qwen2 keeps its window size while use_sliding_window is false */
	if (cfg->model_type == ZINF_HF_MISTRAL ||
	    (cfg->model_type == ZINF_HF_QWEN2 &&
	     (cfg->sliding_window || !cJSON_GetObjectItemCaseSensitive(o, "sliding_window"))))
		ok = ok &&
		     set_item(o, "sliding_window",
			      cfg->sliding_window ? cJSON_CreateNumber((double)cfg->sliding_window)
						  : cJSON_CreateNull());
	if (cfg->model_type == ZINF_HF_QWEN2) {
		ok = ok &&
		     set_item(o, "use_sliding_window", cJSON_CreateBool(cfg->sliding_window != 0));
		ok = ok && set_num(o, "max_window_layers", (double)cfg->max_window_layers);
	}
	if (ok && cJSON_GetObjectItemCaseSensitive(o, "dtype"))
		ok = set_item(o, "dtype", cJSON_CreateString(zinf_hf_torch_dtype_name(dtype)));
	ok = ok && set_item(o, "torch_dtype", cJSON_CreateString(zinf_hf_torch_dtype_name(dtype)));
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

int zinf_hf_config_save(struct zinf_hf_config *cfg, const char *path, enum zinf_st_dtype dtype)
{
	cJSON *o;
	char *text;
	int rc;

	if (!path)
		return hf_fail(cfg, -EINVAL, "config", "save: no path");
	rc = zinf_hf_config_validate(cfg, path);
	if (rc < 0)
		return rc;
	if (zinf_st_dtype_size(dtype) == 0)
		return hf_fail(cfg, -EINVAL, path, "torch_dtype: invalid dtype %d", (int)dtype);
	o = config_json(cfg, dtype);
	text = o ? cJSON_Print(o) : NULL;
	cJSON_Delete(o);
	if (!text)
		return hf_fail(cfg, -ENOMEM, path, "no memory to build the JSON");
	{
		size_t n = strlen(text);
		char *t2 = realloc(text, n + 2);

		if (!t2) {
			free(text);
			return hf_fail(cfg, -ENOMEM, path, "no memory");
		}
		text = t2;
		text[n] = '\n';
		text[n + 1] = '\0';
	}
	rc = st_write_file_atomic(path, text, strlen(text));
	free(text);
	if (rc < 0)
		return hf_fail(cfg, rc, path, "write failed: %s", zinf_strerror(rc));
	text = st_path_dir(path); /* (the file is in place; the directory's sync may fail) */
	if (text)
		st_fsync_dir(text);
	free(text);
	return 0;
}

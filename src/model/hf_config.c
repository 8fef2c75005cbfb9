/*
 * Hugging Face config.json for llama, mistral and qwen2 (see hf_config.h): load with
 * per-architecture defaults and strict checks with one-line errors. Saving is
 * hf_config_save.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "hf_config.h"
#include "hf_config_internal.h"
#include "zinf/config.h" /* zinf_json_raw_control */
#include "zinf/error.h"
#include "zinf/log.h"

#define HF_MAX_DIM (1ull << 24)	  /* vocab, hidden, intermediate: far above any model */
#define HF_MAX_COUNT (1ull << 16) /* layers and heads */
#define HF_MAX_FILE_BYTES (16u << 20)

int hf_fail(struct zinf_hf_config *cfg, int code, const char *name, const char *fmt, ...)
{
	char msg[ZINF_HF_ERR_BYTES - 320];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(cfg->last_error, sizeof(cfg->last_error), "%.300s: %s", name, msg);
	zinf_logf(ZINF_LOG_DEBUG, "%s", cfg->last_error);
	return code;
}

const char *zinf_hf_model_type_name(enum zinf_hf_model_type type)
{
	switch (type) {
	case ZINF_HF_LLAMA:
		return "llama";
	case ZINF_HF_MISTRAL:
		return "mistral";
	case ZINF_HF_QWEN2:
		return "qwen2";
	}
	return "?";
}

const char *zinf_hf_torch_dtype_name(enum zinf_st_dtype dtype)
{
	switch (dtype) {
	case ZINF_ST_BF16:
		return "bfloat16";
	case ZINF_ST_F16:
		return "float16";
	case ZINF_ST_F32:
		return "float32";
	case ZINF_ST_OTHER:
		break;
	}
	return "?";
}

const char *hf_architecture(enum zinf_hf_model_type type)
{
	switch (type) {
	case ZINF_HF_LLAMA:
		return "LlamaForCausalLM";
	case ZINF_HF_MISTRAL:
		return "MistralForCausalLM";
	case ZINF_HF_QWEN2:
		return "Qwen2ForCausalLM";
	}
	return "?";
}

/* The defaults of transformers' LlamaConfig / MistralConfig / Qwen2Config. */
static void set_type_defaults(struct zinf_hf_config *cfg, enum zinf_hf_model_type type)
{
	cfg->model_type = type;
	cfg->rms_norm_eps = 1e-6;
	cfg->initializer_range = 0.02;
	cfg->attention_dropout = 0.0;
	cfg->rope_theta = 10000.0;
	cfg->rope_truncate = true;
	cfg->tie_word_embeddings = false;
	cfg->attention_bias = type == ZINF_HF_QWEN2;
	cfg->attention_out_bias = false;
	cfg->mlp_bias = false;
	cfg->sliding_window = 0;
	cfg->max_window_layers = 0;
	switch (type) {
	case ZINF_HF_LLAMA:
		cfg->max_position_embeddings = 2048;
		break;
	case ZINF_HF_MISTRAL:
		cfg->max_position_embeddings = 4096 * 32;
		cfg->sliding_window = 4096;
		break;
	case ZINF_HF_QWEN2: /* Qwen2Config: the window (4096) is on with use_sliding_window */
		cfg->max_position_embeddings = 32768;
		cfg->sliding_window = 4096;
		cfg->max_window_layers = 28;
		break;
	}
}

void zinf_hf_config_init(struct zinf_hf_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	set_type_defaults(cfg, ZINF_HF_LLAMA);
	cfg->torch_dtype = ZINF_ST_F32;
}

void zinf_hf_config_free(struct zinf_hf_config *cfg)
{
	if (!cfg)
		return;
	cJSON_Delete(cfg->json);
	zinf_hf_config_init(cfg);
}

/* ---- typed field readers: absent or null keep the default ---------------------------- */

bool hf_absent(const cJSON *item)
{
	return !item || cJSON_IsNull(item);
}

int hf_get_uint(struct zinf_hf_config *cfg, const char *name, const cJSON *root, const char *prefix,
		const char *key, uint64_t max, uint64_t *out)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
	double d;

	if (hf_absent(item))
		return 0;
	d = cJSON_IsNumber(item) ? item->valuedouble : -1.0;
	if (!cJSON_IsNumber(item) || !(d >= 1.0) || d > (double)max || d != floor(d))
		return hf_fail(cfg, ZINF_ECONFIG, name, "%s%s: %s is not an integer in [1, %llu]",
			       prefix, key, cJSON_IsNumber(item) ? "value" : "non-number",
			       (unsigned long long)max);
	*out = (uint64_t)d;
	return 0;
}

/* An integer in [0, max]; absent or null keep the default. */
static int get_count(struct zinf_hf_config *cfg, const char *name, const cJSON *root,
		     const char *key, uint64_t max, uint64_t *out)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
	double d;

	if (hf_absent(item))
		return 0;
	d = cJSON_IsNumber(item) ? item->valuedouble : -1.0;
	if (!cJSON_IsNumber(item) || !(d >= 0.0) || d > (double)max || d != floor(d))
		return hf_fail(cfg, ZINF_ECONFIG, name, "%s: %s is not an integer in [0, %llu]",
			       key, cJSON_IsNumber(item) ? "value" : "non-number",
			       (unsigned long long)max);
	*out = (uint64_t)d;
	return 0;
}

int hf_get_positive(struct zinf_hf_config *cfg, const char *name, const cJSON *root,
		    const char *prefix, const char *key, double *out)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);

	if (hf_absent(item))
		return 0;
	/* the runtimes compute in float: a value it rounds to 0 or infinity is no value */
	if (!cJSON_IsNumber(item) || !((float)item->valuedouble > 0.0f) ||
	    !isfinite((float)item->valuedouble))
		return hf_fail(cfg, ZINF_ECONFIG, name,
			       "%s%s: expected a positive number within float range (%g to %g)",
			       prefix, key, (double)FLT_MIN, (double)FLT_MAX);
	*out = item->valuedouble;
	return 0;
}

/* attention_dropout: a probability below 1. */
static int get_dropout(struct zinf_hf_config *cfg, const char *name, const cJSON *root)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, "attention_dropout");

	if (hf_absent(item))
		return 0;
	if (!cJSON_IsNumber(item) || !(item->valuedouble >= 0.0 && item->valuedouble < 1.0))
		return hf_fail(
			cfg, ZINF_ECONFIG, name,
			"attention_dropout: expected a number from 0 up to (not including) 1");
	cfg->attention_dropout = item->valuedouble;
	return 0;
}

static int get_bool(struct zinf_hf_config *cfg, const char *name, const cJSON *root,
		    const char *key, bool *out)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);

	if (hf_absent(item))
		return 0;
	if (!cJSON_IsBool(item))
		return hf_fail(cfg, ZINF_ECONFIG, name, "%s: expected true or false", key);
	*out = cJSON_IsTrue(item);
	return 0;
}

static int parse_model_type(struct zinf_hf_config *cfg, const char *name, const cJSON *root)
{
	static const enum zinf_hf_model_type types[] = {ZINF_HF_LLAMA, ZINF_HF_MISTRAL,
							ZINF_HF_QWEN2};
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, "model_type");

	if (!cJSON_IsString(item))
		return hf_fail(
			cfg, ZINF_ECONFIG, name,
			"model_type: missing or not a string (expected \"llama\", \"mistral\" or \"qwen2\")");
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (strcmp(item->valuestring, zinf_hf_model_type_name(types[i])) == 0) {
			set_type_defaults(cfg, types[i]);
			return 0;
		}
	}
	return hf_fail(
		cfg, ZINF_ECONFIG, name,
		"model_type: \"%.40s\" is not supported (expected \"llama\", \"mistral\" or \"qwen2\")",
		item->valuestring);
}

static int parse_dtype(struct zinf_hf_config *cfg, const char *name, const cJSON *root)
{
	static const enum zinf_st_dtype all[] = {ZINF_ST_BF16, ZINF_ST_F16, ZINF_ST_F32};
	const char *key = "torch_dtype";
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);

	if (hf_absent(item)) {
		key = "dtype"; /* the newer spelling */
		item = cJSON_GetObjectItemCaseSensitive(root, key);
	}
	if (hf_absent(item))
		return 0;
	for (size_t i = 0; cJSON_IsString(item) && i < sizeof(all) / sizeof(all[0]); i++) {
		if (strcmp(item->valuestring, zinf_hf_torch_dtype_name(all[i])) == 0) {
			cfg->torch_dtype = all[i];
			cfg->has_torch_dtype = true;
			return 0;
		}
	}
	return hf_fail(
		cfg, ZINF_ECONFIG, name,
		"%s: %s%.40s%s is not supported (expected \"bfloat16\", \"float16\" or \"float32\")",
		key, cJSON_IsString(item) ? "\"" : "",
		cJSON_IsString(item) ? item->valuestring : "a non-string",
		cJSON_IsString(item) ? "\"" : "");
}

static int parse_sliding_window(struct zinf_hf_config *cfg, const char *name, const cJSON *root)
{
	const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
	bool use = cfg->model_type == ZINF_HF_MISTRAL;
	int rc;

	if (cfg->model_type == ZINF_HF_LLAMA)
		return 0;
	if (cfg->model_type == ZINF_HF_QWEN2) {
		rc = get_bool(cfg, name, root, "use_sliding_window", &use);
		if (rc == 0)
			rc = get_count(cfg, name, root, "max_window_layers", HF_MAX_COUNT,
				       &cfg->max_window_layers);
		if (rc < 0)
			return rc;
	}
	if (sw && cJSON_IsNull(sw))
		cfg->sliding_window = 0;
	else if (sw) {
		rc = hf_get_uint(cfg, name, root, "", "sliding_window", HF_MAX_POSITIONS,
				 &cfg->sliding_window);
		if (rc < 0)
			return rc;
	}
	if (!use)
		cfg->sliding_window = 0;
	return 0;
}

/* The attention kind of layer l the window fields imply, as Hugging Face names it. */
static const char *layer_type(const struct zinf_hf_config *cfg, uint64_t l)
{
	return cfg->sliding_window && l >= cfg->max_window_layers ? "sliding_attention"
								  : "full_attention";
}

/* layer_types (newer transformers write it): accepted when it says what the window fields
 * imply, refused otherwise, since zinf derives each layer's attention from those. */
static int check_layer_types(struct zinf_hf_config *cfg, const char *name, const cJSON *root)
{
	const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
	const cJSON *item;
	uint64_t l = 0;

	if (hf_absent(lt))
		return 0;
	if (!cJSON_IsArray(lt) || (uint64_t)cJSON_GetArraySize(lt) != cfg->num_hidden_layers)
		return hf_fail(cfg, ZINF_ECONFIG, name,
			       "layer_types: expected an array of num_hidden_layers = %llu strings",
			       (unsigned long long)cfg->num_hidden_layers);
	cJSON_ArrayForEach(item, lt)
	{
		const char *want = layer_type(cfg, l);

		if (!cJSON_IsString(item) || strcmp(item->valuestring, want) != 0)
			return hf_fail(
				cfg, ZINF_ECONFIG, name,
				"layer_types[%llu]: %s%.40s%s is not supported (expected \"%s\", as sliding_window and max_window_layers imply)",
				(unsigned long long)l, cJSON_IsString(item) ? "\"" : "",
				cJSON_IsString(item) ? item->valuestring : "a non-string",
				cJSON_IsString(item) ? "\"" : "", want);
		l++;
	}
	return 0;
}

/* Keys whose values zinf cannot honour: refused rather than silently ignored. */
static int check_unsupported(struct zinf_hf_config *cfg, const char *name, const cJSON *root)
{
	const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
	bool mlp_bias = false;
	int rc;

	if (!hf_absent(act) && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
		return hf_fail(cfg, ZINF_ECONFIG, name,
			       "hidden_act: only \"silu\" is supported (SwiGLU MLP)");
	rc = get_bool(cfg, name, root, "mlp_bias", &mlp_bias);
	if (rc < 0)
		return rc;
	/* LlamaMLP honours mlp_bias; MistralMLP and Qwen2MLP never have biases */
	if (mlp_bias && cfg->model_type != ZINF_HF_LLAMA)
		return hf_fail(cfg, ZINF_ECONFIG, name,
			       "mlp_bias: true is not supported for model_type %s (expected false)",
			       zinf_hf_model_type_name(cfg->model_type));
	cfg->mlp_bias = mlp_bias;
	return 0;
}

static int by_key(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* zinf_json_duplicate_key below node, whose path is prefix. Each object's keys are
 * sorted (n log n: a config of a million keys is checked in a moment). */
static int duplicate_under(const cJSON *node, const char *prefix, char *dup, size_t len)
{
	const cJSON **keys = NULL;
	size_t n = 0;
	int rc = 0;

	for (const cJSON *c = node->child; c; c = c->next)
		n++;
	if (cJSON_IsObject(node) && n > 1) {
		size_t k = 0;
		keys = malloc(n * sizeof(*keys));
		if (!keys)
			return -ENOMEM;
		for (const cJSON *c = node->child; c; c = c->next)
			keys[k++] = c;
		qsort(keys, n, sizeof(*keys), by_key);
		for (k = 1; k < n && !rc; k++)
			if (strcmp(keys[k - 1]->string, keys[k]->string) == 0) {
				snprintf(dup, len, "%s%s", prefix, keys[k]->string);
				rc = 1;
			}
		free(keys);
	}
	for (const cJSON *c = node->child; c && !rc; c = c->next)
		if (c->child) {
			char sub[512];
			snprintf(sub, sizeof(sub), "%s%s%s", prefix,
				 cJSON_IsObject(node) ? c->string : "[]", ".");
			rc = duplicate_under(c, sub, dup, len);
		}
	return rc;
}

int zinf_json_duplicate_key(const struct cJSON *root, char *dup, size_t len)
{
	return duplicate_under(root, "", dup, len);
}

static int parse_fields(struct zinf_hf_config *cfg, const char *name, const cJSON *root)
{
	static const struct {
		const char *key;
		size_t off;
		uint64_t max;
	} uints[] = {
		{"vocab_size", offsetof(struct zinf_hf_config, vocab_size), HF_MAX_DIM},
		{"hidden_size", offsetof(struct zinf_hf_config, hidden_size), HF_MAX_DIM},
		{"intermediate_size", offsetof(struct zinf_hf_config, intermediate_size),
		 HF_MAX_DIM},
		{"num_hidden_layers", offsetof(struct zinf_hf_config, num_hidden_layers),
		 HF_MAX_COUNT},
		{"num_attention_heads", offsetof(struct zinf_hf_config, num_attention_heads),
		 HF_MAX_COUNT},
		{"num_key_value_heads", offsetof(struct zinf_hf_config, num_key_value_heads),
		 HF_MAX_COUNT},
		{"head_dim", offsetof(struct zinf_hf_config, head_dim), HF_MAX_DIM},
		{"max_position_embeddings",
		 offsetof(struct zinf_hf_config, max_position_embeddings), HF_MAX_POSITIONS},
	};
	char dup[512];
	bool bias;
	int rc;

	/* cJSON keeps both copies of a key; Python's json (so transformers) the last */
	rc = zinf_json_duplicate_key(root, dup, sizeof(dup));
	if (rc < 0)
		return hf_fail(cfg, -ENOMEM, name, "no memory");
	if (rc)
		return hf_fail(cfg, ZINF_ECONFIG, name,
			       "%s: appears twice (expected each key once)", dup);
	rc = parse_model_type(cfg, name, root);
	for (size_t i = 0; rc == 0 && i < sizeof(uints) / sizeof(uints[0]); i++)
		rc = hf_get_uint(cfg, name, root, "", uints[i].key, uints[i].max,
				 (uint64_t *)((char *)cfg + uints[i].off));
	if (rc == 0)
		rc = hf_get_positive(cfg, name, root, "", "rms_norm_eps", &cfg->rms_norm_eps);
	if (rc == 0)
		rc = hf_get_positive(cfg, name, root, "", "initializer_range",
				     &cfg->initializer_range);
	if (rc == 0)
		rc = get_dropout(cfg, name, root);
	if (rc == 0)
		rc = hf_parse_rope(cfg, name, root);
	if (rc == 0)
		rc = get_bool(cfg, name, root, "tie_word_embeddings", &cfg->tie_word_embeddings);
	if (rc == 0 && cfg->model_type == ZINF_HF_LLAMA) {
		bias = false;
		rc = get_bool(cfg, name, root, "attention_bias", &bias);
		cfg->attention_bias = bias;
		cfg->attention_out_bias = bias; /* LlamaAttention: every projection */
	}
	if (rc == 0)
		rc = parse_sliding_window(cfg, name, root);
	if (rc == 0)
		rc = parse_dtype(cfg, name, root);
	if (rc == 0)
		rc = check_unsupported(cfg, name, root);
	if (rc == 0 && cfg->num_hidden_layers)
		rc = check_layer_types(cfg, name, root);
	return rc;
}

uint64_t zinf_hf_config_max_positions(const struct zinf_hf_config *cfg)
{
	uint64_t context =
		cfg->rope_type == ZINF_ROPE_YARN && cfg->rope_original_max_position_embeddings
			? cfg->rope_original_max_position_embeddings
			: cfg->max_position_embeddings;
	double scaled = floor((double)context * cfg->rope_factor);
	bool scales = cfg->rope_type == ZINF_ROPE_LINEAR || cfg->rope_type == ZINF_ROPE_DYNAMIC ||
		      cfg->rope_type == ZINF_ROPE_YARN;

	if (!scales || !(scaled > (double)cfg->max_position_embeddings))
		return cfg->max_position_embeddings;
	return scaled >= (double)HF_MAX_POSITIONS ? HF_MAX_POSITIONS : (uint64_t)scaled;
}

int zinf_hf_config_validate(struct zinf_hf_config *cfg, const char *name)
{
	static const char *required[] = {"vocab_size", "hidden_size", "intermediate_size",
					 "num_hidden_layers", "num_attention_heads"};
	const uint64_t vals[] = {cfg->vocab_size, cfg->hidden_size, cfg->intermediate_size,
				 cfg->num_hidden_layers, cfg->num_attention_heads};
	int rc;

	if (!name)
		name = "config.json";
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		if (vals[i] == 0)
			return hf_fail(cfg, ZINF_ECONFIG, name,
				       "%s: missing (expected a positive integer)", required[i]);
	if (cfg->num_key_value_heads == 0)
		cfg->num_key_value_heads = cfg->num_attention_heads;
	if (cfg->num_attention_heads % cfg->num_key_value_heads != 0)
		return hf_fail(cfg, ZINF_ECONFIG, name,
			       "num_key_value_heads: %llu does not divide num_attention_heads %llu",
			       (unsigned long long)cfg->num_key_value_heads,
			       (unsigned long long)cfg->num_attention_heads);
	if (cfg->head_dim == 0) {
		if (cfg->hidden_size % cfg->num_attention_heads != 0)
			return hf_fail(
				cfg, ZINF_ECONFIG, name,
				"hidden_size: %llu is not a multiple of num_attention_heads %llu (expected, as head_dim is not given)",
				(unsigned long long)cfg->hidden_size,
				(unsigned long long)cfg->num_attention_heads);
		cfg->head_dim = cfg->hidden_size / cfg->num_attention_heads;
	}
	if (cfg->head_dim % 2 != 0)
		return hf_fail(
			cfg, ZINF_ECONFIG, name,
			"head_dim: %llu is odd (expected even: rotary embeddings rotate pairs)",
			(unsigned long long)cfg->head_dim);
	if (cfg->num_attention_heads * cfg->head_dim > HF_MAX_DIM)
		return hf_fail(cfg, ZINF_ECONFIG, name,
			       "head_dim: %llu x num_attention_heads %llu is larger than %llu",
			       (unsigned long long)cfg->head_dim,
			       (unsigned long long)cfg->num_attention_heads,
			       (unsigned long long)HF_MAX_DIM);
	if (cfg->max_position_embeddings == 0)
		return hf_fail(cfg, ZINF_ECONFIG, name,
			       "max_position_embeddings: missing (expected a positive integer)");
	if (!(cfg->rms_norm_eps > 0) || !isfinite(cfg->rms_norm_eps))
		return hf_fail(cfg, ZINF_ECONFIG, name, "rms_norm_eps: expected a positive number");
	if (!(cfg->rope_theta > 0) || !isfinite(cfg->rope_theta))
		return hf_fail(cfg, ZINF_ECONFIG, name, "rope_theta: expected a positive number");
	rc = hf_validate_rope(cfg, name);
	if (rc)
		return rc;
	if (zinf_st_dtype_size(cfg->torch_dtype) == 0)
		return hf_fail(cfg, ZINF_ECONFIG, name, "torch_dtype: invalid value %d",
			       (int)cfg->torch_dtype);
	return 0;
}

/* The next JSON number's text in *p (strings skipped), or NULL; *p moves past it. */
static const char *next_number(const char **p, size_t *len)
{
	const char *s = *p;

	while (*s && *s != '-' && !(*s >= '0' && *s <= '9')) {
		if (*s++ != '"')
			continue;
		while (*s && *s != '"')
			s += s[0] == '\\' && s[1] ? 2 : 1;
		if (*s)
			s++;
	}
	if (!*s)
		return NULL;
	*len = strspn(s, "-+.eE0123456789");
	*p = s + *len;
	return s;
}

/* Each number under node, in the order of text (the JSON node was parsed from), made a
 * raw item holding its text as written, so a save writes it back the same (32.0 stays
 * 32.0 for a transformers release that wants a float; a 20-digit integer stays whole):
 * where the text does not read back as the number, the numbers from there stay numbers. */
static bool keep_number_text(cJSON *node, const char **text)
{
	for (cJSON *c = node->child; c; c = c->next) {
		if (cJSON_IsNumber(c)) {
			size_t len;
			const char *at = next_number(text, &len);
			char *copy = at ? strndup(at, len) : NULL;

			if (!copy || zinf_strtod(copy, NULL) != c->valuedouble) {
				free(copy);
				return false;
			}
			c->valuestring = copy;
			c->type = cJSON_Raw;
		} else if ((cJSON_IsObject(c) || cJSON_IsArray(c)) && !keep_number_text(c, text)) {
			return false;
		}
	}
	return true;
}

int zinf_hf_config_load_string(struct zinf_hf_config *cfg, const char *json, const char *name)
{
	const char *end = NULL, *raw;
	cJSON *root;
	int rc;

	if (!name)
		name = "config.json";
	zinf_hf_config_free(cfg);
	if (!json)
		return hf_fail(cfg, -EINVAL, name, "no JSON text");
	root = cJSON_ParseWithOpts(json, &end, 1);
	if (!root) {
		const char *at = cJSON_GetErrorPtr();

		return hf_fail(cfg, ZINF_EJSON, name, "malformed JSON near byte %lld",
			       at ? (long long)(at - json) : -1LL);
	}
	raw = zinf_json_raw_control(json, strlen(json));
	if (raw) {
		cJSON_Delete(root);
		return hf_fail(cfg, ZINF_EJSON, name,
			       "malformed JSON: a control character (0x%02x) inside a string at "
			       "byte %lld (expected it escaped, as \\n or \\t)",
			       (unsigned char)*raw, (long long)(raw - json));
	}
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return hf_fail(cfg, ZINF_EJSON, name, "expected a JSON object");
	}
	rc = parse_fields(cfg, name, root);
	if (rc == 0)
		rc = zinf_hf_config_validate(cfg, name);
	if (rc < 0) {
		char msg[ZINF_HF_ERR_BYTES];

		cJSON_Delete(root);
		memcpy(msg, cfg->last_error, sizeof(msg));
		zinf_hf_config_init(cfg);
		memcpy(cfg->last_error, msg, sizeof(msg));
		return rc;
	}
	keep_number_text(root, &json); /* (for the save: nothing reads the tree after) */
	cfg->json = root;
	return 0;
}

int zinf_hf_config_load_file(struct zinf_hf_config *cfg, const char *path)
{
	struct stat st;
	char *text;
	ssize_t got = 0;
	int fd, rc;

	zinf_hf_config_free(cfg);
	if (!path)
		return hf_fail(cfg, -EINVAL, "config", "no path");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: refused below */
	if (fd < 0)
		return hf_fail(cfg, -errno, path, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > HF_MAX_FILE_BYTES) {
		close(fd);
		return hf_fail(cfg, ZINF_ECONFIG, path, "not a regular file of at most %u bytes",
			       HF_MAX_FILE_BYTES);
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		close(fd);
		return hf_fail(cfg, -ENOMEM, path, "no memory");
	}
	while (got < st.st_size) {
		ssize_t n = read(fd, text + got, (size_t)(st.st_size - got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	close(fd);
	if (got != st.st_size) {
		free(text);
		return hf_fail(cfg, -EIO, path, "short read: %lld of %lld bytes", (long long)got,
			       (long long)st.st_size);
	}
	text[got] = '\0';
	if (strlen(text) != (size_t)got) {
		free(text);
		return hf_fail(cfg, ZINF_EJSON, path, "NUL byte in the file (expected JSON text)");
	}
	rc = zinf_hf_config_load_string(cfg, text, path);
	free(text);
	return rc;
}

uint64_t zinf_hf_config_param_count(const struct zinf_hf_config *cfg)
{
	uint64_t C = cfg->hidden_size, q = cfg->num_attention_heads * cfg->head_dim;
	uint64_t kv = cfg->num_key_value_heads * cfg->head_dim;
	uint64_t layer = C * q + 2 * C * kv + q * C + 3 * C * cfg->intermediate_size + 2 * C;

	if (cfg->attention_bias)
		layer += q + 2 * kv;
	if (cfg->attention_out_bias)
		layer += C;
	if (cfg->mlp_bias)
		layer += 2 * cfg->intermediate_size + C;
	return cfg->vocab_size * C * (cfg->tie_word_embeddings ? 1 : 2) +
	       cfg->num_hidden_layers * layer + C;
}

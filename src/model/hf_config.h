/*
 * Hugging Face config.json of a Llama-family model (model_type llama, mistral, qwen2):
 * read the fields these architectures share, validate them, and write them back.
 *
 * docs/formats.md lists every field read, its default and its check. Loading keeps the
 * file's JSON so that saving writes back the keys zinf does not interpret (token ids,
 * generation settings) next to the ones it does.
 */
#ifndef ZINF_MODEL_HF_CONFIG_H
#define ZINF_MODEL_HF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llama.h" /* enum zinf_rope_type */
#include "safetensors.h"

enum zinf_hf_model_type {
	ZINF_HF_LLAMA = 0,
	ZINF_HF_MISTRAL = 1,
	ZINF_HF_QWEN2 = 2,
};

#define ZINF_HF_ERR_BYTES 1024

struct zinf_hf_config {
	enum zinf_hf_model_type model_type;
	uint64_t vocab_size;
	uint64_t hidden_size;	    /* C */
	uint64_t intermediate_size; /* MLP width */
	uint64_t num_hidden_layers; /* L */
	uint64_t num_attention_heads;
	uint64_t num_key_value_heads; /* default num_attention_heads; divides it */
	uint64_t head_dim;	      /* default hidden_size / num_attention_heads; even */
	uint64_t max_position_embeddings;
	double rms_norm_eps;
	double rope_theta;
	/* rope_scaling's rope_type: default (null / absent), linear, dynamic, yarn, llama3 */
	enum zinf_rope_type rope_type;
	/* the rotary settings came from rope_parameters (transformers 5) rather than
	 * rope_theta + rope_scaling: names the key in error messages */
	bool rope_parameters;
	double rope_factor;	      /* linear, dynamic, yarn, llama3 */
	double rope_low_freq_factor;  /* llama3 */
	double rope_high_freq_factor; /* llama3 */
	/* llama3 (required), yarn (0: not given, max_position_embeddings is used); a top-level
	 * original_max_position_embeddings wins over the rope object's (transformers 5) */
	uint64_t rope_original_max_position_embeddings;
	/* yarn's optional keys, 0 when not given: beta_fast (32), beta_slow (1),
	 * attention_factor (derived), mscale, mscale_all_dim; truncate (default true) */
	double rope_beta_fast;
	double rope_beta_slow;
	double rope_attention_factor;
	double rope_mscale;
	double rope_mscale_all_dim;
	bool rope_truncate;
	bool tie_word_embeddings;
	/* Biases: q/k/v projections (llama: attention_bias; qwen2: always), and the output
	 * projection (llama: attention_bias; qwen2, mistral: never). */
	bool attention_bias;
	bool attention_out_bias;
	bool mlp_bias; /* gate/up/down projections carry biases (llama's mlp_bias) */
	/* Sliding-window attention: in layers l >= max_window_layers, query i sees keys j with
	 * i - sliding_window < j <= i. mistral: sliding_window (null = none), every layer
	 * (max_window_layers 0); qwen2: only with use_sliding_window, max_window_layers
	 * (default 28) full-attention layers first; llama: none. */
	uint64_t sliding_window; /* 0 = none */
	uint64_t max_window_layers;
	enum zinf_st_dtype torch_dtype;
	bool has_torch_dtype;	  /* torch_dtype (or dtype) was given */
	double initializer_range; /* std of a random init's matrices; default 0.02 */
	double attention_dropout; /* in [0, 1); zinf applies no dropout (train warns) */

	void *json; /* private: the loaded JSON tree, for writing back; NULL if built */
	char last_error[ZINF_HF_ERR_BYTES];
};

/* Zero cfg and set the llama defaults (the shape fields stay 0: they must be set). */
void zinf_hf_config_init(struct zinf_hf_config *cfg);
/* Free what cfg owns (the loaded JSON); cfg is init'ed again. */
void zinf_hf_config_free(struct zinf_hf_config *cfg);

/* Read and validate path into cfg (init'ed). Returns 0, ZINF_EJSON, ZINF_ECONFIG or
 * -errno, with one line "PATH: field: what is wrong (what was expected)" in
 * cfg->last_error; on error cfg holds no loaded state. */
int zinf_hf_config_load_file(struct zinf_hf_config *cfg, const char *path);
/* Same from a NUL-terminated JSON text; name stands for the path in messages. */
int zinf_hf_config_load_string(struct zinf_hf_config *cfg, const char *json, const char *name);
/* Re-run the checks on cfg's fields (after a caller filled or changed them). name is used
 * in messages. Returns 0 or ZINF_ECONFIG. */
int zinf_hf_config_validate(struct zinf_hf_config *cfg, const char *name);

/* Write cfg as a config.json to path with torch_dtype = dtype: keys of the loaded file
 * are kept, the fields above overwritten. Written to PATH.tmp, fsynced and renamed.
 * Returns 0, ZINF_ECONFIG (invalid cfg), -errno; message in cfg->last_error. */
int zinf_hf_config_save(struct zinf_hf_config *cfg, const char *path, enum zinf_st_dtype dtype);

/* "llama", "mistral", "qwen2". */
const char *zinf_hf_model_type_name(enum zinf_hf_model_type type);
/* "bfloat16", "float16", "float32": torch's names, as config.json spells them. */
const char *zinf_hf_torch_dtype_name(enum zinf_st_dtype dtype);

/* Parameters of the model the config describes (embedding, layers, norms, head). */
uint64_t zinf_hf_config_param_count(const struct zinf_hf_config *cfg);

/* The longest sequence the model is meant for: max_position_embeddings, or with linear,
 * dynamic or yarn rope scaling the context they scale (yarn's
 * original_max_position_embeddings, else max_position_embeddings) times factor when that is
 * larger. */
uint64_t zinf_hf_config_max_positions(const struct zinf_hf_config *cfg);

/* A key that appears twice in one object anywhere in a JSON document: 1 with its dotted
 * path in dup, 0 when none, -ENOMEM. cJSON keeps both copies and finds the first;
 * Python's json (so transformers) keeps the last: the readers refuse both. */
struct cJSON;
int zinf_json_duplicate_key(const struct cJSON *root, char *dup, size_t len);

#endif /* ZINF_MODEL_HF_CONFIG_H */

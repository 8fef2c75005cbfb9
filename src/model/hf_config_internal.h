/*
 * What hf_config.c and hf_config_rope.c (loading) and hf_config_save.c (saving) share.
 */
#ifndef ZINF_MODEL_HF_CONFIG_INTERNAL_H
#define ZINF_MODEL_HF_CONFIG_INTERNAL_H

#include "hf_config.h"

/* Record "NAME: message" as cfg's last error (and log it at debug); returns code. */
__attribute__((format(printf, 4, 5))) int hf_fail(struct zinf_hf_config *cfg, int code,
						  const char *name, const char *fmt, ...);
/* transformers' class name of the model type ("LlamaForCausalLM"). */
const char *hf_architecture(enum zinf_hf_model_type type);

/* ---- loading (hf_config.c, hf_config_rope.c) ----------------------------------------- */

#define HF_MAX_POSITIONS (1ull << 40)

struct cJSON;
/* A key absent or null: the default stays. */
bool hf_absent(const struct cJSON *item);
/* root's key (shown as prefix key) into *out if present: an integer in [1, max]. */
int hf_get_uint(struct zinf_hf_config *cfg, const char *name, const struct cJSON *root,
		const char *prefix, const char *key, uint64_t max, uint64_t *out);
/* root's key into *out if present: positive, finite in float. */
int hf_get_positive(struct zinf_hf_config *cfg, const char *name, const struct cJSON *root,
		    const char *prefix, const char *key, double *out);
/* The rotary fields of root (rope_theta, rope_scaling or rope_parameters,
 * partial_rotary_factor, a top-level original_max_position_embeddings), each type's keys
 * present and positive (hf_config_rope.c). */
int hf_parse_rope(struct zinf_hf_config *cfg, const char *name, const struct cJSON *root);
/* The rope fields, however they were set: what each type needs, in range. */
int hf_validate_rope(struct zinf_hf_config *cfg, const char *name);

#endif /* ZINF_MODEL_HF_CONFIG_INTERNAL_H */

/*
 * Rotary settings of a Hugging Face config.json: rope_theta with rope_scaling
 * (transformers before 5) or rope_parameters (5 and later); the types default, linear,
 * dynamic, yarn and llama3 with the keys each needs, read and checked. Loading the rest
 * is hf_config.c.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "hf_config.h"
#include "hf_config_internal.h"
#include "zinf/error.h"

/* The rope_type of a rope_scaling / rope_parameters object (transformers' names). */
static int rope_type_of(const char *name, enum zinf_rope_type *out)
{
	for (int t = ZINF_ROPE_DEFAULT; t <= ZINF_ROPE_LLAMA3; t++) {
		if (strcmp(name, zinf_rope_type_name((enum zinf_rope_type)t)) == 0) {
			*out = (enum zinf_rope_type)t;
			return 0;
		}
	}
	return -1;
}

/* A rope key the type needs: present and positive. */
static int get_required(struct zinf_hf_config *cfg, const char *name, const cJSON *rs,
			const char *prefix, const char *key, double *out)
{
	if (hf_absent(cJSON_GetObjectItemCaseSensitive(rs, key)))
		return hf_fail(cfg, ZINF_ECONFIG, name, "%s%s: missing (rope_type \"%s\" needs it)",
			       prefix, key, zinf_rope_type_name(cfg->rope_type));
	return hf_get_positive(cfg, name, rs, prefix, key, out);
}

/* A yarn key transformers reads with `or` / truthiness: 0 (like null) means not given. */
static int get_unless_zero(struct zinf_hf_config *cfg, const char *name, const cJSON *rs,
			   const char *prefix, const char *key, double *out)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(rs, key);

	if (cJSON_IsNumber(item) && item->valuedouble == 0.0)
		return 0;
	return hf_get_positive(cfg, name, rs, prefix, key, out);
}

/* yarn's optional keys: beta_fast, beta_slow, attention_factor, mscale, mscale_all_dim,
 * truncate (original_max_position_embeddings: parse_rope_context). */
static int parse_yarn(struct zinf_hf_config *cfg, const char *name, const cJSON *rs,
		      const char *prefix)
{
	const cJSON *truncate = cJSON_GetObjectItemCaseSensitive(rs, "truncate");
	int rc = get_unless_zero(cfg, name, rs, prefix, "beta_fast", &cfg->rope_beta_fast);

	if (rc == 0)
		rc = get_unless_zero(cfg, name, rs, prefix, "beta_slow", &cfg->rope_beta_slow);
	if (rc == 0)
		rc = hf_get_positive(cfg, name, rs, prefix, "attention_factor",
				     &cfg->rope_attention_factor);
	if (rc == 0)
		rc = get_unless_zero(cfg, name, rs, prefix, "mscale", &cfg->rope_mscale);
	if (rc == 0)
		rc = get_unless_zero(cfg, name, rs, prefix, "mscale_all_dim",
				     &cfg->rope_mscale_all_dim);
	if (rc)
		return rc;
	/* transformers reads a null truncate as false, zinf's null elsewhere as absent */
	if (truncate && !cJSON_IsBool(truncate))
		return hf_fail(cfg, ZINF_ECONFIG, name, "%struncate: expected true or false",
			       prefix);
	cfg->rope_truncate = !truncate || cJSON_IsTrue(truncate);
	return 0;
}

/* The pretrained context of llama3 and yarn: like transformers 5, a top-level
 * original_max_position_embeddings (Phi-3 style) wins over the rope object's. */
static int parse_rope_context(struct zinf_hf_config *cfg, const char *name, const cJSON *root,
			      const cJSON *rs, const char *prefix)
{
	const uint64_t max = HF_MAX_POSITIONS < INT_MAX ? HF_MAX_POSITIONS : INT_MAX;
	const cJSON *top =
		cJSON_GetObjectItemCaseSensitive(root, "original_max_position_embeddings");

	if (!hf_absent(top))
		return hf_get_uint(cfg, name, root, "", "original_max_position_embeddings", max,
				   &cfg->rope_original_max_position_embeddings);
	if (cfg->rope_type == ZINF_ROPE_LLAMA3 &&
	    hf_absent(cJSON_GetObjectItemCaseSensitive(rs, "original_max_position_embeddings")))
		return hf_fail(
			cfg, ZINF_ECONFIG, name,
			"%soriginal_max_position_embeddings: missing (rope_type \"%s\" needs it)",
			prefix, zinf_rope_type_name(cfg->rope_type));
	return hf_get_uint(cfg, name, rs, prefix, "original_max_position_embeddings", max,
			   &cfg->rope_original_max_position_embeddings);
}

/* partial_rotary_factor (top level, or in rope_parameters in transformers 5): only 1, every
 * dimension rotating, is what the Llama family uses. */
static int check_partial_rotary(struct zinf_hf_config *cfg, const char *name, const cJSON *obj,
				const char *prefix)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(obj, "partial_rotary_factor");

	if (hf_absent(p) || (cJSON_IsNumber(p) && p->valuedouble == 1.0))
		return 0;
	return hf_fail(cfg, ZINF_ECONFIG, name,
		       "%spartial_rotary_factor: only 1 is supported (every dimension rotates)",
		       prefix);
}

/* Rotary settings. transformers before 5 writes rope_theta and rope_scaling (null, or
 * {"rope_type" (or "type"): ..., factors}); 5 and later write one rope_parameters object
 * ({"rope_type": ..., "rope_theta": ..., factors}). */
int hf_parse_rope(struct zinf_hf_config *cfg, const char *name, const cJSON *root)
{
	const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
	const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
	const char *prefix = "rope_scaling.";
	const cJSON *type;
	int rc = hf_get_positive(cfg, name, root, "", "rope_theta", &cfg->rope_theta);

	cfg->rope_type = ZINF_ROPE_DEFAULT;
	cfg->rope_parameters = false;
	cfg->rope_factor = 0;
	cfg->rope_low_freq_factor = 0;
	cfg->rope_high_freq_factor = 0;
	cfg->rope_original_max_position_embeddings = 0;
	cfg->rope_beta_fast = 0;
	cfg->rope_beta_slow = 0;
	cfg->rope_attention_factor = 0;
	cfg->rope_mscale = 0;
	cfg->rope_mscale_all_dim = 0;
	cfg->rope_truncate = true;
	if (rc == 0)
		rc = check_partial_rotary(cfg, name, root, "");
	if (rc)
		return rc;
	if (!hf_absent(rp)) {
		if (!cJSON_IsObject(rp))
			return hf_fail(
				cfg, ZINF_ECONFIG, name,
				"rope_parameters: expected an object with rope_type and rope_theta");
		if (!hf_absent(rs))
			return hf_fail(
				cfg, ZINF_ECONFIG, name,
				"rope_scaling: given with rope_parameters (expected one of them: rope_parameters holds the scaling in transformers 5)");
		rc = hf_get_positive(cfg, name, rp, "rope_parameters.", "rope_theta",
				     &cfg->rope_theta);
		if (rc == 0)
			rc = check_partial_rotary(cfg, name, rp, "rope_parameters.");
		if (rc)
			return rc;
		rs = rp;
		prefix = "rope_parameters.";
		cfg->rope_parameters = true;
	}
	if (hf_absent(rs))
		return 0;
	if (!cJSON_IsObject(rs))
		return hf_fail(cfg, ZINF_ECONFIG, name,
			       "rope_scaling: expected null or an object with a rope_type");
	type = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
	if (hf_absent(type))
		type = cJSON_GetObjectItemCaseSensitive(rs, "type");
	if (!cJSON_IsString(type))
		return hf_fail(cfg, ZINF_ECONFIG, name, "%srope_type: missing or not a string",
			       prefix);
	if (rope_type_of(type->valuestring, &cfg->rope_type))
		return hf_fail(
			cfg, ZINF_ECONFIG, name,
			"%srope_type: \"%.40s\" is not supported (expected \"default\", \"linear\", \"dynamic\", \"yarn\" or \"llama3\")",
			prefix, type->valuestring);
	if (cfg->rope_type == ZINF_ROPE_DEFAULT)
		return 0;
	rc = get_required(cfg, name, rs, prefix, "factor", &cfg->rope_factor);
	if (rc || cfg->rope_type == ZINF_ROPE_LINEAR || cfg->rope_type == ZINF_ROPE_DYNAMIC)
		return rc;
	if (cfg->rope_type == ZINF_ROPE_YARN) {
		rc = parse_yarn(cfg, name, rs, prefix);
	} else {
		rc = get_required(cfg, name, rs, prefix, "low_freq_factor",
				  &cfg->rope_low_freq_factor);
		if (rc == 0)
			rc = get_required(cfg, name, rs, prefix, "high_freq_factor",
					  &cfg->rope_high_freq_factor);
	}
	return rc ? rc : parse_rope_context(cfg, name, root, rs, prefix);
}

/* yarn's fields: the optional ones >= 0 (0: not given); theta above 1 (the ramp divides by
 * its log); a context (original_max_position_embeddings, else max_position_embeddings)
 * the runtime holds exactly. */
static int validate_yarn(struct zinf_hf_config *cfg, const char *name, const char *key)
{
	const struct {
		const char *key;
		double v;
	} opt[] = {
		{"beta_fast", cfg->rope_beta_fast},
		{"beta_slow", cfg->rope_beta_slow},
		{"attention_factor", cfg->rope_attention_factor},
		{"mscale", cfg->rope_mscale},
		{"mscale_all_dim", cfg->rope_mscale_all_dim},
	};
	uint64_t context = cfg->rope_original_max_position_embeddings
				   ? cfg->rope_original_max_position_embeddings
				   : cfg->max_position_embeddings;

	for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
		if (!(opt[i].v >= 0) || !isfinite(opt[i].v))
			return hf_fail(cfg, ZINF_ECONFIG, name,
				       "%s.%s: %g is not a positive number (0: not given)", key,
				       opt[i].key, opt[i].v);
	if (!(cfg->rope_theta > 1))
		return hf_fail(
			cfg, ZINF_ECONFIG, name,
			"rope_theta: %g must be above 1 with rope_type \"yarn\" (its ramp divides by log(rope_theta))",
			cfg->rope_theta);
	if (context > INT_MAX)
		return hf_fail(
			cfg, ZINF_ECONFIG, name,
			"%s: yarn's context %llu (original_max_position_embeddings, else max_position_embeddings) is above 2^31 - 1",
			key, (unsigned long long)context);
	return 0;
}

/* The rope fields, however they were set: the keys each type needs, positive. */
int hf_validate_rope(struct zinf_hf_config *cfg, const char *name)
{
	const char *key = cfg->rope_parameters ? "rope_parameters" : "rope_scaling";
	const char *type = zinf_rope_type_name(cfg->rope_type);

	if (!type)
		return hf_fail(cfg, ZINF_ECONFIG, name, "%s: invalid rope type %d", key,
			       (int)cfg->rope_type);
	if (cfg->rope_type == ZINF_ROPE_DEFAULT)
		return 0;
	if (!(cfg->rope_factor > 0) || !isfinite(cfg->rope_factor))
		return hf_fail(cfg, ZINF_ECONFIG, name,
			       "%s.factor: rope_type \"%s\" needs a positive factor", key, type);
	if (cfg->rope_type == ZINF_ROPE_DYNAMIC && cfg->head_dim < 4)
		return hf_fail(
			cfg, ZINF_ECONFIG, name,
			"%s: rope_type \"dynamic\" needs head_dim >= 4 (theta's exponent is head_dim / (head_dim - 2)), not %llu",
			key, (unsigned long long)cfg->head_dim);
	if (cfg->rope_type == ZINF_ROPE_YARN)
		return validate_yarn(cfg, name, key);
	if (cfg->rope_type != ZINF_ROPE_LLAMA3)
		return 0;
	if (!(cfg->rope_low_freq_factor > 0) || !(cfg->rope_high_freq_factor > 0) ||
	    cfg->rope_original_max_position_embeddings == 0)
		return hf_fail(
			cfg, ZINF_ECONFIG, name,
			"%s: llama3 needs factor, low_freq_factor, high_freq_factor and original_max_position_embeddings, all positive",
			key);
	if (!(cfg->rope_high_freq_factor > cfg->rope_low_freq_factor))
		return hf_fail(cfg, ZINF_ECONFIG, name,
			       "%s.high_freq_factor: %g is not above low_freq_factor %g", key,
			       cfg->rope_high_freq_factor, cfg->rope_low_freq_factor);
	return 0;
}

/*
 * Rotary embedding frequencies of the Llama family: transformers' default RoPE and its
 * scaled variants (linear, dynamic NTK, YaRN, Llama 3.1), the cos/sin tables built from
 * them, and the checks of their settings. The rotation itself is in llama_ops.c.
 * docs/model.md gives the formulas.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "llama_ops.h"
#include "zinf/error.h"

const char *zinf_rope_type_name(enum zinf_rope_type type)
{
	switch (type) {
	case ZINF_ROPE_DEFAULT:
		return "default";
	case ZINF_ROPE_LINEAR:
		return "linear";
	case ZINF_ROPE_DYNAMIC:
		return "dynamic";
	case ZINF_ROPE_YARN:
		return "yarn";
	case ZINF_ROPE_LLAMA3:
		return "llama3";
	}
	return NULL;
}

static int rope_fail(char *err, size_t errlen, const char *field, double v, const char *want)
{
	snprintf(err, errlen, "llama config: %s = %g must be %s", field, v, want);
	return ZINF_ECONFIG;
}

int llama_rope_check(const struct zinf_llama_config *cfg, char *err, size_t errlen)
{
	const char *name = zinf_rope_type_name(cfg->rope_type);

	if (!name) {
		snprintf(err, errlen, "llama config: rope_type = %d is not a rope type",
			 (int)cfg->rope_type);
		return ZINF_ECONFIG;
	}
	if (cfg->rope_type == ZINF_ROPE_DEFAULT)
		return 0;
	if (!(cfg->rope_factor > 0) || !isfinite(cfg->rope_factor))
		return rope_fail(err, errlen, "rope_factor", cfg->rope_factor, "> 0");
	if (cfg->rope_type == ZINF_ROPE_LINEAR)
		return 0;
	if (cfg->rope_original_max_position_embeddings <= 0)
		return rope_fail(err, errlen, "rope_original_max_position_embeddings",
				 cfg->rope_original_max_position_embeddings, "> 0");
	switch (cfg->rope_type) {
	case ZINF_ROPE_DYNAMIC:
		/* theta's exponent is hd / (hd - 2) */
		if (cfg->head_dim < 4)
			return rope_fail(err, errlen, "head_dim", cfg->head_dim,
					 ">= 4 with dynamic rope scaling");
		return 0;
	case ZINF_ROPE_YARN:
		/* the ramp's ends divide by log(theta) */
		if (!(cfg->rope_theta > 1))
			return rope_fail(err, errlen, "rope_theta", cfg->rope_theta,
					 "> 1 with yarn rope scaling");
		if (!(cfg->rope_beta_fast > 0) || !isfinite(cfg->rope_beta_fast))
			return rope_fail(err, errlen, "rope_beta_fast", cfg->rope_beta_fast, "> 0");
		if (!(cfg->rope_beta_slow > 0) || !isfinite(cfg->rope_beta_slow))
			return rope_fail(err, errlen, "rope_beta_slow", cfg->rope_beta_slow, "> 0");
		if (!(cfg->rope_attention_factor >= 0) || !isfinite(cfg->rope_attention_factor))
			return rope_fail(err, errlen, "rope_attention_factor",
					 cfg->rope_attention_factor, ">= 0 (0: derived)");
		if (!(cfg->rope_mscale >= 0) || !isfinite(cfg->rope_mscale))
			return rope_fail(err, errlen, "rope_mscale", cfg->rope_mscale,
					 ">= 0 (0: none)");
		if (!(cfg->rope_mscale_all_dim >= 0) || !isfinite(cfg->rope_mscale_all_dim))
			return rope_fail(err, errlen, "rope_mscale_all_dim",
					 cfg->rope_mscale_all_dim, ">= 0 (0: none)");
		return 0;
	case ZINF_ROPE_LLAMA3:
		if (!(cfg->rope_low_freq_factor > 0))
			return rope_fail(err, errlen, "rope_low_freq_factor",
					 cfg->rope_low_freq_factor, "> 0");
		if (!(cfg->rope_high_freq_factor > cfg->rope_low_freq_factor)) {
			snprintf(
				err, errlen,
				"llama config: rope_scaling.high_freq_factor = %g must be > low_freq_factor = %g",
				(double)cfg->rope_high_freq_factor,
				(double)cfg->rope_low_freq_factor);
			return ZINF_ECONFIG;
		}
		return 0;
	default:
		return 0;
	}
}

/* Llama 3.1: long wavelengths slowed by factor, short ones kept, the band between
 * interpolated smoothly. */
static double llama3_freq(const struct zinf_llama_config *cfg, double f)
{
	double old_len = cfg->rope_original_max_position_embeddings;
	double lo = cfg->rope_low_freq_factor, hi = cfg->rope_high_freq_factor;
	double wavelen = 2.0 * M_PI / f;

	if (wavelen > old_len / lo)
		return f / cfg->rope_factor;
	if (wavelen >= old_len / hi) {
		double smooth = (old_len / wavelen - lo) / (hi - lo);

		return (1.0 - smooth) * f / cfg->rope_factor + smooth * f;
	}
	return f;
}

/* YaRN: the dimension (of hd) at which a frequency turns `rotations` times over the
 * pretrained context. */
static double yarn_dim(double rotations, int hd, double theta, double context)
{
	return hd * log(context / (rotations * 2.0 * M_PI)) / (2.0 * log(theta));
}

/* transformers' get_mscale: 1 up to no scaling, then growing with log(scale). */
static double yarn_mscale(double scale, double mscale)
{
	return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

static double yarn_attention_factor(const struct zinf_llama_config *cfg)
{
	double f = cfg->rope_factor;

	if (cfg->rope_attention_factor > 0)
		return cfg->rope_attention_factor;
	if (cfg->rope_mscale > 0 && cfg->rope_mscale_all_dim > 0)
		return yarn_mscale(f, cfg->rope_mscale) / yarn_mscale(f, cfg->rope_mscale_all_dim);
	return yarn_mscale(f, 1.0);
}

float llama_rope_inv_freq(float *inv_freq, const struct zinf_llama_config *cfg, int T)
{
	int hd = cfg->head_dim, half = hd / 2;
	double theta = cfg->rope_theta, low = 0, high = 0;

	if (cfg->rope_type == ZINF_ROPE_DYNAMIC) {
		/* transformers recomputes theta for the longest sequence seen, here T */
		double context = cfg->rope_original_max_position_embeddings;
		double len = T > context ? T : context, f = cfg->rope_factor;

		theta *= pow(f * len / context - (f - 1.0), (double)hd / (hd - 2));
	}
	if (cfg->rope_type == ZINF_ROPE_YARN) {
		double context = cfg->rope_original_max_position_embeddings;

		low = yarn_dim(cfg->rope_beta_fast, hd, theta, context);
		high = yarn_dim(cfg->rope_beta_slow, hd, theta, context);
		if (cfg->rope_truncate) {
			low = floor(low);
			high = ceil(high);
		}
		low = low > 0 ? low : 0;
		high = high < hd - 1 ? high : hd - 1;
		if (low == high)
			high += 0.001; /* as transformers: no zero-width ramp */
	}
	for (int i = 0; i < half; i++) {
		double f = 1.0 / pow(theta, (double)(2 * i) / hd);

		switch (cfg->rope_type) {
		case ZINF_ROPE_LINEAR:
			f /= cfg->rope_factor;
			break;
		case ZINF_ROPE_YARN: {
			/* dimensions below the ramp keep their frequency, those above it are
			 * interpolated (divided by factor), the ramp blends linearly */
			double ramp = (i - low) / (high - low);
			double keep = 1.0 - (ramp < 0 ? 0 : ramp > 1 ? 1 : ramp);

			f = f / cfg->rope_factor * (1.0 - keep) + f * keep;
			break;
		}
		case ZINF_ROPE_LLAMA3:
			f = llama3_freq(cfg, f);
			break;
		default:
			break;
		}
		inv_freq[i] = (float)f;
	}
	return cfg->rope_type == ZINF_ROPE_YARN ? (float)yarn_attention_factor(cfg) : 1.0f;
}

void llama_rope_tables(float *cos_t, float *sin_t, const float *inv_freq, int T, int hd,
		       float scale)
{
	int half = hd / 2;

	for (int t = 0; t < T; t++) {
		for (int i = 0; i < half; i++) {
			float ang = (float)t * inv_freq[i]; /* the fp32 product, as in HF */

			cos_t[(size_t)t * half + i] = (float)cos((double)ang) * scale;
			sin_t[(size_t)t * half + i] = (float)sin((double)ang) * scale;
		}
	}
}

int llama_rope_build(float *cos_t, float *sin_t, const struct zinf_llama_config *cfg, int T)
{
	float *inv_freq = malloc((size_t)(cfg->head_dim / 2) * sizeof(float)), scale;

	if (!inv_freq)
		return -ENOMEM;
	scale = llama_rope_inv_freq(inv_freq, cfg, T);
	llama_rope_tables(cos_t, sin_t, inv_freq, T, cfg->head_dim, scale);
	free(inv_freq);
	return 0;
}

/*
 * A small model for the loading tests: LF_N_MOD modules of a weight (2-D, decays) and a
 * bias (1-D, does not), sized so that modules span 64 KiB chunks and, with small
 * sub-groups, parameters span and share sub-groups of their optimizer group; sources in fp32, bf16 and fp16 by turns; a
 * training step whose gradients come from the weights the model reads, and the loss it
 * saw.
 */
#ifndef ZINF_TESTS_ENGINE_LOAD_FIXTURE_H
#define ZINF_TESTS_ENGINE_LOAD_FIXTURE_H

#include <math.h>

#include "cast.h"
#include "optim.h" /* zinf_f32_to_f16 */
#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

#define LF_N_MOD 5

static const uint64_t lf_shapes[LF_N_MOD][2][2] = {
	{{200, 130}, {130, 0}}, {{256, 150}, {150, 0}}, {{70, 33}, {33, 0}},
	{{300, 90}, {90, 0}},	{{25, 41}, {41, 0}},
};

struct lf_engine {
	struct zinf_config *cfg;
	struct zinf_engine *e;
	enum zinf_dtype dtype;
	uint32_t mod[LF_N_MOD], par[LF_N_MOD][2];
};

static inline uint64_t lf_elems(int m, int k)
{
	return lf_shapes[m][k][0] * (lf_shapes[m][k][1] ? lf_shapes[m][k][1] : 1);
}

static inline uint64_t lf_total(void)
{
	uint64_t t = 0;

	for (int m = 0; m < LF_N_MOD; m++)
		t += lf_elems(m, 0) + lf_elems(m, 1);
	return t;
}

static inline double lf_target(int m, int k, uint64_t i)
{
	return sin(0.37 * (double)i + m + 0.5 * k);
}

/* The dtype parameter (m, k)'s source comes in: fp32, bf16 and fp16 by turns. */
static inline enum zinf_dtype lf_src_dtype(int m, int k)
{
	static const enum zinf_dtype t[3] = {ZINF_DTYPE_F32, ZINF_DTYPE_BF16, ZINF_DTYPE_F16};

	return t[(m + k) % 3];
}

static inline uint64_t lf_dtype_bytes(enum zinf_dtype t)
{
	return t == ZINF_DTYPE_F32 ? 4 : 2;
}

/* Parameter (m, k)'s values (variant: a different set, for reloads) in dtype dt. */
static inline void *lf_source(int m, int k, enum zinf_dtype dt, int variant)
{
	uint64_t n = lf_elems(m, k);
	char *out = malloc(n * 4);

	T_CHECK(out, "out of memory");
	for (uint64_t i = 0; i < n; i++) {
		float f = (float)(0.2 * cos(0.11 * (double)i * (m + 1) + k + 0.7 * variant));
		if (dt == ZINF_DTYPE_F32)
			((float *)out)[i] = f;
		else if (dt == ZINF_DTYPE_BF16)
			((uint16_t *)out)[i] = zinf_f32_to_bf16(f);
		else
			((uint16_t *)out)[i] = zinf_f32_to_f16(f);
	}
	return out;
}

/* More keys for the "zinf" and "offload_optimizer" blocks of the next lf_create
 * (", \"key\": value ..."). */
static const char *lf_extra_zinf = "";
static const char *lf_extra_offload_optimizer = "";
static const char *lf_extra_top = ""; /* top-level keys (", \"fp16\": {...}") */

static inline void lf_create(struct lf_engine *le, const char *param_home, const char *opt_home,
			     enum zinf_dtype dtype, const char *dir, uint64_t sub_group)
{
	struct zinf_config_resolve_info info = {.world_size = 1, .require_all = true};
	char json[1280], err[512];

	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"gradient_clipping\": 1.0%s,"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"%s\"%s},"
		"  \"sub_group_size\": %llu},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"2MiB\", \"pinned_memory_limit\": \"4MiB\","
		"  \"chunk_size\": \"64KiB\"%s}}",
		lf_extra_top, param_home, dir, opt_home, dir, lf_extra_offload_optimizer,
		(unsigned long long)sub_group, lf_extra_zinf);
	le->dtype = dtype;
	T_CHECK_RC(zinf_config_create(&le->cfg));
	T_CHECK(zinf_config_load_string(le->cfg, json, "load.json") == 0, "%s",
		zinf_config_last_error(le->cfg));
	T_CHECK(zinf_config_resolve(le->cfg, &info) == 0, "%s", zinf_config_last_error(le->cfg));
	T_CHECK(zinf_engine_create(le->cfg, &le->e, err, sizeof(err)) == 0, "%s/%s: %s", param_home,
		opt_home, err);
	for (int m = 0; m < LF_N_MOD; m++) {
		char name[32];
		snprintf(name, sizeof(name), "block%d", m);
		T_CHECK_RC(zinf_module_add(le->e, name, &le->mod[m]));
		for (int k = 0; k < 2; k++) {
			snprintf(name, sizeof(name), "block%d.%s", m, k ? "bias" : "weight");
			T_CHECK_RC(zinf_param_add(le->e, le->mod[m], name, dtype, k ? 1 : 2,
						  lf_shapes[m][k], 0, &le->par[m][k]));
		}
	}
	T_CHECK(zinf_engine_finalize(le->e) == 0, "%s", zinf_last_error(le->e));
}

static inline float lf_weight_at(const void *w, enum zinf_dtype dtype, uint64_t i)
{
	uint32_t u;
	float f;

	if (dtype == ZINF_DTYPE_F32)
		return ((const float *)w)[i];
	u = (uint32_t)((const uint16_t *)w)[i] << 16;
	memcpy(&f, &u, 4);
	return f;
}

/* Fetch module m, take its gradient buffers and add w - target to them (the gradient of
 * half the squared distance); returns that loss term. grads_ready and release are the
 * caller's. */
static inline double lf_module_grads(struct lf_engine *le, int m)
{
	struct zinf_engine *e = le->e;
	double loss = 0;

	T_CHECK(zinf_module_fetch(e, le->mod[m]) == 0 && zinf_module_wait(e, le->mod[m]) == 0, "%s",
		zinf_last_error(e));
	T_CHECK_RC(zinf_module_grads(e, le->mod[m]));
	for (int k = 0; k < 2; k++) {
		const void *w = zinf_param_data(e, le->par[m][k]);
		float *g = zinf_param_grad(e, le->par[m][k]);
		T_CHECK(w && g, "data and grad pointers");
		for (uint64_t i = 0; i < lf_elems(m, k); i++) {
			double d = (double)lf_weight_at(w, le->dtype, i) - lf_target(m, k, i);
			loss += d * d;
			g[i] += (float)d;
		}
	}
	return loss;
}

/* One optimizer step of one micro-batch; returns the loss the model saw before it. */
static inline double lf_step(struct lf_engine *le)
{
	struct zinf_engine *e = le->e;
	struct zinf_step_result r;
	double loss = 0;

	for (int m = 0; m < LF_N_MOD; m++) {
		loss += lf_module_grads(le, m);
		T_CHECK_RC(zinf_module_grads_ready(e, le->mod[m]));
		T_CHECK_RC(zinf_module_release(e, le->mod[m]));
	}
	T_CHECK(zinf_step(e, &r) == 0 && !r.skipped, "step: %s", zinf_last_error(e));
	return loss;
}

/* Every parameter's fp32 master, in registration order. */
static inline float *lf_save(struct lf_engine *le)
{
	float *out = malloc(lf_total() * 4);
	uint64_t off = 0;

	T_CHECK(out, "out of memory");
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++) {
			T_CHECK(zinf_param_save(le->e, le->par[m][k], out + off, ZINF_DTYPE_F32) ==
					0,
				"save: %s", zinf_last_error(le->e));
			off += lf_elems(m, k);
		}
	return out;
}

static inline void lf_destroy(struct lf_engine *le)
{
	zinf_engine_destroy(le->e);
	zinf_config_destroy(le->cfg);
}

#endif /* ZINF_TESTS_ENGINE_LOAD_FIXTURE_H */

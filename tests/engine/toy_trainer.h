/*
 * Test support: a toy model of N_MOD modules of one bf16 (512 x 400) parameter each,
 * trained through the engine API with gradient = weight - target, with an optional
 * forward-only eval pass in another module order before step 4. The config's JSON is
 * given by the test (its nvme_path is the scratch directory). Header-only: every test is
 * one executable.
 */
#ifndef ZINF_TESTS_TOY_TRAINER_H
#define ZINF_TESTS_TOY_TRAINER_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

#define N_MOD 6
#define ELEMS (512 * 400) /* bf16: 400 KiB a module; fp32 gradients 800 KiB */
#define STEPS 5

struct toy_run {
	float *params; /* (N_MOD * ELEMS) fp32 masters after the last step */
	struct zinf_stats st;
};

static float toy_weight(const void *w, uint64_t i)
{
	uint32_t u = (uint32_t)((const uint16_t *)w)[i] << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline void toy_eval_pass(struct zinf_engine *e, const uint32_t *mod, const uint32_t *par)
{
	static const int order[N_MOD] = {5, 0, 4, 1, 3, 2};
	double sum = 0;

	for (int k = 0; k < N_MOD; k++) {
		int m = order[k];
		T_CHECK(zinf_module_fetch(e, mod[m]) == 0 && zinf_module_wait(e, mod[m]) == 0,
			"eval: %s", zinf_last_error(e));
		for (uint64_t i = 0; i < ELEMS; i += 97)
			sum += toy_weight(zinf_param_data(e, par[m]), i);
		T_CHECK_RC(zinf_module_release(e, mod[m]));
	}
	T_CHECK(isfinite(sum), "eval read a non-finite weight");
}

/* Train STEPS steps with the config json; the result in out. */
static inline void toy_train(const char *json, bool with_eval, struct toy_run *out)
{
	char err[512];
	struct zinf_config *cfg;
	struct zinf_engine *e;
	/* the host's memory, as zinf train gives it: an unset pinned limit resolves */
	struct zinf_config_resolve_info info = {
		.world_size = 1, .host_total_bytes = zinf_host_memory_bytes(), .require_all = true};
	uint32_t mod[N_MOD], par[N_MOD];
	uint64_t shape[2] = {512, 400};
	float *buf = malloc(ELEMS * 4);

	T_CHECK(buf, "out of memory");
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_string(cfg, json, "toy.json") == 0, "%s",
		zinf_config_last_error(cfg));
	T_CHECK(zinf_config_resolve(cfg, &info) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	for (int m = 0; m < N_MOD; m++) {
		char name[32];
		snprintf(name, sizeof(name), "layers.%d", m);
		T_CHECK_RC(zinf_module_add(e, name, &mod[m]));
		T_CHECK_RC(zinf_param_add(e, mod[m], name, ZINF_DTYPE_BF16, 2, shape, 0, &par[m]));
	}
	T_CHECK(zinf_engine_finalize(e) == 0, "%s", zinf_last_error(e));
	for (int m = 0; m < N_MOD; m++) {
		for (uint64_t i = 0; i < ELEMS; i++)
			buf[i] = (float)(0.1 * sin(0.01 * (double)i + m));
		T_CHECK_RC(zinf_param_load(e, par[m], buf, ZINF_DTYPE_F32));
	}
	for (int s = 0; s < STEPS; s++) {
		struct zinf_step_result r;
		if (with_eval && s == 3)
			toy_eval_pass(e, mod, par);
		for (int m = 0; m < N_MOD; m++) { /* forward */
			T_CHECK(zinf_module_fetch(e, mod[m]) == 0 &&
					zinf_module_wait(e, mod[m]) == 0,
				"%s", zinf_last_error(e));
			T_CHECK_RC(zinf_module_release(e, mod[m]));
		}
		for (int m = N_MOD - 1; m >= 0; m--) { /* backward: grad = w - target */
			const void *w;
			float *g;
			T_CHECK(zinf_module_fetch(e, mod[m]) == 0 &&
					zinf_module_wait(e, mod[m]) == 0,
				"%s", zinf_last_error(e));
			T_CHECK_RC(zinf_module_grads(e, mod[m]));
			w = zinf_param_data(e, par[m]);
			g = zinf_param_grad(e, par[m]);
			for (uint64_t i = 0; i < ELEMS; i++)
				g[i] += toy_weight(w, i) - (float)cos(0.003 * (double)i * (m + 1));
			T_CHECK_RC(zinf_module_grads_ready(e, mod[m]));
			T_CHECK_RC(zinf_module_release(e, mod[m]));
		}
		T_CHECK(zinf_step(e, &r) == 0, "%s", zinf_last_error(e));
	}
	out->params = malloc((size_t)N_MOD * ELEMS * 4);
	T_CHECK(out->params, "out of memory");
	for (int m = 0; m < N_MOD; m++)
		T_CHECK_RC(zinf_param_save(e, par[m], out->params + (size_t)m * ELEMS,
					   ZINF_DTYPE_F32));
	zinf_engine_get_stats(e, &out->st);
	T_CHECK(out->st.device_peak <= out->st.device_limit,
		"device peak %llu over the budget %llu", (unsigned long long)out->st.device_peak,
		(unsigned long long)out->st.device_limit);
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	free(buf);
}

#endif /* ZINF_TESTS_TOY_TRAINER_H */

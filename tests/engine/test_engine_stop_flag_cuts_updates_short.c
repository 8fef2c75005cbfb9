/*
 * zinf_engine_set_stop: with its flag up, an update stops before its next module (state in
 * host memory or on the device) or NVMe sub-group and fails with -ECANCELED and one line
 * saying it was asked to stop; zinf_engine_stopped says so. In zinf_step itself
 * (overlap_optimizer off), and in the background (on: zinf_engine_sync reports it). An
 * update stopped before it changed anything leaves the parameters as they were, and
 * with the flag down the step is repeated and trains as an engine never stopped; with
 * no flag set nothing stops. Raised while a background update is part way (after its
 * first module is written, which a fetch of that module waits for), it stops the rest:
 * the engine is torn (the next step refused, naming the stopped update) and is destroyed
 * without waiting for the update.
 */
#include <math.h>
#include <unistd.h>

#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

#define N_MOD 4
#define ELEMS 300

static char nvme_dir[] = "/var/tmp/zinf-stop-flag-XXXXXX";

static struct zinf_engine *make(const char *opt_home, bool overlap, struct zinf_config **cfg,
				uint32_t *mod, uint32_t *par)
{
	char json[1024], err[512], name[32];
	struct zinf_config_resolve_info info = {.world_size = 1, .require_all = true};
	struct zinf_engine *e;
	float w[ELEMS];

	snprintf(json, sizeof(json),
		 "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 1,"
		 " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
		 " \"zero_optimization\": {\"stage\": 3, \"sub_group_size\": 200,"
		 " \"offload_param\": {\"device\": \"none\"},"
		 " \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"%s\"}},"
		 " \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"4MiB\","
		 " \"pinned_memory_limit\": \"8MiB\", \"chunk_size\": \"64KiB\","
		 " \"overlap_optimizer\": %s}}",
		 opt_home, nvme_dir, overlap ? "true" : "false");
	T_CHECK_RC(zinf_config_create(cfg));
	T_CHECK(zinf_config_load_string(*cfg, json, "stop.json") == 0, "%s",
		zinf_config_last_error(*cfg));
	T_CHECK(zinf_config_resolve(*cfg, &info) == 0, "%s", zinf_config_last_error(*cfg));
	T_CHECK(zinf_engine_create(*cfg, &e, err, sizeof(err)) == 0, "%s", err);
	for (int m = 0; m < N_MOD; m++) {
		uint64_t shape[1] = {ELEMS};
		snprintf(name, sizeof(name), "block%d", m);
		T_CHECK_RC(zinf_module_add(e, name, &mod[m]));
		snprintf(name, sizeof(name), "block%d.w", m);
		T_CHECK_RC(zinf_param_add(e, mod[m], name, ZINF_DTYPE_F32, 1, shape, 0, &par[m]));
	}
	T_CHECK(zinf_engine_finalize(e) == 0, "%s", zinf_last_error(e));
	for (int m = 0; m < N_MOD; m++) {
		for (int i = 0; i < ELEMS; i++)
			w[i] = (float)sin(0.1 * i + m);
		T_CHECK(zinf_param_load(e, par[m], w, ZINF_DTYPE_F32) == 0, "%s",
			zinf_last_error(e));
	}
	return e;
}

/* One micro-batch of gradients into every module. */
static void grads(struct zinf_engine *e, const uint32_t *mod, const uint32_t *par)
{
	for (int m = 0; m < N_MOD; m++) {
		T_CHECK(zinf_module_fetch(e, mod[m]) == 0 && zinf_module_wait(e, mod[m]) == 0, "%s",
			zinf_last_error(e));
		T_CHECK_RC(zinf_module_grads(e, mod[m]));
		float *g = zinf_param_grad(e, par[m]);
		for (int i = 0; i < ELEMS; i++)
			g[i] += (float)cos(0.2 * i - m);
		T_CHECK_RC(zinf_module_grads_ready(e, mod[m]));
		T_CHECK_RC(zinf_module_release(e, mod[m]));
	}
}

/* Every parameter, fp32, into out (N_MOD * ELEMS). */
static void params(struct zinf_engine *e, const uint32_t *par, float *out)
{
	for (int m = 0; m < N_MOD; m++)
		T_CHECK(zinf_param_save(e, par[m], out + m * ELEMS, ZINF_DTYPE_F32) == 0, "%s",
			zinf_last_error(e));
}

/* A step with the flag up: stopped, parameters unchanged; down again: the step as an
 * engine without a flag takes it (want). */
static void check(const char *opt_home, bool overlap, const float *want)
{
	static volatile int flag;
	struct zinf_config *cfg;
	struct zinf_engine *e;
	struct zinf_step_result r;
	uint32_t mod[N_MOD], par[N_MOD];
	float before[N_MOD * ELEMS], after[N_MOD * ELEMS];
	int rc;

	e = make(opt_home, overlap, &cfg, mod, par);
	zinf_engine_set_stop(e, &flag);
	params(e, par, before);
	grads(e, mod, par);
	flag = 1;
	rc = zinf_step(e, &r);
	/* the update runs in the background (not with the state on the device, which
	 * updates in zinf_step): the wait reports it */
	if (overlap && strcmp(opt_home, "none") != 0) {
		T_CHECK(rc == 0, "%s overlap: zinf_step %d: %s", opt_home, rc, zinf_last_error(e));
		rc = zinf_engine_sync(e);
	}
	T_CHECK(rc == -ECANCELED && strstr(zinf_last_error(e), "asked to stop") &&
			!strchr(zinf_last_error(e), '\n'),
		"%s overlap %d: the update was not stopped: %d %s", opt_home, overlap, rc,
		zinf_last_error(e));
	T_CHECK(zinf_engine_stopped(e), "%s: zinf_engine_stopped is false", opt_home);
	params(e, par, after);
	T_CHECK(memcmp(before, after, sizeof(before)) == 0, "%s overlap %d: parameters changed",
		opt_home, overlap);
	flag = 0; /* nothing changed: the step is taken again */
	T_CHECK(zinf_step(e, &r) == 0 && zinf_engine_sync(e) == 0, "%s overlap %d: again: %s",
		opt_home, overlap, zinf_last_error(e));
	params(e, par, after);
	T_CHECK(memcmp(after, want, sizeof(after)) == 0,
		"%s overlap %d: the repeated step differs from a step never stopped", opt_home,
		overlap);
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
}

/* The flag raised once a background update has written its first of 8 modules of 1M
 * parameters; 0 if the update had already finished (the caller tries again). */
static int torn_once(void)
{
	static volatile int flag;
	enum { MODS = 8, BIG = 1 << 20 };
	char json[1024], err[512], name[32];
	struct zinf_config_resolve_info info = {.world_size = 1, .require_all = true};
	struct zinf_config *cfg;
	struct zinf_engine *e;
	struct zinf_step_result r;
	uint32_t mod[MODS], par[MODS];
	float *w = malloc(BIG * sizeof(float));
	int rc;

	T_CHECK(w != NULL, "malloc");
	snprintf(json, sizeof(json),
		 "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 1,"
		 " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
		 " \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"none\"},"
		 " \"offload_optimizer\": {\"device\": \"cpu\"}},"
		 " \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"160MiB\","
		 " \"pinned_memory_limit\": \"64MiB\", \"overlap_optimizer\": true}}");
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_string(cfg, json, "torn.json") == 0, "%s",
		zinf_config_last_error(cfg));
	T_CHECK(zinf_config_resolve(cfg, &info) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	for (int m = 0; m < MODS; m++) {
		uint64_t shape[1] = {BIG};
		snprintf(name, sizeof(name), "big%d", m);
		T_CHECK_RC(zinf_module_add(e, name, &mod[m]));
		T_CHECK_RC(zinf_param_add(e, mod[m], name, ZINF_DTYPE_F32, 1, shape, 0, &par[m]));
	}
	T_CHECK(zinf_engine_finalize(e) == 0, "%s", zinf_last_error(e));
	zinf_engine_set_stop(e, &flag);
	for (int i = 0; i < BIG; i++)
		w[i] = (float)sin(0.001 * i);
	for (int m = 0; m < MODS; m++) {
		T_CHECK(zinf_param_load(e, par[m], w, ZINF_DTYPE_F32) == 0, "%s",
			zinf_last_error(e));
		T_CHECK(zinf_module_fetch(e, mod[m]) == 0 && zinf_module_wait(e, mod[m]) == 0, "%s",
			zinf_last_error(e));
		T_CHECK_RC(zinf_module_grads(e, mod[m]));
		memcpy(zinf_param_grad(e, par[m]), w, BIG * sizeof(float));
		T_CHECK_RC(zinf_module_grads_ready(e, mod[m]));
		T_CHECK_RC(zinf_module_release(e, mod[m]));
	}
	flag = 0;
	T_CHECK(zinf_step(e, &r) == 0, "%s", zinf_last_error(e));
	/* returns once the update has written module 0 */
	T_CHECK(zinf_module_fetch(e, mod[0]) == 0 && zinf_module_wait(e, mod[0]) == 0, "%s",
		zinf_last_error(e));
	__atomic_store_n(&flag, 1, __ATOMIC_RELAXED); /* the update thread reads it meanwhile */
	rc = zinf_engine_sync(e);
	if (rc == 0) { /* finished before the flag: nothing to check */
		zinf_module_release(e, mod[0]);
		zinf_engine_destroy(e);
		zinf_config_destroy(cfg);
		free(w);
		return 0;
	}
	T_CHECK(rc == -ECANCELED && strstr(zinf_last_error(e), "asked to stop"),
		"the update part way: %d %s", rc, zinf_last_error(e));
	T_CHECK(zinf_engine_stopped(e), "zinf_engine_stopped is false");
	T_CHECK_RC(zinf_module_release(e, mod[0]));
	flag = 0;
	rc = zinf_step(e, &r);
	T_CHECK(rc == ZINF_ESTATE && strstr(zinf_last_error(e), "asked to stop"),
		"a step after an update stopped part way: %d %s", rc, zinf_last_error(e));
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	free(w);
	return 1;
}

int main(void)
{
	const char *homes[] = {"cpu", "none", "nvme"};
	float want[N_MOD * ELEMS];

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(nvme_dir), "mkdtemp");
	for (size_t h = 0; h < 3; h++)
		for (int overlap = 0; overlap < 2; overlap++) {
			struct zinf_config *cfg;
			struct zinf_step_result r;
			uint32_t mod[N_MOD], par[N_MOD];
			struct zinf_engine *e = make(homes[h], overlap, &cfg, mod, par);

			grads(e, mod, par); /* never stopped: no flag */
			T_CHECK(zinf_step(e, &r) == 0 && zinf_engine_sync(e) == 0, "%s: %s",
				homes[h], zinf_last_error(e));
			T_CHECK(!zinf_engine_stopped(e), "stopped without a flag");
			params(e, par, want);
			zinf_engine_destroy(e);
			zinf_config_destroy(cfg);
			check(homes[h], overlap, want);
		}
	rmdir(nvme_dir);
	for (int tries = 0; !torn_once(); tries++)
		T_CHECK(tries < 20, "the background update always finished before the flag");
	printf("ok: updates stopped by the flag, and repeated; one part way left the engine torn\n");
	return T_EXIT_PASS;
}

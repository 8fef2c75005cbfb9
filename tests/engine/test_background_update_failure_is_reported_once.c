/* A background optimizer update that fails (an NVMe write error while the new parameters
 * go home) is reported, never hangs, and does not leave the engine unusable: the fetch of
 * a module the update did not write fails with the error, the first call that waits for
 * the whole update (zinf_engine_sync) returns it once, and afterwards sync and fetches
 * work again. The update had changed module 0's master and moments before its write
 * failed, so the engine is torn: steps and saves are refused, on one line, until both
 * modules are loaded whole again and the progress is set; then a step works. */
#include <math.h>
#include <unistd.h>

#include "io/io_test_util.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

#define N_MOD 2
#define ELEMS (256 * 256)

static uint32_t mod[N_MOD], par[N_MOD];

static void pass(struct zinf_engine *e)
{
	for (int m = 0; m < N_MOD; m++) {
		T_CHECK(zinf_module_fetch(e, mod[m]) == 0 && zinf_module_wait(e, mod[m]) == 0, "%s",
			zinf_last_error(e));
		T_CHECK_RC(zinf_module_release(e, mod[m]));
	}
	for (int m = N_MOD - 1; m >= 0; m--) {
		float *g;
		T_CHECK(zinf_module_fetch(e, mod[m]) == 0 && zinf_module_wait(e, mod[m]) == 0, "%s",
			zinf_last_error(e));
		T_CHECK_RC(zinf_module_grads(e, mod[m]));
		g = zinf_param_grad(e, par[m]);
		for (uint64_t i = 0; i < ELEMS; i++)
			g[i] += 0.01f * (float)((i % 7) + 1);
		T_CHECK_RC(zinf_module_grads_ready(e, mod[m]));
		T_CHECK_RC(zinf_module_release(e, mod[m]));
	}
}

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp"), json[1024], err[512];
	struct zinf_config_resolve_info info = {.world_size = 1, .require_all = true};
	uint64_t shape[2] = {256, 256};
	struct zinf_config *cfg;
	struct zinf_engine *e;
	struct zinf_step_result r;
	float *before = malloc(ELEMS * 4), *after = malloc(ELEMS * 4);
	const void *srcs[1] = {before};
	const enum zinf_dtype f32[1] = {ZINF_DTYPE_F32};
	struct zinf_engine_progress progress;
	int rc;

	T_CHECK(dir && before && after, "setup");
	zinf_log_set_level(ZINF_LOG_ERROR);
	snprintf(json, sizeof(json),
		 "{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true},"
		 " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
		 " \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\","
		 "  \"nvme_path\": \"%s\"}, \"offload_optimizer\": {\"device\": \"cpu\"},"
		 "  \"stage3_prefetch_bucket_size\": 0},"
		 " \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"2MiB\","
		 "  \"pinned_memory_limit\": \"4MiB\", \"chunk_size\": \"64KiB\","
		 "  \"io_engine\": \"psync\", \"overlap_optimizer\": true}}",
		 dir);
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_string(cfg, json, "fail.json") == 0, "%s",
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
	for (uint64_t i = 0; i < ELEMS; i++)
		before[i] = 0.001f * (float)(i % 1000);
	for (int m = 0; m < N_MOD; m++)
		T_CHECK_RC(zinf_param_load(e, par[m], before, ZINF_DTYPE_F32));

	T_CHECK_RC(zinf_engine_progress_get(e, &progress));
	pass(e);
	/* every write of the update fails: module 0, written first, is not written */
	zinf_io_fault_set(IO_FAULT_ERRNO, 1000000, EIO, 0, 1u << ZINF_IO_WRITE);
	T_CHECK(zinf_step(e, NULL) == 0, /* (the result may be left out) */
		"the step itself (norm, hand-over): %s", zinf_last_error(e));
	rc = zinf_module_fetch(e, mod[0]);
	T_CHECK(rc != 0 && strstr(zinf_last_error(e), "optimizer step") &&
			!strchr(zinf_last_error(e), '\n'),
		"fetch of an unwritten module returned %d: %s", rc, zinf_last_error(e));
	rc = zinf_engine_sync(e);
	T_CHECK(rc != 0, "sync did not report the failed update");
	zinf_io_fault_clear();
	T_CHECK(zinf_engine_sync(e) == 0, "the error was reported twice: %s", zinf_last_error(e));
	pass(e); /* fetches work again */
	rc = zinf_param_save(e, par[0], after, ZINF_DTYPE_F32);
	T_CHECK(rc == ZINF_ESTATE && strstr(zinf_last_error(e), "part way") &&
			!strchr(zinf_last_error(e), '\n'),
		"save of a torn engine returned %d: %s", rc, zinf_last_error(e));
	rc = zinf_step(e, &r);
	T_CHECK(rc == ZINF_ESTATE && strstr(zinf_last_error(e), "step 1's update failed part way"),
		"step of a torn engine returned %d: %s", rc, zinf_last_error(e));
	T_CHECK_RC(zinf_module_load(e, mod[0], 1, srcs, f32));
	T_CHECK_RC(zinf_engine_progress_set(e, &progress));
	rc = zinf_step(e, &r);
	T_CHECK(rc == ZINF_ESTATE && strstr(zinf_last_error(e), "1 not yet"),
		"step with module 1 not loaded again returned %d: %s", rc, zinf_last_error(e));
	T_CHECK_RC(zinf_module_load(e, mod[1], 1, srcs, f32));
	T_CHECK_RC(zinf_engine_progress_set(e, &progress));
	pass(e);
	T_CHECK(zinf_step(e, &r) == 0 && r.step == 1, "step after the reload: %s",
		zinf_last_error(e));
	T_CHECK(zinf_engine_sync(e) == 0, "sync after a good step: %s", zinf_last_error(e));
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	free(before);
	free(after);
	t_rmrf(dir);
	return T_EXIT_PASS;
}

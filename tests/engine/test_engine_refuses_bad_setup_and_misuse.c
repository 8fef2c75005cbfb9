/* The engine refuses, with a one-line reason naming what is wrong: a config with an
 * unresolved "auto", fp32 parameters with optimizer state on NVMe, a module larger than the
 * device budget (at finalize, before any step); and calls out of order: use before
 * finalize, gradients asked twice, a step while gradients are out. */
#include <unistd.h>

#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

static struct zinf_config *config(const char *json, bool resolve)
{
	struct zinf_config *cfg;
	struct zinf_config_resolve_info info = {.world_size = 1};

	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_string(cfg, json, "e.json") == 0, "%s",
		zinf_config_last_error(cfg));
	if (resolve)
		T_CHECK(zinf_config_resolve(cfg, &info) == 0, "%s", zinf_config_last_error(cfg));
	return cfg;
}

#define HOST                                                                                       \
	"\"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"1MiB\", \"pinned_memory_limit\": \"2MiB\"}"

int main(void)
{
	struct zinf_config *cfg;
	struct zinf_engine *e;
	struct zinf_step_result r;
	char err[512], json[1024], dir[] = "/var/tmp/zinf-engine-refuse-XXXXXX";
	uint32_t m, p;
	uint64_t big[2] = {1024, 512}, small[1] = {100};

	zinf_log_set_level(ZINF_LOG_ERROR);
	cfg = config(
		"{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"params\": {\"lr\": \"auto\"}}, " HOST
		"}",
		false);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == ZINF_ECONFIG && !e,
		"auto accepted");
	T_CHECK(strstr(err, "optimizer.params.lr: \"auto\" not resolved"), "%s", err);
	zinf_config_destroy(cfg);

	/* A scratch directory of its own: a stale run directory would fail later runs. */
	T_CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(json, sizeof(json),
		 "{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 3,"
		 " \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}}, " HOST
		 "}",
		 dir);
	cfg = config(json, true);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "norm", &m));
	T_CHECK_RC(zinf_param_add(e, m, "norm.weight", ZINF_DTYPE_F32, 1, small, 0, &p));
	T_CHECK(zinf_engine_finalize(e) == ZINF_ECONFIG,
		"fp32 parameters with nvme optimizer state accepted");
	T_CHECK(strstr(zinf_last_error(e),
		       "fp32 parameters with zero_optimization.offload_optimizer.device nvme"),
		"%s", zinf_last_error(e));
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");

	cfg = config("{\"train_micro_batch_size_per_gpu\": 1, " HOST "}", true);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "huge", &m));
	T_CHECK_RC(zinf_param_add(e, m, "huge.weight", ZINF_DTYPE_F32, 2, big, 0,
				  &p)); /* 2 MiB > 1 MiB */
	T_CHECK(zinf_module_fetch(e, m) == ZINF_ESTATE, "fetch before finalize");
	T_CHECK(zinf_engine_finalize(e) == ZINF_EBUDGET, "oversized module accepted");
	T_CHECK(strstr(zinf_last_error(e),
		       "module huge needs 2 MiB, more than the whole budget of 1 MiB"),
		"%s", zinf_last_error(e));
	zinf_engine_destroy(e);

	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "norm", &m));
	T_CHECK_RC(zinf_param_add(e, m, "norm.weight", ZINF_DTYPE_F32, 1, small, 0, &p));
	T_CHECK(zinf_param_add(e, 5, "x", ZINF_DTYPE_F32, 1, small, 0, &p) == -EINVAL,
		"unknown module");
	T_CHECK(zinf_step(e, &r) == ZINF_ESTATE, "step before finalize");
	T_CHECK_RC(zinf_engine_finalize(e));
	T_CHECK(zinf_module_add(e, "late", &m) == ZINF_ESTATE, "module after finalize");
	T_CHECK(zinf_param_data(e, 0) == NULL && zinf_param_grad(e, 0) == NULL,
		"pointers before fetch");
	T_CHECK(zinf_param_load(e, 0, small, ZINF_DTYPE_NONE) == -EINVAL, "load dtype");
	T_CHECK(zinf_param_load(e, 9, small, ZINF_DTYPE_F32) == -EINVAL, "load unknown param");
	T_CHECK_RC(zinf_module_grads(e, 0));
	T_CHECK(zinf_module_grads(e, 0) == ZINF_ESTATE, "gradients asked twice");
	T_CHECK(zinf_step(e, &r) == ZINF_ESTATE, "step with gradients out");
	T_CHECK(strstr(zinf_last_error(e), "module 0 (norm): gradients taken"), "%s",
		zinf_last_error(e));
	T_CHECK_RC(zinf_module_grads_ready(e, 0));
	T_CHECK(zinf_module_grads_ready(e, 0) == ZINF_ESTATE, "gradients returned twice");
	T_CHECK_RC(zinf_step(e, &r));
	T_CHECK(zinf_module_release(e, 0) != 0, "release without fetch");
	zinf_engine_destroy(e);
	zinf_engine_destroy(NULL);
	zinf_config_destroy(cfg);
	return T_EXIT_PASS;
}

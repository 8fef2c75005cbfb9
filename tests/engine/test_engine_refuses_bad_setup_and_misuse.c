/* The engine refuses, with a one-line reason naming what is wrong: a config with an
 * unresolved "auto", NVMe optimizer staging
 * buffers over the pinned budget (with a limit and a sub_group_size that each fit, or
 * the limit alone when no sub_group_size can), a module larger than the device budget
 * (at finalize, before any step); and calls out of order: use before finalize, a
 * finalize after one that failed part-way,
 * gradients asked twice, a step while gradients are out, a module listed twice for the
 * device-room check; a free of device memory the
 * engine did not hand out (a gradient buffer, a block freed already). */
#include <unistd.h>

#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

/* An engine with a bf16 weight of rows x 512 and a bias of 100, optimizer state on NVMe
 * in dir; returns finalize's result (the engine destroyed). */
static int nvme_finalize(const char *dir, const char *pinned, uint64_t rows, uint64_t sub,
			 bool pipelined, char *msg, size_t len);

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

static int nvme_finalize(const char *dir, const char *pinned, uint64_t rows, uint64_t sub,
			 bool pipelined, char *msg, size_t len)
{
	static const uint64_t b[1] = {100};
	const uint64_t w[2] = {rows, 512};
	struct zinf_config *cfg;
	struct zinf_engine *e;
	char json[1024], err[512];
	uint32_t m, p;
	int rc;

	snprintf(json, sizeof(json),
		 "{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 3,"
		 " \"sub_group_size\": %llu, \"offload_optimizer\": {\"device\": \"nvme\","
		 " \"nvme_path\": \"%s\", \"pipeline_read\": %s, \"pipeline_write\": %s}},"
		 " \"zinf\": {\"device\": \"host\", \"device_memory_limit\":"
		 " \"4MiB\", \"pinned_memory_limit\": \"%s\", \"chunk_size\": \"64KiB\"}}",
		 (unsigned long long)sub, dir, pipelined ? "true" : "false",
		 pipelined ? "true" : "false", pinned);
	cfg = config(json, true);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "layer", &m));
	T_CHECK_RC(zinf_param_add(e, m, "layer.weight", ZINF_DTYPE_BF16, 2, w, 0, &p));
	T_CHECK_RC(zinf_param_add(e, m, "layer.bias", ZINF_DTYPE_BF16, 1, b, 0, &p));
	rc = zinf_engine_finalize(e);
	snprintf(msg, len, "%s", rc ? zinf_last_error(e) : "");
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	return rc;
}

/* Staging buffers over the pinned budget: refused before they are taken, with advice
 * that works: the limit named, or the sub_group_size named, and no "at most 0". */
static void staging_over_budget(const char *dir)
{
	char msg[512], limit[32];
	const char *at;
	unsigned long long sub = 0;
	double mib = 0;

	T_CHECK(nvme_finalize(dir, "2MiB", 512, 1000000, true, msg, sizeof(msg)) == ZINF_EBUDGET,
		"staging buffers of 3 MiB in a 2 MiB pool accepted");
	T_CHECK(!strchr(msg, '\n') &&
			strstr(msg, "staging buffers (2 groups, sub_group_size 1000000)"),
		"%s", msg);
	at = strstr(msg, "raise it to at least ");
	T_CHECK(at && sscanf(at, "raise it to at least %lf MiB", &mib) == 1, "no limit: %s", msg);
	at = strstr(msg, "sub_group_size to at most ");
	T_CHECK(at && sscanf(at, "sub_group_size to at most %llu", &sub) == 1 && sub > 0, "%s",
		msg);
	snprintf(limit, sizeof(limit), "%.0fMiB", mib);
	T_CHECK(nvme_finalize(dir, limit, 512, 1000000, true, msg, sizeof(msg)) == 0,
		"the limit advised (%s) is refused: %s", limit, msg);
	T_CHECK(nvme_finalize(dir, "2MiB", 512, sub, true, msg, sizeof(msg)) == 0,
		"the sub_group_size advised (%llu) is refused: %s", sub, msg);
	/* a module whose gradients (992 x 512 x 4 bytes: 1984 KiB) leave less than one
	 * sub-group's buffers: only the limit can help */
	T_CHECK(nvme_finalize(dir, "2MiB", 992, 1000000, true, msg, sizeof(msg)) == ZINF_EBUDGET &&
			strstr(msg, "raise it to at least") && !strstr(msg, "at most"),
		"%s", msg);
	/* ... unless one staging buffer a group (no pipelining) leaves room for a size */
	T_CHECK(nvme_finalize(dir, "2MiB", 992, 1000000, false, msg, sizeof(msg)) == ZINF_EBUDGET,
		"one staging buffer a group of 1000000 elements in 64 KiB accepted");
	at = strstr(msg, "sub_group_size to at most ");
	T_CHECK(at && sscanf(at, "sub_group_size to at most %llu", &sub) == 1 && sub > 0,
		"no size advised where one fits: %s", msg);
	T_CHECK(nvme_finalize(dir, "2MiB", 992, sub, false, msg, sizeof(msg)) == 0,
		"the sub_group_size advised (%llu) is refused: %s", sub, msg);
	T_CHECK(nvme_finalize(dir, "2MiB", 992, sub + 1, false, msg, sizeof(msg)) == ZINF_EBUDGET,
		"the sub_group_size advised (%llu) is not the largest that fits", sub);
}

int main(void)
{
	struct zinf_config *cfg;
	struct zinf_engine *e;
	struct zinf_step_result r;
	char err[512], dir[] = "/var/tmp/zinf-engine-refuse-XXXXXX";
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
	staging_over_budget(dir);
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");

	/* The optimizer state on the device (offload_optimizer none, the default) that does
	 * not fit: refused before anything is laid out, so finalize says the same again. */
	cfg = config("{\"train_micro_batch_size_per_gpu\": 1, " HOST "}", true);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "wide", &m));
	T_CHECK_RC(zinf_param_add(e, m, "wide.weight", ZINF_DTYPE_BF16, 2, (uint64_t[]){256, 256},
				  0, &p)); /* 128 KiB of bf16: 1 MiB and 2 KiB of state */
	for (int i = 0; i < 2; i++) {
		T_CHECK(zinf_engine_finalize(e) == ZINF_EBUDGET, "state over the budget accepted");
		T_CHECK(strstr(zinf_last_error(e), "optimizer state on the device "
						   "(offload_optimizer.device none") &&
				strstr(zinf_last_error(e), "needs 1.00 MiB, 1 MiB free of 1 MiB") &&
				strstr(zinf_last_error(e), "offload_optimizer.device cpu or nvme"),
			"%s", zinf_last_error(e));
	}
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);

	cfg = config(
		"{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 3, "
		"\"offload_optimizer\": {\"device\": \"cpu\"}}, " HOST "}",
		true);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "huge", &m));
	T_CHECK_RC(zinf_param_add(e, m, "huge.weight", ZINF_DTYPE_F32, 2, big, 0,
				  &p)); /* 2 MiB > 1 MiB */
	T_CHECK(zinf_module_fetch(e, m) == ZINF_ESTATE, "fetch before finalize");
	T_CHECK(zinf_engine_finalize(e) == ZINF_EBUDGET, "oversized module accepted");
	T_CHECK(strstr(zinf_last_error(e),
		       "module huge needs 2 MiB, more than the whole budget of 1 MiB"),
		"%s", zinf_last_error(e));
	/* a failure after the layout began is final: another finalize says so */
	T_CHECK(zinf_engine_finalize(e) == ZINF_ESTATE &&
			strstr(zinf_last_error(e), "an earlier call failed") &&
			strstr(zinf_last_error(e), "destroy the engine"),
		"finalize after a failed one: %s", zinf_last_error(e));
	zinf_engine_destroy(e);

	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "norm", &m));
	T_CHECK_RC(zinf_param_add(e, m, "norm.weight", ZINF_DTYPE_F32, 1, small, 0, &p));
	T_CHECK(zinf_param_add(e, 5, "x", ZINF_DTYPE_F32, 1, small, 0, &p) == -EINVAL,
		"unknown module");
	T_CHECK(zinf_step(e, &r) == ZINF_ESTATE, "step before finalize");
	T_CHECK_RC(zinf_engine_finalize(e));
	T_CHECK(zinf_module_add(e, "late", &m) == ZINF_ESTATE, "module after finalize");
	T_CHECK(zinf_engine_check_room(e, 2, (const uint32_t[]){0, 0}, true) == -EINVAL &&
			strstr(zinf_last_error(e), "module 0 listed twice"),
		"a module listed twice for the room check: %s", zinf_last_error(e));
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
	{ /* only blocks zinf_engine_device_alloc gave are freed, and only once */
		void *block, *data, *again;
		float *grad;

		T_CHECK(zinf_module_fetch(e, 0) == 0 && zinf_module_wait(e, 0) == 0, "%s",
			zinf_last_error(e));
		data = (void *)zinf_param_data(e, 0);
		T_CHECK_RC(zinf_engine_device_alloc(e, 4096, &block));
		T_CHECK(data && zinf_engine_device_free(e, data) == -EINVAL &&
				strstr(zinf_last_error(e), "not a block"),
			"the engine's parameter buffer freed: %s", zinf_last_error(e));
		T_CHECK(zinf_engine_device_free(e, (char *)block + 64) == -EINVAL,
			"the inside of a block freed");
		T_CHECK_RC(zinf_engine_device_free(e, block));
		T_CHECK(zinf_engine_device_free(e, block) == -EINVAL, "a block freed twice");
		T_CHECK_RC(zinf_engine_device_alloc(e, 4096, &again));
		T_CHECK(again != data, "the parameter buffer given out again");
		T_CHECK_RC(zinf_engine_device_free(e, again));
		/* a gradient buffer (the first parameter's: the start of the store's block)
		 * is the engine's, not the model's */
		T_CHECK_RC(zinf_module_grads(e, 0));
		grad = zinf_param_grad(e, 0);
		T_CHECK(grad && zinf_engine_device_free(e, grad) == -EINVAL &&
				strstr(zinf_last_error(e), "not a block"),
			"a gradient buffer freed: %s", zinf_last_error(e));
		T_CHECK_RC(zinf_engine_device_alloc(e, 4096, &again));
		T_CHECK(again != (void *)grad, "the gradient buffer given out again");
		T_CHECK_RC(zinf_module_grads_ready(e, 0));
		T_CHECK_RC(zinf_engine_device_free(e, again));
		T_CHECK_RC(zinf_module_release(e, 0));
	}

	zinf_engine_destroy(e);
	zinf_engine_destroy(NULL);
	zinf_config_destroy(cfg);
	return T_EXIT_PASS;
}

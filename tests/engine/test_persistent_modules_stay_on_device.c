/* A module under stage3_param_persistence_threshold elements stays on the device once
 * fetched: after a sweep over larger modules that evicts everything else, fetching it
 * again is a cache hit; with the threshold at 0 the same sweep evicts it. */
#include <unistd.h>

#include "config_fixture.h"
#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

static uint64_t small_refetch_hits(const char *dir, uint64_t threshold)
{
	char json[1024], err[512];
	struct zinf_config *cfg;
	struct zinf_engine *e;
	struct zinf_stats before, after;
	uint32_t m[6], p[6];
	uint64_t big[2] = {512, 300}, small[1] = {1000};

	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 3,"
		" \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}, \"stage3_prefetch_bucket_size\": 0,"
		" \"offload_optimizer\": {\"device\": \"cpu\"},"
		" \"stage3_param_persistence_threshold\": %llu},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"1MiB\", \"pinned_memory_limit\": \"2MiB\","
		" \"chunk_size\": \"64KiB\"}}",
		dir, (unsigned long long)threshold);
	cfg = t_config(json, "p.json", true);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "norm", &m[0]));
	T_CHECK_RC(zinf_param_add(e, m[0], "norm.weight", ZINF_DTYPE_BF16, 1, small, 0, &p[0]));
	for (int i = 1; i < 6; i++) { /* 300 KiB each: three fill the 1 MiB budget */
		char name[16];
		snprintf(name, sizeof(name), "layers.%d", i);
		T_CHECK_RC(zinf_module_add(e, name, &m[i]));
		T_CHECK_RC(zinf_param_add(e, m[i], name, ZINF_DTYPE_BF16, 2, big, 0, &p[i]));
	}
	T_CHECK(zinf_engine_finalize(e) == 0, "%s", zinf_last_error(e));
	for (int i = 0; i < 6; i++) {
		T_CHECK(zinf_module_fetch(e, m[i]) == 0 && zinf_module_wait(e, m[i]) == 0, "%s",
			zinf_last_error(e));
		T_CHECK_RC(zinf_module_release(e, m[i]));
	}
	zinf_engine_get_stats(e, &before);
	T_CHECK(before.evictions > 0, "the sweep evicted nothing: the test proves nothing");
	T_CHECK(zinf_module_fetch(e, m[0]) == 0 && zinf_module_wait(e, m[0]) == 0, "%s",
		zinf_last_error(e));
	T_CHECK_RC(zinf_module_release(e, m[0]));
	zinf_engine_get_stats(e, &after);
	T_CHECK(after.device_peak <= after.device_limit, "over budget");
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	return after.hits - before.hits;
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-persist-test-XXXXXX";

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	T_CHECK(small_refetch_hits(dir, 100000) == 1, "the persistent module was evicted");
	T_CHECK(small_refetch_hits(dir, 0) == 0,
		"with threshold 0 the small module should have been evicted");
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");
	return T_EXIT_PASS;
}

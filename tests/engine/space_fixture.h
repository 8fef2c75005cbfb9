/*
 * Test support for the NVMe space tests: the load fixture's model (bf16 weights, fp32
 * biases: four optimizer groups) with parameters, optimizer state and gradients on NVMe,
 * sub-groups of 7001 elements, extents striped in 64 KiB units over one or two paths.
 */
#ifndef ZINF_TESTS_ENGINE_SPACE_FIXTURE_H
#define ZINF_TESTS_ENGINE_SPACE_FIXTURE_H

#include "load_fixture.h"

static inline void engine_make(struct lf_engine *le, const char *dir0, const char *dir1)
{
	struct zinf_config_resolve_info info = {.world_size = 1, .require_all = true};
	char json[1536], paths[600], err[512];

	if (dir1)
		snprintf(paths, sizeof(paths), "\"%s\", \"%s\"", dir0, dir1);
	else
		snprintf(paths, sizeof(paths), "\"%s\"", dir0);
	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1,"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\"},"
		"  \"offload_optimizer\": {\"device\": \"nvme\"}, \"sub_group_size\": 7001},"
		" \"aio\": {\"block_size\": \"64KiB\"},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"2MiB\", \"pinned_memory_limit\": \"4MiB\","
		"  \"chunk_size\": \"64KiB\", \"offload_gradients\": \"nvme\", \"nvme_paths\": [%s]}}",
		paths);
	T_CHECK_RC(zinf_config_create(&le->cfg));
	T_CHECK(zinf_config_load_string(le->cfg, json, "space.json") == 0, "%s",
		zinf_config_last_error(le->cfg));
	T_CHECK(zinf_config_resolve(le->cfg, &info) == 0, "%s", zinf_config_last_error(le->cfg));
	T_CHECK(zinf_engine_create(le->cfg, &le->e, err, sizeof(err)) == 0, "%s", err);
	for (int m = 0; m < LF_N_MOD; m++) {
		char name[32];
		snprintf(name, sizeof(name), "block%d", m);
		T_CHECK_RC(zinf_module_add(le->e, name, &le->mod[m]));
		for (int k = 0; k < 2; k++) { /* bf16 weights, fp32 biases: four groups */
			snprintf(name, sizeof(name), "block%d.%s", m, k ? "bias" : "weight");
			T_CHECK_RC(zinf_param_add(le->e, le->mod[m], name,
						  k ? ZINF_DTYPE_F32 : ZINF_DTYPE_BF16, k ? 1 : 2,
						  lf_shapes[m][k], 0, &le->par[m][k]));
		}
	}
}

static inline void engine_free(struct lf_engine *le)
{
	zinf_engine_destroy(le->e);
	zinf_config_destroy(le->cfg);
}

#endif /* ZINF_TESTS_ENGINE_SPACE_FIXTURE_H */

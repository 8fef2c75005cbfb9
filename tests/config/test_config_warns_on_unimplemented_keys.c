/* DeepSpeed keys zinf does not implement, old key names, values that have no effect yet
 * and paths missing on this machine load with one warning each naming the key, as does
 * a scheduler whose total_num_steps ends before the run and NVMe sub-groups smaller than
 * an I/O block; a config without them loads with none. Old names (the bfloat16 section
 * too) and unimplemented keys (inside an unimplemented section too) warn through --set as
 * in a file, and both names --set are refused. */
#include "config.h"
#include "test.h"
#include "zinf/zinf.h"

static bool has_warning(struct zinf_config *cfg, const char *text)
{
	for (int i = 0; i < zinf_config_warning_count(cfg); i++)
		if (strstr(zinf_config_warning(cfg, i), text))
			return true;
	return false;
}

int main(void)
{
	struct zinf_config *cfg;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK_RC(zinf_config_load_string(
		cfg,
		"{\"wall_clock_breakdown\": true, \"flops_profiler\": {\"enabled\": true},"
		" \"aio\": {\"thread_count\": 2, \"use_gds\": true},"
		" \"activation_checkpointing\": {\"partition_activations\": true, \"profile\": false},"
		" \"optimizer\": {\"type\": \"Adam\", \"params\": {\"weight_decay\": 0.1}},"
		" \"zero_optimization\": {\"stage\": 3, \"round_robin_gradients\": true,"
		"  \"stage3_gather_fp16_weights_on_model_save\": true,"
		"  \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/nonexistent/zinf-nvme\"}}}",
		"w.json"));
	T_CHECK(zinf_config_resolve(cfg, NULL) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(has_warning(
			cfg,
			"w.json: wall_clock_breakdown: DeepSpeed key not implemented by zinf; ignored"),
		"wall");
	T_CHECK(has_warning(cfg, "flops_profiler: DeepSpeed key not implemented"),
		"flops_profiler");
	T_CHECK(has_warning(
			cfg,
			"zero_optimization.round_robin_gradients: DeepSpeed key not implemented"),
		"rr");
	T_CHECK(has_warning(
			cfg,
			"aio.thread_count: old DeepSpeed name, accepted; use aio.intra_op_parallelism"),
		"alias");
	T_CHECK(has_warning(cfg, "stage3_gather_fp16_weights_on_model_save: old DeepSpeed name"),
		"alias 2");
	T_CHECK(has_warning(cfg, "aio.use_gds: not implemented by zinf yet"), "use_gds");
	T_CHECK(has_warning(cfg, "activation_checkpointing.partition_activations: not implemented"),
		"partition_activations");
	T_CHECK(!has_warning(cfg, "activation_checkpointing.profile"), "a default value warns not");
	T_CHECK(has_warning(cfg, "optimizer.type: Adam applies weight_decay as L2"),
		"Adam/AdamW difference");
	T_CHECK(has_warning(cfg, "/nonexistent/zinf-nvme does not exist on this machine"),
		"missing path");
	T_CHECK(cfg->v.aio.intra_op_parallelism == 2 &&
			cfg->v.zero.stage3_gather_16bit_weights_on_model_save,
		"aliases set the new keys");
	T_CHECK(zinf_config_warning_count(cfg) == 9, "%d warnings", zinf_config_warning_count(cfg));

	/* DeepSpeed's old bfloat16 section: bf16, one warning; and old names through --set,
	 * warned the same, both names set refused */
	T_CHECK_RC(zinf_config_load_string(cfg, "{\"bfloat16\": {\"enabled\": true}}", "b.json"));
	T_CHECK(zinf_config_resolve(cfg, NULL) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(cfg->v.bf16.enabled && zinf_config_warning_count(cfg) == 1 &&
			has_warning(cfg,
				    "b.json: bfloat16: old DeepSpeed name, accepted; use bf16"),
		"bfloat16: %d warnings", zinf_config_warning_count(cfg));
	T_CHECK_RC(zinf_config_load_string(cfg, "{}", "s.json"));
	T_CHECK_RC(zinf_config_set(cfg, "aio.thread_count", "3"));
	T_CHECK(cfg->v.aio.intra_op_parallelism == 3 &&
			has_warning(cfg,
				    "--set: aio.thread_count: old DeepSpeed name, accepted; use "
				    "aio.intra_op_parallelism"),
		"--set of an old name");
	T_CHECK_RC(zinf_config_set(cfg, "aio.thread_count", "4")); /* the same name again */
	T_CHECK(zinf_config_set(cfg, "aio.intra_op_parallelism", "2") != 0 &&
			strstr(zinf_config_last_error(cfg),
			       "aio.intra_op_parallelism: given together with its old name "
			       "aio.thread_count"),
		"--set of both names: %s", zinf_config_last_error(cfg));
	/* DeepSpeed keys zinf does not implement, and keys inside such a section, warn
	 * through --set as in a file (not refused) */
	T_CHECK_RC(zinf_config_load_string(cfg, "{}", "s.json"));
	T_CHECK_RC(zinf_config_set(cfg, "wall_clock_breakdown", "false"));
	T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.round_robin_gradients", "true"));
	T_CHECK_RC(zinf_config_set(cfg, "flops_profiler.enabled", "true"));
	T_CHECK(has_warning(cfg, "--set: wall_clock_breakdown: DeepSpeed key not implemented") &&
			has_warning(cfg,
				    "--set: zero_optimization.round_robin_gradients: DeepSpeed "
				    "key not implemented") &&
			has_warning(cfg, "--set: flops_profiler: DeepSpeed key not implemented") &&
			zinf_config_warning_count(cfg) == 3,
		"--set of unimplemented keys: %d warnings", zinf_config_warning_count(cfg));
	/* an old name set to null resets what it stands for (and is no clash after) */
	T_CHECK_RC(zinf_config_load_string(cfg, "{\"bf16\": {\"enabled\": true}}", "n.json"));
	T_CHECK_RC(zinf_config_set(cfg, "bfloat16", "null"));
	T_CHECK(!cfg->v.bf16.enabled && has_warning(cfg, "--set: bfloat16: old DeepSpeed name"),
		"--set bfloat16=null left bf16.enabled");
	T_CHECK_RC(zinf_config_set(cfg, "bf16.enabled", "true"));
	T_CHECK_RC(zinf_config_set(cfg, "bf16", "null"));
	T_CHECK_RC(zinf_config_set(cfg, "bfloat16.enabled", "true"));
	T_CHECK_RC(zinf_config_load_string(cfg, "{}", "s.json"));
	T_CHECK_RC(zinf_config_set(cfg, "bf16.enabled", "true"));
	T_CHECK(zinf_config_set(cfg, "bfloat16.enabled", "true") != 0 &&
			strstr(zinf_config_last_error(cfg), "given together with its new name"),
		"--set of both names, the old one second: %s", zinf_config_last_error(cfg));

	/* Offload refinements DeepSpeed has and zinf does not implement yet. */
	T_CHECK_RC(zinf_config_load_string(
		cfg,
		"{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\","
		" \"ratio\": 0.5, \"fast_init\": true, \"buffer_count\": 4},"
		" \"offload_param\": {\"device\": \"cpu\", \"max_in_cpu\": 5, \"buffer_count\": 8,"
		" \"buffer_size\": 1e6}}}",
		"o.json"));
	T_CHECK(zinf_config_resolve(cfg, NULL) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(!has_warning(cfg, "zero_optimization.offload_optimizer.ratio"),
		"ratio with device cpu is implemented and warns not");
	T_CHECK(!has_warning(cfg, "zero_optimization.offload_optimizer.fast_init"),
		"fast_init is implemented and warns not");
	/* implemented, but for NVMe homes only */
	T_CHECK(has_warning(cfg, "zero_optimization.offload_param.max_in_cpu: no effect unless "
				 "the parameters' home is nvme"),
		"max_in_cpu with device cpu");
	/* DeepSpeed's staging buffers: zinf's come from its pinned pool */
	T_CHECK(has_warning(cfg, "offload_param.buffer_count: not implemented") &&
			has_warning(cfg, "offload_param.buffer_size: not implemented"),
		"offload_param's buffers");
	T_CHECK(!has_warning(cfg, "offload_optimizer.buffer_count"), "a default buffer_count");
	T_CHECK(zinf_config_warning_count(cfg) == 3, "%d warnings", zinf_config_warning_count(cfg));
	/* drives listed with nothing on NVMe: never opened, so said to do nothing */
	T_CHECK_RC(zinf_config_set(cfg, "zinf.nvme_paths", "[\"/nonexistent/nvme0\"]"));
	T_CHECK(zinf_config_resolve(cfg, NULL) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(has_warning(cfg, "zinf.nvme_paths: no effect unless offload_param or "
				 "offload_optimizer is on nvme"),
		"zinf.nvme_paths with both offloads on cpu");

	/* ratio (Twin-Flow) is the split between host memory and the device: with the
	 * state on NVMe not implemented, with it all on the device meaningless */
	for (int k = 0; k < 2; k++) {
		T_CHECK_RC(zinf_config_load_string(
			cfg,
			k ? "{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\":"
			    " \"nvme\", \"nvme_path\": \"/var/tmp\", \"ratio\": 0.3}}}"
			  : "{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"ratio\":"
			    " 0.3}}}",
			"r.json"));
		T_CHECK(zinf_config_resolve(cfg, NULL) == 0, "%s", zinf_config_last_error(cfg));
		T_CHECK(has_warning(cfg, k ? "zero_optimization.offload_optimizer.ratio: not "
					     "implemented with nvme yet"
					   : "zero_optimization.offload_optimizer.ratio: no effect "
					     "unless the optimizer state's home is cpu") &&
				zinf_config_warning_count(cfg) == 1,
			"ratio 0.3 with %s: %d warnings", k ? "nvme" : "none",
			zinf_config_warning_count(cfg));
	}

	/* NVMe sub-groups smaller than an I/O block: padded, said once resolved (--set too). */
	for (int k = 0; k < 2; k++) {
		struct zinf_config_resolve_info info = {.world_size = 1};
		T_CHECK_RC(zinf_config_load_string(
			cfg,
			"{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\":"
			" \"nvme\", \"nvme_path\": \"/var/tmp\"}}}",
			"n.json"));
		T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.sub_group_size",
					   k ? "1024" : "300"));
		T_CHECK_RC(zinf_config_resolve(cfg, &info));
		T_CHECK(has_warning(cfg,
				    "sub_group_size: 300 elements with the optimizer on NVMe: "
				    "each of a sub-group's master, m and v is padded to an I/O "
				    "block of at least 4 KiB (1024 elements), so the state takes "
				    "3.4x") == !k,
			"sub_group_size %s: %d warnings", k ? "1024" : "300",
			zinf_config_warning_count(cfg));
	}

	/* A schedule shorter than the run: its final rate for the rest, said once resolved;
	 * shorter than its warmup: the warmup goes on, then the rate falls at once (k 3); an
	 * "auto" warmup is 0, never longer (k 4: not its default of 1000) */
	for (int k = 0; k < 5; k++) {
		static const char *total[5] = {"2", "4", "\"auto\"", "2", "4"};
		static const char *warmup[5] = {"1", "1", "1", "3", "\"auto\""};
		struct zinf_config_resolve_info info = {.world_size = 1, .total_steps = 4};
		char json[256];
		snprintf(json, sizeof(json),
			 "{\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\":"
			 " {\"total_num_steps\": %s, \"warmup_num_steps\": %s}}}",
			 total[k], warmup[k]);
		T_CHECK_RC(zinf_config_load_string(cfg, json, "s.json"));
		T_CHECK_RC(zinf_config_resolve(cfg, &info));
		T_CHECK(has_warning(cfg, "scheduler.params.total_num_steps: 2 is less than the "
					 "run's 4 optimizer steps; the steps after it run at the "
					 "schedule's final learning rate") == (k == 0),
			"total_num_steps %s of a 4-step run: %d warnings", total[k],
			zinf_config_warning_count(cfg));
		T_CHECK(has_warning(cfg, "is less than warmup_num_steps") == (k == 3) &&
				(k != 3 ||
				 has_warning(cfg, "2 is less than warmup_num_steps 3; the "
						  "rate warms up through warmup_num_steps "
						  "all the same, then falls at once")),
			"total_num_steps %s below the warmup: %d warnings", total[k],
			zinf_config_warning_count(cfg));
	}

	T_CHECK_RC(zinf_config_load_string(
		cfg, "{\"zero_optimization\": {\"stage\": 2}, \"bf16\": {\"enabled\": true}}",
		"clean.json"));
	T_CHECK(zinf_config_resolve(cfg, NULL) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(zinf_config_warning_count(cfg) == 0, "clean config warns: %s",
		zinf_config_warning(cfg, 0));

	/* Paths are looked at once the overrides are in: the file's missing one, replaced
	 * by --set, warns not; a run about to start (require_all) reports it as its error,
	 * not as a warning. */
	for (int k = 0; k < 3; k++) {
		struct zinf_config_resolve_info info = {.device_free_bytes = 1ull << 30,
							.host_total_bytes = 1ull << 32,
							.require_all = k == 2};
		T_CHECK_RC(zinf_config_load_string(
			cfg,
			"{\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\":"
			" \"nvme\", \"nvme_path\": \"/nonexistent/zinf-nvme\"}},"
			" \"train_micro_batch_size_per_gpu\": 1}",
			"p.json"));
		if (k == 1)
			T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.offload_param.nvme_path",
						   "/var/tmp"));
		T_CHECK(zinf_config_resolve(cfg, &info) == 0, "%s", zinf_config_last_error(cfg));
		T_CHECK(has_warning(cfg, "/nonexistent/zinf-nvme does not exist") == (k == 0),
			"case %d: %d warnings (%s)", k, zinf_config_warning_count(cfg),
			zinf_config_warning(cfg, 0) ? zinf_config_warning(cfg, 0) : "");
	}
	/* a value --set gave is warned of under --set's name, not the file's */
	T_CHECK_RC(zinf_config_load_string(
		cfg,
		"{\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\":"
		" \"nvme\", \"nvme_path\": \"/var/tmp\"}}, \"zinf\": {\"nvme_paths\":"
		" [\"/var/tmp\"]}}",
		"s.json"));
	T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.offload_param.buffer_count", "8"));
	T_CHECK_RC(zinf_config_set(cfg, "zinf.nvme_paths", "[\"/nonexistent/by-set\"]"));
	T_CHECK(zinf_config_resolve(cfg, NULL) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(has_warning(cfg, "--set: zero_optimization.offload_param.buffer_count: not") &&
			has_warning(cfg, "--set: zinf.nvme_paths[0]: /nonexistent/by-set does not"),
		"--set's warnings: %d, the first %s", zinf_config_warning_count(cfg),
		zinf_config_warning(cfg, 0) ? zinf_config_warning(cfg, 0) : "");
	zinf_config_destroy(cfg);
	return T_EXIT_PASS;
}

/* zinf_config_set overrides one key from command-line text (JSON or a bare word), marks
 * it "set", checks it like the loader, and suggests the closest key for a typo; a rule
 * across keys that a --set value breaks, and a warning about one, are named --set, not
 * the file. A refused list value leaves the list as it was; more than 16 paths are
 * refused; the names read back for two enum keys are both still right afterwards. */
#include "config.h"
#include "test.h"
#include "zinf/zinf.h"

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

int main(void)
{
	struct zinf_config *cfg;
	enum zinf_config_source src;
	const char *s;
	uint64_t u;
	double d;

	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK_RC(zinf_config_load_string(cfg, "{\"zero_optimization\": {\"stage\": 1}}", "cli"));
	T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.stage", "3"));
	T_CHECK(cfg->v.zero.stage == 3, "stage set");
	T_CHECK(zinf_config_get_source(cfg, "zero_optimization.stage", &src) == 0 &&
			src == ZINF_SRC_SET,
		"source set");
	T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.offload_param.device",
				   "nvme")); /* bare word */
	T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.offload_param.nvme_path", "/mnt/nvme0"));
	T_CHECK(zinf_config_get_string(cfg, "zero_optimization.offload_param.nvme_path", &s) == 0 &&
			strcmp(s, "/mnt/nvme0") == 0,
		"path set");
	T_CHECK_RC(zinf_config_set(cfg, "aio.block_size", "4MiB"));
	T_CHECK(zinf_config_get_u64(cfg, "aio.block_size", &u) == 0 && u == 4u << 20,
		"bytes from a size string");
	T_CHECK_RC(zinf_config_set(cfg, "zinf.nvme_paths", "[\"/a\", \"/b\"]"));
	T_CHECK(zinf_config_get_list(cfg, "zinf.nvme_paths", 1, &s) == 0 && strcmp(s, "/b") == 0,
		"list");
	T_CHECK(zinf_config_get_list(cfg, "zinf.nvme_paths", 2, &s) == -ERANGE, "list end");
	T_CHECK_RC(zinf_config_set(cfg, "optimizer.params.lr", "3e-4"));
	T_CHECK(zinf_config_get_double(cfg, "optimizer.params.lr", &d) == 0 && d == 3e-4, "lr");
	/* a number key read as u64: whole and in range, else -EINVAL (a value past 2^64 is
	 * not cast: that is undefined) */
	T_CHECK(zinf_config_get_u64(cfg, "optimizer.params.lr", &u) == -EINVAL, "3e-4 as u64");
	T_CHECK_RC(zinf_config_set(cfg, "gradient_clipping", "1e19"));
	T_CHECK(zinf_config_get_u64(cfg, "gradient_clipping", &u) == 0 &&
			u == 10000000000000000000ull,
		"1e19 as u64");
	T_CHECK_RC(zinf_config_set(cfg, "gradient_clipping", "1e20"));
	T_CHECK(zinf_config_get_u64(cfg, "gradient_clipping", &u) == -EINVAL, "1e20 as u64");
	T_CHECK_RC(
		zinf_config_set(cfg, "optimizer.type", "adamw")); /* DeepSpeed matches any case */
	T_CHECK_RC(zinf_config_set(cfg, "zinf.trace", "3"));	  /* a file named 3 is a string */
	T_CHECK(zinf_config_get_string(cfg, "zinf.trace", &s) == 0 && strcmp(s, "3") == 0,
		"bare numeric path");

	T_CHECK(zinf_config_set(cfg, "zero_optimization.stage", "5") == ZINF_ECONFIG,
		"range checked");
	T_CHECK_STR(
		zinf_config_last_error(cfg),
		"--set: zero_optimization.stage: 5 is out of range (expected an integer from 0 to 3)");
	T_CHECK(cfg->v.zero.stage == 3, "refused value not stored");
	/* a count's unwritten bound (1e15) is said, with the value as given */
	T_CHECK(zinf_config_set(cfg, "zero_optimization.sub_group_size", "1000000000000001") ==
				ZINF_ECONFIG &&
			strstr(zinf_config_last_error(cfg),
			       "1000000000000001 is out of range (expected a whole number up to 1e15)"),
		"a count past 1e15: %s", zinf_config_last_error(cfg));
	/* a byte size's wrong type is named as given, not as a string of it */
	T_CHECK(zinf_config_set(cfg, "zinf.pinned_memory_limit", "true") == ZINF_ECONFIG &&
			strstr(zinf_config_last_error(cfg),
			       "--set: zinf.pinned_memory_limit: wrong type: true (expected"),
		"a bool as a byte size: %s", zinf_config_last_error(cfg));
	T_CHECK(zinf_config_set(cfg, "zinf.pinned_memory_limit", "[1]") == ZINF_ECONFIG &&
			strstr(zinf_config_last_error(cfg), "wrong type: a list of 1 (expected"),
		"a list as a byte size: %s", zinf_config_last_error(cfg));
	T_CHECK(zinf_config_set(cfg, "zero_optimization.stage3_prefetch_bucket_sise", "1") ==
			ZINF_ECONFIG,
		"typo");
	T_CHECK_STR(
		zinf_config_last_error(cfg),
		"--set: zero_optimization.stage3_prefetch_bucket_sise: unknown key; did you mean stage3_prefetch_bucket_size?");
	/* a program's own flag names what it set, in its errors and in the resolve's */
	T_CHECK_RC(zinf_config_load_string(cfg, "{\"train_batch_size\": 8}", "tb.json"));
	T_CHECK(zinf_config_set_from(cfg, "train_micro_batch_size_per_gpu", "0",
				     "--micro-batch-size") == ZINF_ECONFIG &&
			strncmp(zinf_config_last_error(cfg),
				"--micro-batch-size: train_micro_batch_size_per_gpu: ", 52) == 0,
		"a flag's bad value: %s", zinf_config_last_error(cfg));
	T_CHECK_RC(zinf_config_set_from(cfg, "train_micro_batch_size_per_gpu", "3",
					"--micro-batch-size"));
	T_CHECK(zinf_config_resolve(cfg, NULL) == ZINF_ECONFIG &&
			strncmp(zinf_config_last_error(cfg),
				"--micro-batch-size: train_batch_size: 8 is not divisible",
				56) == 0,
		"the resolve names the flag: %s", zinf_config_last_error(cfg));
	T_CHECK_RC(zinf_config_set(cfg, "train_micro_batch_size_per_gpu", "3"));
	T_CHECK(zinf_config_resolve(cfg, NULL) == ZINF_ECONFIG &&
			strncmp(zinf_config_last_error(cfg), "--set: train_batch_size: 8", 26) == 0,
		"--set again: %s", zinf_config_last_error(cfg));
	T_CHECK(zinf_config_set_from(cfg, "steps_per_print", "5", NULL) == -EINVAL &&
			zinf_config_set_from(cfg, "steps_per_print", "5", "") == -EINVAL &&
			zinf_config_set_from(cfg, "steps_per_print", "5", "a\nb") == -EINVAL &&
			strstr(zinf_config_last_error(cfg), "origin"),
		"a bad origin: %s", zinf_config_last_error(cfg));
	T_CHECK(zinf_config_set(cfg, "zero_optimization", "3") == ZINF_ECONFIG,
		"a section cannot be set");
	T_CHECK_STR(zinf_config_last_error(cfg),
		    "--set: zero_optimization: a section, not a value (expected one of its keys, "
		    "such as zero_optimization.stage)");
	T_CHECK(zinf_config_set(cfg, "bfloat16", "1") == ZINF_ECONFIG &&
			strstr(zinf_config_last_error(cfg), "such as bf16.enabled)"),
		"an old section's name suggests its new key: %s", zinf_config_last_error(cfg));
	T_CHECK(zinf_config_set(cfg, "aio.block_size", "12KB") == ZINF_ECONFIG,
		"12000 bytes is unaligned");
	T_CHECK(zinf_config_set(cfg, "zero_optimization.offload_param", NULL) == ZINF_ECONFIG &&
			zinf_config_set(cfg, NULL, "1") == ZINF_ECONFIG &&
			strstr(zinf_config_last_error(cfg), "no key"),
		"a NULL key or value: %s", zinf_config_last_error(cfg));
	T_CHECK(zinf_config_set(cfg, "bf16.enabled", "yes") == ZINF_ECONFIG,
		"bool from a bare word");
	zinf_config_destroy(cfg);

	/* a refused list leaves the list; the enum names read back stay put */
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK_RC(zinf_config_load_string(
		cfg,
		"{\"zinf\": {\"nvme_paths\": [\"/a\", \"/b\"]}, \"zero_optimization\": {\"stage\": 3,"
		" \"offload_param\": {\"device\": \"cpu\"}, \"offload_optimizer\": {\"device\":"
		" \"nvme\"}}}",
		"list.json"));
	T_CHECK(zinf_config_set(cfg, "zinf.nvme_paths", "[\"/x\", 5]") == ZINF_ECONFIG &&
			zinf_config_set(cfg, "zinf.nvme_paths", "\"\"") == ZINF_ECONFIG,
		"bad lists accepted");
	T_CHECK(zinf_config_get_list(cfg, "zinf.nvme_paths", 1, &s) == 0 && !strcmp(s, "/b") &&
			zinf_config_get_list(cfg, "zinf.nvme_paths", 2, &s) == -ERANGE,
		"a refused list changed the list");
	T_CHECK(zinf_config_set(
			cfg, "zinf.nvme_paths",
			"[\"/1\",\"/2\",\"/3\",\"/4\",\"/5\",\"/6\",\"/7\",\"/8\",\"/9\","
			"\"/10\",\"/11\",\"/12\",\"/13\",\"/14\",\"/15\",\"/16\",\"/17\"]") ==
				ZINF_ECONFIG &&
			strstr(zinf_config_last_error(cfg), "17 paths (expected at most 16"),
		"17 paths: %s", zinf_config_last_error(cfg));
	{
		const char *a, *b;

		T_CHECK_RC(
			zinf_config_get_string(cfg, "zero_optimization.offload_param.device", &a));
		T_CHECK_RC(zinf_config_get_string(cfg, "zero_optimization.offload_optimizer.device",
						  &b));
		T_CHECK(!strcmp(a, "cpu") && !strcmp(b, "nvme"), "enum names %s, %s", a, b);
	}
	zinf_config_destroy(cfg);

	/* cross-key rules broken by a --set value */
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK_RC(zinf_config_load_string(
		cfg, "{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true}}",
		"x.json"));
	T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.offload_param.device", "nvme"));
	T_CHECK(zinf_config_resolve(cfg, NULL) == ZINF_ECONFIG, "offload at stage 0 accepted");
	T_CHECK(starts(zinf_config_last_error(cfg),
		       "--set: zero_optimization.offload_param.device: "),
		"not named --set: %s", zinf_config_last_error(cfg));
	T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.offload_param.device", "none"));
	T_CHECK_RC(zinf_config_set(cfg, "fp16.enabled", "true"));
	T_CHECK(zinf_config_resolve(cfg, NULL) == ZINF_ECONFIG, "fp16 and bf16 accepted");
	T_CHECK(starts(zinf_config_last_error(cfg), "--set: fp16.enabled: "), "not named --set: %s",
		zinf_config_last_error(cfg));
	T_CHECK_RC(zinf_config_set(cfg, "fp16.enabled", "false"));
	T_CHECK_RC(zinf_config_set(cfg, "optimizer.type", "Adam"));
	T_CHECK_RC(zinf_config_set(cfg, "optimizer.params.weight_decay", "0.1"));
	T_CHECK_RC(zinf_config_resolve(cfg, NULL));
	T_CHECK(zinf_config_warning_count(cfg) > 0 &&
			starts(zinf_config_warning(cfg, zinf_config_warning_count(cfg) - 1),
			       "--set: optimizer.type: Adam applies"),
		"warning not named --set: %s",
		zinf_config_warning_count(cfg)
			? zinf_config_warning(cfg, zinf_config_warning_count(cfg) - 1)
			: "(none)");
	zinf_config_destroy(cfg);
	/* the same rule broken by the file alone is the file's */
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_string(
			cfg,
			"{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"offload_param\":"
			" {\"device\": \"cpu\"}}}",
			"x.json") == ZINF_ECONFIG,
		"offload at stage 0 accepted");
	T_CHECK(starts(zinf_config_last_error(cfg), "x.json: zero_optimization.offload_param"),
		"not named after the file: %s", zinf_config_last_error(cfg));
	zinf_config_destroy(cfg);
	return T_EXIT_PASS;
}

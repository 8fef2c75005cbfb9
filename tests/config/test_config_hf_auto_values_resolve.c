/* A Hugging Face ZeRO-3 NVMe config full of "auto" loads; its autos resolve by HF's
 * rules (bucket sizes from hidden_size, batch from the command line and world size);
 * with require_all, an "auto" that nothing resolves is an error naming the key. */
#include "config.h"
#include "test.h"
#include "zinf/zinf.h"

int main(int argc, char **argv)
{
	struct zinf_config *cfg;
	struct zinf_config_resolve_info info = {.world_size = 2,
						.hidden_size = 4096,
						.total_steps = 500,
						.device_free_bytes = 80ull << 30,
						.host_total_bytes = 64ull << 30,
						.require_all = true};
	enum zinf_config_source src;
	uint64_t u;
	double d;
	bool b;

	T_CHECK(argc == 2, "usage: %s hf.json", argv[0]);
	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_file(cfg, argv[1]) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(zinf_config_get_u64(cfg, "zero_optimization.reduce_bucket_size", &u) == -ENODATA,
		"auto before resolve");
	T_CHECK(zinf_config_get_source(cfg, "train_batch_size", &src) == 0 && src == ZINF_SRC_AUTO,
		"source auto");

	/* Nothing gives the micro batch: refused, naming the key that is missing (not
	 * train_batch_size, which follows from it) and the flag that gives it. */
	T_CHECK(zinf_config_resolve(cfg, &info) == ZINF_ECONFIG, "unresolvable auto accepted");
	T_CHECK(strstr(zinf_config_last_error(cfg),
		       "train_micro_batch_size_per_gpu: \"auto\" could not be resolved") &&
			strstr(zinf_config_last_error(cfg), "--micro-batch-size"),
		"%s", zinf_config_last_error(cfg));

	T_CHECK_RC(zinf_config_set(cfg, "train_micro_batch_size_per_gpu", "4"));
	T_CHECK_RC(zinf_config_set(cfg, "gradient_accumulation_steps", "8"));
	T_CHECK(zinf_config_resolve(cfg, &info) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(zinf_config_get_u64(cfg, "train_batch_size", &u) == 0 && u == 4 * 8 * 2, "tbs %llu",
		(unsigned long long)u);
	T_CHECK(zinf_config_get_source(cfg, "train_batch_size", &src) == 0 &&
			src == ZINF_SRC_RESOLVED,
		"tbs resolved");
	T_CHECK(zinf_config_get_u64(cfg, "zero_optimization.reduce_bucket_size", &u) == 0 &&
			u == 4096ull * 4096,
		"reduce_bucket_size %llu", (unsigned long long)u);
	T_CHECK(zinf_config_get_u64(cfg, "zero_optimization.stage3_prefetch_bucket_size", &u) ==
				0 &&
			u == (uint64_t)(0.9 * 4096 * 4096),
		"prefetch %llu", (unsigned long long)u);
	T_CHECK(zinf_config_get_u64(cfg, "zero_optimization.stage3_param_persistence_threshold",
				    &u) == 0 &&
			u == 40960,
		"persistence %llu", (unsigned long long)u);
	T_CHECK(zinf_config_get_double(cfg, "gradient_clipping", &d) == 0 && d == 1.0,
		"clipping %g", d);
	T_CHECK(zinf_config_get_double(cfg, "optimizer.params.lr", &d) == 0 && d == 5e-5, "lr %g",
		d);
	T_CHECK(zinf_config_get_double(cfg, "scheduler.params.warmup_max_lr", &d) == 0 && d == 5e-5,
		"max lr %g", d);
	T_CHECK(zinf_config_get_bool(cfg, "bf16.enabled", &b) == 0 && b, "bf16 auto -> true");
	T_CHECK(zinf_config_get_bool(cfg, "fp16.enabled", &b) == 0 && !b, "fp16 auto -> false");
	T_CHECK(zinf_config_get_u64(cfg, "zinf.device_memory_limit", &u) == 0 && u == 80ull << 30,
		"device limit");
	T_CHECK(zinf_config_get_u64(cfg, "zinf.pinned_memory_limit", &u) == 0 && u == 16ull << 30,
		"pinned limit");
	T_CHECK(zinf_config_get_u64(cfg, "aio.intra_op_parallelism", &u) == 0 && u == 1,
		"thread_count alias");
	zinf_config_destroy(cfg);
	return T_EXIT_PASS;
}

/* Trace-based prefetch changes when data moves, never what the model computes: training
 * with parameters on NVMe gives bit-identical parameters with prefetch off (bucket 0),
 * at its most aggressive settings, and with an eval pass in another module order
 * inserted between steps (a divergence: the trace is recorded anew). With prefetch on,
 * modules are fetched ahead and the model's fetches find them started; the device never
 * holds more than its budget. */
#include <unistd.h>

#include "toy_trainer.h"

static void train(const char *dir, uint64_t bucket, bool with_eval, struct toy_run *out)
{
	char json[1024];

	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"cpu\"}, \"stage3_prefetch_bucket_size\": %llu,"
		"  \"stage3_max_live_parameters\": 1e12},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"2MiB\", \"pinned_memory_limit\": \"4MiB\","
		"  \"chunk_size\": \"64KiB\"}}",
		dir, (unsigned long long)bucket);
	toy_train(json, with_eval, out);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-prefetch-test-XXXXXX";
	struct toy_run off, on, diverge;
	size_t bytes = (size_t)N_MOD * ELEMS * 4;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	train(dir, 0, false, &off);
	train(dir, 1000000000000ull, false, &on);
	train(dir, 1000000000000ull, true, &diverge);
	T_CHECK(memcmp(off.params, on.params, bytes) == 0, "prefetch changed the result");
	T_CHECK(memcmp(off.params, diverge.params, bytes) == 0, "an eval pass changed the result");
	T_CHECK(off.st.prefetches == 0 && off.st.prefetch_hits == 0, "bucket 0 still prefetched");
	T_CHECK(on.st.prefetches > 0 && on.st.prefetch_hits > 0,
		"no prefetch: %llu issued, %llu hits", (unsigned long long)on.st.prefetches,
		(unsigned long long)on.st.prefetch_hits);
	T_CHECK(on.st.trace_divergences == 0, "%llu divergences without an eval pass",
		(unsigned long long)on.st.trace_divergences);
	T_CHECK(diverge.st.trace_divergences >= 1, "the eval pass was not seen as a divergence");
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");
	free(off.params);
	free(on.params);
	free(diverge.params);
	return T_EXIT_PASS;
}

/* The optimizer step and the adding of gradients in the background
 * (zinf.overlap_optimizer, zinf.overlap_gradients) change when the work runs, never
 * what it computes: with optimizer state in host memory and on NVMe
 * (small sub-groups, so a step takes several pipelined calls; gradient accumulators in
 * host memory and on NVMe), parameters on NVMe and
 * prefetch at its most aggressive, training gives bit-identical parameters with the
 * overlap on and off, and with an eval pass in another module order inserted between
 * steps. With the overlap on, the updates' time is counted as optimizer time; with it
 * off there is no optimizer wait. */
#include <unistd.h>

#include "toy_trainer.h"

static void train(const char *dir, const char *opt_home, const char *grads, bool overlap,
		  bool with_eval, struct toy_run *out)
{
	char json[1536];

	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true},"
		" \"gradient_clipping\": 1.0,"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
		"  \"sub_group_size\": 65536, \"stage3_prefetch_bucket_size\": 1e12,"
		"  \"stage3_max_live_parameters\": 1e12},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"2MiB\", \"pinned_memory_limit\": \"8MiB\","
		"  \"chunk_size\": \"64KiB\", \"overlap_optimizer\": %s, \"overlap_gradients\": %s,"
		"  \"offload_gradients\": \"%s\"}}",
		dir, opt_home, dir, overlap ? "true" : "false", overlap ? "true" : "false", grads);
	toy_train(json, with_eval, out);
}

int main(void)
{
	static const char *const homes[] = {"cpu", "nvme", "nvme"};
	static const char *const grads[] = {"auto", "cpu", "nvme"};
	char dir[] = "/var/tmp/zinf-overlap-test-XXXXXX";
	size_t bytes = (size_t)N_MOD * ELEMS * 4;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	for (int h = 0; h < 3; h++) {
		struct toy_run off, on, diverge;

		train(dir, homes[h], grads[h], false, false, &off);
		train(dir, homes[h], grads[h], true, false, &on);
		train(dir, homes[h], grads[h], true, true, &diverge);
		T_CHECK(memcmp(off.params, on.params, bytes) == 0,
			"optimizer %s: the background step changed the result", homes[h]);
		T_CHECK(memcmp(off.params, diverge.params, bytes) == 0,
			"optimizer %s: an eval pass during the background step changed the result",
			homes[h]);
		T_CHECK(off.st.optimizer_wait_seconds == 0,
			"optimizer %s: waited for the optimizer with the overlap off", homes[h]);
		T_CHECK(on.st.optimizer_seconds > 0 && on.st.steps == STEPS,
			"optimizer %s: %g s of updates over %llu steps", homes[h],
			on.st.optimizer_seconds, (unsigned long long)on.st.steps);
		free(off.params);
		free(on.params);
		free(diverge.params);
	}
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");
	return T_EXIT_PASS;
}

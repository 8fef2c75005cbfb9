/* stage3_max_reuse_distance: with a recorded trace, a released module whose next use is
 * further than the distance (elements of other modules' fetches) is evicted at once,
 * one needed sooner stays cached. Distance 0 evicts on every release after the first
 * step; the default (1e9) evicts nothing for that reason; the results are identical. */
#include <unistd.h>

#include "toy_trainer.h"

static void train(const char *dir, const char *distance, struct toy_run *out)
{
	char json[1536];

	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true},"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"cpu\"}, \"stage3_max_reuse_distance\": %s},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"8MiB\", \"pinned_memory_limit\": \"8MiB\","
		"  \"chunk_size\": \"64KiB\"}}",
		dir, distance);
	toy_train(json, false, out);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-reuse-test-XXXXXX";
	struct toy_run near, far, between;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	train(dir, "1e9", &far);
	train(dir, "0", &near);
	/* Two modules' worth: also cached are the second-to-last layer after its forward
	 * (reused after the last layer's two fetches) and the second layer after its
	 * backward (reused after the first layer's backward and next forward). */
	train(dir, "409600", &between);
	T_CHECK(memcmp(far.params, near.params, (size_t)N_MOD * ELEMS * 4) == 0 &&
			memcmp(far.params, between.params, (size_t)N_MOD * ELEMS * 4) == 0,
		"the reuse distance changed the result");
	T_CHECK(far.st.reuse_evictions == 0, "distance 1e9 evicted %llu modules",
		(unsigned long long)far.st.reuse_evictions);
	/* steps 2..5: every release but the two reused at once (the last layer after its
	 * forward, the first after its backward: the next step starts with it) */
	T_CHECK(near.st.reuse_evictions >= (STEPS - 1) * (2 * N_MOD - 2),
		"distance 0 evicted only %llu modules",
		(unsigned long long)near.st.reuse_evictions);
	T_CHECK(between.st.reuse_evictions == near.st.reuse_evictions - 2 * (STEPS - 1),
		"distance of one module evicted %llu (distance 0: %llu)",
		(unsigned long long)between.st.reuse_evictions,
		(unsigned long long)near.st.reuse_evictions);
	T_CHECK(far.st.evictions < near.st.evictions, "evictions %llu (far) vs %llu (near)",
		(unsigned long long)far.st.evictions, (unsigned long long)near.st.evictions);
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");
	free(near.params);
	free(far.params);
	free(between.params);
	return T_EXIT_PASS;
}

/* zinf.pinned_memory_limit "auto" is the most the pinned pool may take: the engine
 * makes the pool at finalize as large as the run can use (the NVMe optimizer's staging,
 * the parameter chunks, two modules' gradients, a chunk for a load, with room for
 * fragmentation): for the toy model on NVMe (2.4 MiB of bf16 parameters) a few MiB,
 * not a quarter of the host's memory. The run is the same bit for bit as with a large
 * pool the config sets, which is made exactly that size. */
#include <unistd.h>

#include "toy_trainer.h"

static void train(const char *dir, const char *pinned, struct toy_run *out)
{
	char json[1536], limit[96] = "";

	if (pinned)
		snprintf(limit, sizeof(limit), ", \"pinned_memory_limit\": \"%s\"", pinned);
	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true},"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}, \"sub_group_size\": 100000},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"2MiB\", \"chunk_size\": \"64KiB\"%s}}",
		dir, dir, limit);
	toy_train(json, false, out);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-auto-pinned-XXXXXX";
	const uint64_t quarter = zinf_host_memory_bytes() / 4;
	struct toy_run a, big;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	train(dir, NULL, &a);
	train(dir, "256MiB", &big);
	fprintf(stderr, "auto: pool %llu bytes, peak %llu; set: pool %llu, peak %llu\n",
		(unsigned long long)a.st.pinned_limit, (unsigned long long)a.st.pinned_peak,
		(unsigned long long)big.st.pinned_limit, (unsigned long long)big.st.pinned_peak);
	T_CHECK(memcmp(a.params, big.params, (size_t)N_MOD * ELEMS * 4) == 0,
		"the auto-sized pool changed the result");
	T_CHECK(a.st.pinned_limit <= (16u << 20) && a.st.pinned_limit < quarter,
		"auto: a pool of %llu bytes for 2.4 MiB of parameters",
		(unsigned long long)a.st.pinned_limit);
	T_CHECK(a.st.pinned_peak <= a.st.pinned_limit, "auto: peak %llu over the pool %llu",
		(unsigned long long)a.st.pinned_peak, (unsigned long long)a.st.pinned_limit);
	T_CHECK(big.st.pinned_limit == 256u << 20, "set: a pool of %llu bytes, not 256 MiB",
		(unsigned long long)big.st.pinned_limit);
	free(a.params);
	free(big.params);
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");
	return T_EXIT_PASS;
}

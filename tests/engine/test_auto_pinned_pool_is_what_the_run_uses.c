/* zinf.pinned_memory_limit "auto" is the most the pinned pool may take: the engine
 * makes the pool at finalize as large as the run can use (the NVMe optimizer's staging,
 * the parameter chunks, two modules' gradients, a chunk for a load, with room for
 * fragmentation): for the toy model on NVMe (2.4 MiB of bf16 parameters) a few MiB,
 * not a quarter of the host's memory. The run is the same bit for bit as with a large
 * pool the config sets, which is made exactly that size. A chunk_size above every
 * module counts as the largest module: the pool, and a small limit's checks, are not
 * sized by a chunk no module fills. */
#include <unistd.h>

#include "toy_trainer.h"

static void train(const char *dir, const char *pinned, const char *chunk, struct toy_run *out)
{
	char json[1536], limit[96] = "", chunk_size[64] = "";

	if (pinned)
		snprintf(limit, sizeof(limit), ", \"pinned_memory_limit\": \"%s\"", pinned);
	if (chunk)
		snprintf(chunk_size, sizeof(chunk_size), ", \"chunk_size\": \"%s\"", chunk);
	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true},"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}, \"sub_group_size\": 100000},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"2MiB\"%s%s}}",
		dir, dir, chunk_size, limit);
	toy_train(json, false, out);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-auto-pinned-XXXXXX";
	const uint64_t quarter = zinf_host_memory_bytes() / 4;
	struct toy_run a, big, whole, tight;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	train(dir, NULL, "64KiB", &a);
	train(dir, "256MiB", "64KiB", &big);
	/* the default 32 MiB chunk_size, over modules of 400 KiB: one chunk is a module, and
	 * the pool is sized (and a small limit checked) by that, not by 32 MiB */
	train(dir, NULL, NULL, &whole);
	train(dir, "5MiB", NULL, &tight);
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
	T_CHECK(whole.st.pinned_limit < (16u << 20),
		"auto with 32 MiB chunks: a pool of %llu bytes for modules of 400 KiB",
		(unsigned long long)whole.st.pinned_limit);
	T_CHECK(tight.st.pinned_limit == 5u << 20 && tight.st.pinned_peak <= 5u << 20,
		"set 5 MiB with 32 MiB chunks: pool %llu, peak %llu",
		(unsigned long long)tight.st.pinned_limit,
		(unsigned long long)tight.st.pinned_peak);
	T_CHECK(memcmp(a.params, whole.params, (size_t)N_MOD * ELEMS * 4) == 0 &&
			memcmp(a.params, tight.params, (size_t)N_MOD * ELEMS * 4) == 0,
		"the chunk size changed the result");
	free(a.params);
	free(big.params);
	free(whole.params);
	free(tight.params);
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");
	return T_EXIT_PASS;
}

/* A copy to the device that faults when it runs (ZINF_CUDASIM_FAULT=cudaMemcpyAsync:1, the
 * first chunk copy of a fetch from a host home) fails the fetch: zinf_store_wait returns
 * the error with one line naming the module and the copy, instead of calling the module
 * ready and leaving the model to run on it. Runs on the CUDA simulator only. */
#include "cuda_sim_only.h"
#include "store_test_util.h"

int main(void)
{
	uint64_t shape[2] = {300, 1777}; /* bf16, five 256 KiB chunks */
	struct zinf_device_opts dopts;
	struct zinf_store_opts sopts;
	struct zinf_device *dev;
	struct zinf_store *s;
	uint32_t m, p;
	char err[512];
	int rc;

	zinf_log_set_level(ZINF_LOG_ERROR);
	require_cuda_simulator("faults are injected by the CUDA simulator");
	zinf_device_opts_init(&dopts);
	dopts.backend = ZINF_DEVICE_BACKEND_CUDA;
	dopts.memory_limit = 64ull << 20;
	T_CHECK(zinf_device_create(&dopts, &dev, err, sizeof(err)) == 0, "device: %s", err);
	zinf_store_opts_init(&sopts);
	sopts.device = dev;
	sopts.param_home = ZINF_TIER_HOST;
	sopts.chunk_size = 256ull << 10;
	sopts.mover_idle_ns = 60ull * 1000000000ull;
	T_CHECK(zinf_store_create(&sopts, &s, err, sizeof(err)) == 0, "store: %s", err);
	T_CHECK_RC(zinf_store_module_add(s, "layer.0", &m));
	T_CHECK_RC(zinf_store_param_add(s, m, "w", ZINF_DTYPE_BF16, 2, shape, &p));
	T_CHECK(zinf_store_finalize(s) == 0, "%s", zinf_store_last_error(s));

	T_CHECK(setenv("ZINF_CUDASIM_FAULT", "cudaMemcpyAsync:1", 1) == 0, "setenv");
	T_CHECK_RC(zinf_store_fetch(s, m));
	rc = zinf_store_wait(s, m);
	T_CHECK(rc < 0, "the fetch whose copy faulted succeeded (%d)", rc);
	T_CHECK(strstr(zinf_store_last_error(s), "module layer.0: copy to the device") &&
			!strchr(zinf_store_last_error(s), '\n'),
		"the error: %s", zinf_store_last_error(s));
	printf("%s\n", zinf_store_last_error(s));
	zinf_store_release(s, m);
	zinf_store_destroy(s);
	zinf_device_destroy(dev);
	return T_EXIT_PASS;
}

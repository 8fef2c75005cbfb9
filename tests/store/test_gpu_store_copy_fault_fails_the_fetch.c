/* A copy to the device that faults when it runs (ZINF_CUDASIM_FAULT=cudaMemcpyAsync:1, the
 * first chunk copy of a fetch from a host home) fails the fetch: zinf_store_wait returns
 * the error with one line naming the module and the copy, instead of calling the module
 * ready and leaving the model to run on it. Runs on the CUDA simulator only. */
#include "cuda_sim_only.h"
#include "store_test_util.h"

int main(void)
{
	struct zinf_device *dev;
	struct zinf_store *s;
	uint32_t m, p;
	int rc;

	zinf_log_set_level(ZINF_LOG_ERROR);
	require_cuda_simulator("faults are injected by the CUDA simulator");
	t_cuda_host_store_up(&dev, &s, false, &m, &p);

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

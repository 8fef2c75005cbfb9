/*
 * For tests that need a GPU: skip (77) when this process sees none. The line starts
 * "skip: no CUDA device" (tools/gpu_check.sh fails on it, since there a GPU is expected)
 * and gives the reason when a CUDA driver is installed and still finds none, such as a
 * driver too old for the runtime zinf was built with.
 */
#ifndef ZINF_TESTS_GPU_TEST_H
#define ZINF_TESTS_GPU_TEST_H

#include "device.h"
#include "test.h"

static inline void t_require_gpu(void)
{
	char why[256];

	if (zinf_device_cuda_probe(why, sizeof(why)) == 0)
		T_SKIP("no CUDA device%s%s", why[0] ? ": " : " (or zinf built without CUDA)", why);
}

#endif /* ZINF_TESTS_GPU_TEST_H */

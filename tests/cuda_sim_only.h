/*
 * For gpu tests that only the CUDA simulator can run (it injects faults, and rounds
 * TF32 inputs whatever the shape): skip (77) without a CUDA device, and on a real GPU.
 * The name is the one cudasim/sim_runtime.cc gives its device.
 */
#ifndef ZINF_TESTS_CUDA_SIM_ONLY_H
#define ZINF_TESTS_CUDA_SIM_ONLY_H

#include <cuda_runtime.h>
#include <string.h>

#include "device.h"
#include "gpu_test.h"
#include "test.h"

static inline void require_cuda_simulator(const char *why_not_on_a_gpu)
{
	struct cudaDeviceProp prop;

	t_require_gpu();
	if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
	    strcmp(prop.name, "zinf CUDA simulator") != 0)
		T_SKIP("%s", why_not_on_a_gpu);
}

#endif /* ZINF_TESTS_CUDA_SIM_ONLY_H */

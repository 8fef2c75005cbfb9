/*
 * CUDA device backend for builds without CUDA: no GPU is ever visible, and asking for
 * the cuda backend explicitly says how to get one. CMake compiles this file in place of
 * device_cuda.c when the CUDA toolkit is not found (ZINF_HAVE_CUDA OFF).
 */
#include <errno.h>
#include <stdio.h>

#include "device.h"

int zinf_device_cuda_probe(char *why, size_t len)
{
	if (len)
		why[0] = '\0';
	return 0;
}

int zinf_device_cuda_count(void)
{
	return 0;
}

int zinf_device_cuda_open(const struct zinf_device_opts *opts, struct zinf_device **out, char *err,
			  size_t errlen)
{
	*out = NULL;
	snprintf(
		err, errlen,
		"device: the cuda backend is not built into this zinf (configure with -DZINF_CUDA=ON on a machine with the CUDA toolkit), use device \"host\" or \"auto\"");
	return -ENOTSUP;
}

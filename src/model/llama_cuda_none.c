/*
 * The cuda model runtime for builds without CUDA (llama_backend.h): CMake compiles this
 * file in place of llama_cuda.c when the CUDA toolkit is not found, and creating the
 * runtime says so in one line. No other op can be reached without a runtime.
 */
#include <errno.h>
#include <stdio.h>

#include "llama_backend.h"

static int none_create(const struct zinf_llama_config *cfg, const struct llama_rt_opts *opts, int B,
		       int T, struct llama_rt **out, char *err, size_t errlen)
{
	*out = NULL;
	snprintf(
		err, errlen,
		"model runtime: built without CUDA (configure with -DZINF_CUDA=ON on a machine with the CUDA toolkit), use zinf.device \"host\"");
	return -ENOTSUP;
}

static int none_sizes(const struct zinf_llama_config *cfg, const struct llama_rt_opts *opts, int B,
		      int T, struct llama_rt_sizes *out)
{
	return -ENOTSUP;
}

static void none_destroy(struct llama_rt *rt)
{
}

const struct llama_rt_ops llama_rt_cuda_ops = {
	.name = "cuda",
	.create = none_create,
	.destroy = none_destroy,
	.sizes = none_sizes,
};

// Gradient accumulation and sum of squares on the device (see grad_cuda.h). The sum of
// squares is deterministic: each thread sums a fixed stride of elements in double, each
// block reduces its threads in a fixed tree, and the host adds the blocks in order.
#include <cuda_runtime.h>

#include "grad_cuda.h"
#include "launch.h"
#include "zinf/error.h"

#define GRAD_THREADS 256

__global__ void add_f32_kernel(float *dst, const float *src, uint64_t n)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		dst[i] = __fadd_rn(dst[i], src[i]);
}

__global__ void sumsq_f32_kernel(const float *src, uint64_t n, double *parts)
{
	__shared__ double sh[GRAD_THREADS];
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	double s = 0;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		double x = (double)src[i];
		s = __fma_rn(x, x, s);
	}
	sh[threadIdx.x] = s;
	__syncthreads();
	for (int w = GRAD_THREADS / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] = __dadd_rn(sh[threadIdx.x], sh[threadIdx.x + w]);
		__syncthreads();
	}
	if (threadIdx.x == 0)
		parts[blockIdx.x] = sh[0];
}

static int launch_status(void)
{
	cudaError_t err = cudaGetLastError(); // also clears a non-sticky error
	return err == cudaSuccess ? 0 : ZINF_EDEVICE;
}

extern "C" int zinf_cuda_add_f32(float *dst, const float *src, uint64_t n, void *stream)
{
	uint64_t blocks = (n + GRAD_THREADS - 1) / GRAD_THREADS;

	if (n == 0)
		return 0;
	if (blocks > 16384) // grid-stride beyond this
		blocks = 16384;
	ZINF_LAUNCH(add_f32_kernel, (unsigned)blocks, GRAD_THREADS, (cudaStream_t)stream)
	(dst, src, n);
	return launch_status();
}

extern "C" int zinf_cuda_sumsq_f32(const float *src, uint64_t n, double *parts, void *stream)
{
	// always every block, so that each part is written (zeros past the end)
	ZINF_LAUNCH(sumsq_f32_kernel, ZINF_CUDA_SUMSQ_PARTS, GRAD_THREADS, (cudaStream_t)stream)
	(src, n, parts);
	return launch_status();
}

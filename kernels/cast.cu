// fp32 <-> bf16 cast kernels (see cast_cuda.h). Bit-exact with the CPU reference in src/cast.c:
// round to nearest even on the upper 16 bits, NaN forced quiet.
#include <cuda_runtime.h>

#include "cast_cuda.h"
#include "launch.h"
#include "zinf/error.h"

static __device__ uint16_t f32_to_bf16_bits(float x)
{
	uint32_t u = __float_as_uint(x);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u); // quiet NaN
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

__global__ void cast_f32_to_bf16_kernel(const float *src, uint16_t *dst, size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		dst[i] = f32_to_bf16_bits(src[i]);
}

__global__ void cast_bf16_to_f32_kernel(const uint16_t *src, float *dst, size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		dst[i] = __uint_as_float((uint32_t)src[i] << 16);
}

static unsigned grid_for(size_t n)
{
	size_t blocks = (n + 255) / 256;
	return (unsigned)(blocks < 4096 ? (blocks ? blocks : 1) : 4096);
}

static int launch_status(void)
{
	cudaError_t err = cudaGetLastError(); // also clears a non-sticky error
	return err == cudaSuccess ? 0 : ZINF_EDEVICE;
}

extern "C" int zinf_cuda_cast_f32_to_bf16(const float *src, uint16_t *dst, size_t n, void *stream)
{
	ZINF_LAUNCH(cast_f32_to_bf16_kernel, grid_for(n), 256, (cudaStream_t)stream)(src, dst, n);
	return launch_status();
}

extern "C" int zinf_cuda_cast_bf16_to_f32(const uint16_t *src, float *dst, size_t n, void *stream)
{
	ZINF_LAUNCH(cast_bf16_to_f32_kernel, grid_for(n), 256, (cudaStream_t)stream)(src, dst, n);
	return launch_status();
}

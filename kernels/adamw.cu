// Fused Adam/AdamW step (see adamw_cuda.h). Every rounding is spelled out with the _rn
// intrinsics, so nvcc cannot contract or reorder anything and the result is bit-identical
// to the CPU reference loop (src/optim.h); the 16-bit conversions are the reference's
// integer code, NaN payloads included.
#include <cuda_runtime.h>

#include "adamw_cuda.h"
#include "launch.h"
#include "zinf/error.h"

static __device__ float bf16_to_f32(uint16_t h)
{
	return __uint_as_float((uint32_t)h << 16);
}

static __device__ uint16_t f32_to_bf16(float x)
{
	uint32_t u = __float_as_uint(x);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u); // quiet NaN
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static __device__ float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;

	if (exp == 0x1fu) {
		u = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u);
	} else if (exp) {
		u = sign | ((exp + 112u) << 23) | (mant << 13);
	} else if (mant == 0) {
		u = sign;
	} else { // subnormal: normalise
		int e = -1;
		do {
			mant <<= 1;
			e++;
		} while (!(mant & 0x400u));
		u = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13);
	}
	return __uint_as_float(u);
}

static __device__ uint16_t f32_to_f16(float x)
{
	uint32_t u = __float_as_uint(x);
	uint32_t sign = (u >> 16) & 0x8000u, abs = u & 0x7fffffffu;
	int32_t exp;

	if (abs > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
	if (abs >= 0x477ff000u)
		return (uint16_t)(sign | 0x7c00u);
	exp = (int32_t)(abs >> 23) - 112;
	if (exp >= 1) {
		uint32_t h = ((uint32_t)exp << 10) | ((abs >> 13) & 0x3ffu), rest = abs & 0x1fffu;
		if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
			h++;
		return (uint16_t)(sign | h);
	}
	if (exp < -10)
		return (uint16_t)sign;
	uint32_t mant = (abs & 0x7fffffu) | 0x800000u, shift = (uint32_t)(14 - exp);
	uint32_t h = mant >> shift, rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
	if (rest > half || (rest == half && (h & 1u)))
		h++;
	return (uint16_t)(sign | h);
}

__global__ void adam_update_kernel(const zinf_cuda_adam_args a, uint64_t n)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float p = a.p[i], m = a.m[i], v = a.v[i], g, d;

		if (a.g_dtype == ZINF_DTYPE_BF16)
			g = bf16_to_f32(((const uint16_t *)a.g)[i]);
		else if (a.g_dtype == ZINF_DTYPE_F16)
			g = f16_to_f32(((const uint16_t *)a.g)[i]);
		else
			g = ((const float *)a.g)[i];
		g = __fmul_rn(g, a.grad_scale);
		if (a.l2)
			g = __fmaf_rn(a.weight_decay, p, g);
		m = __fmaf_rn(a.beta1, m, __fmul_rn(a.one_minus_beta1, g));
		v = __fmaf_rn(a.beta2, v, __fmul_rn(__fmul_rn(a.one_minus_beta2, g), g));
		d = __fmaf_rn(__fsqrt_rn(v), a.rsqrt_bc2, a.eps);
		if (a.decoupled)
			p = __fmul_rn(p, a.decay);
		p = __fmaf_rn(a.neg_step_size, __fdiv_rn(m, d), p);
		a.p[i] = p;
		a.m[i] = m;
		a.v[i] = v;
		if (a.out_dtype == ZINF_DTYPE_BF16)
			((uint16_t *)a.out)[i] = f32_to_bf16(p);
		else if (a.out_dtype == ZINF_DTYPE_F16)
			((uint16_t *)a.out)[i] = f32_to_f16(p);
	}
}

extern "C" int zinf_cuda_adam_update(const struct zinf_cuda_adam_args *args, uint64_t n_elems,
				     void *stream)
{
	uint64_t blocks = (n_elems + 255) / 256;
	cudaError_t err;

	if (n_elems == 0)
		return 0;
	if (blocks > 16384) // grid-stride beyond this: enough blocks to fill any GPU
		blocks = 16384;
	ZINF_LAUNCH(adam_update_kernel, (unsigned)blocks, 256, (cudaStream_t)stream)
	(*args, n_elems);
	err = cudaGetLastError(); // also clears a non-sticky launch error
	return err == cudaSuccess ? 0 : ZINF_EDEVICE;
}

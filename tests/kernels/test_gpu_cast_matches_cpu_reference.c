/* The CUDA fp32<->bf16 cast kernels are bit-identical to the CPU reference (src/cast.c),
 * including rounding ties, subnormals, infinities and NaN. Skips (77) without a GPU. */
#include <cuda_runtime.h>
#include <math.h>

#include "cast.h"
#include "cast_cuda.h"
#include "test.h"

#define N (1u << 20)

int main(void)
{
	int ndev = 0;
	float *h_src, *d_src, *h_back, *d_back;
	uint16_t *h_ref, *h_got, *d_dst;

	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
		T_SKIP("no CUDA device");
	h_src = malloc(N * sizeof(float));
	h_back = malloc(N * sizeof(float));
	h_ref = malloc(N * sizeof(uint16_t));
	h_got = malloc(N * sizeof(uint16_t));
	T_CHECK(h_src && h_back && h_ref && h_got, "host allocation");
	/* Every bf16 tie pattern and special value appears among these bit patterns. */
	for (uint32_t i = 0; i < N; i++) {
		uint32_t u = i * 2654435761u ^ (i << 7);
		memcpy(&h_src[i], &u, sizeof(u));
	}
	h_src[0] = INFINITY;
	h_src[1] = -INFINITY;
	h_src[2] = NAN;
	h_src[3] = 1.00390625f; /* exact tie: 1 + 2^-8 rounds to even */
	zinf_cast_f32_to_bf16_ref(h_src, h_ref, N);

	T_CHECK(cudaMalloc((void **)&d_src, N * sizeof(float)) == cudaSuccess, "cudaMalloc");
	T_CHECK(cudaMalloc((void **)&d_dst, N * sizeof(uint16_t)) == cudaSuccess, "cudaMalloc");
	T_CHECK(cudaMalloc((void **)&d_back, N * sizeof(float)) == cudaSuccess, "cudaMalloc");
	T_CHECK(cudaMemcpy(d_src, h_src, N * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess,
		"H2D");
	T_CHECK_RC(zinf_cuda_cast_f32_to_bf16(d_src, d_dst, N, NULL));
	T_CHECK_RC(zinf_cuda_cast_bf16_to_f32(d_dst, d_back, N, NULL));
	T_CHECK(cudaMemcpy(h_got, d_dst, N * sizeof(uint16_t), cudaMemcpyDeviceToHost) ==
			cudaSuccess,
		"D2H");
	T_CHECK(cudaMemcpy(h_back, d_back, N * sizeof(float), cudaMemcpyDeviceToHost) ==
			cudaSuccess,
		"D2H");
	for (uint32_t i = 0; i < N; i++) {
		float want = zinf_bf16_to_f32(h_ref[i]);
		T_CHECK(h_got[i] == h_ref[i], "element %u: gpu 0x%04x cpu 0x%04x", i, h_got[i],
			h_ref[i]);
		T_CHECK(memcmp(&h_back[i], &want, sizeof(float)) == 0, "widen element %u", i);
	}
	cudaFree(d_src);
	cudaFree(d_dst);
	cudaFree(d_back);
	free(h_src);
	free(h_back);
	free(h_ref);
	free(h_got);
	return T_EXIT_PASS;
}

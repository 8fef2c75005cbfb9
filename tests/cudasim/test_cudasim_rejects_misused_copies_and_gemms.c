/* The CUDA simulator refuses, with the CUDA or cuBLAS error a GPU run would show (or the
 * fault it would risk), what the real device only sometimes catches: a copy whose
 * pointers are not where its kind says, a device range that leaves its allocation, a
 * memset outside device memory, a copy direction that does not exist, a second
 * registration of pinned memory, an unknown stream, a GEMM with a too small leading
 * dimension or a matrix past its allocation, a batched GEMM whose outputs overlap, and
 * allocations beyond the simulated device's memory. Errors reach cudaGetLastError. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "test.h"

#define CK(call) T_CHECK((call) == cudaSuccess, "%s", #call)

int main(void)
{
	static float host[256] __attribute__((aligned(64)));
	float *dev, *dev2, alpha = 1, beta = 0;
	cudaStream_t s;
	cublasHandle_t h;
	size_t free_b, total_b;
	void *big;

	CK(cudaMalloc((void **)&dev, 256 * sizeof(float)));
	CK(cudaMalloc((void **)&dev2, 256 * sizeof(float)));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	T_CHECK(cudaMemcpyAsync(host, dev, 16, cudaMemcpyHostToDevice, s) == cudaErrorInvalidValue,
		"host-to-device with the pointers swapped");
	T_CHECK(cudaGetLastError() == cudaErrorInvalidValue, "the error is the last error");
	T_CHECK(cudaGetLastError() == cudaSuccess, "and reading it clears it");
	T_CHECK(cudaMemcpyAsync(dev + 200, host, 100 * sizeof(float), cudaMemcpyHostToDevice, s) ==
			cudaErrorInvalidValue,
		"a copy running past the end of its allocation");
	T_CHECK(cudaMemcpyAsync(dev, dev2, 16, cudaMemcpyDeviceToHost, s) == cudaErrorInvalidValue,
		"device-to-host into device memory");
	T_CHECK(cudaMemcpyAsync(host, host + 64, 16, cudaMemcpyDeviceToDevice, s) ==
			cudaErrorInvalidValue,
		"device-to-device between host buffers");
	T_CHECK(cudaMemsetAsync(host, 0, 16, s) == cudaErrorInvalidValue, "memset of host memory");
	T_CHECK(cudaMemsetAsync(dev, 0, 16, (cudaStream_t)(uintptr_t)0x1234) ==
			cudaErrorInvalidResourceHandle,
		"an unknown stream");
	T_CHECK(cudaMemcpyAsync(dev, host, 16, (enum cudaMemcpyKind)7, s) ==
			cudaErrorInvalidMemcpyDirection,
		"a copy kind that does not exist");
	CK(cudaMemcpyAsync(dev, host, 16, cudaMemcpyDefault, s)); /* inferred: fine */

	CK(cudaHostRegister(host, sizeof(host), cudaHostRegisterDefault));
	T_CHECK(cudaHostRegister(host + 16, 64, cudaHostRegisterDefault) ==
			cudaErrorHostMemoryAlreadyRegistered,
		"registering part of a registered range again");
	CK(cudaHostUnregister(host));
	T_CHECK(cudaHostUnregister(host) == cudaErrorHostMemoryNotRegistered,
		"unregistering twice");

	T_CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
	T_CHECK(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
	/* 16x16 = 16x16 * 16x16 fits in 256 floats */
	T_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 16, 16, 16, &alpha, dev, 16, dev2, 16,
			    &beta, dev, 16) == CUBLAS_STATUS_SUCCESS,
		"a GEMM inside its allocations");
	T_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 16, 16, 16, &alpha, dev, 8, dev2, 16,
			    &beta, dev, 16) == CUBLAS_STATUS_INVALID_VALUE,
		"lda smaller than the rows of A");
	T_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 16, 16, 17, &alpha, dev, 17, dev2, 17,
			    &beta, dev, 16) == CUBLAS_STATUS_EXECUTION_FAILED,
		"A and B (17x16) past the end of their allocations");
	T_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &alpha, dev, 8, 64,
					  dev2, 8, 64, &beta, dev, 8, 64,
					  5) == CUBLAS_STATUS_EXECUTION_FAILED,
		"the fifth batch item past the end");
	T_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &alpha, dev, 8, 64,
					  dev2, 8, 64, &beta, dev, 8, 64,
					  4) == CUBLAS_STATUS_SUCCESS,
		"four batch items fit");
	T_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &alpha, dev, 8, 64,
					  dev2, 8, 64, &beta, dev, 8, 0,
					  2) == CUBLAS_STATUS_EXECUTION_FAILED,
		"two batch items writing the same C");
	T_CHECK(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS, "cublasDestroy");

	CK(cudaMemGetInfo(&free_b, &total_b));
	T_CHECK(cudaMalloc(&big, free_b + 1) == cudaErrorMemoryAllocation,
		"more than the free device memory");
	(void)cudaGetLastError();
	CK(cudaStreamSynchronize(s));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(dev2));
	CK(cudaFree(dev));
	T_CHECK(cudaFree(host) == cudaErrorInvalidValue, "freeing host memory");
	return 0;
}

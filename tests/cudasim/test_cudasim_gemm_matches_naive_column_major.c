/* The CUDA simulator's cuBLAS SGEMMs compute what cuBLAS defines, checked against a naive
 * column-major product: every transpose pair, leading dimensions larger than the rows,
 * alpha and beta both used, beta = 0 ignoring C's old contents (NaN there stays out),
 * and a strided batch; in CUBLAS_TF32_TENSOR_OP_MATH mode the inputs are rounded to TF32
 * first (an input's 2^-15 part below TF32's precision drops out of the product, which
 * it does not in the default mode). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>

#include "test.h"

#define M 5
#define N 7
#define K 3
#define LD 9 /* every leading dimension; >= each matrix's rows */
#define BATCH 3
#define STRIDE (LD * 9)

static float at(const float *A, int ld, cublasOperation_t op, int i, int j)
{
	return op == CUBLAS_OP_N ? A[(size_t)j * ld + i] : A[(size_t)i * ld + j];
}

static void naive(cublasOperation_t ta, cublasOperation_t tb, float alpha, const float *A,
		  const float *B, float beta, float *C)
{
	for (int j = 0; j < N; j++)
		for (int i = 0; i < M; i++) {
			double acc = 0;

			for (int p = 0; p < K; p++)
				acc += (double)at(A, LD, ta, i, p) * at(B, LD, tb, p, j);
			C[(size_t)j * LD + i] =
				(float)(alpha * acc +
					(beta != 0 ? beta * C[(size_t)j * LD + i] : 0));
		}
}

#define CK(call) T_CHECK((call) == cudaSuccess, "%s", #call)

int main(void)
{
	static float A[STRIDE * BATCH], B[STRIDE * BATCH], C[STRIDE * BATCH], want[STRIDE * BATCH],
		got[STRIDE * BATCH];
	const cublasOperation_t ops[2] = {CUBLAS_OP_N, CUBLAS_OP_T};
	float *dA, *dB, *dC;
	cublasHandle_t h;

	for (int i = 0; i < STRIDE * BATCH; i++) {
		A[i] = (float)((i * 37) % 11) - 5;
		B[i] = (float)((i * 13) % 7) - 3;
		C[i] = (float)((i * 5) % 9) - 4;
	}
	CK(cudaMalloc((void **)&dA, sizeof(A)));
	CK(cudaMalloc((void **)&dB, sizeof(B)));
	CK(cudaMalloc((void **)&dC, sizeof(C)));
	CK(cudaMemcpy(dA, A, sizeof(A), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(dB, B, sizeof(B), cudaMemcpyHostToDevice));
	T_CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++)
			for (int z = 0; z < 2; z++) {
				float alpha = 1.5f, beta = z ? 0.0f : -0.5f;

				memcpy(want, C, sizeof(C));
				if (z) /* beta = 0: C's NaNs must not reach the result */
					for (int i = 0; i < STRIDE * BATCH; i++)
						want[i] = NAN;
				CK(cudaMemcpy(dC, want, sizeof(C), cudaMemcpyHostToDevice));
				T_CHECK(cublasSgemm(h, ops[a], ops[b], M, N, K, &alpha, dA, LD, dB,
						    LD, &beta, dC, LD) == CUBLAS_STATUS_SUCCESS,
					"sgemm %d%d", a, b);
				naive(ops[a], ops[b], alpha, A, B, beta, want);
				CK(cudaMemcpy(got, dC, sizeof(C), cudaMemcpyDeviceToHost));
				for (int j = 0; j < N; j++)
					for (int i = 0; i < M; i++)
						T_CHECK(got[j * LD + i] == want[j * LD + i],
							"op %d%d beta %g C(%d,%d) %g, want %g", a,
							b, beta, i, j, got[j * LD + i],
							want[j * LD + i]);
			}
	{
		float alpha = 1, beta = 1;

		memcpy(want, C, sizeof(C));
		CK(cudaMemcpy(dC, C, sizeof(C), cudaMemcpyHostToDevice));
		T_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &alpha, dA,
						  LD, STRIDE, dB, LD, STRIDE, &beta, dC, LD, STRIDE,
						  BATCH) == CUBLAS_STATUS_SUCCESS,
			"strided batched sgemm");
		for (int i = 0; i < BATCH; i++)
			naive(CUBLAS_OP_T, CUBLAS_OP_N, alpha, A + i * STRIDE, B + i * STRIDE, beta,
			      want + i * STRIDE);
		CK(cudaMemcpy(got, dC, sizeof(C), cudaMemcpyDeviceToHost));
		for (int i = 0; i < STRIDE * BATCH; i++)
			T_CHECK(got[i] == want[i], "batch element %d: %g, want %g", i, got[i],
				want[i]);
	}
	{
		float alpha = 1, beta = 0, exact[STRIDE];

		/* A: small integers + 2^-15, which TF32 (10 mantissa bits) rounds away */
		for (int i = 0; i < STRIDE; i++)
			want[i] = A[i] + (A[i] >= 1 ? 0x1p-15f : 0);
		CK(cudaMemcpy(dA, want, STRIDE * sizeof(float), cudaMemcpyHostToDevice));
		T_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, dA, LD, dB, LD,
				    &beta, dC, LD) == CUBLAS_STATUS_SUCCESS,
			"fp32 sgemm");
		CK(cudaMemcpy(exact, dC, sizeof(exact), cudaMemcpyDeviceToHost));
		T_CHECK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH) == CUBLAS_STATUS_SUCCESS,
			"TF32 math mode");
		T_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, dA, LD, dB, LD,
				    &beta, dC, LD) == CUBLAS_STATUS_SUCCESS,
			"TF32 sgemm");
		CK(cudaMemcpy(got, dC, STRIDE * sizeof(float), cudaMemcpyDeviceToHost));
		memcpy(want, C, sizeof(C));
		naive(CUBLAS_OP_N, CUBLAS_OP_N, alpha, A, B, beta, want); /* the rounded inputs */
		int differ = 0;
		for (int j = 0; j < N; j++)
			for (int i = 0; i < M; i++) {
				T_CHECK(got[j * LD + i] == want[j * LD + i],
					"TF32 C(%d,%d) %.9g, want %.9g", i, j, got[j * LD + i],
					want[j * LD + i]);
				differ += exact[j * LD + i] != got[j * LD + i];
			}
		T_CHECK(differ > 0, "the default mode kept the 2^-15 parts");
	}
	T_CHECK(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS, "cublasDestroy");
	CK(cudaFree(dC));
	CK(cudaFree(dB));
	CK(cudaFree(dA));
	return 0;
}

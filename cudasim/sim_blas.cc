// The CUDA simulator's cuBLAS: handles, their stream, and the fp32 GEMMs zinf calls,
// queued on the handle's stream and run with the host's BLAS (OpenBLAS sgemm, exact
// fp32). In CUBLAS_TF32_TENSOR_OP_MATH mode the inputs are first rounded to TF32 (10
// mantissa bits, to nearest even) as tensor cores take them, so that mode's effect on
// results shows here too. Scalars are read at the call (host pointer mode).
// The arguments are checked as cuBLAS checks them, and every matrix must lie inside one
// device allocation, which the real device would only notice as a fault or wrong data.
#include <cblas.h>
#include <cublas_v2.h>
#include <stdint.h>
#include <string.h>

#include <vector>

#include "sim_internal.h"

struct cublasContext {
	cudaStream_t stream = NULL;
	cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace
{
// Elements spanned by a rows x cols column-major matrix with leading dimension ld.
size_t span(int rows, int cols, int ld)
{
	return rows && cols ? (size_t)ld * (cols - 1) + rows : 0;
}

CBLAS_TRANSPOSE cblas_op(cublasOperation_t op)
{
	return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
}

bool op_valid(cublasOperation_t op)
{
	return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// Check one GEMM (batch items stride* elements apart); CUBLAS_STATUS_SUCCESS if valid.
cublasStatus_t check_gemm(const char *what, cublasOperation_t ta, cublasOperation_t tb, int m,
			  int n, int k, const float *A, int lda, long long sa, const float *B,
			  int ldb, long long sb, const float *C, int ldc, long long sc, int batch)
{
	int arows = ta == CUBLAS_OP_N ? m : k, acols = ta == CUBLAS_OP_N ? k : m;
	int brows = tb == CUBLAS_OP_N ? k : n, bcols = tb == CUBLAS_OP_N ? n : k;
	size_t ea = 0, eb = 0, ec = 0, ba = 0, bb = 0, bc = 0;

	if (!op_valid(ta) || !op_valid(tb) || m < 0 || n < 0 || k < 0 || batch < 0 ||
	    lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) ||
	    ldc < (m > 1 ? m : 1) || sa < 0 || sb < 0 || sc < 0) {
		sim_complain("%s: invalid arguments (m %d n %d k %d lda %d ldb %d ldc %d batch %d)",
			     what, m, n, k, lda, ldb, ldc, batch);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if (!m || !n || !batch)
		return CUBLAS_STATUS_SUCCESS;
	if (batch > 1 && (size_t)sc < span(m, n, ldc)) { // tolerated here, a race on a GPU
		sim_complain("%s: batch items overlap in C (strideC %lld, each item spans %zu)",
			     what, sc, span(m, n, ldc));
		return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	if (__builtin_mul_overflow((size_t)sa, (size_t)(batch - 1), &ea) ||
	    __builtin_add_overflow(ea, span(arows, acols, lda), &ea) ||
	    __builtin_mul_overflow(ea, sizeof(float), &ba) ||
	    __builtin_mul_overflow((size_t)sb, (size_t)(batch - 1), &eb) ||
	    __builtin_add_overflow(eb, span(brows, bcols, ldb), &eb) ||
	    __builtin_mul_overflow(eb, sizeof(float), &bb) ||
	    __builtin_mul_overflow((size_t)sc, (size_t)(batch - 1), &ec) ||
	    __builtin_add_overflow(ec, span(m, n, ldc), &ec) ||
	    __builtin_mul_overflow(ec, sizeof(float), &bc) ||
	    (k && (!sim_is_device_range(A, ba) || !sim_is_device_range(B, bb))) ||
	    !sim_is_device_range(C, bc)) {
		sim_complain("%s: a matrix leaves its device allocation (A %p %zu, B %p %zu, C %p "
			     "%zu elements)",
			     what, (const void *)A, ea, (const void *)B, eb, (const void *)C, ec);
		return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	return CUBLAS_STATUS_SUCCESS;
}

float tf32_round(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	if ((u & 0x7f800000u) != 0x7f800000u) // finite: round the low 13 bits away
		u = (u + 0xfffu + ((u >> 13) & 1)) & ~0x1fffu;
	memcpy(&x, &u, sizeof(x));
	return x;
}

// A TF32 copy of the n elements at p.
std::vector<float> tf32_copy(const float *p, size_t n)
{
	std::vector<float> v(p, p + n);

	for (float &x : v)
		x = tf32_round(x);
	return v;
}

void run_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
	      const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
	      bool tf32)
{
	std::vector<float> a32, b32;

	if (tf32 && k) {
		a32 = tf32_copy(A, span(ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda));
		b32 = tf32_copy(B, span(tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb));
		A = a32.data();
		B = b32.data();
	}
	if (beta == 0.0f) { // C is not read: it may hold anything, NaN included
		for (int j = 0; j < n; j++)
			memset(C + (size_t)j * ldc, 0, (size_t)m * sizeof(float));
	}
	if (!k) {
		for (int j = 0; j < n && beta != 0.0f; j++)
			for (int i = 0; i < m; i++)
				C[(size_t)j * ldc + i] *= beta;
		return;
	}
	cblas_sgemm(CblasColMajor, cblas_op(ta), cblas_op(tb), m, n, k, alpha, A, lda, B, ldb,
		    beta == 0.0f ? 0.0f : beta, C, ldc);
}

cublasStatus_t queue(cublasHandle_t h, std::function<void()> op)
{
	return sim_enqueue(h->stream, std::move(op)) == cudaSuccess
		       ? CUBLAS_STATUS_SUCCESS
		       : CUBLAS_STATUS_EXECUTION_FAILED;
}
// Check one (batched) GEMM and queue it on the handle's stream.
cublasStatus_t gemm(cublasHandle_t h, const char *what, cublasOperation_t ta, cublasOperation_t tb,
		    int m, int n, int k, const float *alpha, const float *A, int lda, long long sa,
		    const float *B, int ldb, long long sb, const float *beta, float *C, int ldc,
		    long long sc, int batch)
{
	cublasStatus_t st;
	float a, b;
	bool tf32;

	if (!h)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	st = check_gemm(what, ta, tb, m, n, k, A, lda, sa, B, ldb, sb, C, ldc, sc, batch);
	if (st != CUBLAS_STATUS_SUCCESS || !m || !n || !batch)
		return st;
	a = *alpha;
	b = *beta;
	tf32 = (h->math & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH; // less the flag bits
	return queue(h, [=]() {
		for (int i = 0; i < batch; i++)
			run_gemm(ta, tb, m, n, k, a, A + i * sa, lda, B + i * sb, ldb, b,
				 C + i * sc, ldc, tf32);
	});
}
} // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
	*handle = new cublasContext;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	delete handle;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	handle->stream = stream;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *stream)
{
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	*stream = handle->stream;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
	if (!handle)
		return CUBLAS_STATUS_NOT_INITIALIZED;
	handle->math = mode;
	return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status)
{
	switch (status) {
	case CUBLAS_STATUS_SUCCESS:
		return "the operation completed successfully";
	case CUBLAS_STATUS_NOT_INITIALIZED:
		return "the library was not initialized";
	case CUBLAS_STATUS_INVALID_VALUE:
		return "an invalid value was used as an argument";
	case CUBLAS_STATUS_EXECUTION_FAILED:
		return "the GPU program failed to execute";
	default:
		return "unknown error";
	}
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
			      cublasOperation_t transb, int m, int n, int k, const float *alpha,
			      const float *A, int lda, const float *B, int ldb, const float *beta,
			      float *C, int ldc)
{
	return gemm(handle, "cublasSgemm", transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0,
		    beta, C, ldc, 0, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
					 cublasOperation_t transb, int m, int n, int k,
					 const float *alpha, const float *A, int lda,
					 long long int strideA, const float *B, int ldb,
					 long long int strideB, const float *beta, float *C,
					 int ldc, long long int strideC, int batchCount)
{
	return gemm(handle, "cublasSgemmStridedBatched", transa, transb, m, n, k, alpha, A, lda,
		    strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount);
}

} // extern "C"

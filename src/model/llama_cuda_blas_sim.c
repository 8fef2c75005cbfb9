/*
 * cuBLAS in the CUDA simulator's build (llama_cuda_blas.h): the simulator's stand-in,
 * linked; there is no library to load.
 */
#include "llama_cuda_blas.h"

const char *const crt_blas_names[] = {NULL};

int crt_blas_load(const char *const *names, struct crt_blas_api *api, char *err, size_t errlen)
{
	(void)names;
	(void)err;
	(void)errlen;
	api->Create = cublasCreate_v2;
	api->Destroy = cublasDestroy_v2;
	api->SetStream = cublasSetStream_v2;
	api->SetMathMode = cublasSetMathMode;
	api->Sgemm = cublasSgemm_v2;
	api->SgemmStridedBatched = cublasSgemmStridedBatched;
	api->GetStatusString = cublasGetStatusString;
	return 0;
}

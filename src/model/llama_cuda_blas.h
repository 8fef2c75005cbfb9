/*
 * cuBLAS for the cuda model runtime, loaded on first use. A CUDA build that linked
 * libcublas would pay for loading it (tens of MB, hundreds of thousands of relocations:
 * about half a second) at the start of every program, `zinf version` included, on
 * machines with and without a GPU; the runtime loads it when it creates its first handle.
 * The CUDA simulator's build (ZINF_CUDA=SIM) links its stand-in and uses it directly.
 */
#ifndef ZINF_MODEL_LLAMA_CUDA_BLAS_H
#define ZINF_MODEL_LLAMA_CUDA_BLAS_H

#include <cublas_v2.h>
#include <stddef.h>

/* The calls the runtime makes, by their cuBLAS names without the "cublas" prefix (BLAS()
 * in llama_cuda_internal.h names a failed call "cublas" + field). */
struct crt_blas_api {
	__typeof__(cublasCreate_v2) *Create;
	__typeof__(cublasDestroy_v2) *Destroy;
	__typeof__(cublasSetStream_v2) *SetStream;
	__typeof__(cublasSetMathMode) *SetMathMode;
	__typeof__(cublasSgemm_v2) *Sgemm;
	__typeof__(cublasSgemmStridedBatched) *SgemmStridedBatched;
	__typeof__(cublasGetStatusString) *GetStatusString;
};

/* The calls, loaded once per process (thread-safe); NULL with one line in err (naming the
 * library and the loader's reason) when the library or a symbol cannot be loaded. The
 * outcome is kept: a failed load is not retried. */
const struct crt_blas_api *crt_blas(char *err, size_t errlen);

/* Load the calls from the first of names (NULL-terminated; file names searched as dlopen
 * searches, or paths) that opens, into api; 0, or -1 with one line in err. For crt_blas and
 * its tests; the simulator's build fills api from its stand-in and ignores names. */
int crt_blas_load(const char *const *names, struct crt_blas_api *api, char *err, size_t errlen);

#endif /* ZINF_MODEL_LLAMA_CUDA_BLAS_H */

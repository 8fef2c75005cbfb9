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

/* Room for crt_blas's message. */
#define CRT_BLAS_ERR_LEN 512

/* The calls, loaded once per process (thread-safe) from crt_blas_names; NULL with one line
 * in err (each library tried and the loader's reason) when none loads. The outcome is
 * kept: a failed load is not retried. (llama_cuda_blas.c) */
const struct crt_blas_api *crt_blas(char *err, size_t errlen);

/* Load the calls into api from the first of names (NULL-terminated; file names searched
 * as dlopen searches, or paths) that opens and has them all; 0, or -1 with api zeroed and
 * one line in err naming each candidate's failure. The build's loader defines it and
 * crt_blas_names, the candidates crt_blas tries: llama_cuda_blas_dl.c (the toolkit's
 * soname, then its path), or llama_cuda_blas_sim.c (the simulator's stand-in, linked:
 * names ignored, none listed). */
int crt_blas_load(const char *const *names, struct crt_blas_api *api, char *err, size_t errlen);
extern const char *const crt_blas_names[];

#endif /* ZINF_MODEL_LLAMA_CUDA_BLAS_H */

/*
 * cuBLAS loaded on first use (llama_cuda_blas.h): crt_blas loads the calls once per
 * process with crt_blas_load, from llama_cuda_blas_dl.c (dlopen of the toolkit's
 * libcublas) or llama_cuda_blas_sim.c (the CUDA simulator's stand-in, linked), as the
 * build chose.
 */
#include <pthread.h>
#include <stdio.h>

#include "llama_cuda_blas.h"

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static struct crt_blas_api blas_api;
static int blas_rc;
static char blas_err[CRT_BLAS_ERR_LEN];

static void blas_load_once(void)
{
	blas_rc = crt_blas_load(crt_blas_names, &blas_api, blas_err, sizeof(blas_err));
}

const struct crt_blas_api *crt_blas(char *err, size_t errlen)
{
	pthread_once(&blas_once, blas_load_once);
	if (blas_rc) {
		snprintf(err, errlen, "%s", blas_err);
		return NULL;
	}
	return &blas_api;
}

/*
 * cuBLAS loaded on first use (llama_cuda_blas.h): dlopen of the library the build was
 * configured with (ZINF_CUBLAS_SONAME, searched as the dynamic linker searches, then
 * ZINF_CUBLAS_PATH, the toolkit's copy), dlsym of each call.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "llama_cuda_blas.h"

#ifndef ZINF_CUBLAS_SIM
/* Look up one call; -1 with err set when missing. */
static int blas_sym(void *lib, const char *libname, const char *sym, void **fn, char *err,
		    size_t errlen)
{
	const char *why;

	dlerror();
	*fn = dlsym(lib, sym);
	if (*fn)
		return 0;
	why = dlerror();
	snprintf(err, errlen, "cuBLAS (%s): no %s: %s", libname, sym, why ? why : "NULL symbol");
	return -1;
}
#endif

int crt_blas_load(const char *const *names, struct crt_blas_api *api, char *err, size_t errlen)
{
#ifdef ZINF_CUBLAS_SIM
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
#else
	char first[256] = "";
	const char *name = NULL;
	void *lib = NULL;

	for (const char *const *n = names; *n && !lib; n++) {
		name = *n;
		lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
		if (!lib && !first[0]) {
			const char *why = dlerror();

			snprintf(first, sizeof(first), "%s", why ? why : "dlopen failed");
		}
	}
	if (!lib) {
		snprintf(err, errlen, "cuBLAS: cannot load %s: %s", names[0] ? names[0] : "(none)",
			 first[0] ? first : "no library named");
		return -1;
	}
	/* each call by the symbol cublas_v2.h maps its name to */
	if (blas_sym(lib, name, "cublasCreate_v2", (void **)&api->Create, err, errlen) ||
	    blas_sym(lib, name, "cublasDestroy_v2", (void **)&api->Destroy, err, errlen) ||
	    blas_sym(lib, name, "cublasSetStream_v2", (void **)&api->SetStream, err, errlen) ||
	    blas_sym(lib, name, "cublasSetMathMode", (void **)&api->SetMathMode, err, errlen) ||
	    blas_sym(lib, name, "cublasSgemm_v2", (void **)&api->Sgemm, err, errlen) ||
	    blas_sym(lib, name, "cublasSgemmStridedBatched", (void **)&api->SgemmStridedBatched,
		     err, errlen) ||
	    blas_sym(lib, name, "cublasGetStatusString", (void **)&api->GetStatusString, err,
		     errlen)) {
		dlclose(lib);
		memset(api, 0, sizeof(*api));
		return -1;
	}
	return 0; /* the library stays loaded for the process's life */
#endif
}

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static struct crt_blas_api blas_api;
static int blas_rc;
static char blas_err[512];

static void blas_load_once(void)
{
#ifdef ZINF_CUBLAS_SIM
	static const char *const names[] = {NULL};
#else
	static const char *const names[] = {ZINF_CUBLAS_SONAME, ZINF_CUBLAS_PATH, NULL};
#endif

	blas_rc = crt_blas_load(names, &blas_api, blas_err, sizeof(blas_err));
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

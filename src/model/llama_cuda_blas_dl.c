/*
 * cuBLAS from the toolkit, loaded with dlopen (llama_cuda_blas.h): the library the build
 * was configured with, by its soname (ZINF_CUBLAS_SONAME, searched as the dynamic linker
 * searches) and then by its path in that toolkit (ZINF_CUBLAS_PATH); each call by dlsym.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "llama_cuda_blas.h"

const char *const crt_blas_names[] = {ZINF_CUBLAS_SONAME, ZINF_CUBLAS_PATH, NULL};

/* Each call by the symbol cublas_v2.h maps its name to, and where it goes. */
static const struct {
	const char *sym;
	size_t off;
} blas_syms[] = {
	{"cublasCreate_v2", offsetof(struct crt_blas_api, Create)},
	{"cublasDestroy_v2", offsetof(struct crt_blas_api, Destroy)},
	{"cublasSetStream_v2", offsetof(struct crt_blas_api, SetStream)},
	{"cublasSetMathMode", offsetof(struct crt_blas_api, SetMathMode)},
	{"cublasSgemm_v2", offsetof(struct crt_blas_api, Sgemm)},
	{"cublasSgemmStridedBatched", offsetof(struct crt_blas_api, SgemmStridedBatched)},
	{"cublasGetStatusString", offsetof(struct crt_blas_api, GetStatusString)},
};

/* Every call from lib into api; 0, or -1 with the loader's reason in why. */
static int blas_syms_load(void *lib, struct crt_blas_api *api, char *why, size_t len)
{
	for (size_t i = 0; i < sizeof(blas_syms) / sizeof(blas_syms[0]); i++) {
		void *fn;
		const char *e;

		dlerror();
		fn = dlsym(lib, blas_syms[i].sym);
		if (!fn) {
			e = dlerror();
			snprintf(why, len, "%s", e ? e : blas_syms[i].sym);
			return -1;
		}
		/* a function pointer has a data pointer's representation (POSIX) */
		memcpy((char *)api + blas_syms[i].off, &fn, sizeof(fn));
	}
	return 0;
}

int crt_blas_load(const char *const *names, struct crt_blas_api *api, char *err, size_t errlen)
{
	char why[CRT_BLAS_ERR_LEN];
	size_t used = 0;

	memset(api, 0, sizeof(*api));
	err[0] = '\0';
	for (const char *const *n = names; *n; n++) {
		void *lib = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
		const char *e;

		if (lib && blas_syms_load(lib, api, why, sizeof(why)) == 0)
			return 0; /* the library stays loaded for the process's life */
		if (lib) {
			dlclose(lib);
			memset(api, 0, sizeof(*api));
		} else {
			e = dlerror();
			snprintf(why, sizeof(why), "%s", e ? e : *n);
		}
		/* each candidate's reason, in order */
		if (used < errlen)
			used += (size_t)snprintf(err + used, errlen - used, "%s%s",
						 used ? "; " : "cuBLAS: cannot load it: ", why);
	}
	if (!names[0])
		snprintf(err, errlen, "cuBLAS: cannot load it: no library named");
	return -1;
}

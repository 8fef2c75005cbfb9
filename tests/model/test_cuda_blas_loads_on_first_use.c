/*
 * cuBLAS is loaded by the first cuda model runtime, not at program start: a CUDA build's
 * programs (the CLI, this test) start without libcublas mapped; crt_blas loads it once and
 * returns every call the runtime makes. A library that cannot be loaded, or that lacks a
 * call, gives one line naming each candidate's failure and leaves no call behind; the
 * next candidate is tried after either. In the CUDA simulator's build the calls are the
 * simulator's, linked.
 */
#include <stdio.h>
#include <string.h>

#include "llama_cuda_blas.h"
#include "test.h"

/* Whether a mapping of this process names a file containing needle. */
static int mapped(const char *needle)
{
	char line[4096];
	FILE *f = fopen("/proc/self/maps", "r");
	int found = 0;

	T_CHECK(f != NULL, "/proc/self/maps: %s", strerror(errno));
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* Whether every call of api is NULL. */
static int no_calls(const struct crt_blas_api *api)
{
	return !api->Create && !api->Destroy && !api->SetStream && !api->SetMathMode &&
	       !api->Sgemm && !api->SgemmStridedBatched && !api->GetStatusString;
}

#ifndef ZINF_CUBLAS_SIM
/* The loader's failures and its fallback: a missing library, one without the calls
 * (libm), then the real one after a missing one. */
static void check_loader(void)
{
	const char *const missing[] = {"libzinf-no-such-cublas.so.0", "libm.so.6", NULL};
	const char *const fallback[] = {"libzinf-no-such-cublas.so.0", ZINF_CUBLAS_SONAME, NULL};
	struct crt_blas_api api;
	char err[512] = "";

	memset(&api, 0xa5, sizeof(api));
	T_CHECK(crt_blas_load(missing, &api, err, sizeof(err)) == -1, "a missing library loaded");
	T_CHECK(strstr(err, "libzinf-no-such-cublas.so.0") && strstr(err, "cublasCreate_v2") &&
			!strchr(err, '\n'),
		"not one line naming both candidates' failures: %s", err);
	T_CHECK(no_calls(&api), "a failed load left calls behind");
	T_CHECK(!mapped("libcublas"), "a failed load mapped libcublas");
	memset(&api, 0, sizeof(api));
	T_CHECK(crt_blas_load(fallback, &api, err, sizeof(err)) == 0,
		"the second candidate did not load: %s", err);
	T_CHECK(api.Create && api.Sgemm && api.GetStatusString, "the fallback's calls are missing");
	T_CHECK(mapped("libcublas"), "the fallback loaded but libcublas is not mapped");
}
#endif

int main(void)
{
	const struct crt_blas_api *b;
	char err[512] = "";

#ifndef ZINF_CUBLAS_SIM
	T_CHECK(!mapped("libcublas"), "libcublas is mapped before any model runtime asked for it");
	check_loader();
#endif
	err[0] = '\0';
	b = crt_blas(err, sizeof(err));
	T_CHECK(b != NULL, "cuBLAS did not load: %s", err);
	T_CHECK(b->Create && b->Destroy && b->SetStream && b->SetMathMode && b->Sgemm &&
			b->SgemmStridedBatched && b->GetStatusString,
		"a call is missing from the loaded table");
	T_CHECK(crt_blas(err, sizeof(err)) == b, "a second call gave another table");
	T_CHECK(b->GetStatusString(CUBLAS_STATUS_NOT_INITIALIZED) != NULL &&
			b->GetStatusString(CUBLAS_STATUS_SUCCESS) != NULL &&
			strcmp(b->GetStatusString(CUBLAS_STATUS_NOT_INITIALIZED),
			       b->GetStatusString(CUBLAS_STATUS_SUCCESS)) != 0,
		"cublasGetStatusString through the table does not tell statuses apart");
#ifndef ZINF_CUBLAS_SIM
	T_CHECK(mapped("libcublas"), "crt_blas returned calls but libcublas is not mapped");
#else
	T_CHECK(b->Sgemm == cublasSgemm_v2, "the simulator's build does not call its stand-in");
#endif
	printf("ok: cuBLAS loaded on first use\n");
	return T_EXIT_PASS;
}

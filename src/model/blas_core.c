/*
 * Which OpenBLAS kernel set (its "core") the CPU model's matrix products run on, and a
 * faster one when OpenBLAS did not recognise the CPU.
 *
 * A DYNAMIC_ARCH OpenBLAS (Debian's) picks its core from the CPU's model number when it
 * loads. On a CPU newer than the build knows (Debian 12's 0.3.21 on an Intel Xeon of
 * family 6 model 207, for one) it falls back to its generic Prescott (SSE3) kernels,
 * which run the demo's sgemm-bound training 2.3x slower than the AVX-512 kernels the
 * CPU supports (docs/benchmarks.md, "The demo's step time"). The core can only be chosen
 * before OpenBLAS loads, by OPENBLAS_CORETYPE in the environment: the library only says
 * which core would be better; the zinf CLI re-executes itself with it set.
 *
 * Only a fallback is overridden: a core with AVX2 kernels or better is OpenBLAS's own
 * informed choice and is kept, and so is anything the user set. A build without
 * DYNAMIC_ARCH has one core and ignores the variable: nothing is suggested there.
 * For AVX-512 the suggestion is SkylakeX, which every DYNAMIC_ARCH build since 0.2.20
 * finds by name (0.3.21 does not find "Cooperlake" by name; its extra kernels are bf16
 * products, which the model does not use).
 */
#include <cblas.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "llama_ops.h"
#include "zinf/log.h"
#include "zinf/train.h"

/* Cores with AVX2 kernels or wider: OpenBLAS chose them knowing the CPU. Anything else on
 * a CPU with AVX2 is a fallback (Prescott for an Intel model it does not know). */
static bool vector_core(const char *name)
{
	static const char *const known[] = {"Haswell",	"Zen",	      "Excavator",
					    "SkylakeX", "Cooperlake", "SapphireRapids"};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcasecmp(name, known[i]))
			return true;
	return false;
}

/* The best core this CPU (and its OS, which must save the vector state: libgcc checks
 * XCR0) runs; NULL below AVX2. */
static const char *cpu_best_core(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512cd"))
		return "SkylakeX";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "Haswell";
	return NULL;
}

const char *zinf_blas_core(void)
{
	return openblas_get_corename();
}

const char *zinf_blas_core_suggested(void)
{
	const char *best;

	if (getenv("OPENBLAS_CORETYPE") || !strstr(openblas_get_config(), "DYNAMIC_ARCH"))
		return NULL;
	best = cpu_best_core();
	if (!best || vector_core(zinf_blas_core()))
		return NULL;
	return best;
}

void zinf_cpu_model_threads(int *openmp, int *openblas)
{
	if (openmp)
		*openmp = omp_get_max_threads();
	if (openblas)
		*openblas = openblas_get_num_threads();
}

static void warn_once(void)
{
	const char *best = zinf_blas_core_suggested();

	if (best)
		zinf_logf(ZINF_LOG_WARN,
			  "OpenBLAS did not recognise this CPU and runs its generic %s kernels; "
			  "OPENBLAS_CORETYPE=%s in the environment makes the model's matrix "
			  "products about 2x faster",
			  zinf_blas_core(), best);
}

void blas_core_check(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, warn_once);
}

/* OpenBLAS's buffer a thread on x86-64 (its BUFFER_SIZE, 32 << 22) */
#define BLAS_BUFFER (128ull << 20)

int zinf_cpu_model_check_address_space(char *err, size_t errlen)
{
	struct rlimit rl;
	int blas_threads = 1;
	uint64_t need;
	void *p;

	if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	zinf_cpu_model_threads(NULL, &blas_threads);
	need = (uint64_t)(blas_threads + 2) * BLAS_BUFFER;
	p = mmap(NULL, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p != MAP_FAILED) {
		munmap(p, need);
		return 0;
	}
	if (!err)
		errlen = 0;
	snprintf(err, errlen,
		 "address space: the limit (ulimit -v, %llu KiB) leaves less than the %llu MiB "
		 "OpenBLAS maps for %d threads and the run's own (raise it: ulimit -v unlimited)",
		 (unsigned long long)(rl.rlim_cur >> 10), (unsigned long long)(need >> 20),
		 blas_threads);
	return -ENOMEM;
}

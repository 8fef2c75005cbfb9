/*
 * Which OpenBLAS kernel set (its "core") the CPU model's matrix products run on, and a
 * faster one when OpenBLAS did not recognise the CPU.
 *
 * A DYNAMIC_ARCH OpenBLAS (Debian's) picks its core from the CPU's model number when it
 * loads. On a CPU newer than the build knows (Debian 12's 0.3.21 on an Intel Xeon of
 * family 6 model 207, for one) it falls back to its generic Prescott (SSE3) kernels,
 * which run the demo's sgemm-bound training 2.3x slower than the AVX-512 kernels the
 * CPU supports (docs/benchmarks.md, "OpenBLAS core"). The core can only be chosen
 * before OpenBLAS loads, by OPENBLAS_CORETYPE in the environment: the library only says
 * which core would be better; the zinf CLI re-executes itself with it set.
 *
 * Only a fallback is overridden: a core with AVX2 kernels or better is OpenBLAS's own
 * informed choice and is kept, and so is anything the user set.
 */
#include <cblas.h>
#include <cpuid.h>
#include <stdlib.h>
#include <strings.h>

#include "llama_ops.h"
#include "zinf/log.h"
#include "zinf/train.h"

/* The widest vector kernels of an OpenBLAS x86-64 core: 2 for AVX2, 3 for AVX-512, 1 for
 * older or unknown ones (the generic fallbacks among them). */
static int core_level(const char *name)
{
	static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
	static const char *const avx2[] = {"Haswell", "Zen"};

	for (size_t i = 0; i < sizeof(avx512) / sizeof(avx512[0]); i++)
		if (!strcasecmp(name, avx512[i]))
			return 3;
	for (size_t i = 0; i < sizeof(avx2) / sizeof(avx2[0]); i++)
		if (!strcasecmp(name, avx2[i]))
			return 2;
	return 1;
}

/* AVX512_BF16: cpuid leaf 7, sub-leaf 1, EAX bit 5. */
static bool cpu_has_avx512_bf16(void)
{
	unsigned a, b, c, d;

	return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}

/* The best core this CPU (and its OS, which must save the AVX state) runs; NULL below
 * AVX2. */
static const char *cpu_best_core(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512cd"))
		return cpu_has_avx512_bf16() ? "Cooperlake" : "SkylakeX";
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

	if (getenv("OPENBLAS_CORETYPE"))
		return NULL;
	best = cpu_best_core();
	if (!best || core_level(zinf_blas_core()) > 1)
		return NULL;
	return best;
}

void blas_core_check(void)
{
	const char *best = zinf_blas_core_suggested();

	if (best)
		zinf_logf(ZINF_LOG_WARN,
			  "OpenBLAS did not recognise this CPU and runs its generic %s kernels; "
			  "OPENBLAS_CORETYPE=%s in the environment makes the model's matrix "
			  "products about 2x faster (the zinf CLI sets it itself)",
			  zinf_blas_core(), best);
}

/* The zinf CLI never runs OpenBLAS's generic (pre-AVX2) kernels on a CPU with AVX2 and
 * FMA: when OpenBLAS did not recognise the CPU it re-executes itself with
 * OPENBLAS_CORETYPE naming the best core the CPU runs ('zinf version' prints the core in
 * use). A core the user chose in OPENBLAS_CORETYPE is kept, even a generic one. In this
 * process (which loaded OpenBLAS with the environment it had), a suggestion is made
 * exactly when the core in use is generic, the CPU does better, and the variable is
 * unset. Skipped with an OpenBLAS built for one core (no DYNAMIC_ARCH), which ignores
 * OPENBLAS_CORETYPE. argv[1]: the zinf CLI. */
#include <strings.h>

#include "cli_util.h"

char *openblas_get_config(void); /* OpenBLAS's own (cblas.h is not on this path) */
#include "zinf/train.h"

static bool generic(const char *core)
{
	static const char *const vector[] = {"Haswell",	 "Zen",	       "Excavator",
					     "SkylakeX", "Cooperlake", "SapphireRapids"};

	for (size_t i = 0; i < sizeof(vector) / sizeof(vector[0]); i++)
		if (!strcasecmp(core, vector[i]))
			return false;
	return true;
}

/* The core 'zinf version' reports, run with env (a prefix for the shell). */
static void cli_core(const char *cli, const char *env, char *core, size_t len)
{
	t_version_line(cli, env, "OpenBLAS core ", core, len);
}

int main(int argc, char **argv)
{
	bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	const char *here = zinf_blas_core(), *suggested = zinf_blas_core_suggested();
	char core[64];

	T_CHECK(argc == 2, "usage: %s ZINF_CLI", argv[0]);
	if (!strstr(openblas_get_config(), "DYNAMIC_ARCH"))
		T_SKIP("OpenBLAS without DYNAMIC_ARCH (%s): one core, OPENBLAS_CORETYPE ignored",
		       openblas_get_config());
	printf("this process: core %s, suggested %s; cpu avx2+fma: %d\n", here,
	       suggested ? suggested : "(none)", avx2);
	if (getenv("OPENBLAS_CORETYPE"))
		T_CHECK(!suggested, "a suggestion (%s) over the user's OPENBLAS_CORETYPE",
			suggested);
	else
		T_CHECK(!suggested == !(avx2 && generic(here)),
			"suggestion %s with core %s on a cpu %s avx2+fma",
			suggested ? suggested : "(none)", here, avx2 ? "with" : "without");
	if (suggested)
		T_CHECK(!generic(suggested), "suggested a generic core: %s", suggested);

	cli_core(argv[1], "env -u OPENBLAS_CORETYPE", core, sizeof(core));
	printf("zinf version, no OPENBLAS_CORETYPE: %s\n", core);
	T_CHECK(!avx2 || !generic(core), "the CLI runs the generic %s kernels on an avx2 cpu",
		core);
	cli_core(argv[1], "OPENBLAS_CORETYPE=Prescott", core, sizeof(core));
	T_CHECK(!strcasecmp(core, "Prescott"), "the user's OPENBLAS_CORETYPE=Prescott became %s",
		core);
	return T_EXIT_PASS;
}

/* zinf version: the version of the CLI's linked library, and what the CPU model's
 * libraries run with. */
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "zinf/train.h"
#include "zinf/zinf.h"

const char cmd_version_usage[] =
	"usage: zinf version\n"
	"Print the version of the zinf library this CLI is linked with, the OpenBLAS\n"
	"kernel set (core) its CPU model runs on, how OpenMP's idle threads wait, the CPUs\n"
	"this process may use and the threads OpenMP and OpenBLAS run.\n";

int cmd_version(int argc, char **argv)
{
	unsigned cpus, mask;
	int omp, blas;

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(cmd_version_usage, stdout);
		return ZINF_EXIT_OK;
	}
	if (argc > 1) {
		fprintf(stderr, "zinf version: %s: unexpected argument\n", argv[1]);
		return ZINF_EXIT_USAGE;
	}
	printf("zinf %s\n", zinf_version());
	printf("OpenBLAS core %s\n", zinf_blas_core());
	if (getenv("OMP_WAIT_POLICY"))
		printf("OpenMP wait policy %s\n", getenv("OMP_WAIT_POLICY"));
	else
		printf("OpenMP wait policy libgomp's default (GOMP_SPINCOUNT=%s)\n",
		       getenv("GOMP_SPINCOUNT") ? getenv("GOMP_SPINCOUNT") : "unset");
	cpus = zinf_host_cpus(&mask);
	zinf_cpu_model_threads(&omp, &blas);
	printf("CPUs %u (affinity mask %u%s)\n", cpus, mask,
	       cpus < mask ? ", fewer by the control group's CPU quota" : "");
	printf("threads OpenMP %d, OpenBLAS %d\n", omp, blas);
	return ZINF_EXIT_OK;
}

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
	"kernel set (core) its CPU model runs on, and how OpenMP's idle threads wait.\n";

int cmd_version(int argc, char **argv)
{
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
	return ZINF_EXIT_OK;
}

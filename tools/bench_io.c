/* zinf bench io: placeholder until the I/O engine lands (see docs/cli.md). */
#include <string.h>

#include "cmd.h"

const char bench_io_usage[] = "usage: zinf bench io [options]\n";

int bench_io(int argc, char **argv)
{
	fprintf(stderr, "zinf bench io: not built yet\n");
	return ZINF_EXIT_FAIL;
}

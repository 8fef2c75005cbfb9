/* zinf bench adam: placeholder until the optimizer lands (see docs/cli.md). */
#include <string.h>

#include "cmd.h"

const char bench_adam_usage[] = "usage: zinf bench adam [options]\n";

int bench_adam(int argc, char **argv)
{
	fprintf(stderr, "zinf bench adam: not built yet\n");
	return ZINF_EXIT_FAIL;
}

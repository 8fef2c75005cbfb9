/* zinf bench KIND: dispatch to one benchmark (io, adam, train). */
#include <string.h>

#include "cmd.h"

struct bench {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *usage;
	const char *summary;
};

static const struct bench benches[] = {
	{"io", bench_io, bench_io_usage, "NVMe read/write bandwidth and IOPS, beside fio"},
	{"adam", bench_adam, bench_adam_usage, "CPU Adam step speed against memory bandwidth"},
	{"train", bench_train, bench_train_usage,
	 "offloaded training against the same run resident on the device"},
};
#define N_BENCHES (sizeof(benches) / sizeof(benches[0]))

const char cmd_bench_usage[] =
	"usage: zinf bench KIND [options]\n"
	"Benchmark one part of the offload path. KIND is one of:\n"
	"  io     NVMe read/write bandwidth and IOPS (zinf bench io --help)\n"
	"  adam   CPU Adam step speed against memory bandwidth (zinf bench adam --help)\n"
	"  train  offloaded training against the resident run (zinf bench train --help)\n";

int cmd_bench(int argc, char **argv)
{
	if (argc < 2) {
		fputs(cmd_bench_usage, stderr);
		return ZINF_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(cmd_bench_usage, stdout);
		return ZINF_EXIT_OK;
	}
	for (size_t i = 0; i < N_BENCHES; i++) {
		if (strcmp(argv[1], benches[i].name) == 0)
			return benches[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "zinf bench: %s: unknown benchmark (expected io, adam or train)\n",
		argv[1]);
	return ZINF_EXIT_USAGE;
}

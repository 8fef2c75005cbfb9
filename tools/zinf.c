/*
 * zinf: one CLI with git-style subcommands (train, plan, check, bench, version, help;
 * ckpt joins when it is built). Each subcommand parses its own flags with
 * getopt_long and answers --help.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cmd.h"
#include "zinf/train.h"
#include "zinf/zinf.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
	const char *usage;
};

static const struct command commands[] = {
	{"train", cmd_train, "train a Llama-family model through the offload engine",
	 cmd_train_usage},
	{"plan", cmd_plan, "say where a model's training state fits, and write its config",
	 cmd_plan_usage},
	{"check", cmd_check, "validate a DeepSpeed-style config and print it resolved",
	 cmd_check_usage},
	{"bench", cmd_bench, "benchmark the offload path (io, ...)", cmd_bench_usage},
	{"version", cmd_version, "print the zinf version", cmd_version_usage},
	{"help", NULL, "show help for zinf or one subcommand",
	 "usage: zinf help [COMMAND | bench KIND | config]\n"
	 "'zinf help config' prints the reference of every config key (Markdown).\n"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: zinf <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'zinf help <command>' or 'zinf <command> --help' shows a command's options;\n"
		   "'zinf help config' lists every config key.\n");
}

static int cmd_help(int argc, char **argv)
{
	if (argc < 2) {
		usage(stdout);
		return ZINF_EXIT_OK;
	}
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		char *help_help[] = {argv[0], "help", NULL}; /* help's own usage */

		return cmd_help(2, help_help);
	}
	/* one word more only for a benchmark: zinf help bench io */
	if (argc > 3 || (argc == 3 && strcmp(argv[1], "bench") != 0)) {
		fprintf(stderr, "zinf help: %s: unexpected argument (try 'zinf help')\n",
			argv[argc > 3 && strcmp(argv[1], "bench") == 0 ? 3 : 2]);
		return ZINF_EXIT_USAGE;
	}
	if (argc == 3) {
		char *bench_help[] = {argv[1], argv[2], "--help", NULL};
		return cmd_bench(3, bench_help);
	}
	if (strcmp(argv[1], "config") == 0)
		return zinf_config_print_reference(stdout) ? ZINF_EXIT_FAIL : ZINF_EXIT_OK;
	for (size_t i = 0; i < N_COMMANDS; i++) {
		if (strcmp(argv[1], commands[i].name) == 0) {
			fputs(commands[i].usage, stdout);
			return ZINF_EXIT_OK;
		}
	}
	fprintf(stderr, "zinf help: %s: unknown command (try 'zinf help')\n", argv[1]);
	return ZINF_EXIT_USAGE;
}

/* Run again with the environment the libraries read only as they load, where it is
 * missing:
 * - OPENBLAS_CORETYPE naming the faster core the CPU supports, when OpenBLAS did not
 *   recognise this CPU and runs generic kernels (zinf_blas_core_suggested() is NULL once
 *   it is set);
 * - OMP_WAIT_POLICY=passive, when neither it nor GOMP_SPINCOUNT is set: libgomp's
 *   default spins its idle workers, which then hold the cores the engine's copy, I/O and
 *   OpenBLAS threads need (the demo took 6.6x as long on 2 cores, docs/benchmarks.md);
 * - OMP_NUM_THREADS and OPENBLAS_NUM_THREADS, the CPUs this process may use, when a
 *   control group's CPU quota (a container's, a batch job's) allows fewer than the
 *   affinity mask holds and the user set none of them (nor GOTO_NUM_THREADS): both
 *   libraries would start a thread per CPU of the mask, and the quota would throttle
 *   them all.
 * Each is set once, so this happens at most once. Not when started through the dynamic
 * loader named as the program (no interpreter base: /proc/self/exe is then the loader).
 * If the exec fails, go on as we are. */
static void rerun_with_fast_defaults(char **argv)
{
	const char *core = zinf_blas_core_suggested();
	bool passive = !getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT");
	unsigned mask, cpus = zinf_host_cpus(&mask);
	bool threads = cpus < mask && !getenv("OMP_NUM_THREADS") &&
		       !getenv("OPENBLAS_NUM_THREADS") && !getenv("GOTO_NUM_THREADS");
	char n[16];

	if ((!core && !passive && !threads) || !getauxval(AT_BASE))
		return;
	snprintf(n, sizeof(n), "%u", cpus);
	if ((!core || !setenv("OPENBLAS_CORETYPE", core, 1)) &&
	    (!passive || !setenv("OMP_WAIT_POLICY", "passive", 1)) &&
	    (!threads ||
	     (!setenv("OMP_NUM_THREADS", n, 1) && !setenv("OPENBLAS_NUM_THREADS", n, 1))))
		execv("/proc/self/exe", argv);
	if (core)
		unsetenv("OPENBLAS_CORETYPE");
	if (passive)
		unsetenv("OMP_WAIT_POLICY");
	if (threads) {
		unsetenv("OMP_NUM_THREADS");
		unsetenv("OPENBLAS_NUM_THREADS");
	}
}

/* The soft limit on open files up to the hard one (as Go's runtime does): a checkpoint
 * of many safetensors shards keeps each open while it loads, beside the NVMe files and
 * rings; Debian's soft default is 1024. */
static void raise_open_files_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl); /* (if refused, the limit stays as it was) */
	}
}

/* An address-space limit (ulimit -v) too low for OpenBLAS: said on one line. The caller
 * then ends with _exit, not exit: OpenBLAS's threads, started as it loaded, may already
 * spin on a buffer they cannot map, and its teardown at exit waits for them. */
static bool address_space_short(void)
{
	char why[320];

	if (!zinf_cpu_model_check_address_space(why, sizeof(why)))
		return false;
	fprintf(stderr, "zinf: %s\n", why);
	fflush(stderr);
	return true;
}

/* What a command printed reached stdout (a full disk: exit 1, said once; a closed pipe
 * ends the process by SIGPIPE first), else its own status. */
static int stdout_written(int rc)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return rc;
	fprintf(stderr, "zinf: cannot write to stdout: %s\n", strerror(errno));
	return rc == ZINF_EXIT_OK ? ZINF_EXIT_FAIL : rc;
}

static int run_command(int argc, char **argv)
{
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return ZINF_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0)
		return cmd_version(1, argv + 1);
	for (size_t i = 0; i < N_COMMANDS; i++) {
		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		if (!commands[i].run)
			return cmd_help(argc - 1, argv + 1);
		return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "zinf: %s: unknown command (try 'zinf help')\n", argv[1]);
	return ZINF_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	rerun_with_fast_defaults(argv);
	raise_open_files_limit();
	/* a write past the file-size limit (ulimit -f) fails with EFBIG, said on one line
	 * and cleaned up after, instead of ending the process then and there */
	signal(SIGXFSZ, SIG_IGN);
	if (address_space_short())
		_exit(ZINF_EXIT_FAIL);
	if (argc < 2) {
		usage(stderr);
		return ZINF_EXIT_USAGE;
	}
	return stdout_written(run_command(argc, argv));
}

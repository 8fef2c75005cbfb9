/*
 * The zinf CLI's subcommands. Each takes argc/argv starting at its own name and
 * returns the process exit status: 0 success, 1 failure, 2 invalid input or usage.
 * Each has a usage text, printed by `zinf help NAME` and `zinf NAME --help`.
 * tools/ links the public API only.
 */
#ifndef ZINF_TOOLS_CMD_H
#define ZINF_TOOLS_CMD_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define ZINF_EXIT_OK 0
#define ZINF_EXIT_FAIL 1
#define ZINF_EXIT_USAGE 2

int cmd_check(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_plan(int argc, char **argv);
extern const char cmd_check_usage[];
extern const char cmd_version_usage[];
extern const char cmd_bench_usage[];
extern const char cmd_train_usage[];
extern const char cmd_plan_usage[];

/* `zinf bench KIND`: one function and usage text per benchmark. */
int bench_io(int argc, char **argv);
extern const char bench_io_usage[];
int bench_adam(int argc, char **argv);
extern const char bench_adam_usage[];
int bench_train(int argc, char **argv);
extern const char bench_train_usage[];

#define CMD_MAX_WORLD_SIZE (1u << 24)

/* The world size a launcher set ($WORLD_SIZE, $OMPI_COMM_WORLD_SIZE, $PMI_SIZE: every one
 * set must say the same), 1 when none did, with *var (when not NULL) the first variable
 * set or NULL; 0 when one is not a whole number from 1 to CMD_MAX_WORLD_SIZE or two
 * disagree (a line printed). */
int cmd_env_world_size(const char *prog, const char **var);

/* SIGINT and SIGTERM run handler once (SA_RESETHAND: the same signal again then stops
 * the process at once); one the caller set to be ignored (a script's `cmd &`, `trap '' INT`)
 * stays ignored. */
void cmd_catch_stop_signals(void (*handler)(int));

#define CMD_FLAG_CODES 512 /* getopt_long codes cmd_flag_once tells apart */

/* Flag c (a getopt_long code of opts) given a second time: one line naming it and -1,
 * unless c is in again (0-ended: --set and the like) or is a switch (no_argument: the same
 * again). A second value would otherwise replace the first without a word. seen:
 * CMD_FLAG_CODES entries, false at the start. */
int cmd_flag_once(bool *seen, const struct option *opts, int c, const int *again, const char *prog);

/* The flag getopt_long just refused (unknown, or missing its value) as written: "--bogus",
 * or "-x" for a short one, inside a cluster ("-qx", "-xq") too. */
static inline const char *cmd_bad_flag(char **argv, int argc)
{
	static char buf[4];
	const char *cur = optind < argc ? argv[optind] : NULL, *prev = argv[optind - 1];
	bool in_cur = cur && cur[0] == '-' && cur[1] != '-' && optopt > 0 && optopt < 128 &&
		      strchr(cur + 1, optopt); /* still inside this cluster */
	bool in_prev = prev[0] == '-' && prev[1] != '-' && optopt > 0 && optopt < 128 &&
		       strchr(prev + 1, optopt); /* the cluster just finished */

	if (!in_cur && !in_prev)
		return prev;
	snprintf(buf, sizeof(buf), "-%c", optopt);
	return buf;
}

#endif /* ZINF_TOOLS_CMD_H */

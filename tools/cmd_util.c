/*
 * Helpers the zinf subcommands share (tools/cmd.h): the launcher's world size, the rule
 * that a flag is given once, and the stop signals.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd.h"

int cmd_env_world_size(const char *prog, const char **var)
{
	static const char *const vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
	const char *first = NULL;
	unsigned long long world = 1;

	if (var)
		*var = NULL;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		char *end;
		unsigned long long n;

		if (!v || !*v)
			continue;
		errno = 0;
		n = strtoull(v, &end, 10);
		if (errno || *end || n == 0 || n > CMD_MAX_WORLD_SIZE || v[0] < '0' || v[0] > '9') {
			fprintf(stderr, "%s: %s: '%s' is not a whole number from 1 to %u\n", prog,
				vars[i], v, CMD_MAX_WORLD_SIZE);
			return 0;
		}
		if (first && n != world) { /* a stale export beside a launcher's own */
			fprintf(stderr,
				"%s: %s=%llu but %s=%llu: the launcher's world sizes disagree (unset the stale one)\n",
				prog, first, world, vars[i], n);
			return 0;
		}
		if (!first) {
			first = vars[i];
			world = n;
		}
	}
	if (var)
		*var = first;
	return (int)world;
}

int cmd_flag_once(bool *seen, const struct option *opts, int c, const int *again, const char *prog)
{
	if (c <= 0 || c >= CMD_FLAG_CODES)
		return 0;
	for (const int *a = again; *a; a++)
		if (*a == c)
			return 0;
	for (size_t i = 0; opts[i].name; i++) /* a switch given again says the same */
		if (!opts[i].flag && opts[i].val == c && opts[i].has_arg == no_argument)
			return 0;
	if (!seen[c]) {
		seen[c] = true;
		return 0;
	}
	for (size_t i = 0; opts[i].name; i++)
		if (!opts[i].flag && opts[i].val == c) {
			fprintf(stderr, "%s: --%s: given twice (expected once)\n", prog,
				opts[i].name);
			return -1;
		}
	fprintf(stderr, "%s: -%c: given twice (expected once)\n", prog, c);
	return -1;
}

void cmd_catch_stop_signals(void (*handler)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 2; i++) {
		int sig = i ? SIGTERM : SIGINT;
		struct sigaction old;

		if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(sig, &sa, NULL);
	}
}

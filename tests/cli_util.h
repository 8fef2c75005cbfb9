/*
 * Test support for the CLI tests: run a command and capture its output, and read a
 * number out of the one-line JSON the benchmarks print. Header-only.
 */
#ifndef ZINF_TESTS_CLI_UTIL_H
#define ZINF_TESTS_CLI_UTIL_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

/* Run cmd (through the shell); its stdout (with 2>&1 in cmd: also stderr) goes to out,
 * NUL-terminated, at most len - 1 bytes. Returns the exit status, or -1 if it did not
 * exit. */
static inline int t_run(const char *cmd, char *out, size_t len)
{
	FILE *f = popen(cmd, "r");
	size_t got;
	int status;

	T_CHECK(f, "popen %s", cmd);
	got = fread(out, 1, len - 1, f);
	out[got] = '\0';
	status = pclose(f);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The rest of the line of `env CLI version` that starts with label (env: a prefix for
 * the shell, such as "VAR=value" or "env -u VAR"); fails the test if the command fails or
 * prints no such line. */
static inline void t_version_line(const char *cli, const char *env, const char *label, char *line,
				  size_t len)
{
	char cmd[4200], out[512];
	const char *p;
	int rc;

	snprintf(cmd, sizeof(cmd), "%s '%s' version 2>&1", env, cli);
	rc = t_run(cmd, out, sizeof(out));
	T_CHECK(rc == 0, "%s: exit %d: %s", cmd, rc, out);
	p = strstr(out, label);
	T_CHECK(p, "%s: no '%s' line in: %s", cmd, label, out);
	p += strlen(label);
	snprintf(line, len, "%.*s", (int)strcspn(p, "\n"), p);
}

/* The number after "name": in json (the first occurrence); fails the test if absent. */
static inline double t_json_number(const char *json, const char *name)
{
	char key[96];
	const char *p;

	snprintf(key, sizeof(key), "\"%s\": ", name);
	p = strstr(json, key);
	T_CHECK(p, "no field %s in %s", name, json);
	return strtod(p + strlen(key), NULL);
}

/* Run argv (argv[0] the program; its output to /dev/null) until path exists (the test
 * fails if it does not within 20 s), usec more, then SIGTERM it: the test fails unless
 * it ends by that signal. */
static inline void t_stop_when_made(const char *const *argv, const char *path, useconds_t usec)
{
	struct stat st;
	int status;
	pid_t pid = fork();

	T_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (int waited = 0; stat(path, &st) != 0; waited++) {
		T_CHECK(waitpid(pid, &status, WNOHANG) == 0, "%s ended before %s", argv[0], path);
		if (waited == 20000) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			T_CHECK(0, "%s %s made no %s in 20 s", argv[1], argv[2], path);
		}
		usleep(1000);
	}
	usleep(usec);
	T_CHECK(kill(pid, SIGTERM) == 0 && waitpid(pid, &status, 0) == pid, "kill, wait");
	T_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM,
		"stopped %s %s: status %#x, expected an end by SIGTERM", argv[1], argv[2], status);
}

/* How many times needle occurs in text (not overlapping). */
static inline int t_count(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = strstr(text, needle); p; p = strstr(p + strlen(needle), needle))
		n++;
	return n;
}

#endif /* ZINF_TESTS_CLI_UTIL_H */

/*
 * Test support for the CLI tests: run a command and capture its output, and read a
 * number out of the one-line JSON the benchmarks print. Header-only.
 */
#ifndef ZINF_TESTS_CLI_UTIL_H
#define ZINF_TESTS_CLI_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

#endif /* ZINF_TESTS_CLI_UTIL_H */

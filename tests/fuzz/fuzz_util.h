/*
 * For the fuzz harnesses: whether a text is one JSON object and nothing else, and a
 * scratch directory of the process's own (in /dev/shm, else
 * /tmp: the inputs are files the readers open), removed with its files at exit, and by
 * the next harness when a crash or timeout skipped that.
 */
#ifndef ZINF_TESTS_FUZZ_UTIL_H
#define ZINF_TESTS_FUZZ_UTIL_H

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether text (n bytes) is one JSON object and nothing else: no NUL, nothing after it. */
static inline bool fuzz_one_json_object(const void *text, size_t n)
{
	char *z = malloc(n + 1);
	cJSON *o;

	memcpy(z, text, n);
	z[n] = 0;
	o = strlen(z) == n ? cJSON_ParseWithOpts(z, NULL, 1) : NULL;
	free(z);
	cJSON_Delete(o);
	return o != NULL;
}

static char fuzz_dir[128];

static int fuzz_rm(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(p);
}

static void fuzz_scratch_remove(void)
{
	nftw(fuzz_dir, fuzz_rm, 8, FTW_DEPTH | FTW_PHYS);
}

/* Remove the directories of harness processes that are gone: a crash or a timeout ends
 * a harness without its atexit. */
static void fuzz_scratch_sweep(const char *base)
{
	DIR *d = opendir(base);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		long pid;
		char path[512];

		if (sscanf(e->d_name, "zinf-fuzz-%ld-", &pid) != 1 || pid <= 0 ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", base, e->d_name);
		nftw(path, fuzz_rm, 8, FTW_DEPTH | FTW_PHYS);
	}
	if (d)
		closedir(d);
}

/* Make the directory (once); its path is fuzz_dir. Aborts when none can be made. */
static void fuzz_scratch(void)
{
	struct stat st;
	const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";

	fuzz_scratch_sweep(base);
	snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/zinf-fuzz-%ld-XXXXXX", base, (long)getpid());
	if (!mkdtemp(fuzz_dir))
		abort();
	atexit(fuzz_scratch_remove);
}

#endif /* ZINF_TESTS_FUZZ_UTIL_H */

/*
 * For the fuzz harnesses: a scratch directory of the process's own (in /dev/shm, else
 * /tmp: the inputs are files the readers open), removed with its files at exit.
 */
#ifndef ZINF_TESTS_FUZZ_SCRATCH_H
#define ZINF_TESTS_FUZZ_SCRATCH_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

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

/* Make the directory (once); its path is fuzz_dir. Aborts when none can be made. */
static void fuzz_scratch(void)
{
	struct stat st;

	snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/zinf-fuzz-XXXXXX",
		 stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp");
	if (!mkdtemp(fuzz_dir))
		abort();
	atexit(fuzz_scratch_remove);
}

#endif /* ZINF_TESTS_FUZZ_SCRATCH_H */

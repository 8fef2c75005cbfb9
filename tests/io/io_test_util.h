/*
 * Helpers shared by the I/O tests: scratch directories under /var/tmp (a real disk,
 * for O_DIRECT) or /dev/shm (tmpfs), random data, and the list of backends.
 */
#ifndef ZINF_TESTS_IO_TEST_UTIL_H
#define ZINF_TESTS_IO_TEST_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_internal.h"
#include "test.h"
#include "zinf/io.h"
#include "zinf/log.h"

static const enum zinf_io_engine t_engines[] = {ZINF_IO_ENGINE_IO_URING, ZINF_IO_ENGINE_LIBAIO,
						ZINF_IO_ENGINE_PSYNC};
static const char *const t_engine_names[] = {"io_uring", "libaio", "psync"};
#define T_N_ENGINES 3

static inline int t_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static inline void t_rmrf(char *path)
{
	if (path)
		nftw(path, t_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(path);
}

/* Scratch directories are also removed at exit, so a failed check leaves none. */
static char t_scratch[8][256];

static inline void t_scratch_cleanup(void)
{
	for (int i = 0; i < 8; i++) {
		if (t_scratch[i][0])
			nftw(t_scratch[i], t_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	}
}

/* The size of data file name (data.0, ...) in dir's run directory. */
static inline uint64_t t_run_file_bytes(const char *dir, const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s/%s", dir, "zinf-run", name);
	T_CHECK(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
	return (uint64_t)st.st_size;
}

/* Make a fresh directory under base; the caller removes it with t_rmrf. */
static inline char *t_mkdtemp(const char *base)
{
	char *p = NULL;

	if (asprintf(&p, "%s/zinf-test-XXXXXX", base) < 0)
		return NULL;
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	for (int i = 0; i < 8; i++) {
		if (!t_scratch[i][0]) {
			if (i == 0)
				atexit(t_scratch_cleanup);
			snprintf(t_scratch[i], sizeof(t_scratch[i]), "%s", p);
			break;
		}
	}
	return p;
}

/* Aligned buffer of len bytes filled from seed (xorshift). */
static inline void *t_buf(uint64_t len, uint64_t seed)
{
	uint64_t *b = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

	T_CHECK(b != NULL, "out of memory for %llu bytes", (unsigned long long)len);
	for (uint64_t i = 0; i < (len + 4095) / 4096 * 512; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = x;
	}
	return b;
}

/* Open file descriptors of this process (to catch fd leaks). */
static inline int t_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	T_CHECK(d != NULL, "cannot list /proc/self/fd");
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Create a handle or skip the test when the engine is refused (seccomp, old kernel). */
static inline int t_create(struct zinf_io_opts *o, struct zinf_io **io, int engine_idx)
{
	char err[512];
	int rc;

	o->engine = t_engines[engine_idx];
	rc = zinf_io_create(o, io, err, sizeof(err));
	if (rc && engine_idx < 2 && strstr(err, "io engine")) {
		fprintf(stderr, "note: %s unavailable here: %s\n", t_engine_names[engine_idx], err);
		return 77;
	}
	T_CHECK(rc == 0, "create with %s: %s", t_engine_names[engine_idx], err);
	return 0;
}

/* A handle on a new scratch directory (*dir) with the checksum given, 16 MiB files and
 * block_size-byte pieces; NULL (and *dir NULL) when the engine is unavailable here. */
static inline struct zinf_io *t_create_in_dir(int engine_idx, uint64_t block_size,
					      enum zinf_io_checksum checksum, char **dir)
{
	struct zinf_io_opts o;
	struct zinf_io *io = NULL;

	*dir = t_mkdtemp("/var/tmp");
	T_CHECK(*dir, "cannot make a scratch directory under /var/tmp");
	zinf_io_opts_init(&o);
	o.nvme_paths[0] = *dir;
	o.n_paths = 1;
	o.block_size = block_size;
	o.file_size = 16 << 20;
	o.checksum = checksum;
	if (t_create(&o, &io, engine_idx) == 77) {
		t_rmrf(*dir);
		*dir = NULL;
		return NULL;
	}
	return io;
}

/* The same with CRC32C on. */
static inline struct zinf_io *t_create_crc(int engine_idx, uint64_t block_size, char **dir)
{
	return t_create_in_dir(engine_idx, block_size, ZINF_IO_CHECKSUM_CRC32C, dir);
}

#endif /* ZINF_TESTS_IO_TEST_UTIL_H */

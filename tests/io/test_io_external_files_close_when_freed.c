/*
 * An external file (zinf_io_extent_open_file) is closed when its extent is freed and its
 * slot in the handle's file table serves the next: 2000 open, write, read back and free
 * cycles leave no file descriptor open, on every backend; a table filled with external
 * files refuses the next with -EMFILE and leaks no descriptor, and frees make room again,
 * for an external file or a data file of the handle's own.
 * A NULL id is -EINVAL, for an allocated extent too.
 */
#include <fcntl.h>
#include <sys/resource.h>

#include "io_test_util.h"
#include "zinf/error.h"

static void cycle(int engine, const char *dir)
{
	struct zinf_io_opts o;
	struct zinf_io *io;
	char path[300], other[300];
	uint32_t ext, *many;
	int fds, opened = 0, rc = 0;
	void *src = t_buf(8192, 5), *dst = t_buf(8192, 6);

	zinf_io_opts_init(&o);
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	o.file_size = 1 << 20;
	if (t_create(&o, &io, engine) == 77)
		return;
	snprintf(path, sizeof(path), "%s/external.bin", dir);
	snprintf(other, sizeof(other), "%s/other.bin", dir);
	fds = t_count_fds();
	/* two files in turn, each read before it is written: a slot still reaching the
	 * previous file (a stale registered descriptor) reads the other's bytes */
	for (int i = 0; i < 2000; i++) {
		const char *p = i % 2 ? other : path;

		T_CHECK(zinf_io_extent_open_file(io, p, 8192, true, &ext) == 0, "%s: open %d: %s",
			t_engine_names[engine], i, zinf_io_last_error(io));
		if (i >= 2) {
			T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext, 0, dst, 8192));
			T_CHECK(((unsigned char *)dst)[0] == (unsigned char)(i - 2) &&
					((unsigned char *)dst)[1] == (unsigned char)(i % 2),
				"%s: cycle %d read another file's bytes", t_engine_names[engine],
				i);
		}
		((unsigned char *)src)[0] = (unsigned char)i;
		((unsigned char *)src)[1] = (unsigned char)(i % 2);
		T_CHECK_RC(zinf_io_rw(io, ZINF_IO_WRITE, ext, 0, src, 8192));
		T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext, 0, dst, 8192));
		T_CHECK(memcmp(src, dst, 8192) == 0, "%s: cycle %d read back differs",
			t_engine_names[engine], i);
		T_CHECK_RC(zinf_io_extent_free(io, ext));
		T_CHECK(t_count_fds() == fds, "%s: cycle %d left %d descriptors open",
			t_engine_names[engine], i, t_count_fds() - fds);
	}
	T_CHECK(zinf_io_extent_open_file(io, path, 8192, true, NULL) == -EINVAL &&
			zinf_io_extent_alloc(io, 4096, NULL) == -EINVAL,
		"a NULL id accepted");
	T_CHECK(t_count_fds() == fds, "a refused open left a descriptor");
	/* fill the table: the one past it is refused, and leaves nothing open */
	many = calloc(4096, sizeof(*many));
	T_CHECK(many, "out of memory");
	while (opened < 4096 &&
	       (rc = zinf_io_extent_open_file(io, path, 8192, false, &many[opened])) == 0)
		opened++;
	T_CHECK(rc == -EMFILE && opened > 100 &&
			strstr(zinf_io_last_error(io), "too many files open in one handle") &&
			!strchr(zinf_io_last_error(io), '\n'),
		"%s: %d files opened, then %d (%s)", t_engine_names[engine], opened, rc,
		zinf_io_last_error(io));
	T_CHECK(t_count_fds() == fds + opened, "%s: %d open for %d files", t_engine_names[engine],
		t_count_fds() - fds, opened);
	T_CHECK_RC(zinf_io_extent_free(io, many[0]));
	T_CHECK(zinf_io_extent_open_file(io, path, 8192, false, &many[0]) == 0,
		"%s: no room after a free: %s", t_engine_names[engine], zinf_io_last_error(io));
	for (int i = 0; i < opened; i++)
		T_CHECK_RC(zinf_io_extent_free(io, many[i]));
	T_CHECK(t_count_fds() == fds, "%s: %d descriptors left after freeing every file",
		t_engine_names[engine], t_count_fds() - fds);
	/* the table was full: a data file of the handle's own takes a freed place */
	T_CHECK(zinf_io_extent_alloc(io, 8192, &ext) == 0, "%s: no data file after the frees: %s",
		t_engine_names[engine], zinf_io_last_error(io));
	T_CHECK_RC(zinf_io_rw(io, ZINF_IO_WRITE, ext, 0, src, 8192));
	T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext, 0, dst, 8192));
	T_CHECK(memcmp(src, dst, 8192) == 0, "%s: the data file read back differs",
		t_engine_names[engine]);
	T_CHECK_RC(zinf_io_extent_free(io, ext));
	free(many);
	zinf_io_destroy(io);
	unlink(path);
	unlink(other);
	free(src);
	free(dst);
}

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp");
	struct rlimit nofile;

	/* room for the handle's table of 1024 files beside this process's own, so that the
	 * table, not the process's limit, is what fills */
	T_CHECK(getrlimit(RLIMIT_NOFILE, &nofile) == 0, "getrlimit");
	if (nofile.rlim_cur < 2048 && nofile.rlim_max >= 2048) {
		nofile.rlim_cur = 2048;
		T_CHECK(setrlimit(RLIMIT_NOFILE, &nofile) == 0, "setrlimit");
	}
	if (nofile.rlim_cur < 2048)
		T_SKIP("a file limit of %llu, below 2048", (unsigned long long)nofile.rlim_cur);

	T_CHECK(dir, "cannot make a scratch directory in /var/tmp");
	for (int e = 0; e < T_N_ENGINES; e++)
		cycle(e, dir);
	T_CHECK(rmdir(dir) == 0, "scratch directory not empty after destroy");
	free(dir);
	return 0;
}

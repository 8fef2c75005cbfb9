/*
 * Where a whole file_size does not fit the file system (fallocate fails with ENOSPC:
 * forced with the fault hook, as a small tmpfs would), a data file is preallocated to
 * what fits, down to the extent alone, and the extent then round-trips its data; so
 * many small extents on a small file system share few files (not one file each, which
 * would run out at 1024 files). Where it fits, the file is a whole file_size as before.
 */
#include "io_test_util.h"

#define LEN (192 * 1024)

int main(void)
{
	char *d = t_mkdtemp("/var/tmp");
	struct zinf_io_opts o;
	struct zinf_io *io;
	uint32_t a, b;
	void *src = t_buf(LEN, 7), *dst = t_buf(LEN, 8);

	T_CHECK(d, "scratch directory");
	zinf_log_set_level(ZINF_LOG_ERROR);
	zinf_io_opts_init(&o);
	o.block_size = 64 * 1024;
	o.file_size = 4 << 20;
	o.nvme_paths[0] = d;
	o.n_paths = 1;
	o.engine = ZINF_IO_ENGINE_PSYNC;
	T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	zinf_io_fault_set(IO_FAULT_NOSPACE, 1000, ENOSPC, LEN, 0); /* LEN bytes free */
	T_CHECK(zinf_io_extent_alloc(io, LEN, &a) == 0, "extent on a small file system: %s",
		zinf_io_last_error(io));
	zinf_io_fault_clear();
	T_CHECK(t_run_file_bytes(d, "data.0") == LEN, "data.0 is %llu bytes, want the extent's %d",
		(unsigned long long)t_run_file_bytes(d, "data.0"), LEN);
	T_CHECK_RC(zinf_io_rw(io, ZINF_IO_WRITE, a, 0, src, LEN));
	T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, a, 0, dst, LEN));
	T_CHECK(memcmp(src, dst, LEN) == 0, "the extent did not round-trip");
	/* room again: the next file is a whole file_size */
	T_CHECK_RC(zinf_io_extent_alloc(io, LEN, &b));
	T_CHECK(t_run_file_bytes(d, "data.1") == o.file_size, "data.1 is %llu bytes, want %llu",
		(unsigned long long)t_run_file_bytes(d, "data.1"), (unsigned long long)o.file_size);
	/* 1 MiB free at a time: 1100 extents of 4 KiB fill files of 1 MiB, 256 each */
	zinf_io_fault_set(IO_FAULT_NOSPACE, 1000000, ENOSPC, 1 << 20, 0);
	for (int i = 0; i < 1100; i++)
		T_CHECK(zinf_io_extent_alloc(io, 4096, &b) == 0, "small extent %d: %s", i,
			zinf_io_last_error(io));
	zinf_io_fault_clear();
	T_CHECK(io->n_files <= 2 + 1100 / 256 + 1, "%u data files for 1100 small extents",
		io->n_files);
	zinf_io_destroy(io);
	free(src);
	free(dst);
	t_rmrf(d);
	return T_EXIT_PASS;
}

/*
 * Where no new file of an extent's size fits the file system but the free tail of the
 * last data file and the free space together do, the last file grows by what its tail
 * lacks (the fault hook pretends 192 KiB free): files made under space pressure leave no
 * stranded tails, so a run the space check passed also lays out. The grown extent
 * round-trips its data, the live-extent bytes are counted in the stats, and freeing the
 * extents gives them back.
 */
#include "io_test_util.h"

#define UNIT (64 * 1024)

int main(void)
{
	char *d = t_mkdtemp("/var/tmp");
	struct zinf_io_opts o;
	struct zinf_io_stats st;
	struct zinf_io *io;
	uint32_t a, b;
	void *src = t_buf(4 * UNIT, 7), *dst = t_buf(4 * UNIT, 8);

	T_CHECK(d, "scratch directory");
	zinf_log_set_level(ZINF_LOG_ERROR);
	zinf_io_opts_init(&o);
	o.block_size = UNIT;
	o.file_size = 4 << 20;
	o.nvme_paths[0] = d;
	o.n_paths = 1;
	o.engine = ZINF_IO_ENGINE_PSYNC;
	T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	/* 192 KiB free: data.0 is halved from 4 MiB down to 128 KiB and holds one unit */
	zinf_io_fault_set(IO_FAULT_NOSPACE, 1000, ENOSPC, 3 * UNIT, 0);
	T_CHECK(zinf_io_extent_alloc(io, UNIT, &a) == 0, "first extent: %s",
		zinf_io_last_error(io));
	T_CHECK(t_run_file_bytes(d, "data.0") == 2 * UNIT, "data.0 is %llu bytes, want %d",
		(unsigned long long)t_run_file_bytes(d, "data.0"), 2 * UNIT);
	/* 256 KiB: no new file of that size fits, the tail (64 KiB) + 192 KiB does */
	T_CHECK(zinf_io_extent_alloc(io, 4 * UNIT, &b) == 0, "extent over the tail: %s",
		zinf_io_last_error(io));
	zinf_io_fault_clear();
	T_CHECK(io->n_files == 1, "%u data files, want data.0 grown", io->n_files);
	T_CHECK(t_run_file_bytes(d, "data.0") == 5 * UNIT, "data.0 is %llu bytes, want %d",
		(unsigned long long)t_run_file_bytes(d, "data.0"), 5 * UNIT);
	T_CHECK(zinf_io_extent_footprint(io, UNIT) == UNIT &&
			zinf_io_extent_footprint(io, 4 * UNIT - 100) == 4 * UNIT,
		"footprints of 64 KiB and 256 KiB - 100");
	zinf_io_get_stats(io, &st);
	T_CHECK(st.space_bytes == 5 * UNIT, "live extents hold %llu bytes, want %d",
		(unsigned long long)st.space_bytes, 5 * UNIT);
	T_CHECK_RC(zinf_io_rw(io, ZINF_IO_WRITE, b, 0, src, 4 * UNIT));
	T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, b, 0, dst, 4 * UNIT));
	T_CHECK(memcmp(src, dst, 4 * UNIT) == 0, "the grown extent did not round-trip");
	T_CHECK_RC(zinf_io_extent_free(io, a));
	T_CHECK_RC(zinf_io_extent_free(io, b));
	zinf_io_get_stats(io, &st);
	T_CHECK(st.space_bytes == 0, "after free, %llu bytes held",
		(unsigned long long)st.space_bytes);
	/* the space is reused: a 320 KiB extent fits the grown file with no I/O to the fs */
	T_CHECK_RC(zinf_io_extent_alloc(io, 5 * UNIT, &a));
	T_CHECK(io->n_files == 1, "%u data files after reuse", io->n_files);
	zinf_io_destroy(io);
	free(src);
	free(dst);
	t_rmrf(d);
	return T_EXIT_PASS;
}

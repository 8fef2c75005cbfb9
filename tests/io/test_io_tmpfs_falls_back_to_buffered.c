/*
 * A filesystem that refuses O_DIRECT (tmpfs on older kernels; forced here with the
 * fault hook since newer tmpfs accepts it) falls back to buffered I/O with exactly one
 * warning, zinf_io_direct() says so (what zinf bench io reports), and then round-trips
 * data from unaligned buffers and lengths.
 */
#include "io_test_util.h"

static int warnings;

static void count_warn(enum zinf_log_level level, const char *msg, void *user)
{
	if (level == ZINF_LOG_WARN && strstr(msg, "O_DIRECT"))
		warnings++;
}

int main(void)
{
	char *shm = t_mkdtemp("/dev/shm");
	struct zinf_io_opts o;
	struct zinf_io *io;
	uint32_t ext, ext2;
	char *src, *dst;

	T_CHECK(shm, "scratch directory in /dev/shm");
	zinf_log_set_callback(count_warn, NULL);
	for (int e = 0; e < T_N_ENGINES; e++) {
		zinf_io_opts_init(&o);
		o.block_size = 64 * 1024;
		o.file_size = 1 << 20;
		o.nvme_paths[0] = shm;
		o.n_paths = 1;
		warnings = 0;
		zinf_io_fault_set(IO_FAULT_NO_DIRECT, 100, 0, 0, 0);
		if (t_create(&o, &io, e) == 77)
			continue;
		/* two extents in two files: still one warning */
		T_CHECK_RC(zinf_io_extent_alloc(io, 700 * 1024, &ext));
		T_CHECK_RC(zinf_io_extent_alloc(io, 700 * 1024, &ext2));
		zinf_io_fault_clear();
		T_CHECK(warnings == 1, "%s: %d O_DIRECT warnings, expected 1", t_engine_names[e],
			warnings);
		T_CHECK(!zinf_io_direct(io), "%s: O_DIRECT said on, the files being buffered",
			t_engine_names[e]);
		src = (char *)t_buf(300001 + 8, 5) + 3; /* unaligned address and length */
		dst = (char *)t_buf(300001 + 8, 6) + 5;
		T_CHECK_RC(zinf_io_rw(io, ZINF_IO_WRITE, ext, 1000, src, 300001));
		T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext, 1000, dst, 300001));
		T_CHECK(memcmp(src, dst, 300001) == 0, "%s: buffered round trip differs",
			t_engine_names[e]);
		free(src - 3);
		free(dst - 5);
		zinf_io_destroy(io);
	}
	zinf_log_set_callback(NULL, NULL);
	T_CHECK(rmdir(shm) == 0, "run directory left in %s", shm);
	free(shm);
	return 0;
}

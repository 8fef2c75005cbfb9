/*
 * Random data written and read back is identical on every backend and layout: one path
 * with O_DIRECT, striped over two paths, and with CRC32C checksums; with requests larger
 * than block_size x queue_depth, several requests at once and several lanes.
 */
#include "io_test_util.h"

#define BS (64 * 1024)
#define QD 4
#define BIG (3 * 1024 * 1024 + 8192) /* > BS * QD, not a multiple of the stripe unit */
#define N_SMALL 6

static void roundtrip(int engine, int layout, const char *d0, const char *d1)
{
	struct zinf_io_opts o;
	struct zinf_io *io;
	struct zinf_io_req reqs[N_SMALL + 1], *rp[N_SMALL + 1], *done[N_SMALL + 1];
	uint32_t ext[N_SMALL + 1];
	void *src[N_SMALL + 1], *dst[N_SMALL + 1];
	struct zinf_io_stats st;
	int got = 0;

	zinf_io_opts_init(&o);
	o.block_size = BS;
	o.queue_depth = QD;
	o.intra_op_parallelism = layout == 1 ? 2 : 1;
	o.file_size = 4 << 20;
	o.nvme_paths[0] = d0;
	o.n_paths = 1;
	if (layout == 1) {
		o.nvme_paths[1] = d1;
		o.n_paths = 2;
	}
	if (layout == 2)
		o.checksum = ZINF_IO_CHECKSUM_CRC32C;
	if (t_create(&o, &io, engine) == 77)
		return;
	T_CHECK_STR(zinf_io_engine_name(io), t_engine_names[engine]);

	for (int i = 0; i <= N_SMALL; i++) {
		uint64_t len = i == N_SMALL ? BIG : (uint64_t)(i + 1) * 4096 * 5;

		T_CHECK_RC(zinf_io_extent_alloc(io, len, &ext[i]));
		src[i] = t_buf(len, 100 * engine + 10 * layout + i);
		dst[i] = t_buf(len, 7777);
		reqs[i] = (struct zinf_io_req){
			.op = ZINF_IO_WRITE, .extent = ext[i], .len = len, .buf = src[i]};
		rp[i] = &reqs[i];
	}
	/* all writes at once, completions by wait */
	T_CHECK_RC(zinf_io_submit(io, rp, N_SMALL + 1));
	while (got < N_SMALL + 1) {
		int n = zinf_io_wait(io, done, 1, N_SMALL + 1, 20000);

		T_CHECK(n > 0, "wait returned %d after %d of %d writes", n, got, N_SMALL + 1);
		for (int k = 0; k < n; k++)
			T_CHECK(done[k]->status == 0, "%s layout %d: write failed: %s",
				t_engine_names[engine], layout, done[k]->error);
		got += n;
	}
	/* reads: the big one in two halves at an aligned split, the rest whole */
	for (int i = 0; i <= N_SMALL; i++) {
		uint64_t len = reqs[i].len;

		if (i == N_SMALL) {
			uint64_t half = (len / 2) & ~4095ull;

			T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext[i], 0, dst[i], half));
			T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext[i], half, (char *)dst[i] + half,
					      len - half));
			T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext[i], 0, dst[i], len));
		} else {
			T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext[i], 0, dst[i], len));
		}
		T_CHECK(memcmp(src[i], dst[i], len) == 0,
			"%s layout %d: extent %u (%llu bytes) read back differs",
			t_engine_names[engine], layout, ext[i], (unsigned long long)len);
	}
	zinf_io_get_stats(io, &st);
	T_CHECK(st.errors == 0, "%llu errors", (unsigned long long)st.errors);
	T_CHECK(st.write_reqs == N_SMALL + 1, "write_reqs %llu", (unsigned long long)st.write_reqs);
	if (layout == 1) {
		T_CHECK(st.path[0].write_bytes > BIG / 3 && st.path[1].write_bytes > BIG / 3,
			"striping: path bytes %llu and %llu",
			(unsigned long long)st.path[0].write_bytes,
			(unsigned long long)st.path[1].write_bytes);
	}
	T_CHECK(st.busy_ns > 0, "busy time not counted");
	for (int i = 0; i <= N_SMALL; i++) {
		T_CHECK_RC(zinf_io_extent_free(io, ext[i]));
		free(src[i]);
		free(dst[i]);
	}
	zinf_io_destroy(io);
}

int main(void)
{
	char *d0 = t_mkdtemp("/var/tmp"), *d1 = t_mkdtemp("/var/tmp");

	T_CHECK(d0 && d1, "cannot make scratch directories in /var/tmp");
	int fds = t_count_fds();

	for (int e = 0; e < T_N_ENGINES; e++) {
		for (int layout = 0; layout < 3; layout++)
			roundtrip(e, layout, d0, d1);
	}
	T_CHECK(t_count_fds() == fds, "file descriptors leaked: %d before, %d after", fds,
		t_count_fds());
	/* the run directories are gone after a clean destroy */
	T_CHECK(rmdir(d0) == 0 && rmdir(d1) == 0, "scratch dirs not empty after destroy");
	free(d0);
	free(d1);
	return 0;
}

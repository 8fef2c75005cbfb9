/*
 * Four lanes taking pieces of one request queue while the submitter keeps it full: 3000
 * requests of one to three 4 KiB pieces (queue depth 2 a lane, so lanes go back to the
 * queue all the time and look at it before sleeping) all complete, and every extent
 * reads back what was written, on every backend. (Under ThreadSanitizer, in CI, it
 * exercises the queue's sharing among the lanes too.)
 */
#include "io_test_util.h"

#define N_REQS 3000
#define WINDOW 24 /* requests in flight at once */
#define PIECE 4096

static void hammer(int engine, const char *dir)
{
	struct zinf_io_opts o;
	struct zinf_io *io;
	struct zinf_io_req *reqs = calloc(N_REQS, sizeof(*reqs)), *done[WINDOW];
	uint32_t ext[WINDOW];
	char *src, *back;
	int next = 0, finished = 0, free_slots[WINDOW], n_free = WINDOW, last[WINDOW];

	zinf_io_opts_init(&o);
	o.block_size = PIECE;
	o.queue_depth = 2;
	o.intra_op_parallelism = 4;
	o.file_size = 4 << 20;
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	T_CHECK(reqs, "out of memory");
	if (t_create(&o, &io, engine) == 77) {
		free(reqs);
		return;
	}
	/* WINDOW extents ("slots") of 3 pieces; each request writes 1 to 3 pieces to a slot
	 * no request in flight writes, the slot freed when it completes */
	src = t_buf((uint64_t)N_REQS * 3 * PIECE, 17 + (uint64_t)engine);
	for (int s = 0; s < WINDOW; s++) {
		T_CHECK_RC(zinf_io_extent_alloc(io, 3 * PIECE, &ext[s]));
		free_slots[s] = s;
		last[s] = -1;
	}
	while (finished < N_REQS) {
		struct zinf_io_req *batch[WINDOW];
		int nb = 0, n;

		while (n_free > 0 && next < N_REQS) {
			struct zinf_io_req *r = &reqs[next];
			int slot = free_slots[--n_free];

			*r = (struct zinf_io_req){.op = ZINF_IO_WRITE,
						  .extent = ext[slot],
						  .len = (uint64_t)(next % 3 + 1) * PIECE,
						  .buf = src + (uint64_t)next * 3 * PIECE,
						  .user = (void *)(intptr_t)slot};
			last[slot] = next;
			batch[nb++] = r;
			next++;
		}
		if (nb)
			T_CHECK_RC(zinf_io_submit(io, batch, (uint32_t)nb));
		n = zinf_io_wait(io, done, 1, WINDOW, 20000);
		T_CHECK(n > 0, "%s: wait returned %d with %d of %d done", t_engine_names[engine], n,
			finished, N_REQS);
		for (int k = 0; k < n; k++) {
			T_CHECK(done[k]->status == 0, "%s: request %d failed: %s",
				t_engine_names[engine], (int)(done[k] - reqs), done[k]->error);
			free_slots[n_free++] = (int)(intptr_t)done[k]->user;
		}
		finished += n;
	}
	/* each slot holds its last request's pieces */
	back = t_buf(3 * PIECE, 1);
	for (int s = 0; s < WINDOW; s++) {
		uint64_t len = (uint64_t)(last[s] % 3 + 1) * PIECE;

		T_CHECK(last[s] >= 0, "slot %d never written", s);
		T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext[s], 0, back, len));
		T_CHECK(memcmp(back, src + (uint64_t)last[s] * 3 * PIECE, len) == 0,
			"%s: slot %d does not hold request %d's data", t_engine_names[engine], s,
			last[s]);
	}
	free(back);
	free(src);
	free(reqs);
	zinf_io_destroy(io);
}

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp");

	T_CHECK(dir, "cannot make a scratch directory in /var/tmp");
	for (int e = 0; e < T_N_ENGINES; e++)
		hammer(e, dir);
	T_CHECK(rmdir(dir) == 0, "scratch directory not empty after destroy");
	free(dir);
	return 0;
}

/*
 * Per-request callbacks run exactly once each; drain waits for all; a registered
 * (fixed) buffer round-trips on every backend; single_submit and overlap_events=false
 * give the same data; registration refuses a second region.
 */
#include "io_test_util.h"
#include "zinf/error.h"

#define N_REQ 16
#define LEN (256 * 1024)

static int calls[N_REQ];

static void on_done(struct zinf_io_req *req)
{
	__atomic_add_fetch(&calls[(int)(intptr_t)req->user], 1, __ATOMIC_RELAXED);
}

static void run(int engine, int variant, const char *dir)
{
	struct zinf_io_opts o;
	struct zinf_io *io;
	struct zinf_io_req reqs[N_REQ], *rp[N_REQ];
	uint32_t ext;
	char *pool = t_buf(2 * N_REQ * LEN, 9), *ref = t_buf(2 * N_REQ * LEN, 9);

	zinf_io_opts_init(&o);
	o.block_size = 64 * 1024;
	o.queue_depth = 8;
	o.file_size = 16 << 20;
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	o.single_submit = variant == 1;
	o.overlap_events = variant != 2;
	if (t_create(&o, &io, engine) == 77)
		goto out_free;
	T_CHECK_RC(zinf_io_register_buffer(io, pool, 2 * N_REQ * LEN));
	T_CHECK(zinf_io_register_buffer(io, pool, LEN) == ZINF_ESTATE, "second region accepted");
	T_CHECK_RC(zinf_io_extent_alloc(io, N_REQ * LEN, &ext));
	memset(calls, 0, sizeof(calls));
	for (int i = 0; i < N_REQ; i++) {
		reqs[i] = (struct zinf_io_req){.op = ZINF_IO_WRITE,
					       .extent = ext,
					       .offset = (uint64_t)i * LEN,
					       .len = LEN,
					       .buf = pool + (uint64_t)i * LEN,
					       .done = on_done,
					       .user = (void *)(intptr_t)i};
		rp[i] = &reqs[i];
	}
	T_CHECK_RC(zinf_io_submit(io, rp, N_REQ));
	T_CHECK_RC(zinf_io_drain(io));
	for (int i = 0; i < N_REQ; i++) {
		T_CHECK(calls[i] == 1, "request %d: %d callbacks", i, calls[i]);
		T_CHECK(reqs[i].status == 0, "write %d: %s", i, reqs[i].error);
		/* read back into the second half of the registered pool */
		reqs[i].op = ZINF_IO_READ;
		reqs[i].buf = pool + (uint64_t)(N_REQ + i) * LEN;
		memset(reqs[i].buf, 0, LEN);
	}
	T_CHECK_RC(zinf_io_submit(io, rp, N_REQ));
	T_CHECK_RC(zinf_io_drain(io));
	for (int i = 0; i < N_REQ; i++)
		T_CHECK(calls[i] == 2 && reqs[i].status == 0, "read %d: %d calls, %s", i, calls[i],
			reqs[i].error);
	T_CHECK(memcmp(pool + (uint64_t)N_REQ * LEN, ref, (uint64_t)N_REQ * LEN) == 0,
		"%s variant %d: fixed-buffer round trip differs", t_engine_names[engine], variant);
	T_CHECK_RC(zinf_io_unregister_buffer(io));
	{
		struct zinf_io_req *none[1];

		T_CHECK(zinf_io_poll(io, none, 1) == 0, "callback requests also queued for poll");
		T_CHECK(zinf_io_wait(io, none, 1, 1, 10) == -ETIMEDOUT &&
				strstr(zinf_io_last_error(io), "no request completed within 10 ms"),
			"wait without work: %s", zinf_io_last_error(io));
	}
	zinf_io_destroy(io);
out_free:
	free(pool);
	free(ref);
}

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp");

	T_CHECK(dir, "scratch directory");
	for (int e = 0; e < T_N_ENGINES; e++)
		for (int v = 0; v < 3; v++)
			run(e, v, dir);
	t_rmrf(dir);
	return 0;
}

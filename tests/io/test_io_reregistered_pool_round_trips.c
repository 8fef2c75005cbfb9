/*
 * A pinned pool registered, used, unregistered and replaced by a new pool (mapped again,
 * usually at the same address with the same size) many times on ONE handle round-trips
 * its data every time, with and without CRC32C, on every backend and two lanes. The
 * caller waits for its requests the way the NVMe optimizer does: a completion callback
 * signals it, and it unregisters as soon as it is told; the callback may still be
 * running then (here it sleeps after signalling, which made the race deterministic).
 * Before the fix the unregister was refused while the last request's completion was
 * still being accounted, the caller freed the pool anyway, the next register was refused
 * ("already registered") and the old range stayed registered: io_uring then wrote the
 * new pool's pieces from the old pool's pinned pages (CRC32C mismatch or stale data).
 * Also: register and unregister from a completion callback are refused with one line.
 */
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

#include "io_test_util.h"
#include "zinf/error.h"

#define LEN (1024 * 1024) /* one extent; the pool holds a source and a destination */
#define CYCLES 24

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int linger_us; /* the callback's work after it signalled */
	struct zinf_io *io;
	int cb_register_rc, cb_unregister_rc;
	char cb_error[512];
};

static void on_done(struct zinf_io_req *req)
{
	struct waiter *w = req->user;

	pthread_mutex_lock(&w->lock);
	w->done = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (w->linger_us)
		usleep((useconds_t)w->linger_us);
}

/* Submit one request with on_done and wait until the callback has signalled. */
static int rw_signalled(struct zinf_io *io, struct waiter *w, enum zinf_io_op op, uint32_t ext,
			void *buf)
{
	struct zinf_io_req req = {
		.op = op, .extent = ext, .len = LEN, .buf = buf, .done = on_done, .user = w};
	struct zinf_io_req *r = &req;
	int rc;

	w->done = false;
	rc = zinf_io_submit(io, &r, 1);
	if (rc)
		return rc;
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	return req.status;
}

static void fill(uint64_t *p, uint64_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;

	for (uint64_t i = 0; i < len / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = x;
	}
}

static void cycles(int engine, bool crc, int linger_us, const char *dir)
{
	struct zinf_io_opts o;
	struct zinf_io *io;
	struct waiter w = {.linger_us = linger_us};
	uint64_t *ref = malloc(LEN);
	uint32_t ext;
	int same_addr = 0;
	void *prev = NULL;

	T_CHECK(ref, "out of memory");
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	zinf_io_opts_init(&o);
	o.block_size = 128 * 1024;
	o.queue_depth = 4;
	o.intra_op_parallelism = 2;
	o.file_size = 4 << 20;
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	o.checksum = crc ? ZINF_IO_CHECKSUM_CRC32C : ZINF_IO_CHECKSUM_NONE;
	if (t_create(&o, &io, engine) == 77)
		goto out_free;
	T_CHECK_RC(zinf_io_extent_alloc(io, LEN, &ext));
	for (int c = 0; c < CYCLES; c++) {
		/* mostly the same size (so usually the same address), sometimes not */
		uint64_t size = 2 * LEN + (c % 6 == 5 ? 64 * 1024 : 0);
		char *pool = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				  -1, 0);
		int reg_rc, unreg_rc, rc;

		T_CHECK(pool != MAP_FAILED, "mmap of %llu bytes", (unsigned long long)size);
		same_addr += pool == prev;
		prev = pool;
		reg_rc = zinf_io_register_buffer(io, pool, size);
		fill((uint64_t *)pool, LEN, (uint64_t)c + 1);
		memcpy(ref, pool, LEN);
		memset(pool + LEN, 0, LEN);
		rc = rw_signalled(io, &w, ZINF_IO_WRITE, ext, pool);
		T_CHECK(rc == 0, "%s crc %d linger %d cycle %d: write: %s", t_engine_names[engine],
			crc, linger_us, c, zinf_io_last_error(io));
		rc = rw_signalled(io, &w, ZINF_IO_READ, ext, pool + LEN);
		/* the data first: what a stale registration does to it is the symptom */
		T_CHECK(rc == 0, "%s crc %d linger %d cycle %d: read back: %s (%d)",
			t_engine_names[engine], crc, linger_us, c, zinf_io_last_error(io), rc);
		T_CHECK(memcmp(pool + LEN, ref, LEN) == 0,
			"%s crc %d linger %d cycle %d: data read back differs from data written",
			t_engine_names[engine], crc, linger_us, c);
		T_CHECK(memcmp(pool, ref, LEN) == 0, "%s cycle %d: the source changed",
			t_engine_names[engine], c);
		/* as soon as the caller was told: the callback may still be running */
		unreg_rc = zinf_io_unregister_buffer(io);
		T_CHECK(reg_rc == 0, "%s crc %d linger %d cycle %d: register %p: %s",
			t_engine_names[engine], crc, linger_us, c, (void *)pool,
			zinf_io_last_error(io));
		T_CHECK(unreg_rc == 0, "%s crc %d linger %d cycle %d: unregister: %s",
			t_engine_names[engine], crc, linger_us, c, zinf_io_last_error(io));
		munmap(pool, size);
	}
	/* the case under test needs the new pool at the old address; mmap gives it */
	T_CHECK(same_addr >= CYCLES / 4, "only %d of %d pools mapped at the previous address",
		same_addr, CYCLES);
	zinf_io_destroy(io);
out_free:
	free(ref);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
}

static void on_done_registers(struct zinf_io_req *req)
{
	struct waiter *w = req->user;

	w->cb_register_rc = zinf_io_register_buffer(w->io, req->buf, LEN);
	snprintf(w->cb_error, sizeof(w->cb_error), "%s", zinf_io_last_error(w->io));
	w->cb_unregister_rc = zinf_io_unregister_buffer(w->io);
	on_done(req);
}

/* Registration from a completion callback would wait for itself: refused, one line. */
static void from_callback(int engine, const char *dir)
{
	struct zinf_io_opts o;
	struct zinf_io *io;
	struct waiter w = {0};
	void *buf = t_buf(LEN, 3);
	uint32_t ext;

	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	zinf_io_opts_init(&o);
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	o.file_size = 4 << 20;
	if (t_create(&o, &io, engine) == 77)
		goto out_free;
	w.io = io;
	T_CHECK_RC(zinf_io_extent_alloc(io, LEN, &ext));
	struct zinf_io_req req = {.op = ZINF_IO_WRITE,
				  .extent = ext,
				  .len = LEN,
				  .buf = buf,
				  .done = on_done_registers,
				  .user = &w};
	struct zinf_io_req *r = &req;

	T_CHECK_RC(zinf_io_submit(io, &r, 1));
	T_CHECK_RC(zinf_io_drain(io));
	T_CHECK(req.status == 0, "write: %s", req.error);
	T_CHECK(w.cb_register_rc == ZINF_ESTATE, "%s: register from a callback returned %d",
		t_engine_names[engine], w.cb_register_rc);
	T_CHECK(w.cb_unregister_rc == ZINF_ESTATE, "%s: unregister from a callback returned %d",
		t_engine_names[engine], w.cb_unregister_rc);
	T_CHECK(strstr(w.cb_error, "register buffer") && strstr(w.cb_error, "callback") &&
			!strchr(w.cb_error, '\n'),
		"%s: message: %s", t_engine_names[engine], w.cb_error);
	/* the handle still works: register now, outside the callback */
	T_CHECK_RC(zinf_io_register_buffer(io, buf, LEN));
	T_CHECK_RC(zinf_io_unregister_buffer(io));
	zinf_io_destroy(io);
out_free:
	free(buf);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
}

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp");

	T_CHECK(dir, "scratch directory");
	for (int e = 0; e < T_N_ENGINES; e++) {
		for (int crc = 0; crc < 2; crc++) {
			cycles(e, crc, 2000, dir); /* the callback lingers: deterministic */
			cycles(e, crc, 0, dir);	   /* the natural race */
		}
		from_callback(e, dir);
	}
	t_rmrf(dir);
	return 0;
}

/*
 * zinf_io_last_error is per thread. Three threads fail different calls on one handle at
 * the same time (an unknown extent freed, a read past an extent's end, a read the fault
 * hook fails on a lane) and each must read exactly its own message every round, never
 * another's or a torn mix. Then, on one thread: a request collected by zinf_io_wait or
 * zinf_io_poll hands its message to the caller; a request failing on a lane with a
 * callback changes no caller's message; a failure on another handle reads "" on this
 * one.
 */
#include <inttypes.h>
#include <pthread.h>

#include "io_test_util.h"

#define BS (64 * 1024) /* one piece per request: the fault's message is always the same */
#define ROUNDS 100000

static const char *const what[] = {"extent free", "read past the end", "injected EIO read"};

struct shared {
	struct zinf_io *io;
	uint32_t ext;
	char eio_msg[512]; /* the injected read failure's message, learned first */
	int finished;	   /* threads with fixed rounds done (atomic) */
};

struct worker {
	struct shared *sh;
	int kind; /* 0: extent free, 1: read past the end, 2: injected EIO */
	uint64_t rounds, wrong;
	char first_wrong[1200];
	pthread_t thread;
};

static void note_wrong(struct worker *w, uint64_t round, const char *want, const char *got)
{
	if (!w->wrong++)
		snprintf(w->first_wrong, sizeof(w->first_wrong),
			 "round %" PRIu64 ": want '%s', got '%s'", round, want, got);
}

static void *run(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	void *buf = t_buf(BS, 7 + w->kind);
	char want[512];
	const char *got;
	int rc;

	for (uint64_t k = 0;; k++) {
		if (w->kind == 2) {
			if (k >= ROUNDS ||
			    (__atomic_load_n(&sh->finished, __ATOMIC_ACQUIRE) == 2 && k >= 200))
				break;
			rc = zinf_io_rw(sh->io, ZINF_IO_READ, sh->ext, 0, buf, BS);
			snprintf(want, sizeof(want), "%s", sh->eio_msg);
		} else if (w->kind == 1) {
			if (k >= ROUNDS)
				break;
			uint64_t off = BS + (k % 9) * 4096;

			rc = zinf_io_rw(sh->io, ZINF_IO_READ, sh->ext, off, buf, 4096);
			snprintf(want, sizeof(want),
				 "submit: request 0 of 1: read of 4096 bytes at offset %" PRIu64
				 " of extent %u: past its end (%u bytes)",
				 off, sh->ext, BS);
		} else {
			if (k >= ROUNDS)
				break;
			uint32_t id = 900000 + (uint32_t)(k % 1000);

			rc = zinf_io_extent_free(sh->io, id);
			snprintf(want, sizeof(want), "extent free: unknown extent %u", id);
		}
		got = zinf_io_last_error(sh->io);
		if (rc == 0)
			note_wrong(w, k, want, "(the call succeeded)");
		else if (strcmp(got, want) != 0)
			note_wrong(w, k, want, got);
		w->rounds++;
	}
	if (w->kind != 2)
		__atomic_add_fetch(&sh->finished, 1, __ATOMIC_ACQ_REL);
	free(buf);
	return NULL;
}

struct cb_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void on_done(struct zinf_io_req *req)
{
	struct cb_wait *c = req->user;

	pthread_mutex_lock(&c->lock);
	c->done = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* One thread: hand-over through zinf_io_wait, callbacks, another handle. */
/* A thread that fails on a handle, then (after the main thread destroyed it and made a
 * new one, likely at the same address) reads the new handle's last error. */
struct stale {
	struct zinf_io *old, *fresh;
	pthread_barrier_t failed, remade;
	char got[512];
};

static void *fail_then_read(void *arg)
{
	struct stale *st = arg;

	T_CHECK(zinf_io_extent_free(st->old, 99) == -EINVAL, "free of unknown extent 99");
	T_CHECK_STR(zinf_io_last_error(st->old), "extent free: unknown extent 99");
	pthread_barrier_wait(&st->failed);
	pthread_barrier_wait(&st->remade);
	snprintf(st->got, sizeof(st->got), "%s", zinf_io_last_error(st->fresh));
	return NULL;
}

static void one_thread(struct shared *sh)
{
	struct cb_wait c = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
	struct zinf_io_req req, *rp = &req, *done = NULL;
	struct zinf_io_opts o;
	struct zinf_io *io2;
	void *buf = t_buf(BS, 3);
	char err[512];

	/* a failed request collected by zinf_io_wait: its message is now this thread's */
	T_CHECK(zinf_io_extent_free(sh->io, 4242) == -EINVAL, "free of unknown extent 4242");
	zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_READ);
	req = (struct zinf_io_req){.op = ZINF_IO_READ, .extent = sh->ext, .len = BS, .buf = buf};
	T_CHECK_RC(zinf_io_submit(sh->io, &rp, 1));
	T_CHECK(zinf_io_wait(sh->io, &done, 1, 1, 20000) == 1 && done == &req, "no completion");
	T_CHECK(req.status == -EIO, "injected EIO: status %d", req.status);
	T_CHECK_STR(zinf_io_last_error(sh->io), req.error);

	/* the same through zinf_io_poll */
	T_CHECK(zinf_io_extent_free(sh->io, 4244) == -EINVAL, "free of unknown extent 4244");
	zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_READ);
	req = (struct zinf_io_req){.op = ZINF_IO_READ, .extent = sh->ext, .len = BS, .buf = buf};
	T_CHECK_RC(zinf_io_submit(sh->io, &rp, 1));
	T_CHECK_RC(zinf_io_drain(sh->io));
	T_CHECK(zinf_io_poll(sh->io, &done, 1) == 1 && done == &req, "poll: no completion");
	T_CHECK(req.status == -EIO, "injected EIO (poll): status %d", req.status);
	T_CHECK_STR(zinf_io_last_error(sh->io), req.error);

	/* a request failing on a lane with a callback: the caller's message stays */
	T_CHECK(zinf_io_extent_free(sh->io, 4243) == -EINVAL, "free of unknown extent 4243");
	zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_READ);
	req = (struct zinf_io_req){.op = ZINF_IO_READ,
				   .extent = sh->ext,
				   .len = BS,
				   .buf = buf,
				   .done = on_done,
				   .user = &c};
	T_CHECK_RC(zinf_io_submit(sh->io, &rp, 1));
	pthread_mutex_lock(&c.lock);
	while (!c.done)
		pthread_cond_wait(&c.cond, &c.lock);
	pthread_mutex_unlock(&c.lock);
	T_CHECK(req.status == -EIO && strstr(req.error, "Input/output error"),
		"callback request: status %d, error '%s'", req.status, req.error);
	T_CHECK_STR(zinf_io_last_error(sh->io), "extent free: unknown extent 4243");

	/* a failure on another handle: "" on this one, the message on that one */
	zinf_io_opts_init(&o);
	o.engine = ZINF_IO_ENGINE_PSYNC;
	T_CHECK(zinf_io_create(&o, &io2, err, sizeof(err)) == 0, "second handle: %s", err);
	T_CHECK(zinf_io_extent_free(io2, 77) == -EINVAL, "free of unknown extent 77");
	T_CHECK_STR(zinf_io_last_error(io2), "extent free: unknown extent 77");
	T_CHECK_STR(zinf_io_last_error(sh->io), "");
	T_CHECK_STR(zinf_io_last_error(NULL), "");
	zinf_io_fault_clear();
	free(buf);

	/* another thread failed on io2; io2 destroyed and a new handle made (malloc tends
	 * to hand back the same address): that thread must read "" on the new one */
	{
		struct stale st = {.old = io2};
		pthread_t t;
		pthread_barrier_init(&st.failed, NULL, 2);
		pthread_barrier_init(&st.remade, NULL, 2);
		T_CHECK(pthread_create(&t, NULL, fail_then_read, &st) == 0, "pthread_create");
		pthread_barrier_wait(&st.failed);
		zinf_io_destroy(io2);
		T_CHECK(zinf_io_create(&o, &st.fresh, err, sizeof(err)) == 0, "remake: %s", err);
		if (st.fresh != st.old)
			fprintf(stderr,
				"new handle at another address: the reuse case not tested\n");
		pthread_barrier_wait(&st.remade);
		pthread_join(t, NULL);
		T_CHECK(st.got[0] == '\0', "a new handle shows an old handle's message: %s",
			st.got);
		zinf_io_destroy(st.fresh);
		pthread_barrier_destroy(&st.failed);
		pthread_barrier_destroy(&st.remade);
	}
}

int main(void)
{
	struct zinf_io_opts o;
	struct shared sh = {0};
	struct worker w[3];
	char err[512];
	char *dir = t_mkdtemp("/var/tmp");
	void *buf = t_buf(BS, 1);
	int rc;

	T_CHECK(dir != NULL, "cannot make a scratch directory under /var/tmp");
	zinf_io_opts_init(&o);
	o.block_size = BS;
	o.queue_depth = 2;
	o.file_size = 1 << 20;
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	rc = zinf_io_create(&o, &sh.io, err, sizeof(err));
	T_CHECK(rc == 0, "create: %s", err);
	T_CHECK_RC(zinf_io_extent_alloc(sh.io, BS, &sh.ext));
	T_CHECK_RC(zinf_io_rw(sh.io, ZINF_IO_WRITE, sh.ext, 0, buf, BS));

	/* every read fails on a lane from now on; learn the message once, alone */
	zinf_io_fault_set(IO_FAULT_ERRNO, 1 << 30, EIO, 0, 1u << ZINF_IO_READ);
	rc = zinf_io_rw(sh.io, ZINF_IO_READ, sh.ext, 0, buf, BS);
	T_CHECK(rc == -EIO, "injected EIO read: %d", rc);
	snprintf(sh.eio_msg, sizeof(sh.eio_msg), "%s", zinf_io_last_error(sh.io));
	T_CHECK(strstr(sh.eio_msg, "Input/output error") && strstr(sh.eio_msg, "/data.0"),
		"EIO read: message '%s' lacks the error or the file", sh.eio_msg);

	for (int i = 0; i < 3; i++) {
		w[i] = (struct worker){.sh = &sh, .kind = i};
		T_CHECK(pthread_create(&w[i].thread, NULL, run, &w[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < 3; i++)
		pthread_join(w[i].thread, NULL);
	zinf_io_fault_clear();
	for (int i = 0; i < 3; i++)
		fprintf(stderr, "%s: %" PRIu64 " rounds, %" PRIu64 " wrong messages\n", what[i],
			w[i].rounds, w[i].wrong);
	for (int i = 0; i < 3; i++)
		T_CHECK(w[i].wrong == 0,
			"%s thread read a message not its own %" PRIu64 " times of %" PRIu64
			"; first: %s",
			what[i], w[i].wrong, w[i].rounds, w[i].first_wrong);

	one_thread(&sh);
	zinf_io_destroy(sh.io);
	free(buf);
	t_rmrf(dir);
	return 0;
}

/*
 * Host device backend: CUDA's stream and event semantics on CPU threads.
 *
 * "Device memory" is one private anonymous mapping of the budget (pages become resident
 * when first touched), sub-allocated by the common heap. Each stream is a ring of ops
 * (copy, memset, event record, event wait). A pool of copy threads runs the streams: a
 * stream with work sits in a run queue, and at most one thread runs it at a time, which
 * keeps each stream in order while different streams run concurrently. One op is run per
 * turn, then the stream goes to the back of the queue, so no stream starves another.
 *
 * Events follow CUDA: a record gets the next sequence number of its event and completes
 * when the stream reaches it; waits and queries refer to the latest record at the time
 * of the call. Records of one event may complete out of order when made on different
 * streams, so each event keeps "every record <= floor is done" plus a 64-bit window of
 * later records that are done. A stream whose head op waits on an unfinished record
 * leaves the run queue until that record completes.
 *
 * One lock (per device) guards the queues and events; it is held only for bookkeeping,
 * never during a memcpy, and taken once or twice per op (ops move MiBs, not bytes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "budget.h"
#include "clip.h"
#include "device.h"
#include "host_limits.h"
#include "optim.h"
#include "pool.h"
#include "zinf/config.h"
#include "zinf/error.h"
#include "zinf/log.h"

#define EVENT_WINDOW 64

enum host_op_kind { OP_COPY, OP_MEMSET, OP_RECORD, OP_WAIT };

struct host_event;

struct host_op {
	enum host_op_kind kind;
	enum zinf_copy_dir dir; /* OP_COPY */
	int value;		/* OP_MEMSET */
	void *dst;
	const void *src;
	uint64_t len;
	struct host_event *ev; /* OP_RECORD, OP_WAIT: holds a reference */
	uint64_t seq;	       /* the record made or awaited */
};

struct host_stream {
	struct zinf_stream base;
	struct host_op *ring; /* (depth) ops; head is the next to run */
	uint32_t depth, head, count;
	bool queued;  /* in the run queue */
	bool running; /* a copy thread runs its head op now */
	bool blocked; /* head op waits on an unfinished record */
	struct host_stream *next_run;
	struct host_stream *next_all;
};

struct host_event {
	struct zinf_event base;
	uint64_t recorded; /* sequence number of the latest record; 0 = never recorded */
	uint64_t floor;	   /* every record <= floor has completed */
	uint64_t window;   /* bit i: record floor + 1 + i has completed */
	uint32_t refs;	   /* the owner's (until destroy) + one per queued op naming it */
	bool destroyed;
	struct host_event *next_all;
};

struct host_device {
	struct zinf_device base;
	pthread_mutex_t lock;
	pthread_cond_t work;	/* copy threads: a stream was queued, or stop */
	pthread_cond_t changed; /* an op completed or a stream unblocked */
	struct host_stream *run_head, *run_tail;
	struct host_stream *streams; /* all live streams */
	struct host_event *events;   /* all events not yet freed */
	uint64_t pending;	     /* ops queued on all streams, not yet completed */
	uint32_t depth;
	unsigned nthreads;
	pthread_t *threads;
	bool stopping;
	/* the device's threads (one a core: the update, gradient sums and norms), started
	 * by the first loop that uses them (host_threads) */
	pthread_mutex_t adam_lock;
	struct zinf_adam *adam;
	bool adam_tried;
};

static struct host_device *to_hd(struct zinf_device *d)
{
	return (struct host_device *)d;
}

static struct host_stream *to_hs(struct zinf_stream *s)
{
	return (struct host_stream *)s;
}

static struct host_event *to_he(struct zinf_event *e)
{
	return (struct host_event *)e;
}

/* ---- events (lock held) --------------------------------------------------------------- */

static bool record_done(const struct host_event *e, uint64_t seq)
{
	if (seq <= e->floor)
		return true;
	return seq - e->floor - 1 < EVENT_WINDOW && (e->window >> (seq - e->floor - 1)) & 1;
}

static void record_complete(struct host_event *e, uint64_t seq)
{
	e->window |= 1ull << (seq - e->floor - 1);
	while (e->window & 1) {
		e->window >>= 1;
		e->floor++;
	}
}

static void event_unref(struct host_device *hd, struct host_event *e)
{
	struct host_event **pp;

	if (--e->refs)
		return;
	for (pp = &hd->events; *pp != e; pp = &(*pp)->next_all)
		;
	*pp = e->next_all;
	free(e);
}

/* ---- run queue (lock held) ------------------------------------------------------------ */

static void run_push(struct host_device *hd, struct host_stream *s)
{
	s->queued = true;
	s->next_run = NULL;
	if (hd->run_tail)
		hd->run_tail->next_run = s;
	else
		hd->run_head = s;
	hd->run_tail = s;
	pthread_cond_signal(&hd->work);
}

static struct host_stream *run_pop(struct host_device *hd)
{
	struct host_stream *s = hd->run_head;

	if (!s)
		return NULL;
	hd->run_head = s->next_run;
	if (!hd->run_head)
		hd->run_tail = NULL;
	s->queued = false;
	return s;
}

/* Streams whose head waits on a record of e: requeue those it now satisfies. */
static void wake_waiters(struct host_device *hd, struct host_event *e)
{
	for (struct host_stream *s = hd->streams; s; s = s->next_all) {
		const struct host_op *op = &s->ring[s->head];

		if (s->blocked && op->ev == e && record_done(e, op->seq)) {
			s->blocked = false;
			run_push(hd, s);
		}
	}
}

/* Append op to s, waiting for ring space. Lock held. */
static void stream_push(struct host_device *hd, struct host_stream *s, const struct host_op *op)
{
	while (s->count == s->depth)
		pthread_cond_wait(&hd->changed, &hd->lock);
	s->ring[(s->head + s->count) % s->depth] = *op;
	s->count++;
	hd->pending++;
	if (!s->queued && !s->running && !s->blocked)
		run_push(hd, s);
}

/* ---- copy threads --------------------------------------------------------------------- */

static void run_op(struct host_device *hd, const struct host_op *op)
{
	uint64_t t0;

	switch (op->kind) {
	case OP_COPY:
		t0 = zinf_device_now_ns();
		memcpy(op->dst, op->src, op->len);
		zinf_device_account_copy(&hd->base, op->dir, op->len, zinf_device_now_ns() - t0);
		break;
	case OP_MEMSET:
		memset(op->dst, op->value, op->len);
		__atomic_fetch_add(&hd->base.memset_bytes, op->len, __ATOMIC_RELAXED);
		break;
	case OP_RECORD:
	case OP_WAIT:
		break;
	}
}

static void *copy_thread(void *arg)
{
	struct host_device *hd = arg;

	pthread_mutex_lock(&hd->lock);
	for (;;) {
		struct host_stream *s = run_pop(hd);
		struct host_op op;

		if (!s) {
			if (hd->stopping)
				break;
			pthread_cond_wait(&hd->work, &hd->lock);
			continue;
		}
		op = s->ring[s->head];
		if (op.kind == OP_WAIT && !record_done(op.ev, op.seq)) {
			s->blocked = true; /* wake_waiters requeues it */
			continue;
		}
		s->running = true;
		if (op.kind == OP_COPY || op.kind == OP_MEMSET) {
			pthread_mutex_unlock(&hd->lock);
			run_op(hd, &op);
			pthread_mutex_lock(&hd->lock);
		}
		s->head = (s->head + 1) % s->depth;
		s->count--;
		hd->pending--;
		s->running = false;
		if (op.kind == OP_RECORD) {
			record_complete(op.ev, op.seq);
			wake_waiters(hd, op.ev);
		}
		if (op.ev)
			event_unref(hd, op.ev);
		if (s->count)
			run_push(hd, s);
		pthread_cond_broadcast(&hd->changed);
	}
	pthread_mutex_unlock(&hd->lock);
	return NULL;
}

/* ---- streams --------------------------------------------------------------------------- */

static int host_stream_create(struct zinf_device *dev, struct zinf_stream **out)
{
	struct host_device *hd = to_hd(dev);
	struct host_stream *s = calloc(1, sizeof(*s));

	if (!s || !(s->ring = calloc(hd->depth, sizeof(*s->ring)))) {
		free(s);
		return zinf_device_set_error(dev, -ENOMEM, "stream create: out of host memory");
	}
	s->base.dev = dev;
	s->depth = hd->depth;
	pthread_mutex_lock(&hd->lock);
	s->next_all = hd->streams;
	hd->streams = s;
	pthread_mutex_unlock(&hd->lock);
	*out = &s->base;
	return 0;
}

static void stream_drain(struct host_device *hd, struct host_stream *s)
{
	while (s->count)
		pthread_cond_wait(&hd->changed, &hd->lock);
}

static void host_stream_destroy(struct zinf_stream *zs)
{
	struct host_device *hd = to_hd(zs->dev);
	struct host_stream *s = to_hs(zs), **pp;

	pthread_mutex_lock(&hd->lock);
	stream_drain(hd, s);
	for (pp = &hd->streams; *pp != s; pp = &(*pp)->next_all)
		;
	*pp = s->next_all;
	pthread_mutex_unlock(&hd->lock);
	free(s->ring);
	free(s);
}

static int host_stream_synchronize(struct zinf_stream *zs)
{
	struct host_device *hd = to_hd(zs->dev);

	pthread_mutex_lock(&hd->lock);
	stream_drain(hd, to_hs(zs));
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

/* Compute on device memory: this backend's device memory is host memory, and its
 * "kernels" are the CPU loops, run from the calling thread once the stream has run what
 * was queued before (so they keep its order), on a thread a core (as a GPU's run on its
 * SMs), with the same bits as on one. */

/* The device's threads (one a core; the update's handle), started by the first loop that
 * uses them; NULL if they did not start (the loops run on the caller). adam_lock held. */
static struct zinf_adam *host_threads(struct host_device *hd)
{
	if (!hd->adam && !hd->adam_tried) {
		unsigned ncpu = zinf_cpu_count();
		struct zinf_adam_opts o;
		zinf_adam_opts_init(&o);
		o.threads = ncpu > 1024 ? 1024 : ncpu;
		hd->adam_tried = true;
		if (zinf_adam_create(&hd->adam, &o)) { /* the loop runs here alone */
			hd->adam = NULL;
			zinf_logf(ZINF_LOG_WARN,
				  "host device: the optimizer update, gradient sums and norms run "
				  "on one thread (its threads did not start)");
		}
	}
	return hd->adam;
}

static int host_add_f32(struct zinf_stream *zs, float *dst, const float *src, uint64_t n)
{
	struct host_device *hd = to_hd(zs->dev);

	host_stream_synchronize(zs);
	pthread_mutex_lock(&hd->adam_lock);
	zinf_pool_add_f32(zinf_adam_pool(host_threads(hd)), dst, src, n);
	pthread_mutex_unlock(&hd->adam_lock);
	return 0;
}

static int host_sumsq_f32_many(struct zinf_stream *zs, uint32_t count, const float *const *src,
			       const uint64_t *n, void *parts, double *out)
{
	struct host_device *hd = to_hd(zs->dev);

	(void)parts;
	host_stream_synchronize(zs);
	pthread_mutex_lock(&hd->adam_lock);
	/* the same bits as zinf_grad_sumsq on any number of threads */
	for (uint32_t i = 0; i < count; i++)
		out[i] = n[i] ? zinf_grad_sumsq_pool(zinf_adam_pool(host_threads(hd)), src[i],
						     ZINF_DTYPE_F32, n[i])
			      : 0;
	pthread_mutex_unlock(&hd->adam_lock);
	return 0;
}

static int host_adam_update(struct zinf_stream *zs, const struct zinf_adam_args *a, uint64_t n)
{
	struct host_device *hd = to_hd(zs->dev);

	host_stream_synchronize(zs);
	pthread_mutex_lock(&hd->adam_lock);
	if (host_threads(hd))
		zinf_adam_run(hd->adam, a, n);
	else
		zinf_adam_kernel_for(ZINF_ADAM_ISA_AUTO)->update(a, 0, n);
	pthread_mutex_unlock(&hd->adam_lock);
	return 0;
}

static int host_stream_wait_event(struct zinf_stream *zs, struct zinf_event *ze)
{
	struct host_device *hd = to_hd(zs->dev);
	struct host_event *e = to_he(ze);

	pthread_mutex_lock(&hd->lock);
	/* Waiting on a finished (or never made) record is a no-op, as in CUDA. */
	if (!record_done(e, e->recorded)) {
		struct host_op op = {.kind = OP_WAIT, .ev = e, .seq = e->recorded};

		e->refs++;
		stream_push(hd, to_hs(zs), &op);
	}
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

static void *host_stream_native(struct zinf_stream *zs)
{
	return NULL;
}

/* ---- events ---------------------------------------------------------------------------- */

static int host_event_create(struct zinf_device *dev, struct zinf_event **out)
{
	struct host_device *hd = to_hd(dev);
	struct host_event *e = calloc(1, sizeof(*e));

	if (!e)
		return zinf_device_set_error(dev, -ENOMEM, "event create: out of host memory");
	e->base.dev = dev;
	e->refs = 1;
	pthread_mutex_lock(&hd->lock);
	e->next_all = hd->events;
	hd->events = e;
	pthread_mutex_unlock(&hd->lock);
	*out = &e->base;
	return 0;
}

static void host_event_destroy(struct zinf_event *ze)
{
	struct host_device *hd = to_hd(ze->dev);
	struct host_event *e = to_he(ze);

	pthread_mutex_lock(&hd->lock);
	e->destroyed = true;
	event_unref(hd, e); /* freed now, or by the last queued op naming it */
	pthread_mutex_unlock(&hd->lock);
}

static int host_event_record(struct zinf_event *ze, struct zinf_stream *zs)
{
	struct host_device *hd = to_hd(ze->dev);
	struct host_event *e = to_he(ze);
	struct host_op op = {.kind = OP_RECORD, .ev = e};

	pthread_mutex_lock(&hd->lock);
	/* The done-window covers 64 records past floor: a 65th outstanding record of one
	 * event waits for the oldest (only an event re-recorded faster than it completes). */
	while (e->recorded + 1 - e->floor > EVENT_WINDOW)
		pthread_cond_wait(&hd->changed, &hd->lock);
	op.seq = ++e->recorded;
	e->refs++;
	stream_push(hd, to_hs(zs), &op);
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

static int host_event_query(struct zinf_event *ze)
{
	struct host_device *hd = to_hd(ze->dev);
	struct host_event *e = to_he(ze);
	bool done;

	pthread_mutex_lock(&hd->lock);
	done = record_done(e, e->recorded);
	pthread_mutex_unlock(&hd->lock);
	return done ? 0 : -EAGAIN;
}

static int host_event_synchronize(struct zinf_event *ze)
{
	struct host_device *hd = to_hd(ze->dev);
	struct host_event *e = to_he(ze);
	uint64_t seq;

	pthread_mutex_lock(&hd->lock);
	seq = e->recorded;
	while (!record_done(e, seq))
		pthread_cond_wait(&hd->changed, &hd->lock);
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

/* ---- work ------------------------------------------------------------------------------ */

static int host_memcpy_async(struct zinf_stream *zs, void *dst, const void *src, uint64_t len,
			     enum zinf_copy_dir dir)
{
	struct host_device *hd = to_hd(zs->dev);
	struct host_op op = {.kind = OP_COPY, .dir = dir, .dst = dst, .src = src, .len = len};

	pthread_mutex_lock(&hd->lock);
	stream_push(hd, to_hs(zs), &op);
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

static int host_memset_async(struct zinf_stream *zs, void *dst, int value, uint64_t len)
{
	struct host_device *hd = to_hd(zs->dev);
	struct host_op op = {.kind = OP_MEMSET, .dst = dst, .value = value, .len = len};

	pthread_mutex_lock(&hd->lock);
	stream_push(hd, to_hs(zs), &op);
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

static int host_synchronize(struct zinf_device *dev)
{
	struct host_device *hd = to_hd(dev);

	pthread_mutex_lock(&hd->lock);
	while (hd->pending)
		pthread_cond_wait(&hd->changed, &hd->lock);
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

/* ---- host memory ----------------------------------------------------------------------- */

static int host_host_register(struct zinf_device *dev, void *ptr, uint64_t len)
{
	if (mlock(ptr, len))
		return zinf_device_set_error(dev, -errno, "host register: mlock(%p, %llu): %s", ptr,
					     (unsigned long long)len, strerror(errno));
	return 0;
}

static int host_host_unregister(struct zinf_device *dev, void *ptr, uint64_t len)
{
	if (munlock(ptr, len))
		return zinf_device_set_error(dev, -errno, "host unregister: munlock(%p, %llu): %s",
					     ptr, (unsigned long long)len, strerror(errno));
	return 0;
}

static int host_pci_bus_id(struct zinf_device *dev, char *buf, size_t len)
{
	return zinf_device_set_error(dev, -ENOTSUP, "pci bus id: the host backend has no GPU");
}

/* ---- checks ---------------------------------------------------------------------------- */

static bool overlaps(const void *p, uint64_t plen, const void *q, uint64_t qlen)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;

	return plen && qlen && a < b + qlen && b < a + plen;
}

/* Refuse to free memory that a queued or running op still reads or writes. */
static int host_check_idle(struct zinf_device *dev, const void *ptr, uint64_t len)
{
	struct host_device *hd = to_hd(dev);

	pthread_mutex_lock(&hd->lock);
	for (struct host_stream *s = hd->streams; s; s = s->next_all) {
		for (uint32_t i = 0; i < s->count; i++) {
			const struct host_op *op = &s->ring[(s->head + i) % s->depth];
			bool copy = op->kind == OP_COPY;

			if ((!copy && op->kind != OP_MEMSET) ||
			    !(overlaps(ptr, len, op->dst, op->len) ||
			      (copy && overlaps(ptr, len, op->src, op->len))))
				continue;
			pthread_mutex_unlock(&hd->lock);
			return zinf_device_set_error(
				dev, ZINF_ESTATE,
				"device free: %p (%llu bytes) is still used by a queued %s of %llu bytes (op %u in its stream); wait for its event first",
				ptr, (unsigned long long)len,
				copy ? zinf_copy_dir_name(op->dir) : "memset",
				(unsigned long long)op->len, i);
		}
	}
	pthread_mutex_unlock(&hd->lock);
	return 0;
}

/* ---- lifecycle ------------------------------------------------------------------------- */

static void host_destroy(struct zinf_device *dev)
{
	struct host_device *hd = to_hd(dev);
	unsigned nstreams = 0, nevents = 0;

	host_synchronize(dev);
	pthread_mutex_lock(&hd->lock);
	hd->stopping = true;
	pthread_cond_broadcast(&hd->work);
	pthread_mutex_unlock(&hd->lock);
	for (unsigned i = 0; i < hd->nthreads; i++)
		pthread_join(hd->threads[i], NULL);
	while (hd->streams) {
		struct host_stream *s = hd->streams;

		hd->streams = s->next_all;
		free(s->ring);
		free(s);
		nstreams++;
	}
	while (hd->events) {
		struct host_event *e = hd->events;

		hd->events = e->next_all;
		free(e);
		nevents++;
	}
	if (nstreams || nevents)
		zinf_logf(ZINF_LOG_WARN, "device %s destroyed with %u stream(s), %u event(s) live",
			  dev->name, nstreams, nevents);
	munmap(dev->heap_base, dev->heap_size);
	zinf_device_fini_common(dev);
	pthread_cond_destroy(&hd->work);
	pthread_cond_destroy(&hd->changed);
	pthread_mutex_destroy(&hd->lock);
	zinf_adam_destroy(hd->adam);
	pthread_mutex_destroy(&hd->adam_lock);
	free(hd->threads);
	free(hd);
}

static const struct zinf_device_ops host_ops = {
	.name = "host",
	.dma_register = false,
	.destroy = host_destroy,
	.stream_create = host_stream_create,
	.stream_destroy = host_stream_destroy,
	.stream_synchronize = host_stream_synchronize,
	.stream_wait_event = host_stream_wait_event,
	.stream_native = host_stream_native,
	.event_create = host_event_create,
	.event_destroy = host_event_destroy,
	.event_record = host_event_record,
	.event_query = host_event_query,
	.event_synchronize = host_event_synchronize,
	.memcpy_async = host_memcpy_async,
	.memset_async = host_memset_async,
	.add_f32 = host_add_f32,
	.sumsq_f32_many = host_sumsq_f32_many,
	.adam_update = host_adam_update,
	.synchronize = host_synchronize,
	.host_register = host_host_register,
	.host_unregister = host_host_unregister,
	.pci_bus_id = host_pci_bus_id,
	.collect_stats = NULL,
	.check_idle = host_check_idle,
};

/* A quarter of physical memory: the auto budget (as zinf.device_memory_limit "auto"
 * documents for the host backend). */
static uint64_t host_auto_limit(void)
{
	return zinf_host_memory_bytes() / 4;
}

int zinf_device_host_open(const struct zinf_device_opts *opts, struct zinf_device **out, char *err,
			  size_t errlen)
{
	uint64_t limit = opts->memory_limit ? opts->memory_limit : host_auto_limit();
	unsigned ncpu = zinf_cpu_count();
	struct host_device *hd;
	char lim[32];
	void *heap;
	int rc;

	limit = (limit + 4095) & ~4095ull;
	/* the heap is host memory, mapped unreserved: a budget beyond it would be a promise
	 * the step breaks (as on cuda, where the limit must fit the GPU's free memory) */
	rc = zinf_budget_fits_host("device", "device_memory_limit", limit,
				   "the host device backend's heap is host memory", err, errlen);
	if (rc)
		return rc;
	hd = calloc(1, sizeof(*hd));
	if (!hd) {
		snprintf(err, errlen, "host device: out of host memory");
		return -ENOMEM;
	}
	hd->nthreads = opts->copy_threads ? opts->copy_threads : (ncpu < 4 ? ncpu : 4);
	hd->depth = opts->stream_depth;
	heap = mmap(NULL, limit, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (heap == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "host device: cannot map a heap of %s: %s",
			 zinf_format_bytes(limit, lim, sizeof(lim)), strerror(errno));
		goto out_free;
	}
	rc = zinf_device_init_common(&hd->base, &host_ops, ZINF_DEVICE_BACKEND_HOST, heap, limit,
				     opts->max_allocs);
	if (rc) {
		snprintf(err, errlen, "host device: heap bookkeeping for %u allocations: %s",
			 opts->max_allocs, strerror(-rc));
		goto out_unmap;
	}
	snprintf(hd->base.name, sizeof(hd->base.name), "host (%u copy threads)", hd->nthreads);
	pthread_mutex_init(&hd->lock, NULL);
	pthread_mutex_init(&hd->adam_lock, NULL);
	pthread_cond_init(&hd->work, NULL);
	pthread_cond_init(&hd->changed, NULL);
	hd->threads = calloc(hd->nthreads, sizeof(*hd->threads));
	if (!hd->threads) {
		rc = -ENOMEM;
		snprintf(err, errlen, "host device: out of host memory");
		goto out_sync;
	}
	for (unsigned i = 0; i < hd->nthreads; i++) {
		rc = -pthread_create(&hd->threads[i], NULL, copy_thread, hd);
		if (rc) {
			snprintf(err, errlen, "host device: cannot start copy thread %u: %s", i,
				 strerror(-rc));
			hd->nthreads = i;
			host_destroy(&hd->base);
			return rc;
		}
	}
	*out = &hd->base;
	return 0;

out_sync:
	pthread_cond_destroy(&hd->work);
	pthread_cond_destroy(&hd->changed);
	pthread_mutex_destroy(&hd->lock);
	pthread_mutex_destroy(&hd->adam_lock);
	zinf_device_fini_common(&hd->base);
out_unmap:
	munmap(heap, limit);
out_free:
	free(hd);
	return rc;
}

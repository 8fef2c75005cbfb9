/*
 * The worker pool (pool.h). Workers wait for the generation to move, run their slice
 * of the loop published with it, and count down; a worker without a slice this time
 * only takes note of the generation. One loop at a time: run_lock makes callers take
 * turns, lock guards the job and the counters.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "pool.h"
#include "zinf/error.h"
#include "zinf/log.h"

struct pool_worker {
	struct zinf_pool *pool;
	pthread_t thread;
	unsigned index; /* slice index; the calling thread takes the last slice */
};

struct zinf_pool {
	pthread_mutex_t run_lock; /* one loop at a time */
	pthread_mutex_t lock;
	pthread_cond_t start; /* generation moved or quit set */
	pthread_cond_t done;  /* pending reached 0 */
	uint64_t generation;
	unsigned pending;
	bool quit;

	/* the loop in progress, read by workers after they see generation move */
	zinf_pool_fn fn;
	void *ctx;
	uint64_t n, per;
	unsigned n_slices;

	unsigned n_workers;
	struct pool_worker *workers; /* (n_workers) */
};

static void run_slice(struct zinf_pool *p, unsigned slice)
{
	uint64_t begin = p->per * slice, end = slice + 1 == p->n_slices ? p->n : begin + p->per;

	if (begin > p->n)
		begin = p->n;
	if (end > p->n)
		end = p->n;
	if (begin < end)
		p->fn(p->ctx, begin, end);
}

static void *worker_main(void *arg)
{
	struct pool_worker *w = arg;
	struct zinf_pool *p = w->pool;
	uint64_t seen = 0;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->quit && p->generation == seen)
			pthread_cond_wait(&p->start, &p->lock);
		if (p->quit)
			break;
		seen = p->generation;
		if (w->index + 1 >= p->n_slices) /* no slice for this one this time */
			continue;
		pthread_mutex_unlock(&p->lock);
		run_slice(p, w->index);
		pthread_mutex_lock(&p->lock);
		if (--p->pending == 0)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int zinf_pool_create(unsigned threads, struct zinf_pool **out)
{
	struct zinf_pool *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->n_workers = threads > 1 ? threads - 1 : 0;
	p->workers = calloc(p->n_workers + 1, sizeof(*p->workers));
	if (!p->workers) {
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->run_lock, NULL);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->start, NULL);
	pthread_cond_init(&p->done, NULL);
	for (unsigned i = 0; i < p->n_workers; i++) {
		p->workers[i].pool = p;
		p->workers[i].index = i;
		rc = -pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]);
		if (rc) {
			zinf_logf(ZINF_LOG_ERROR, "thread pool: cannot start worker %u of %u: %s",
				  i + 1, p->n_workers, zinf_strerror(rc));
			p->n_workers = i;
			zinf_pool_destroy(p);
			return rc;
		}
	}
	*out = p;
	return 0;
}

void zinf_pool_destroy(struct zinf_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->quit = true;
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->n_workers; i++)
		pthread_join(p->workers[i].thread, NULL);
	free(p->workers);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->start);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->run_lock);
	free(p);
}

unsigned zinf_pool_threads(const struct zinf_pool *p)
{
	return p ? p->n_workers + 1 : 1;
}

pthread_t zinf_pool_worker(const struct zinf_pool *p, unsigned i)
{
	return p->workers[i].thread;
}

void zinf_pool_for(struct zinf_pool *p, uint64_t n, uint64_t min_slice, uint64_t align,
		   zinf_pool_fn fn, void *ctx)
{
	uint64_t slices = min_slice ? n / min_slice : n, per;

	if (!p || slices < 2) {
		if (n)
			fn(ctx, 0, n);
		return;
	}
	if (slices > p->n_workers + 1)
		slices = p->n_workers + 1;
	if (!align)
		align = 1;
	per = n / slices;
	per = (per + align - 1) / align * align;
	pthread_mutex_lock(&p->run_lock);
	pthread_mutex_lock(&p->lock);
	p->fn = fn;
	p->ctx = ctx;
	p->n = n;
	p->per = per;
	p->n_slices = (unsigned)slices;
	p->pending = p->n_slices - 1;
	p->generation++;
	pthread_cond_broadcast(&p->start);
	pthread_mutex_unlock(&p->lock);

	run_slice(p, p->n_slices - 1);

	pthread_mutex_lock(&p->lock);
	while (p->pending)
		pthread_cond_wait(&p->done, &p->lock);
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&p->run_lock);
}

/* The fewest elements a thread adds (below twice this the caller adds alone), and slices
 * start 64 bytes (16 floats) apart from the start (on a 64-byte-aligned buffer no line is
 * written by two threads; on another, at most one at each slice boundary: shared, no
 * harm). */
#define ADD_MIN_SLICE_ELEMS (1u << 16)
#define ADD_SLICE_ALIGN_ELEMS 16u

struct add_loop {
	float *dst;
	const float *src;
};

static void add_slice(void *ctx, uint64_t begin, uint64_t end)
{
	const struct add_loop *l = ctx;

	for (uint64_t i = begin; i < end; i++)
		l->dst[i] += l->src[i];
}

void zinf_pool_add_f32(struct zinf_pool *p, float *dst, const float *src, uint64_t n)
{
	struct add_loop l = {dst, src};

	zinf_pool_for(p, n, ADD_MIN_SLICE_ELEMS, ADD_SLICE_ALIGN_ELEMS, add_slice, &l);
}

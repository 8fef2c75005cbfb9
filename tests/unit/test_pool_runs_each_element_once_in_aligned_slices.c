/*
 * The thread pool (src/pool.h) runs a loop over [0, n) with each element exactly once,
 * in contiguous slices that start on multiples of the alignment, no more slices than
 * threads and none under the minimum (under twice it, the calling thread alone), on any
 * number of threads; loops from two threads at once take turns and are each whole; a
 * NULL pool runs the loop on the caller.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "test.h"

#define MAX_SLICES 16

struct loop {
	unsigned char *hits;
	uint64_t align;
	pthread_mutex_t lock;
	unsigned n_slices;
	uint64_t begins[MAX_SLICES], ends[MAX_SLICES];
	pthread_t who[MAX_SLICES];
};

static void body(void *ctx, uint64_t begin, uint64_t end)
{
	struct loop *l = ctx;

	for (uint64_t i = begin; i < end; i++)
		l->hits[i]++;
	pthread_mutex_lock(&l->lock);
	if (l->n_slices < MAX_SLICES) {
		l->begins[l->n_slices] = begin;
		l->ends[l->n_slices] = end;
		l->who[l->n_slices] = pthread_self();
	}
	l->n_slices++;
	pthread_mutex_unlock(&l->lock);
}

static void check(struct zinf_pool *p, uint64_t n, uint64_t min_slice, uint64_t align)
{
	struct loop l;
	unsigned threads = zinf_pool_threads(p);
	uint64_t want = min_slice ? n / min_slice : n;
	bool caller = false;

	memset(&l, 0, sizeof(l));
	pthread_mutex_init(&l.lock, NULL);
	l.align = align;
	l.hits = calloc(n + 1, 1);
	T_CHECK(l.hits, "out of memory");
	zinf_pool_for(p, n, min_slice, align, body, &l);
	for (uint64_t i = 0; i < n; i++)
		T_CHECK(l.hits[i] == 1, "n %llu on %u threads: element %llu ran %u times",
			(unsigned long long)n, threads, (unsigned long long)i, l.hits[i]);
	if (want > threads)
		want = threads;
	if (want < 2)
		want = n ? 1 : 0;
	T_CHECK(l.n_slices <= want && (n == 0 || l.n_slices >= 1),
		"n %llu, min %llu on %u threads: %u slices, at most %llu expected",
		(unsigned long long)n, (unsigned long long)min_slice, threads, l.n_slices,
		(unsigned long long)want);
	for (unsigned s = 0; s < l.n_slices; s++) {
		T_CHECK(l.begins[s] % (align ? align : 1) == 0,
			"n %llu: a slice starts at %llu, not a multiple of %llu",
			(unsigned long long)n, (unsigned long long)l.begins[s],
			(unsigned long long)align);
		T_CHECK(l.n_slices == 1 || l.ends[s] - l.begins[s] >= min_slice / 2,
			"n %llu: a slice of %llu elements, the minimum being %llu",
			(unsigned long long)n, (unsigned long long)(l.ends[s] - l.begins[s]),
			(unsigned long long)min_slice);
		caller |= pthread_equal(l.who[s], pthread_self());
	}
	T_CHECK(n == 0 || caller, "n %llu: the calling thread ran no slice", (unsigned long long)n);
	free(l.hits);
	pthread_mutex_destroy(&l.lock);
}

struct racer {
	struct zinf_pool *pool;
	int rounds;
};

static void *race(void *arg)
{
	struct racer *r = arg;

	for (int i = 0; i < r->rounds; i++)
		check(r->pool, 100003 + (uint64_t)i, 1000, 64);
	return NULL;
}

int main(void)
{
	static const uint64_t sizes[] = {0, 1, 63, 1999, 2000, 2001, 4096, 65536, 100003, 1000000};
	struct zinf_pool *p;
	pthread_t t;
	struct racer r;

	for (uint64_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		check(NULL, sizes[k], 1000, 64);
	for (unsigned threads = 1; threads <= 5; threads++) {
		T_CHECK(zinf_pool_create(threads, &p) == 0 && p, "pool of %u threads", threads);
		T_CHECK(zinf_pool_threads(p) == threads, "pool of %u threads says %u", threads,
			zinf_pool_threads(p));
		for (uint64_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			check(p, sizes[k], 1000, 64);
			check(p, sizes[k], 1, 1);
			check(p, sizes[k], 0, 0);
		}
		r = (struct racer){p, 50};
		T_CHECK(pthread_create(&t, NULL, race, &r) == 0, "second caller");
		race(&r);
		pthread_join(t, NULL);
		zinf_pool_destroy(p);
	}
	zinf_pool_destroy(NULL);
	return T_EXIT_PASS;
}

/*
 * Pinned buffers are aligned for O_DIRECT (4096, or the pool's larger alignment), never
 * overlap (each holds its own pattern through random alloc/free from several threads),
 * and the pool accounts every byte: used is the sum of live buffers rounded to 4096,
 * peak never passes the size; base and size are page-aligned and exposed; bad frees and
 * bad options are refused with a one-line reason.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pinned.h"
#include "tiers_test.h"

#define MiB (1ull << 20)
#define THREADS 3

static struct zinf_pinned *pool;
static uint64_t align;

static void *churn(void *arg)
{
	uint64_t rng = 77 + (uintptr_t)arg, seed[16] = {0}, len[16] = {0};
	void *p[16] = {0};

	for (int r = 0; r < 3000; r++) {
		int i = (int)(tt_rand(&rng) % 16);

		if (p[i]) {
			T_CHECK(tt_check(p[i], len[i], seed[i]) == UINT64_MAX,
				"buffer %p overwritten by another", p[i]);
			T_CHECK(zinf_pinned_owns(pool, p[i], len[i]), "owns");
			T_CHECK_RC(zinf_pinned_free(pool, p[i]));
			p[i] = NULL;
			continue;
		}
		len[i] = 8 * (1 + tt_rand(&rng) % (256 * 1024 / 8));
		if (zinf_pinned_try_alloc(pool, len[i], &p[i]) != 0)
			continue;
		T_CHECK(((uintptr_t)p[i] & (align - 1)) == 0, "buffer %p not %llu-aligned", p[i],
			(unsigned long long)align);
		seed[i] = tt_rand(&rng);
		tt_fill(p[i], len[i], seed[i]);
	}
	for (int i = 0; i < 16; i++) {
		if (p[i])
			T_CHECK_RC(zinf_pinned_free(pool, p[i]));
	}
	return NULL;
}

int main(void)
{
	struct zinf_pinned_opts o;
	struct zinf_pinned_stats st;
	pthread_t th[THREADS];
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	void *a, *b, *c, *none;
	char err[512];

	zinf_pinned_opts_init(&o);
	T_CHECK(o.align == 4096, "default alignment 4096");
	o.size = 3 * MiB + 1000; /* rounded up to a page */
	o.lock = ZINF_PINNED_LOCK_BEST_EFFORT;
	T_CHECK(zinf_pinned_create(&o, &pool, err, sizeof(err)) == 0, "create: %s", err);
	T_CHECK(zinf_pinned_size(pool) == ((3 * MiB + 1000 + page - 1) & ~(page - 1)), "size");
	T_CHECK(((uintptr_t)zinf_pinned_base(pool) & (page - 1)) == 0, "base page-aligned");

	/* Exact accounting: 1 byte costs 4096, 5000 costs 8192. */
	T_CHECK_RC(zinf_pinned_alloc(pool, 1, 0, &a));
	T_CHECK_RC(zinf_pinned_alloc(pool, 5000, 0, &b));
	T_CHECK_RC(zinf_pinned_try_alloc(pool, 4096, &c));
	zinf_pinned_get_stats(pool, &st);
	T_CHECK(st.used == 16384 && st.live_buffers == 3 && st.allocs == 3, "used %llu",
		(unsigned long long)st.used);
	T_CHECK(st.numa_node >= -1, "numa node %d", st.numa_node);
	T_CHECK(zinf_pinned_free(pool, (char *)b + 4096) == -EINVAL, "free inside a buffer");
	T_CHECK(strstr(zinf_pinned_last_error(pool), "is not a live buffer"), "%s",
		zinf_pinned_last_error(pool));
	T_CHECK(zinf_pinned_free(pool, &st) == -EINVAL, "free of a stack address");
	T_CHECK(zinf_pinned_alloc(pool, 0, 0, &none) < 0 && none == NULL, "zero length refused");
	T_CHECK(!zinf_pinned_owns(pool, b, 8193) && zinf_pinned_owns(pool, b, 8192), "owns");
	T_CHECK_RC(zinf_pinned_free(pool, b));
	T_CHECK(zinf_pinned_free(pool, b) == -EINVAL, "double free refused");
	T_CHECK_RC(zinf_pinned_free(pool, c));
	T_CHECK_RC(zinf_pinned_free(pool, a));
	zinf_pinned_destroy(pool);

	/* Concurrent churn with 64 KiB alignment. */
	o.size = 8 * MiB;
	o.align = align = 64 * 1024;
	T_CHECK(zinf_pinned_create(&o, &pool, err, sizeof(err)) == 0, "create: %s", err);
	for (uintptr_t i = 0; i < THREADS; i++)
		T_CHECK(pthread_create(&th[i], NULL, churn, (void *)i) == 0, "thread");
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	zinf_pinned_get_stats(pool, &st);
	T_CHECK(st.used == 0 && st.peak <= 8 * MiB && st.peak > 0, "used %llu peak %llu",
		(unsigned long long)st.used, (unsigned long long)st.peak);
	zinf_pinned_destroy(pool);
	zinf_pinned_destroy(NULL);

	/* Bad options. */
	o.align = 1000;
	T_CHECK(zinf_pinned_create(&o, &pool, err, sizeof(err)) == -EINVAL, "align 1000");
	T_CHECK(strstr(err, "align 1000 is not a power of two >= 4096"), "%s", err);
	o.align = 4096;
	o.max_buffers = 0;
	T_CHECK(zinf_pinned_create(&o, &pool, err, sizeof(err)) == -EINVAL, "max_buffers 0");
	T_CHECK(strstr(err, "max_buffers 0"), "%s", err);
	return T_EXIT_PASS;
}

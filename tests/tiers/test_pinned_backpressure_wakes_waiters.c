/*
 * The pinned pool is back-pressure, never a silent malloc: on a full pool try_alloc says
 * -EAGAIN at once, a blocking alloc waits and wakes when a buffer is freed (in order:
 * a large waiter is served before later small ones), times out with -ETIMEDOUT and the
 * numbers, and a buffer larger than the pool is refused with ZINF_EBUDGET at once.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pinned.h"
#include "test.h"
#include "zinf/error.h"

#define MiB (1ull << 20)

static struct zinf_pinned *pool;
static int order[2], norder;
static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;

struct waiter {
	uint64_t len;
	int id;
	int rc;
	void *p;
	volatile int done;
};

static void *wait_alloc(void *arg)
{
	struct waiter *w = arg;

	w->rc = zinf_pinned_alloc(pool, w->len, 10ull * 1000000000ull, &w->p);
	pthread_mutex_lock(&order_lock);
	order[norder++] = w->id;
	pthread_mutex_unlock(&order_lock);
	w->done = 1;
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
	struct zinf_pinned_opts o;
	struct zinf_pinned_stats st;
	struct waiter big = {.len = 8 * MiB, .id = 1}, small = {.len = 1 * MiB, .id = 2};
	pthread_t tb, ts;
	void *p[4], *q;
	char err[512];
	double t0;

	zinf_pinned_opts_init(&o);
	o.size = 16 * MiB;
	o.lock = ZINF_PINNED_LOCK_NONE;
	T_CHECK(zinf_pinned_create(&o, &pool, err, sizeof(err)) == 0, "create: %s", err);
	for (int i = 0; i < 4; i++)
		T_CHECK_RC(zinf_pinned_alloc(pool, 4 * MiB, 0, &p[i]));

	/* Full: try says so at once, with the numbers. */
	T_CHECK(zinf_pinned_try_alloc(pool, 4096, &q) == -EAGAIN && q == NULL, "try on full");
	T_CHECK_STR(zinf_pinned_last_error(pool),
		    "pinned pool: no room for 4 KiB now (16 MiB of 16 MiB in use by 4 buffers)");
	/* A timed wait gives up after its timeout. */
	t0 = now_s();
	T_CHECK(zinf_pinned_alloc(pool, 4096, 50 * 1000000ull, &q) == -ETIMEDOUT, "timeout");
	T_CHECK(now_s() - t0 >= 0.045 && now_s() - t0 < 5, "waited %.3f s", now_s() - t0);
	T_CHECK_STR(
		zinf_pinned_last_error(pool),
		"pinned pool: no room for 4 KiB within 0.050 s (16 MiB of 16 MiB in use by 4 buffers)");
	/* Never fits: refused at once. */
	T_CHECK(zinf_pinned_alloc(pool, 17 * MiB, UINT64_MAX, &q) == ZINF_EBUDGET, "too big");
	T_CHECK_STR(
		zinf_pinned_last_error(pool),
		"pinned budget: a 17 MiB buffer can never fit the 16 MiB pool (pinned_memory_limit)");

	/* A big waiter first, then a small one: freeing 4 MiB must not let the small one
	 * jump the line; freeing another 4 MiB serves the big one, then the small one. */
	T_CHECK(pthread_create(&tb, NULL, wait_alloc, &big) == 0, "thread");
	usleep(50000);
	T_CHECK(pthread_create(&ts, NULL, wait_alloc, &small) == 0, "thread");
	usleep(50000);
	T_CHECK(!big.done && !small.done, "both wait on a full pool");
	T_CHECK_RC(zinf_pinned_free(pool, p[0]));
	usleep(100000);
	T_CHECK(!big.done && !small.done, "small did not overtake big (big %d small %d)", big.done,
		small.done);
	T_CHECK(zinf_pinned_try_alloc(pool, 4096, &q) == -EAGAIN, "try does not jump the line");
	T_CHECK_RC(zinf_pinned_free(pool, p[1]));
	pthread_join(tb, NULL);
	T_CHECK(big.rc == 0, "big woken: %d", big.rc);
	usleep(50000);
	T_CHECK(!small.done, "small still waits: the pool is full again");
	T_CHECK_RC(zinf_pinned_free(pool, p[2]));
	pthread_join(ts, NULL);
	T_CHECK(small.rc == 0, "small woken: %d", small.rc);
	T_CHECK(norder == 2 && order[0] == 1 && order[1] == 2, "served in order %d %d", order[0],
		order[1]);
	zinf_pinned_get_stats(pool, &st);
	T_CHECK(st.waits == 3 && st.wait_ns > 150000000ull, "waits %llu wait_ns %llu",
		(unsigned long long)st.waits, (unsigned long long)st.wait_ns);
	T_CHECK(st.used == 13 * MiB && st.live_buffers == 3, "used %llu",
		(unsigned long long)st.used);
	T_CHECK(st.peak == 16 * MiB && st.limit == 16 * MiB, "peak %llu",
		(unsigned long long)st.peak);
	T_CHECK(st.failures == 4, "failures %llu", (unsigned long long)st.failures);
	T_CHECK_RC(zinf_pinned_free(pool, big.p));
	T_CHECK_RC(zinf_pinned_free(pool, small.p));
	T_CHECK_RC(zinf_pinned_free(pool, p[3]));
	zinf_pinned_get_stats(pool, &st);
	T_CHECK(st.used == 0 && st.live_buffers == 0, "all returned");
	zinf_pinned_destroy(pool);
	return T_EXIT_PASS;
}

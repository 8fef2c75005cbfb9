/*
 * The mover queues a chunk's copy to the device without the store lock: on a GPU a copy
 * from pageable memory (a host home without pin_memory) returns only once the driver has
 * staged all of it, and meanwhile the threads that fetch, wait, read parameter pointers
 * and release must go on. Here the device's copy call is made to block until the test
 * lets it go, while module a's chunk is being queued; module b (already on the device)
 * is fetched, waited for, read and released, and the stats read, all before a's copy is
 * let go (within 10 s: with the lock held they would wait for ever). Then a arrives with
 * its values. Host home, host-backend device.
 */
#include <pthread.h>
#include <time.h>

#include "store_internal.h"
#include "store_test_util.h"

#define BYTES (1ull << 20) /* one bf16 512 x 1024 parameter: one chunk */

static struct zinf_device_ops blocking_ops;
static const struct zinf_device_ops *real_ops;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static const void *block_src; /* a copy from here blocks until let_go */
static bool entered, let_go, b_done;

static int blocking_memcpy(struct zinf_stream *s, void *dst, const void *src, uint64_t len,
			   enum zinf_copy_dir dir)
{
	pthread_mutex_lock(&mu);
	if (src == block_src) {
		entered = true;
		pthread_cond_broadcast(&cv);
		while (!let_go)
			pthread_cond_wait(&cv, &mu);
	}
	pthread_mutex_unlock(&mu);
	return real_ops->memcpy_async(s, dst, src, len, dir);
}

struct use_b {
	struct zinf_store *store;
	uint32_t module, param;
	const void *want;
	int rc;
};

/* What the model's thread does with a module while another one loads. */
static void *use_b(void *arg)
{
	struct use_b *u = arg;
	struct zinf_store_stats st;

	u->rc = zinf_store_fetch(u->store, u->module);
	if (!u->rc)
		u->rc = zinf_store_wait(u->store, u->module);
	if (!u->rc && memcmp(zinf_store_param_data(u->store, u->param), u->want, BYTES) != 0)
		u->rc = -1;
	if (!u->rc)
		u->rc = zinf_store_release(u->store, u->module);
	zinf_store_get_stats(u->store, &st);
	pthread_mutex_lock(&mu);
	b_done = true;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* Wait for flag under mu, at most seconds; returns whether it was set. */
static bool wait_flag(const bool *flag, int seconds)
{
	struct timespec ts;
	bool set;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += seconds;
	pthread_mutex_lock(&mu);
	while (!*flag && pthread_cond_timedwait(&cv, &mu, &ts) == 0)
		;
	set = *flag;
	pthread_mutex_unlock(&mu);
	return set;
}

int main(void)
{
	struct t_tiers t;
	uint32_t ma, mb, pa, pb;
	void *src_a = malloc(BYTES), *src_b = malloc(BYTES);
	struct use_b u;
	pthread_t th;
	bool done;

	T_CHECK(src_a && src_b, "out of memory");
	zinf_log_set_level(ZINF_LOG_ERROR);
	t_tiers_up(&t, ZINF_TIER_HOST, 4 * BYTES, 0, BYTES);
	t_two_modules(&t, &ma, &pa, &mb, &pb, src_a, src_b);
	T_CHECK_RC(zinf_store_fetch(t.store, mb)); /* b on the device, cached */
	T_CHECK_RC(zinf_store_wait(t.store, mb));
	T_CHECK_RC(zinf_store_release(t.store, mb));

	/* a's chunk copy blocks in the device call */
	real_ops = t.dev->ops;
	blocking_ops = *real_ops;
	blocking_ops.memcpy_async = blocking_memcpy;
	block_src = t.store->chunks[t.store->modules[ma].first_chunk].host;
	t.dev->ops = &blocking_ops;
	T_CHECK_RC(zinf_store_fetch(t.store, ma));
	T_CHECK(wait_flag(&entered, 20), "the mover never queued a's copy");

	u = (struct use_b){.store = t.store, .module = mb, .param = pb, .want = src_b};
	T_CHECK(pthread_create(&th, NULL, use_b, &u) == 0, "pthread_create");
	done = wait_flag(&b_done, 10);
	pthread_mutex_lock(&mu);
	let_go = true;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	T_CHECK(done, "fetch, wait, read and release of a cached module, and the stats, waited "
		      "for another module's copy call to return: the store lock is held there");
	pthread_join(th, NULL);
	T_CHECK(u.rc == 0, "module b: %d: %s", u.rc, zinf_store_last_error(t.store));

	T_CHECK_RC(zinf_store_wait(t.store, ma));
	T_CHECK(memcmp(zinf_store_param_data(t.store, pa), src_a, BYTES) == 0, "a's values");
	T_CHECK_RC(zinf_store_release(t.store, ma));
	t.dev->ops = real_ops;
	t_tiers_down(&t);
	free(src_a);
	free(src_b);
	return T_EXIT_PASS;
}

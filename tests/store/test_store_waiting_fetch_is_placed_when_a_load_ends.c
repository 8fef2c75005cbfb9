/* A fetch waiting for device room that only the end of another module's load can make
 * (that module's fetch was given up, so once loaded it can be evicted) is placed as soon
 * as that load ends, by the mover itself: nothing else kicks it then. Before, the mover
 * went to sleep with the fetch waiting, and the demo lost a second in half its steps.
 * The mover's idle sleep is set to 60 s here, so a missed placement is a minute's wait,
 * far past the 20 s this test allows (the placement takes milliseconds). NVMe home,
 * room on the device for one module, a pinned pool of one chunk that the test holds
 * until both fetches are queued. */
#include <pthread.h>
#include <time.h>

#include "store_internal.h"
#include "store_test_util.h"

#define BYTES (1ull << 20) /* one bf16 512 x 1024 parameter: one chunk */

static enum module_state state_of(struct zinf_store *s, uint32_t m)
{
	enum module_state st;

	pthread_mutex_lock(&s->lock);
	st = s->modules[m].state;
	pthread_mutex_unlock(&s->lock);
	return st;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
	struct t_tiers t;
	uint32_t ma, mb, pa, pb;
	void *src_a = malloc(BYTES), *src_b = malloc(BYTES), *held = NULL;
	double t0, waited;
	int rc;

	T_CHECK(src_a && src_b, "out of memory");
	zinf_log_set_level(ZINF_LOG_ERROR);
	t_tiers_up(&t, ZINF_TIER_NVME, BYTES, BYTES, BYTES); /* the mover idles 60 s */
	t_two_modules(&t, &ma, &pa, &mb, &pb, src_a, src_b);

	/* a gets the device room but cannot read: the pinned pool is ours */
	T_CHECK_RC(zinf_pinned_alloc(t.pinned, BYTES, UINT64_MAX, &held));
	T_CHECK_RC(zinf_store_fetch(t.store, ma));
	for (int i = 0; state_of(t.store, ma) != MOD_LOADING; i++) {
		T_CHECK(i < 20000, "module a was never placed (state %d)", state_of(t.store, ma));
		usleep(100);
	}
	T_CHECK_RC(zinf_store_release(t.store, ma)); /* a prefetch given up: loads on */
	T_CHECK_RC(zinf_store_fetch(t.store, mb));
	T_CHECK(state_of(t.store, mb) == MOD_WAITING_SPACE,
		"module b: state %d, expected it to wait for a's room", state_of(t.store, mb));

	/* a's load can end now; b must take its room when it does */
	t0 = now_s();
	T_CHECK_RC(zinf_pinned_free(t.pinned, held));
	rc = zinf_store_wait(t.store, mb);
	waited = now_s() - t0;
	T_CHECK(rc == 0, "the fetch of b failed (%d): %s", rc, zinf_store_last_error(t.store));
	T_CHECK(waited < 20.0,
		"the fetch of b waited %.1f s after a's load could end: the mover slept with it "
		"waiting",
		waited);
	T_CHECK(memcmp(zinf_store_param_data(t.store, pb), src_b, BYTES) == 0, "b's values");
	T_CHECK_RC(zinf_store_release(t.store, mb));
	printf("b placed and loaded %.3f s after a's load could end\n", waited);
	free(src_a);
	free(src_b);
	t_tiers_down(&t);
	return T_EXIT_PASS;
}

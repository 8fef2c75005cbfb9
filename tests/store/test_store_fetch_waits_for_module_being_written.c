/* A fetch that needs the room of the only cached module while another thread writes that
 * module (the background optimizer's write-through) waits for the write to end and then
 * evicts it, instead of failing with ZINF_EBUDGET; the fetched module and the written
 * one both hold the right values afterwards. Host home, room for one module. */
#include <pthread.h>
#include <unistd.h>

#include "store_test_util.h"

#define BYTES (32ull << 20) /* one bf16 4096 x 4096 parameter */

static struct t_tiers t;
static uint32_t ma, mb, pa, pb;
static void *src_a;
static int write_rc;

static void *writer(void *arg)
{
	(void)arg;
	write_rc = zinf_store_module_write(t.store, ma, (const void *const *)&src_a);
	return NULL;
}

int main(void)
{
	uint64_t shape[2] = {4096, 4096};
	void *src_b = malloc(BYTES), *got = malloc(BYTES);

	T_CHECK(src_b && got, "out of memory");
	zinf_log_set_level(ZINF_LOG_ERROR);
	t_tiers_up(&t, ZINF_TIER_HOST, 40ull << 20, 0, 4ull << 20);
	T_CHECK_RC(zinf_store_module_add(t.store, "a", &ma));
	T_CHECK_RC(zinf_store_param_add(t.store, ma, "pa", ZINF_DTYPE_BF16, 2, shape, &pa));
	T_CHECK_RC(zinf_store_module_add(t.store, "b", &mb));
	T_CHECK_RC(zinf_store_param_add(t.store, mb, "pb", ZINF_DTYPE_BF16, 2, shape, &pb));
	T_CHECK_RC(zinf_store_finalize(t.store));
	src_a = malloc(BYTES);
	T_CHECK(src_a, "out of memory");
	t_fill(src_b, BYTES, 2);
	T_CHECK_RC(zinf_store_param_write(t.store, pb, src_b));
	for (int it = 0; it < 20; it++) {
		pthread_t th;
		int rc;

		t_fill(src_a, BYTES, (uint64_t)it + 10);
		T_CHECK_RC(zinf_store_fetch(t.store, ma)); /* a cached: no room left for b */
		T_CHECK_RC(zinf_store_wait(t.store, ma));
		T_CHECK_RC(zinf_store_release(t.store, ma));
		T_CHECK(pthread_create(&th, NULL, writer, NULL) == 0, "pthread_create");
		usleep(1000); /* most iterations: the fetch comes while a is being written */
		T_CHECK_RC(zinf_store_fetch(t.store, mb));
		rc = zinf_store_wait(t.store, mb);
		T_CHECK(rc == 0, "iteration %d: the fetch of b failed (%d): %s", it, rc,
			zinf_store_last_error(t.store));
		pthread_join(th, NULL);
		T_CHECK(write_rc == 0, "iteration %d: the write of a failed (%d)", it, write_rc);
		T_CHECK(memcmp(zinf_store_param_data(t.store, pb), src_b, BYTES) == 0,
			"iteration %d: b's values", it);
		T_CHECK_RC(zinf_store_release(t.store, mb));
		T_CHECK_RC(zinf_store_param_read(t.store, pa, got));
		T_CHECK(memcmp(got, src_a, BYTES) == 0, "iteration %d: a's new values", it);
		zinf_store_evict(t.store, mb);
	}
	free(src_a);
	free(src_b);
	free(got);
	t_tiers_down(&t);
	return T_EXIT_PASS;
}

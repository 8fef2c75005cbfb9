/* A module marked persistent gets its device buffer when marked, from the top of the
 * heap, above the places of the modules that come and go; its fetches load into that
 * buffer, a parameter write drops the copy but not the place (the next fetch reads the
 * new values there), and unmarked it gives the buffer back: at once when it holds no
 * copy, and also when the module was waiting in the fetch line behind a module that
 * did not fit (nothing else could ever free it then). */
#include "store_test_util.h"

#define SMALL_ELEMS (64u << 10) /* bf16: 128 KiB */
#define BIG_ELEMS (2u << 20)	/* bf16: 4 MiB */

static uint64_t used(struct t_tiers *t)
{
	struct zinf_device_stats ds;

	zinf_device_get_stats(t->dev, &ds);
	return ds.used;
}

static const char *fetch(struct t_tiers *t, uint32_t m, uint32_t p)
{
	T_CHECK_RC(zinf_store_fetch(t->store, m));
	T_CHECK(zinf_store_wait(t->store, m) == 0, "%s", zinf_store_last_error(t->store));
	return zinf_store_param_data(t->store, p);
}

int main(void)
{
	uint64_t small_shape[1] = {SMALL_ELEMS}, big_shape[1] = {BIG_ELEMS}, small_bytes, u0;
	uint32_t ms, ps, mb[2], pb[2];
	char *want = malloc(SMALL_ELEMS * 2);
	const char *at, *big_at;
	struct t_tiers t;

	zinf_log_set_level(ZINF_LOG_ERROR);
	t_tiers_up(&t, ZINF_TIER_HOST, 8ull << 20, 0, 256ull << 10);
	T_CHECK_RC(zinf_store_module_add(t.store, "small", &ms));
	T_CHECK_RC(zinf_store_param_add(t.store, ms, "s", ZINF_DTYPE_BF16, 1, small_shape, &ps));
	for (int i = 0; i < 2; i++) {
		char name[8];
		snprintf(name, sizeof(name), "big%d", i);
		T_CHECK_RC(zinf_store_module_add(t.store, name, &mb[i]));
		T_CHECK_RC(zinf_store_param_add(t.store, mb[i], name, ZINF_DTYPE_BF16, 1, big_shape,
						&pb[i]));
	}
	T_CHECK_RC(zinf_store_finalize(t.store));
	small_bytes = zinf_store_module_bytes(t.store, ms);
	u0 = used(&t);

	/* marked: its buffer taken now */
	zinf_store_set_persistent(t.store, ms, true);
	T_CHECK(used(&t) == u0 + small_bytes, "marking took %llu bytes, expected %llu",
		(unsigned long long)(used(&t) - u0), (unsigned long long)small_bytes);
	big_at = fetch(&t, mb[0], pb[0]);
	T_CHECK_RC(zinf_store_release(t.store, mb[0]));
	t_fill(want, SMALL_ELEMS * 2, 1);
	T_CHECK_RC(zinf_store_param_write(t.store, ps, want));
	at = fetch(&t, ms, ps);
	T_CHECK(at > big_at, "the kept module (%p) below a module that comes and goes (%p)",
		(const void *)at, (const void *)big_at);
	T_CHECK(memcmp(at, want, SMALL_ELEMS * 2) == 0, "contents");
	T_CHECK_RC(zinf_store_release(t.store, ms));

	/* a parameter write drops the copy, not the place */
	t_fill(want, SMALL_ELEMS * 2, 2);
	T_CHECK_RC(zinf_store_param_write(t.store, ps, want));
	T_CHECK(fetch(&t, ms, ps) == at, "the kept module moved after a write");
	T_CHECK(memcmp(at, want, SMALL_ELEMS * 2) == 0, "contents after the write");
	T_CHECK_RC(zinf_store_release(t.store, ms));

	/* unmarked without a copy (dropped by a write): the buffer goes back at once */
	T_CHECK_RC(zinf_store_param_write(t.store, ps, want));
	T_CHECK_RC(zinf_store_evict(t.store, mb[0]));
	zinf_store_set_persistent(t.store, ms, false);
	T_CHECK(used(&t) == u0, "unmarked: %llu bytes still used",
		(unsigned long long)(used(&t) - u0));

	/* marked again, then fetched behind a module that does not fit (big0 held, big1
	 * waiting for its room), unmarked and released while in the line */
	zinf_store_set_persistent(t.store, ms, true);
	fetch(&t, mb[0], pb[0]);
	T_CHECK_RC(zinf_store_fetch(t.store, mb[1]));
	T_CHECK_RC(zinf_store_fetch(t.store, ms));
	zinf_store_set_persistent(t.store, ms, false);
	T_CHECK_RC(zinf_store_release(t.store, ms));
	T_CHECK_RC(zinf_store_release(t.store, mb[1]));
	T_CHECK_RC(zinf_store_release(t.store, mb[0]));
	/* big1, released while its room was being made, may still be landing (the mover
	 * placed it once big0 let go); a load counts until it lands, then it is a cached
	 * copy that can be had back: wait for that, up to 10 s */
	for (int i = 0; i < 1000 && zinf_store_device_need(t.store, 0, NULL) != u0; i++)
		usleep(10000);
	T_CHECK(zinf_store_device_need(t.store, 0, NULL) == u0,
		"after the line: %llu bytes cannot be had back",
		(unsigned long long)(zinf_store_device_need(t.store, 0, NULL) - u0));
	t_tiers_down(&t);
	free(want);
	return T_EXIT_PASS;
}

/* When a fetched module cannot get device space because every resident module is held,
 * zinf_store_wait returns ZINF_EBUDGET naming the held modules instead of hanging;
 * after a release the same fetch completes by evicting the released module. A released
 * module is served from the device cache (a hit) until evicted. */
#include "store_test_util.h"

int main(void)
{
	struct t_tiers t;
	uint32_t m[3], p[3];
	uint64_t shape[1] = {512 * 1024}; /* 2 MiB of f32 */
	struct zinf_store_stats st;
	void *buf = malloc(2u << 20);

	zinf_log_set_level(ZINF_LOG_ERROR);
	t_tiers_up(&t, ZINF_TIER_HOST, 5ull << 20, 0, 1ull << 20);
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "block%d", i);
		T_CHECK_RC(zinf_store_module_add(t.store, name, &m[i]));
		T_CHECK_RC(
			zinf_store_param_add(t.store, m[i], name, ZINF_DTYPE_F32, 1, shape, &p[i]));
	}
	T_CHECK_RC(zinf_store_finalize(t.store));
	for (int i = 0; i < 3; i++) {
		t_fill(buf, 2u << 20, (uint64_t)i);
		T_CHECK_RC(zinf_store_param_write(t.store, p[i], buf));
	}
	T_CHECK_RC(zinf_store_fetch(t.store, m[0]));
	T_CHECK_RC(zinf_store_fetch(t.store, m[1]));
	T_CHECK_RC(zinf_store_wait(t.store, m[0]));
	T_CHECK_RC(zinf_store_wait(t.store, m[1]));
	T_CHECK_RC(zinf_store_fetch(t.store, m[2])); /* 2 MiB more than the 5 MiB budget holds */
	T_CHECK(zinf_store_wait(t.store, m[2]) == ZINF_EBUDGET,
		"wait did not report the full budget");
	T_CHECK(strstr(zinf_store_last_error(t.store), "module block2 needs 2 MiB") &&
			strstr(zinf_store_last_error(t.store), "(block0, block1)"),
		"%s", zinf_store_last_error(t.store));
	T_CHECK_RC(zinf_store_release(t.store, m[0]));
	T_CHECK(zinf_store_wait(t.store, m[2]) == 0, "%s", zinf_store_last_error(t.store));
	t_fill(buf, 2u << 20, 2);
	T_CHECK(memcmp(zinf_store_param_data(t.store, p[2]), buf, 2u << 20) == 0,
		"block2 contents");
	T_CHECK(zinf_store_param_data(t.store, p[0]) == NULL, "released module still addressable");
	T_CHECK_RC(zinf_store_release(t.store, m[1]));
	T_CHECK_RC(zinf_store_fetch(t.store, m[1])); /* still cached: a hit */
	T_CHECK_RC(zinf_store_wait(t.store, m[1]));
	zinf_store_get_stats(t.store, &st);
	T_CHECK(st.hits == 1 && st.evictions == 1, "hits %llu evictions %llu",
		(unsigned long long)st.hits, (unsigned long long)st.evictions);
	T_CHECK(zinf_store_param_write(t.store, p[1], buf) == -EBUSY, "write to a module in use");
	T_CHECK_RC(zinf_store_release(t.store, m[1]));
	T_CHECK_RC(zinf_store_release(t.store, m[2]));

	/* Persistent modules are never evicted: with blocks 1 and 2 cached and persistent,
	 * block 0 cannot get room, and both a fetch and a scratch buffer say so at once. */
	zinf_store_set_persistent(t.store, m[1], true);
	zinf_store_set_persistent(t.store, m[2], true);
	T_CHECK_RC(zinf_store_fetch(t.store, m[0]));
	T_CHECK(zinf_store_wait(t.store, m[0]) == ZINF_EBUDGET,
		"waited for room persistent modules hold");
	T_CHECK_RC(zinf_store_release(t.store, m[0]));
	{
		void *scratch = NULL;
		T_CHECK(zinf_store_alloc_scratch(t.store, 2u << 20, &scratch) == ZINF_EBUDGET &&
				!scratch,
			"scratch buffer out of room persistent modules hold");
	}
	zinf_store_set_persistent(t.store, m[1], false);
	{
		void *scratch = NULL;
		T_CHECK(zinf_store_alloc_scratch(t.store, 2u << 20, &scratch) == 0, "%s",
			zinf_store_last_error(t.store));
		T_CHECK_RC(zinf_store_free_scratch(t.store, scratch));
	}
	t_tiers_down(&t);
	free(buf);
	return T_EXIT_PASS;
}

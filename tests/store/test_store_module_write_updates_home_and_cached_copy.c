/* zinf_store_module_write stores every parameter of a module at once, for each home:
 * the contents read back exactly (parameters spanning chunks, unaligned sizes); a cached
 * device copy is refreshed with the new values (write-through: the next fetch is a hit
 * that moves nothing from the home; from a host home the refresh copies its chunks, as a
 * fetch does, from NVMe the parameters), and once evicted the module is fetched back from
 * the home with the new values; on NVMe each chunk is written once and nothing is read. */
#include "store_test_util.h"

int main(void)
{
	static const enum zinf_tier homes[] = {ZINF_TIER_DEVICE, ZINF_TIER_HOST, ZINF_TIER_NVME};
	uint64_t shapes[3][2] = {
		{300, 777}, {1, 1001}, {64, 4096}}; /* bf16: 466200, 2002, 524288 B */

	zinf_log_set_level(ZINF_LOG_ERROR);
	for (int h = 0; h < 3; h++) {
		struct t_tiers t;
		struct zinf_store_stats before, after;
		uint32_t m, p[3];
		uint64_t fetch_bytes;
		void *src[3], *got;
		t_tiers_up(&t, homes[h], 16ull << 20, homes[h] == ZINF_TIER_NVME ? 8ull << 20 : 0,
			   256ull << 10);
		T_CHECK_RC(zinf_store_module_add(t.store, "mod", &m));
		for (int i = 0; i < 3; i++)
			T_CHECK_RC(zinf_store_param_add(t.store, m,
							(const char *[]){"p0", "p1", "p2"}[i],
							ZINF_DTYPE_BF16, 2, shapes[i], &p[i]));
		T_CHECK_RC(zinf_store_finalize(t.store));
		for (int i = 0; i < 3; i++) {
			src[i] = malloc(zinf_store_param_bytes(t.store, p[i]));
			t_fill(src[i], zinf_store_param_bytes(t.store, p[i]),
			       (uint64_t)(h * 10 + i));
		}
		zinf_store_get_stats(t.store, &before);
		T_CHECK_RC(
			zinf_store_fetch(t.store, m)); /* cache a copy that the write must drop */
		T_CHECK_RC(zinf_store_wait(t.store, m));
		T_CHECK_RC(zinf_store_release(t.store, m));
		zinf_store_get_stats(t.store, &after);
		/* what a fetch from the home moves: the module's chunks */
		fetch_bytes = after.link[ZINF_LINK_PINNED_TO_DEVICE].bytes -
			      before.link[ZINF_LINK_PINNED_TO_DEVICE].bytes;
		zinf_store_get_stats(t.store, &before);
		T_CHECK(zinf_store_module_write(t.store, m, (const void *const *)src) == 0, "%s",
			zinf_store_last_error(t.store));
		zinf_store_get_stats(t.store, &after);
		/* from NVMe the parameters are copied, from a host home its chunks, just written */
		if (homes[h] != ZINF_TIER_DEVICE)
			T_CHECK(after.link[ZINF_LINK_PINNED_TO_DEVICE].bytes -
						before.link[ZINF_LINK_PINNED_TO_DEVICE].bytes ==
					(homes[h] == ZINF_TIER_HOST
						 ? fetch_bytes
						 : zinf_store_param_bytes(t.store, p[0]) +
							   zinf_store_param_bytes(t.store, p[1]) +
							   zinf_store_param_bytes(t.store, p[2])),
				"%s: the cached copy was not refreshed", zinf_tier_name(homes[h]));
		if (homes[h] == ZINF_TIER_NVME) {
			T_CHECK(after.link[ZINF_LINK_NVME_TO_PINNED].bytes ==
					before.link[ZINF_LINK_NVME_TO_PINNED].bytes,
				"the module write read from nvme");
			T_CHECK(after.link[ZINF_LINK_PINNED_TO_NVME].count -
						before.link[ZINF_LINK_PINNED_TO_NVME].count ==
					after.chunks,
				"%llu chunk writes for %u chunks",
				(unsigned long long)(after.link[ZINF_LINK_PINNED_TO_NVME].count -
						     before.link[ZINF_LINK_PINNED_TO_NVME].count),
				after.chunks);
		}
		T_CHECK_RC(zinf_store_fetch(t.store, m));
		T_CHECK_RC(zinf_store_wait(t.store, m));
		zinf_store_get_stats(t.store, &before);
		T_CHECK(homes[h] == ZINF_TIER_DEVICE || before.hits == after.hits + 1,
			"%s: the fetch after the write was not a hit", zinf_tier_name(homes[h]));
		for (int i = 0; i < 3; i++) {
			uint64_t n = zinf_store_param_bytes(t.store, p[i]);
			T_CHECK(memcmp(zinf_store_param_data(t.store, p[i]), src[i], n) == 0,
				"%s: fetched param %d", zinf_tier_name(homes[h]), i);
			got = malloc(n);
			T_CHECK_RC(zinf_store_release(t.store, m));
			T_CHECK_RC(zinf_store_param_read(t.store, p[i], got));
			T_CHECK(memcmp(got, src[i], n) == 0, "%s: read back param %d",
				zinf_tier_name(homes[h]), i);
			free(got);
			T_CHECK_RC(zinf_store_fetch(t.store, m));
			T_CHECK_RC(zinf_store_wait(t.store, m));
		}
		T_CHECK_RC(zinf_store_release(t.store, m));
		if (homes[h] != ZINF_TIER_DEVICE) { /* from the home again */
			T_CHECK_RC(zinf_store_evict(t.store, m));
			T_CHECK_RC(zinf_store_fetch(t.store, m));
			T_CHECK_RC(zinf_store_wait(t.store, m));
			for (int i = 0; i < 3; i++)
				T_CHECK(memcmp(zinf_store_param_data(t.store, p[i]), src[i],
					       zinf_store_param_bytes(t.store, p[i])) == 0,
					"%s: param %d fetched from the home after eviction",
					zinf_tier_name(homes[h]), i);
			T_CHECK_RC(zinf_store_release(t.store, m));
		}
		T_CHECK(zinf_store_module_write(t.store, 9, (const void *const *)src) == -EINVAL,
			"unknown module");
		for (int i = 0; i < 3; i++)
			free(src[i]);
		t_tiers_down(&t);
	}
	return T_EXIT_PASS;
}

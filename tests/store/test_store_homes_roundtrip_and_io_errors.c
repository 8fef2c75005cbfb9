/* For each home tier (device, host, nvme) parameters written come back identical through
 * fetch and through read; a rewrite is seen by the next fetch (no stale cache); an NVMe
 * read error reaches zinf_store_wait with the module named and the store stays usable. */
#include "io_internal.h"
#include "store_test_util.h"

int main(void)
{
	static const enum zinf_tier homes[] = {ZINF_TIER_DEVICE, ZINF_TIER_HOST, ZINF_TIER_NVME};
	uint64_t shape[2] = {300, 777}; /* bf16: 466200 bytes, not a multiple of 4096 */
	uint64_t n = 300 * 777 * 2;
	void *want = malloc(n), *got = malloc(n);

	zinf_log_set_level(ZINF_LOG_ERROR);
	for (int h = 0; h < 3; h++) {
		struct t_tiers t;
		uint32_t m[2], p[2];
		t_tiers_up(&t, homes[h], 16ull << 20, homes[h] == ZINF_TIER_NVME ? 8ull << 20 : 0,
			   64ull << 10);
		for (int i = 0; i < 2; i++) {
			char name[16];
			snprintf(name, sizeof(name), "mod%d", i);
			T_CHECK_RC(zinf_store_module_add(t.store, name, &m[i]));
			T_CHECK_RC(zinf_store_param_add(t.store, m[i], name, ZINF_DTYPE_BF16, 2,
							shape, &p[i]));
		}
		T_CHECK(zinf_store_finalize(t.store) == 0, "%s: %s", zinf_tier_name(homes[h]),
			zinf_store_last_error(t.store));
		for (int v = 0; v < 2; v++) {
			t_fill(want, n, (uint64_t)(h * 10 + v));
			T_CHECK_RC(zinf_store_param_write(t.store, p[1], want));
			T_CHECK_RC(zinf_store_fetch(t.store, m[1]));
			T_CHECK(zinf_store_wait(t.store, m[1]) == 0, "%s",
				zinf_store_last_error(t.store));
			T_CHECK(memcmp(zinf_store_param_data(t.store, p[1]), want, n) == 0,
				"%s: fetched contents v%d", zinf_tier_name(homes[h]), v);
			T_CHECK_RC(zinf_store_release(t.store, m[1]));
			T_CHECK_RC(zinf_store_param_read(t.store, p[1], got));
			T_CHECK(memcmp(got, want, n) == 0, "%s: read back v%d",
				zinf_tier_name(homes[h]), v);
		}
		/* A parameter never written reads as zeros. */
		T_CHECK_RC(zinf_store_param_read(t.store, p[0], got));
		for (uint64_t i = 0; i < n; i++)
			T_CHECK(((unsigned char *)got)[i] == 0, "%s: unwritten byte %llu",
				zinf_tier_name(homes[h]), (unsigned long long)i);
		if (homes[h] == ZINF_TIER_NVME) {
			T_CHECK_RC(zinf_store_param_write(t.store, p[1],
							  want)); /* drops the cached copy */
			zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_READ);
			T_CHECK_RC(zinf_store_fetch(t.store, m[1]));
			T_CHECK(zinf_store_wait(t.store, m[1]) == -EIO,
				"injected EIO not reported");
			T_CHECK(strstr(zinf_store_last_error(t.store), "module mod1"), "%s",
				zinf_store_last_error(t.store));
			T_CHECK(zinf_store_param_data(t.store, p[1]) == NULL,
				"failed module addressable");
			T_CHECK_RC(zinf_store_release(t.store, m[1]));
			zinf_io_fault_clear();
			T_CHECK_RC(zinf_store_fetch(t.store, m[1]));
			T_CHECK(zinf_store_wait(t.store, m[1]) == 0, "after the fault: %s",
				zinf_store_last_error(t.store));
			T_CHECK(memcmp(zinf_store_param_data(t.store, p[1]), want, n) == 0,
				"contents after the fault");
			T_CHECK_RC(zinf_store_release(t.store, m[1]));
		}
		t_tiers_down(&t);
	}
	free(want);
	free(got);
	return T_EXIT_PASS;
}

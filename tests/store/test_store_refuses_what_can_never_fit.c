/* finalize refuses, with the numbers, a module larger than the whole device budget, a
 * chunk larger than the whole pinned pool, and device-homed parameters over budget;
 * registration refuses bad shapes and dtypes with a message naming the parameter. */
#include "store_test_util.h"

/* modules big, big1, big2, ... (a store refuses a name twice) */
static void add(struct t_tiers *t, uint64_t rows, uint64_t cols)
{
	static uint32_t k;
	uint32_t m, p;
	uint64_t shape[2] = {rows, cols};
	char name[32], weight[48];

	snprintf(name, sizeof(name), k ? "big%u" : "big", k);
	snprintf(weight, sizeof(weight), "%s.weight", name);
	T_CHECK_RC(zinf_store_module_add(t->store, name, &m));
	T_CHECK_RC(zinf_store_param_add(t->store, m, weight, ZINF_DTYPE_F32, 2, shape, &p));
	k++;
}

int main(void)
{
	struct t_tiers t;
	uint32_t m, p;
	uint64_t shape[2] = {4, 0};

	zinf_log_set_level(ZINF_LOG_ERROR);
	t_tiers_up(&t, ZINF_TIER_HOST, 4ull << 20, 0, 1ull << 20);
	add(&t, 2048, 1024); /* 8 MiB > 4 MiB */
	T_CHECK(zinf_store_finalize(t.store) == ZINF_EBUDGET, "oversized module accepted");
	T_CHECK_STR(
		zinf_store_last_error(t.store),
		"device budget: module big needs 8 MiB, more than the whole budget of 4 MiB (raise zinf.device_memory_limit or split the module)");
	t_tiers_down(&t);

	t_tiers_up(&t, ZINF_TIER_NVME, 64ull << 20, 2ull << 20, 4ull << 20);
	add(&t, 1024, 1024); /* one 4 MiB chunk > 2 MiB pool */
	T_CHECK(zinf_store_finalize(t.store) == ZINF_EBUDGET, "oversized chunk accepted");
	T_CHECK(strstr(zinf_store_last_error(t.store),
		       "pinned budget: one chunk needs 4 MiB, more than the whole pool of 2 MiB"),
		"%s", zinf_store_last_error(t.store));
	t_tiers_down(&t);

	t_tiers_up(&t, ZINF_TIER_DEVICE, 4ull << 20, 0, 1ull << 20);
	for (int i = 0; i < 3; i++)
		add(&t, 512, 1024); /* 3 x 2 MiB homed on a 4 MiB device */
	T_CHECK(zinf_store_finalize(t.store) == ZINF_EBUDGET, "device-homed overflow accepted");
	T_CHECK(strstr(zinf_store_last_error(t.store), "parameters homed on the device need 6 MiB"),
		"%s", zinf_store_last_error(t.store));
	t_tiers_down(&t);

	t_tiers_up(&t, ZINF_TIER_HOST, 4ull << 20, 0, 1ull << 20);
	T_CHECK_RC(zinf_store_module_add(t.store, "m", &m));
	T_CHECK(zinf_store_param_add(t.store, m, "m.zero", ZINF_DTYPE_F32, 2, shape, &p) == -EINVAL,
		"zero dim");
	T_CHECK_STR(
		zinf_store_last_error(t.store),
		"param m.zero: dimension 1 is 0 (expected 1 or more, the product at most 2^48)");
	T_CHECK(zinf_store_param_add(t.store, m, "m.int", ZINF_DTYPE_NONE, 1, shape, &p) == -EINVAL,
		"dtype");
	T_CHECK(zinf_store_param_add(t.store, 7, "x", ZINF_DTYPE_F32, 1, shape, &p) == -EINVAL,
		"bad module");
	T_CHECK(zinf_store_fetch(t.store, m) == ZINF_ESTATE, "fetch before finalize");
	T_CHECK_RC(zinf_store_finalize(t.store));
	T_CHECK(zinf_store_module_add(t.store, "late", &m) == ZINF_ESTATE, "module after finalize");
	T_CHECK(zinf_store_fetch(t.store, 99) == -EINVAL, "unknown module");
	T_CHECK(zinf_store_release(t.store, 0) == ZINF_ESTATE, "release without fetch");
	T_CHECK(zinf_store_wait(t.store, 0) == ZINF_ESTATE, "wait without fetch");
	t_tiers_down(&t);

	/* sizes whose state (16 bytes an element) would not fit 64 bits: refused as they
	 * are registered, at most 2^48 elements a parameter and 2^50 in all */
	t_tiers_up(&t, ZINF_TIER_HOST, 4ull << 20, 0, 1ull << 20);
	T_CHECK_RC(zinf_store_module_add(t.store, "m", &m));
	T_CHECK(zinf_store_param_add(t.store, m, "m.huge", ZINF_DTYPE_F32, 1,
				     (uint64_t[]){(1ull << 60) + 1}, &p) == -EINVAL,
		"2^60 + 1 elements");
	T_CHECK_STR(zinf_store_last_error(t.store),
		    "param m.huge: dimension 0 is 1152921504606846977 (expected 1 or more, the "
		    "product at most 2^48)");
	for (int k = 0; k < 4; k++) {
		char name[16];

		snprintf(name, sizeof(name), "m.quarter%d", k);
		T_CHECK_RC(zinf_store_param_add(t.store, m, name, ZINF_DTYPE_BF16, 2,
						(uint64_t[]){1ull << 24, 1ull << 24}, &p));
	}
	T_CHECK(zinf_store_param_add(t.store, m, "m.one", ZINF_DTYPE_F32, 1, (uint64_t[]){1}, &p) ==
			-EINVAL,
		"an element past 2^50 in all");
	T_CHECK_STR(zinf_store_last_error(t.store),
		    "param m.one: 1 elements after 1125899906842624 registered: more than 2^50 in "
		    "all");
	t_tiers_down(&t);
	return T_EXIT_PASS;
}

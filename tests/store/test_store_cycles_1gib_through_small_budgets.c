/* More than 1 GiB of parameters in 40 modules, homed on NVMe, cycle through a 64 MiB
 * device budget and a 128 MiB pinned pool, forward and reverse, with the next module
 * prefetched while the current one is in use: every byte read back equals what was
 * written (CRC32C of each parameter, also after some are rewritten), and the peak
 * device and pinned bytes never exceed their budgets. */
#include "store_test_util.h"

#define N_MODULES 40
#define PASSES 4

struct spec {
	enum zinf_dtype dtype;
	int ndim;
	uint64_t shape[2];
};

static const struct spec specs[] = {
	{ZINF_DTYPE_BF16, 2, {2560, 4096}}, /* 20 MiB: spans several 8 MiB chunks */
	{ZINF_DTYPE_F32, 2, {1792, 1024}},  /* 7 MiB */
	{ZINF_DTYPE_F32, 1, {1000}},	    /* 4000 bytes: not a multiple of anything */
};
#define N_SPECS 3

static uint32_t crc_of(const void *p, uint64_t len)
{
	return zinf_crc32c(0, p, len);
}

int main(void)
{
	struct t_tiers t;
	static uint32_t param[N_MODULES][N_SPECS], module[N_MODULES], want[N_MODULES][N_SPECS];
	struct zinf_store_stats st;
	uint64_t total = 0, max_bytes = 20ull << 20;
	void *buf = malloc(max_bytes);

	T_CHECK(buf, "buffer");
	zinf_log_set_level(ZINF_LOG_ERROR);
	t_tiers_up(&t, ZINF_TIER_NVME, 64ull << 20, 128ull << 20, 8ull << 20);
	for (int m = 0; m < N_MODULES; m++) {
		char name[64];
		snprintf(name, sizeof(name), "layers.%d", m);
		T_CHECK_RC(zinf_store_module_add(t.store, name, &module[m]));
		for (int k = 0; k < N_SPECS; k++) {
			snprintf(name, sizeof(name), "layers.%d.p%d", m, k);
			T_CHECK_RC(zinf_store_param_add(t.store, module[m], name, specs[k].dtype,
							specs[k].ndim, specs[k].shape,
							&param[m][k]));
		}
	}
	T_CHECK(zinf_store_finalize(t.store) == 0, "%s", zinf_store_last_error(t.store));
	for (int m = 0; m < N_MODULES; m++) {
		for (int k = 0; k < N_SPECS; k++) {
			uint64_t n = zinf_store_param_bytes(t.store, param[m][k]);
			t_fill(buf, n, (uint64_t)m * 16 + (uint64_t)k);
			want[m][k] = crc_of(buf, n);
			total += n;
			T_CHECK(zinf_store_param_write(t.store, param[m][k], buf) == 0, "%s",
				zinf_store_last_error(t.store));
		}
	}
	T_CHECK(total >= (1ull << 30), "only %llu bytes of parameters", (unsigned long long)total);

	for (int pass = 0; pass < PASSES; pass++) {
		bool reverse = pass % 2;
		int first = reverse ? N_MODULES - 1 : 0, step = reverse ? -1 : 1;
		T_CHECK_RC(zinf_store_fetch(t.store, module[first]));
		for (int i = 0, m = first; i < N_MODULES; i++, m += step) {
			if (i + 1 < N_MODULES) /* prefetch the next module while this one is used */
				T_CHECK_RC(zinf_store_fetch(t.store, module[m + step]));
			T_CHECK(zinf_store_wait(t.store, module[m]) == 0, "pass %d module %d: %s",
				pass, m, zinf_store_last_error(t.store));
			for (int k = 0; k < N_SPECS; k++) {
				const void *d = zinf_store_param_data(t.store, param[m][k]);
				uint64_t n = zinf_store_param_bytes(t.store, param[m][k]);
				/* host backend: device memory is addressable from the CPU */
				T_CHECK(d && crc_of(d, n) == want[m][k],
					"pass %d module %d param %d: contents differ", pass, m, k);
			}
			T_CHECK_RC(zinf_store_release(t.store, module[m]));
		}
		/* As an optimizer step would: new contents for every third module. */
		for (int m = pass % 3; m < N_MODULES; m += 3) {
			uint64_t n = zinf_store_param_bytes(t.store, param[m][0]);
			t_fill(buf, n, 1000 + (uint64_t)pass * 100 + (uint64_t)m);
			want[m][0] = crc_of(buf, n);
			T_CHECK(zinf_store_param_write(t.store, param[m][0], buf) == 0, "%s",
				zinf_store_last_error(t.store));
		}
	}
	/* Read back through the synchronous path too. */
	for (int m = 0; m < N_MODULES; m++) {
		for (int k = 0; k < N_SPECS; k++) {
			T_CHECK_RC(zinf_store_param_read(t.store, param[m][k], buf));
			T_CHECK(crc_of(buf, zinf_store_param_bytes(t.store, param[m][k])) ==
					want[m][k],
				"read back module %d param %d", m, k);
		}
	}
	zinf_store_get_stats(t.store, &st);
	zinf_store_stats_json(&st, stderr);
	fputc('\n', stderr);
	T_CHECK(st.device_peak <= 64ull << 20 && st.device_limit == 64ull << 20,
		"device peak %llu over budget", (unsigned long long)st.device_peak);
	T_CHECK(st.pinned_peak <= 128ull << 20, "pinned peak %llu over budget",
		(unsigned long long)st.pinned_peak);
	T_CHECK(st.link[ZINF_LINK_NVME_TO_PINNED].bytes >=
			PASSES * (total - (1ull << 20) * N_MODULES),
		"nvme reads %llu for %d passes over %llu bytes",
		(unsigned long long)st.link[ZINF_LINK_NVME_TO_PINNED].bytes, PASSES,
		(unsigned long long)total);
	/* Every fetch that was not a cache hit copied its whole module (27 MiB) to the device. */
	T_CHECK(st.link[ZINF_LINK_PINNED_TO_DEVICE].bytes >= (st.fetches - st.hits) * (27ull << 20),
		"h2d bytes %llu", (unsigned long long)st.link[ZINF_LINK_PINNED_TO_DEVICE].bytes);
	T_CHECK(st.evictions > 0 && st.fetches == PASSES * N_MODULES, "evictions %llu fetches %llu",
		(unsigned long long)st.evictions, (unsigned long long)st.fetches);
	T_CHECK(st.modules == N_MODULES && st.param_bytes == total, "counts");
	t_tiers_down(&t);
	free(buf);
	return T_EXIT_PASS;
}

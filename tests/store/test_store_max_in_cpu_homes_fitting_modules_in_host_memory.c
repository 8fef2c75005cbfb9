/* offload_param.max_in_cpu (the store's host_elems) with an NVMe home: the modules whose
 * elements fit in what is left of it, first fit in registration order, are homed in host
 * memory. Their fetches, writes and reads touch no drive; the rest are read from NVMe;
 * every module's contents come back identical through fetch and read after parameter,
 * range and module writes. The sizes queried before finalize are the ones finalize
 * allocates, and a store whose every module fits in host memory needs no pinned pool,
 * while one module left on NVMe does. */
#include "store_test_util.h"

#define N_MOD 4

/* bf16 elements of each module's parameters: 100k (two parameters), 300k, 50k, 60k.
 * host_elems 170k keeps modules 0 (70k left) and 2 (20k left) in host memory; 1 and 3
 * do not fit in what is left. */
static const uint64_t elems[N_MOD][2] = {{60000, 40000}, {300000, 0}, {50000, 0}, {60000, 0}};
static const bool on_host[N_MOD] = {true, false, true, false};

struct split_store {
	struct t_tiers t;
	uint32_t m[N_MOD], p[N_MOD][2];
};

static void add_modules(struct split_store *s)
{
	for (int i = 0; i < N_MOD; i++) {
		char name[16];
		snprintf(name, sizeof(name), "mod%d", i);
		T_CHECK_RC(zinf_store_module_add(s->t.store, name, &s->m[i]));
		for (int k = 0; k < 2 && elems[i][k]; k++) {
			uint64_t shape[1] = {elems[i][k]};
			snprintf(name, sizeof(name), "mod%d.p%d", i, k);
			T_CHECK_RC(zinf_store_param_add(s->t.store, s->m[i], name, ZINF_DTYPE_BF16,
							1, shape, &s->p[i][k]));
		}
	}
}

static uint64_t nvme_read_bytes(struct zinf_store *store)
{
	struct zinf_store_stats st;

	zinf_store_get_stats(store, &st);
	return st.link[ZINF_LINK_NVME_TO_PINNED].bytes;
}

static uint64_t nvme_write_bytes(struct zinf_store *store)
{
	struct zinf_store_stats st;

	zinf_store_get_stats(store, &st);
	return st.link[ZINF_LINK_PINNED_TO_NVME].bytes;
}

/* Fetch module i and compare each parameter with want[k]; return the NVMe bytes read. */
static uint64_t fetch_and_check(struct split_store *s, int i, void *const want[2], const char *what)
{
	uint64_t before = nvme_read_bytes(s->t.store);

	T_CHECK_RC(zinf_store_fetch(s->t.store, s->m[i]));
	T_CHECK(zinf_store_wait(s->t.store, s->m[i]) == 0, "%s: mod%d: %s", what, i,
		zinf_store_last_error(s->t.store));
	for (int k = 0; k < 2 && elems[i][k]; k++)
		T_CHECK(memcmp(zinf_store_param_data(s->t.store, s->p[i][k]), want[k],
			       elems[i][k] * 2) == 0,
			"%s: mod%d.p%d fetched contents", what, i, k);
	T_CHECK_RC(zinf_store_release(s->t.store, s->m[i]));
	T_CHECK_RC(zinf_store_evict(s->t.store, s->m[i])); /* the next fetch loads again */
	return nvme_read_bytes(s->t.store) - before;
}

static void read_and_check(struct split_store *s, int i, void *const want[2], void *got,
			   const char *what)
{
	for (int k = 0; k < 2 && elems[i][k]; k++) {
		T_CHECK_RC(zinf_store_param_read(s->t.store, s->p[i][k], got));
		T_CHECK(memcmp(got, want[k], elems[i][k] * 2) == 0, "%s: mod%d.p%d read back", what,
			i, k);
	}
}

static void roundtrips(void)
{
	struct split_store s;
	uint64_t host_before, nvme_before, staged_before, host_bytes = 0, nvme_bytes = 0;
	void *want[N_MOD][2] = {{0}}, *got = malloc(300000 * 2);
	struct zinf_store_stats st;

	t_tiers_up_split(&s.t, ZINF_TIER_NVME, 16ull << 20, 8ull << 20, 64ull << 10, 170000);
	add_modules(&s);
	host_before = zinf_store_host_split_bytes(s.t.store);
	nvme_before = zinf_store_nvme_home_bytes(s.t.store);
	staged_before = zinf_store_chunk_bytes(s.t.store);
	T_CHECK(zinf_store_finalize(s.t.store) == 0, "%s", zinf_store_last_error(s.t.store));
	for (int i = 0; i < N_MOD; i++)
		*(on_host[i] ? &host_bytes : &nvme_bytes) +=
			zinf_store_module_bytes(s.t.store, s.m[i]);
	zinf_store_get_stats(s.t.store, &st);
	T_CHECK(host_bytes > 0 && host_before == host_bytes &&
			zinf_store_host_split_bytes(s.t.store) == host_bytes &&
			st.host_now == host_bytes,
		"host homes: %llu before finalize, %llu allocated, %llu of modules 0 and 2",
		(unsigned long long)host_before, (unsigned long long)st.host_now,
		(unsigned long long)host_bytes);
	T_CHECK(staged_before == nvme_bytes && zinf_store_chunk_bytes(s.t.store) == nvme_bytes &&
			st.nvme_now == nvme_bytes && nvme_before >= nvme_bytes &&
			zinf_store_nvme_home_bytes(s.t.store) == nvme_before,
		"nvme homes: %llu staged before finalize, %llu allocated, %llu of modules 1 and 3",
		(unsigned long long)staged_before, (unsigned long long)st.nvme_now,
		(unsigned long long)nvme_bytes);

	for (int i = 0; i < N_MOD; i++)
		for (int k = 0; k < 2 && elems[i][k]; k++) {
			want[i][k] = malloc(elems[i][k] * 2);
			t_fill(want[i][k], elems[i][k] * 2, (uint64_t)(10 * i + k + 1));
		}
	/* parameter writes: no drive write for a host-homed module */
	for (int i = 0; i < N_MOD; i++) {
		uint64_t w = nvme_write_bytes(s.t.store);
		for (int k = 0; k < 2 && elems[i][k]; k++)
			T_CHECK_RC(zinf_store_param_write(s.t.store, s.p[i][k], want[i][k]));
		T_CHECK((nvme_write_bytes(s.t.store) == w) == on_host[i],
			"mod%d: parameter write %s the drive", i,
			on_host[i] ? "touched" : "skipped");
	}
	for (int i = 0; i < N_MOD; i++) {
		uint64_t r = fetch_and_check(&s, i, want[i], "written");
		T_CHECK(on_host[i] ? r == 0 : r >= zinf_store_module_bytes(s.t.store, s.m[i]),
			"mod%d: fetch read %llu bytes from the drive", i, (unsigned long long)r);
		read_and_check(&s, i, want[i], got, "written");
	}

	/* a range inside the second parameter of host-homed mod0, and one of nvme mod1 */
	for (int i = 0; i < 2; i++) {
		int k = i == 0 ? 1 : 0;
		unsigned char *w = want[i][k];
		unsigned char patch[3000];
		t_fill(patch, sizeof(patch), 77 + (uint64_t)i);
		memcpy(w + 5000, patch, sizeof(patch));
		T_CHECK_RC(zinf_store_param_write_range(s.t.store, s.p[i][k], 5000, sizeof(patch),
							patch));
		fetch_and_check(&s, i, want[i], "range written");
		read_and_check(&s, i, want[i], got, "range written");
	}

	/* module writes (the optimizer's path), with a cached copy refreshed in place */
	for (int i = 0; i < N_MOD; i++) {
		const void *src[2];
		uint64_t w;
		for (int k = 0; k < 2 && elems[i][k]; k++) {
			t_fill(want[i][k], elems[i][k] * 2, (uint64_t)(100 + 10 * i + k));
			src[k] = want[i][k];
		}
		T_CHECK_RC(zinf_store_fetch(s.t.store, s.m[i]));
		T_CHECK_RC(zinf_store_wait(s.t.store, s.m[i]));
		T_CHECK_RC(zinf_store_release(s.t.store, s.m[i]));
		w = nvme_write_bytes(s.t.store);
		T_CHECK_RC(zinf_store_module_write(s.t.store, s.m[i], src));
		T_CHECK((nvme_write_bytes(s.t.store) == w) == on_host[i],
			"mod%d: module write %s the drive", i, on_host[i] ? "touched" : "skipped");
		T_CHECK_RC(zinf_store_fetch(s.t.store, s.m[i]));
		T_CHECK_RC(zinf_store_wait(s.t.store, s.m[i]));
		for (int k = 0; k < 2 && elems[i][k]; k++)
			T_CHECK(memcmp(zinf_store_param_data(s.t.store, s.p[i][k]), want[i][k],
				       elems[i][k] * 2) == 0,
				"mod%d.p%d: cached copy after the module write", i, k);
		T_CHECK_RC(zinf_store_release(s.t.store, s.m[i]));
		T_CHECK_RC(zinf_store_evict(s.t.store, s.m[i]));
		fetch_and_check(&s, i, want[i], "module written");
		read_and_check(&s, i, want[i], got, "module written");
	}
	t_tiers_down(&s.t);
	for (int i = 0; i < N_MOD; i++)
		for (int k = 0; k < 2; k++)
			free(want[i][k]);
	free(got);
}

/* No pinned pool: enough when every module fits in host memory, refused with one left
 * on NVMe. */
static void pool_only_for_nvme(void)
{
	for (int all = 0; all < 2; all++) {
		struct split_store s;
		int rc;
		t_tiers_up_split(&s.t, ZINF_TIER_NVME, 16ull << 20, 0, 64ull << 10,
				 all ? 510000 : 170000);
		add_modules(&s);
		rc = zinf_store_finalize(s.t.store);
		if (all) {
			T_CHECK(rc == 0, "every module in host memory, no pool: %s",
				zinf_store_last_error(s.t.store));
			T_CHECK(zinf_store_chunk_bytes(s.t.store) == 0 &&
					zinf_store_nvme_home_bytes(s.t.store) == 0,
				"nothing on the drive");
			/* and used without one: nothing is staged */
			for (int i = 0; i < N_MOD; i++) {
				void *want[2] = {0};
				for (int k = 0; k < 2 && elems[i][k]; k++) {
					want[k] = malloc(elems[i][k] * 2);
					t_fill(want[k], elems[i][k] * 2, (uint64_t)(i + 5 * k));
					T_CHECK_RC(zinf_store_param_write(s.t.store, s.p[i][k],
									  want[k]));
				}
				fetch_and_check(&s, i, want, "no pool");
				free(want[0]);
				free(want[1]);
			}
		} else {
			T_CHECK(rc == -EINVAL && strstr(zinf_store_last_error(s.t.store),
							"need a pinned pool"),
				"modules on nvme without a pool: %d %s", rc,
				zinf_store_last_error(s.t.store));
		}
		t_tiers_down(&s.t);
	}
}

int main(void)
{
	zinf_log_set_level(ZINF_LOG_ERROR);
	roundtrips();
	pool_only_for_nvme();
	return T_EXIT_PASS;
}

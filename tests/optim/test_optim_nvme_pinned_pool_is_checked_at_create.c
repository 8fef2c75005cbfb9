/*
 * The pinned buffers of the NVMe optimizer pipeline are computed and checked against the
 * pinned pool at create, before any step:
 *  - zinf_adam_nvme_pinned_bytes is buffers x (master, m, v of a full sub-group, each
 *    4096-aligned), with 3 / 2 / 2 / 1 buffers for both / read / write / no pipelines;
 *  - a pool one page too small, a sub-group larger than the pool, and a pool whose free
 *    space is taken by someone else are refused with ZINF_EBUDGET and one line holding
 *    the numbers (pool, free, buffers, bytes needed) and a sub_group_size that fits,
 *    which does fit;
 *  - a pool of exactly the size works and holds exactly the bytes computed, given back
 *    at destroy.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_test_util.h"
#include "optim_nvme.h"
#include "pinned.h"
#include "test.h"
#include "zinf/error.h"

#define N 1000000ull

static struct zinf_adam_nvme_opts base;

static void expect_refused(struct zinf_pinned *pool, const struct zinf_adam_nvme_opts *o,
			   const char *const *needles, const char *what)
{
	struct zinf_adam_nvme *h = (void *)1;
	char err[512];
	int rc = zinf_adam_nvme_create_in_pool(o, pool, &h, err, sizeof(err));

	T_CHECK(rc == ZINF_EBUDGET && h == NULL, "%s: create returned %d (%s)", what, rc, err);
	T_CHECK(!strchr(err, '\n') && strstr(err, "pinned pool"), "%s: not one line: %s", what,
		err);
	for (int i = 0; needles[i]; i++)
		T_CHECK(strstr(err, needles[i]), "%s: message lacks '%s': %s", what, needles[i],
			err);
	fprintf(stderr, "%s: %s\n", what, err);
}

/* The sub_group_size the message proposes. */
static uint64_t proposed_sub_group(const char *err)
{
	const char *p = strstr(err, "sub_group_size to at most ");

	T_CHECK(p, "no proposal in %s", err);
	return strtoull(p + strlen("sub_group_size to at most "), NULL, 10);
}

int main(void)
{
	struct zinf_adam_opts ao;
	struct zinf_adam *adam;
	struct zinf_io_opts io_o;
	struct zinf_io *io = NULL;
	struct zinf_adam_nvme_opts o;
	struct zinf_adam_nvme *h;
	struct zinf_pinned_opts po;
	struct zinf_pinned *pool;
	struct zinf_pinned_stats st;
	char *dir = t_mkdtemp("/var/tmp"), err[512], num[64], num2[64];
	uint64_t part = 401408; /* 100000 floats rounded up to 4096 */
	uint64_t need, fit;
	void *blocker;
	int e;

	T_CHECK(dir, "cannot make a scratch directory under /var/tmp");
	zinf_io_opts_init(&io_o);
	io_o.nvme_paths[0] = dir;
	io_o.n_paths = 1;
	io_o.file_size = 16 << 20;
	for (e = 0; e < T_N_ENGINES && t_create(&io_o, &io, e) == 77; e++)
		;
	if (!io)
		T_SKIP("no I/O backend available");
	zinf_adam_opts_init(&ao);
	T_CHECK_RC(zinf_adam_create(&adam, &ao));
	zinf_adam_nvme_opts_init(&base);
	base.adam = adam;
	base.io = io;
	base.n_elems = N;
	base.sub_group_size = 100000;

	/* what the pipeline needs */
	o = base;
	T_CHECK(zinf_adam_nvme_pinned_bytes(&o, 4096) == 3 * 3 * part, "both pipelines: %" PRIu64,
		zinf_adam_nvme_pinned_bytes(&o, 4096));
	o.pipeline_write = false;
	T_CHECK(zinf_adam_nvme_pinned_bytes(&o, 0) == 2 * 3 * part, "read pipeline only");
	o.pipeline_write = true;
	o.pipeline_read = false;
	T_CHECK(zinf_adam_nvme_pinned_bytes(&o, 4096) == 2 * 3 * part, "write pipeline only");
	o.pipeline_write = false;
	T_CHECK(zinf_adam_nvme_pinned_bytes(&o, 4096) == 3 * part, "no pipeline");
	o = base;
	o.sub_group_size = 3 * N; /* one sub-group: one buffer of the shard */
	T_CHECK(zinf_adam_nvme_pinned_bytes(&o, 4096) == 3 * 4001792, "one sub-group");
	o.sub_group_size = 0;
	T_CHECK(zinf_adam_nvme_pinned_bytes(&o, 4096) == 0, "invalid opts");
	need = 9 * part;

	/* a pool one page too small: the numbers, and a sub-group size that fits */
	zinf_pinned_opts_init(&po);
	po.size = need - 4096;
	po.lock = ZINF_PINNED_LOCK_NONE;
	T_CHECK(zinf_pinned_create(&po, &pool, err, sizeof(err)) == 0, "pool: %s", err);
	snprintf(num, sizeof(num), "= %" PRIu64 " B", need);
	snprintf(num2, sizeof(num2), "pinned pool of %" PRIu64 " B", need - 4096);
	expect_refused(pool, &base,
		       (const char *const[]){num, num2, "3 staging buffers of 1204224 B",
					     "sub-group of 100000 elements", "by 4096 B", NULL},
		       "pool one page short");
	zinf_adam_nvme_create_in_pool(&base, pool, &h, err, sizeof(err));
	fit = proposed_sub_group(err);
	T_CHECK(fit > 0 && fit < 100000, "proposed sub_group_size %" PRIu64, fit);
	o = base;
	o.sub_group_size = fit;
	T_CHECK(zinf_adam_nvme_create_in_pool(&o, pool, &h, err, sizeof(err)) == 0,
		"the proposed sub_group_size %" PRIu64 " does not fit: %s", fit, err);
	zinf_adam_nvme_destroy(h);

	/* a sub-group larger than the whole pool */
	o = base;
	o.sub_group_size = N;
	expect_refused(pool, &o,
		       (const char *const[]){"1 staging buffer of 12005376 B",
					     "at most 99328 elements",
					     "sub-group of 1000000 elements", NULL},
		       "sub-group larger than the pool");
	zinf_pinned_destroy(pool);

	/* a pool of the right size, most of it taken by someone else, then given back */
	po.size = need;
	T_CHECK(zinf_pinned_create(&po, &pool, err, sizeof(err)) == 0, "pool: %s", err);
	T_CHECK_RC(zinf_pinned_alloc(pool, need / 2, 0, &blocker));
	snprintf(num, sizeof(num), "with %" PRIu64 " B", need - need / 2 / 4096 * 4096);
	expect_refused(pool, &base, (const char *const[]){num, NULL}, "pool half taken");
	T_CHECK_RC(zinf_pinned_free(pool, blocker));
	T_CHECK(zinf_adam_nvme_create_in_pool(&base, pool, &h, err, sizeof(err)) == 0,
		"exact pool: %s", err);
	zinf_pinned_get_stats(pool, &st);
	T_CHECK(st.used == need && st.live_buffers == 3,
		"pool holds %" PRIu64 " B in %" PRIu64 " buffers, want %" PRIu64 " in 3", st.used,
		st.live_buffers, need);
	zinf_adam_nvme_destroy(h);
	zinf_pinned_get_stats(pool, &st);
	T_CHECK(st.used == 0, "%" PRIu64 " B still held after destroy", st.used);
	zinf_pinned_destroy(pool);

	/* the public create makes its own pool: too small is refused the same way */
	o = base;
	o.pinned_bytes = need - 1;
	T_CHECK(zinf_adam_nvme_create(&o, &h, err, sizeof(err)) == ZINF_EBUDGET && !h,
		"own pool too small: %s", err);
	T_CHECK(strstr(err, num2) == NULL && strstr(err, "cannot hold 3 staging buffers"),
		"own pool message: %s", err);
	o.pinned_bytes = 4096; /* less than the smallest sub-group: no "at most 0 elements" */
	T_CHECK(zinf_adam_nvme_create(&o, &h, err, sizeof(err)) == ZINF_EBUDGET && !h &&
			strstr(err, "raise pinned_memory_limit by") &&
			!strstr(err, "sub_group_size to at most"),
		"a one-page pool: %s", err);
	o.pinned_bytes = 0;
	T_CHECK(zinf_adam_nvme_create(&o, &h, err, sizeof(err)) == 0, "own pool: %s", err);
	zinf_adam_nvme_destroy(h);

	zinf_adam_destroy(adam);
	zinf_io_destroy(io);
	t_rmrf(dir);
	return T_EXIT_PASS;
}

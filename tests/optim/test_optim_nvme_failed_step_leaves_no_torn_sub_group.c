/*
 * A step that fails (an I/O error, or the caller's on_updated callback stopping it) is
 * reported with the sub-group (and the extent) named, and leaves every sub-group's state
 * on NVMe either fully old or fully new (as the result's updated[] says), never torn:
 *  - a write whose first piece reaches the disk but is reported failed (the short-I/O
 *    fault fires after the kernel wrote it): a write in place would leave that sub-group
 *    half new; here it must read back bit-identical to its old state;
 *  - a failed read: nothing is updated and the state is unchanged;
 *  - the callback, which a good step calls once per sub-group in order as soon as it is
 *    updated, stops the step at sub-group 2.
 * After each failure the handle stays consistent: redoing the step for the sub-groups it
 * did not update gives the state (and param copy) of a step that never failed, and later
 * steps succeed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_test_util.h"
#include "optim.h"
#include "test.h"

#define N 300000ull
#define SUB_GROUP 65536ull /* 5 sub-groups, the last of 37856 elements */

static float ref_p[N], ref_m[N], ref_v[N], got_p[N], got_m[N], got_v[N];
static float old_p[N], old_m[N], old_v[N];
static uint16_t grad[N], out[N], ref_out[N];

static uint8_t redo[8];
static struct zinf_adam *adam;

/* Apply the in-memory step to the sub-groups selected by mask (NULL: all). */
static void ref_step(const struct zinf_adam_step_info *si, const uint8_t *mask)
{
	for (uint64_t g = 0, first = 0; first < N; g++, first += SUB_GROUP) {
		uint64_t n = N - first < SUB_GROUP ? N - first : SUB_GROUP;
		struct zinf_adam_shard sh = {
			ref_p + first,	 ref_m + first,	  ref_v + first,   grad + first,
			ref_out + first, ZINF_DTYPE_BF16, ZINF_DTYPE_BF16, n};

		if (!mask || mask[g])
			T_CHECK_RC(zinf_adam_step(adam, &sh, si));
	}
}

static void check_state(struct zinf_adam_nvme *h, const char *when)
{
	T_CHECK(zinf_adam_nvme_read_state(h, got_p, got_m, got_v) == 0, "%s: read state: %s", when,
		zinf_adam_nvme_last_error(h));
	for (uint64_t i = 0; i < N; i++) {
		T_CHECK(memcmp(&got_p[i], &ref_p[i], 4) == 0 &&
				memcmp(&got_m[i], &ref_m[i], 4) == 0 &&
				memcmp(&got_v[i], &ref_v[i], 4) == 0,
			"%s: element %llu (sub-group %llu) is neither as expected: master %a vs %a, "
			"m %a vs %a",
			when, (unsigned long long)i, (unsigned long long)(i / SUB_GROUP),
			(double)got_p[i], (double)ref_p[i], (double)got_m[i], (double)ref_m[i]);
	}
}

static void new_grads(uint32_t seed)
{
	for (uint64_t i = 0; i < N; i++) {
		seed = seed * 1664525u + 1013904223u;
		grad[i] = (uint16_t)(0x3a00u + (seed >> 21)); /* bf16 around 5e-4 .. 1e-2 */
	}
}

static void good_step(struct zinf_adam_nvme *h, uint64_t t, const char *when)
{
	struct zinf_adam_nvme_bufs b = {.grad = grad,
					.param_out = out,
					.grad_dtype = ZINF_DTYPE_BF16,
					.param_dtype = ZINF_DTYPE_BF16};
	struct zinf_adam_step_info si = {t, 1e-3, 1.0f};
	struct zinf_adam_nvme_result r;

	new_grads((uint32_t)t);
	ref_step(&si, NULL);
	T_CHECK(zinf_adam_nvme_step(h, &b, &si, &r) == 0, "%s: %s", when,
		zinf_adam_nvme_last_error(h));
	T_CHECK(r.n_updated == r.n_sub_groups, "%s: %llu updated", when,
		(unsigned long long)r.n_updated);
	T_CHECK(memcmp(out, ref_out, sizeof(out)) == 0, "%s: param copy differs", when);
	check_state(h, when);
}

/* A step that fails by the armed fault; returns its result, checks the message. */
static void failed_step(struct zinf_adam_nvme *h, uint64_t t, const char *op, const char *when)
{
	struct zinf_adam_nvme_bufs b = {.grad = grad,
					.param_out = out,
					.grad_dtype = ZINF_DTYPE_BF16,
					.param_dtype = ZINF_DTYPE_BF16};
	struct zinf_adam_step_info si = {t, 1e-3, 1.0f};
	struct zinf_adam_nvme_result r;
	const char *msg;
	uint64_t count = 0;
	char want[64];
	int rc;

	new_grads((uint32_t)t);
	rc = zinf_adam_nvme_step(h, &b, &si, &r);
	zinf_io_fault_clear();
	msg = zinf_adam_nvme_last_error(h);
	T_CHECK(rc == -EIO, "%s: step returned %d (%s), want -EIO", when, rc, msg);
	snprintf(want, sizeof(want), "%s of extent", op);
	T_CHECK(strstr(msg, "sub-group 0 (elements 0..65535)") && strstr(msg, want) &&
			!strchr(msg, '\n'),
		"%s: message does not name the sub-group and the %s of its extent on one line: %s",
		when, op, msg);
	T_CHECK(r.failed_sub_group == 0 && r.updated && r.updated[0] == 0,
		"%s: failed sub-group %lld, updated[0] %d", when, (long long)r.failed_sub_group,
		r.updated ? r.updated[0] : -1);
	for (uint64_t g = 0; g < r.n_sub_groups; g++)
		count += r.updated[g];
	T_CHECK(count == r.n_updated, "%s: n_updated %llu but %llu flags", when,
		(unsigned long long)r.n_updated, (unsigned long long)count);
	fprintf(stderr, "%s: %s; %llu of %llu sub-groups updated\n", when, msg,
		(unsigned long long)r.n_updated, (unsigned long long)r.n_sub_groups);
	ref_step(&si, r.updated); /* the reference takes the step where NVMe did */
	check_state(h, when);

	/* redo the step for the sub-groups it did not update: as if it never failed */
	for (uint64_t g = 0; g < r.n_sub_groups; g++)
		redo[g] = !r.updated[g];
	b.sub_groups = redo;
	T_CHECK(zinf_adam_nvme_step(h, &b, &si, &r) == 0, "%s: redo: %s", when,
		zinf_adam_nvme_last_error(h));
	T_CHECK(r.n_updated == r.n_sub_groups - count, "%s: redo updated %llu", when,
		(unsigned long long)r.n_updated);
	for (uint64_t g = 0; g < r.n_sub_groups; g++)
		T_CHECK(r.updated[g] == redo[g], "%s: redo: sub-group %llu updated %d", when,
			(unsigned long long)g, r.updated[g]);
	ref_step(&si, redo);
	T_CHECK(memcmp(out, ref_out, sizeof(out)) == 0, "%s: redo: param copy differs", when);
	check_state(h, when);
}

/* on_updated: record the order; stop (return -ECANCELED) at sub-group stop_at. */
static uint64_t seen[8], n_seen, stop_at = UINT64_MAX;

static int on_updated(void *user, uint64_t i)
{
	T_CHECK(user == &n_seen, "callback user pointer");
	T_CHECK(n_seen < 8, "too many callbacks");
	T_CHECK(memcmp(out + i * SUB_GROUP, ref_out + i * SUB_GROUP,
		       (i == N / SUB_GROUP ? N % SUB_GROUP : SUB_GROUP) * 2) == 0,
		"sub-group %llu: param copy not final when reported", (unsigned long long)i);
	seen[n_seen++] = i;
	return i == stop_at ? -ECANCELED : 0;
}

static void stopped_step(struct zinf_adam_nvme *h, uint64_t t)
{
	struct zinf_adam_nvme_bufs b = {.grad = grad,
					.param_out = out,
					.grad_dtype = ZINF_DTYPE_BF16,
					.param_dtype = ZINF_DTYPE_BF16,
					.on_updated = on_updated,
					.user = &n_seen};
	struct zinf_adam_step_info si = {t, 1e-3, 1.0f};
	struct zinf_adam_nvme_result r;
	const char *msg;
	int rc;

	new_grads((uint32_t)t);
	memcpy(old_p, ref_p, sizeof(ref_p));
	memcpy(old_m, ref_m, sizeof(ref_m));
	memcpy(old_v, ref_v, sizeof(ref_v));
	ref_step(&si, NULL); /* ref_out: what every sub-group's copy must be when reported */
	n_seen = 0;
	stop_at = 2;
	rc = zinf_adam_nvme_step(h, &b, &si, &r);
	msg = zinf_adam_nvme_last_error(h);
	T_CHECK(rc == -ECANCELED && strstr(msg, "sub-group 2") && !strchr(msg, '\n'),
		"stopped step returned %d: %s", rc, msg);
	T_CHECK(n_seen == 3 && seen[0] == 0 && seen[1] == 1 && seen[2] == 2,
		"%llu callbacks before the stop", (unsigned long long)n_seen);
	/* 0..2 were updated (2's write was in flight when it stopped), 3 and 4 were not */
	T_CHECK(r.n_updated == 3 && r.updated[2] && !r.updated[3] && !r.updated[4],
		"stopped step updated %llu", (unsigned long long)r.n_updated);
	stop_at = UINT64_MAX;
	T_CHECK(zinf_adam_nvme_read_state(h, got_p, got_m, got_v) == 0, "read state");
	for (uint64_t i = 0; i < N; i++) {
		bool reached = i < 3 * SUB_GROUP;
		const float *p = reached ? ref_p : old_p, *m = reached ? ref_m : old_m,
			    *v = reached ? ref_v : old_v;
		T_CHECK(memcmp(&got_p[i], &p[i], 4) == 0 && memcmp(&got_m[i], &m[i], 4) == 0 &&
				memcmp(&got_v[i], &v[i], 4) == 0,
			"element %llu: state is not the %s one", (unsigned long long)i,
			reached ? "new" : "old");
	}
}

int main(void)
{
	struct zinf_adam_opts ao;
	struct zinf_adam_nvme_opts no;
	struct zinf_adam_nvme *h;
	struct zinf_io_opts o;
	struct zinf_io *io = NULL;
	char *dir = t_mkdtemp("/var/tmp"), err[512];
	int e;

	T_CHECK(dir, "cannot make a scratch directory under /var/tmp");
	zinf_io_opts_init(&o);
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	o.block_size = 64 << 10; /* 12 pieces per sub-group request */
	o.queue_depth = 4;
	o.file_size = 16 << 20;
	for (e = 0; e < T_N_ENGINES && t_create(&o, &io, e) == 77; e++)
		;
	if (!io)
		T_SKIP("no I/O backend available");
	zinf_adam_opts_init(&ao);
	T_CHECK_RC(zinf_adam_create(&adam, &ao));
	zinf_adam_nvme_opts_init(&no);
	no.adam = adam;
	no.io = io;
	no.n_elems = N;
	no.sub_group_size = SUB_GROUP;
	T_CHECK(zinf_adam_nvme_create(&no, &h, err, sizeof(err)) == 0, "create: %s", err);
	for (uint64_t i = 0; i < N; i++) {
		ref_p[i] = (float)(i % 1000) / 1000.0f - 0.5f;
		ref_m[i] = ref_v[i] = 0;
	}
	T_CHECK(zinf_adam_nvme_write_state(h, ref_p, NULL, NULL) == 0, "write state: %s",
		zinf_adam_nvme_last_error(h));
	good_step(h, 1, "step 1");

	/* the first write piece reaches the disk, then reports "no progress" */
	zinf_io_fault_set(IO_FAULT_SHORT, 1, 0, 0, 1u << ZINF_IO_WRITE);
	failed_step(h, 2, "write", "step 2 (write fault)");
	good_step(h, 3, "step 3");
	good_step(h, 4, "step 4");

	zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_READ);
	failed_step(h, 5, "read", "step 5 (read fault)");
	good_step(h, 6, "step 6");
	stopped_step(h, 7);

	zinf_adam_nvme_destroy(h);
	zinf_adam_destroy(adam);
	zinf_io_destroy(io);
	t_rmrf(dir);
	return T_EXIT_PASS;
}

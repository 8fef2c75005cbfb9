/*
 * An I/O error during the pipelined NVMe step is reported with the sub-group and the
 * extent named, and leaves every sub-group's state on NVMe either fully old or fully new
 * (as the result's updated[] says), never torn:
 *  - a write whose first piece reaches the disk but is reported failed (the short-I/O
 *    fault fires after the kernel wrote it): a write in place would leave that sub-group
 *    half new; here it must read back bit-identical to its old state;
 *  - a failed read: nothing is updated and the state is unchanged.
 * After each failure the handle stays consistent: redoing the step for the sub-groups it
 * did not update gives the state (and param copy) of a step that never failed, and later
 * steps succeed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_test_util.h"
#include "optim.h"
#include "test.h"

#define N 300000ull
#define SUB_GROUP 65536ull /* 5 sub-groups, the last of 37856 elements */

static float ref_p[N], ref_m[N], ref_v[N], got_p[N], got_m[N], got_v[N];
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
	struct zinf_adam_nvme_bufs b = {grad, out, ZINF_DTYPE_BF16, ZINF_DTYPE_BF16, NULL};
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
	struct zinf_adam_nvme_bufs b = {grad, out, ZINF_DTYPE_BF16, ZINF_DTYPE_BF16, NULL};
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

	zinf_adam_nvme_destroy(h);
	zinf_adam_destroy(adam);
	zinf_io_destroy(io);
	t_rmrf(dir);
	return T_EXIT_PASS;
}

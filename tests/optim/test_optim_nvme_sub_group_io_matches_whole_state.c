/*
 * Ranged state I/O of the NVMe optimizer (zinf_adam_nvme_write_sub_group /
 * _read_sub_group) gives the state the whole-state calls give, bit for bit:
 *  - sub-groups written one by one, out of order (the last one shorter), read back equal
 *    one by one and through read_state, and a step from them equals a step from the same
 *    state written whole (master, m, v and the parameter copy);
 *  - NULL moments write zeros; a steps and read_state are refused (ZINF_ESTATE) until
 *    every sub-group was written, reading a sub-group never written too;
 *  - a failed write (its first piece reaches the disk, then reports failure) names the
 *    sub-group and the extent and leaves the sub-group's old state whole; a failed read
 *    names them too; with CRC32C on, a corrupted extent is reported as a mismatch;
 *  - through a staging slot in place (zinf_adam_nvme_write_from_slot / _read_into_slot,
 *    the engine's loads and saves): the same state, moments or zeros, and the other
 *    slots' buffers untouched; a read without moments reads the master part alone,
 *    unless the I/O handle checks CRC32C (then the whole extent, verified); the spare extents are zeroed by a call of their own
 *    (zinf_adam_nvme_zero_spares), once the state is complete, through the slot it
 *    names and no other;
 *  - writes started from slots and waited for later (_write_from_slot_start,
 *    _slot_wait, the engine's loads): while one is in flight its slot and the calls
 *    that may use any slot are refused; a failed one keeps the old state and the
 *    slot's buffer, and can be started again;
 *  - bad input (sub-group out of range, master NULL, NULL handle, no such slot) is
 *    refused with one line.
 * On every I/O backend available.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io_test_util.h"
#include "optim_nvme.h"
#include "test.h"
#include "zinf/error.h"

#define N 300000ull
#define SUB_GROUP 65536ull /* 5 sub-groups, the last of 37856 elements */
#define N_SUB 5

static float p0[N], m0[N], v0[N], got_p[N], got_m[N], got_v[N], ref_p[N], ref_m[N], ref_v[N];
static uint16_t grad[N], out_a[N], out_b[N];

static void fill(uint32_t seed)
{
	for (uint64_t i = 0; i < N; i++) {
		seed = seed * 1664525u + 1013904223u;
		p0[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
		m0[i] = p0[i] * 1e-3f;
		v0[i] = p0[i] * p0[i] * 1e-4f;
		grad[i] = (uint16_t)(0x3a00u + (seed >> 21));
	}
}

static void expect_error(struct zinf_adam_nvme *h, int rc, int want, const char *needle,
			 const char *what)
{
	const char *msg = zinf_adam_nvme_last_error(h);

	T_CHECK(rc == want, "%s returned %d, want %d (%s)", what, rc, want, msg);
	T_CHECK(strstr(msg, needle) && !strchr(msg, '\n'), "%s: want one line with '%s': %s", what,
		needle, msg);
}

static struct zinf_adam_nvme *create_fast(struct zinf_adam *adam, struct zinf_io *io,
					  bool fast_init)
{
	struct zinf_adam_nvme_opts no;
	struct zinf_adam_nvme *h;
	char err[512];

	zinf_adam_nvme_opts_init(&no);
	no.adam = adam;
	no.io = io;
	no.n_elems = N;
	no.sub_group_size = SUB_GROUP;
	no.fast_init = fast_init;
	T_CHECK(zinf_adam_nvme_create(&no, &h, err, sizeof(err)) == 0, "create: %s", err);
	return h;
}

static struct zinf_adam_nvme *create(struct zinf_adam *adam, struct zinf_io *io)
{
	return create_fast(adam, io, true);
}

static void check_equal(const float *a, const float *b, uint64_t n, const char *what)
{
	T_CHECK(memcmp(a, b, n * sizeof(float)) == 0, "%s differs", what);
}

/* Written sub-group by sub-group, out of order, against the whole-state calls. */
static void ranged_matches_whole(struct zinf_adam *adam, struct zinf_io *io, const char *engine)
{
	static const uint64_t order[N_SUB] = {3, 0, 4, 1, 2};
	struct zinf_adam_nvme *a = create(adam, io), *b = create(adam, io);
	struct zinf_adam_step_info si = {1, 1e-3, 1.0f};
	struct zinf_adam_nvme_bufs bufs = {.grad = grad,
					   .param_out = out_a,
					   .grad_dtype = ZINF_DTYPE_BF16,
					   .param_dtype = ZINF_DTYPE_BF16};
	struct zinf_adam_nvme_result r;
	uint64_t first, n;

	fill(7);
	for (int k = 0; k < N_SUB; k++) {
		uint64_t g = order[k];
		T_CHECK_RC(zinf_adam_nvme_sub_group(a, g, &first, &n, NULL));
		if (k == N_SUB - 1) {
			expect_error(a, zinf_adam_nvme_step(a, &bufs, &si, &r), ZINF_ESTATE,
				     "never written for 1 of 5 sub-groups", "step before the last");
			expect_error(a, zinf_adam_nvme_read_state(a, got_p, NULL, NULL),
				     ZINF_ESTATE, "never written for 1 of 5", "read_state");
			expect_error(a, zinf_adam_nvme_read_sub_group(a, g, got_p, NULL, NULL),
				     ZINF_ESTATE, "read sub-group 2: its state on NVMe was never",
				     "read of an unwritten sub-group");
		}
		T_CHECK(!zinf_adam_nvme_sub_group_written(a, g), "%s: %llu written early", engine,
			(unsigned long long)g);
		T_CHECK(zinf_adam_nvme_write_sub_group(a, g, p0 + first, m0 + first, v0 + first) ==
				0,
			"%s: write sub-group %llu: %s", engine, (unsigned long long)g,
			zinf_adam_nvme_last_error(a));
		T_CHECK(zinf_adam_nvme_sub_group_written(a, g), "%s: %llu not written", engine,
			(unsigned long long)g);
		T_CHECK(zinf_adam_nvme_read_sub_group(a, g, got_p, got_m, got_v) == 0, "%s: %s",
			engine, zinf_adam_nvme_last_error(a));
		check_equal(got_p, p0 + first, n, "sub-group master");
		check_equal(got_m, m0 + first, n, "sub-group m");
		check_equal(got_v, v0 + first, n, "sub-group v");
	}
	T_CHECK(zinf_adam_nvme_read_state(a, got_p, got_m, got_v) == 0, "%s: read state: %s",
		engine, zinf_adam_nvme_last_error(a));
	check_equal(got_p, p0, N, "master read whole");
	check_equal(got_m, m0, N, "m read whole");
	check_equal(got_v, v0, N, "v read whole");

	/* the same step from a state written whole */
	T_CHECK(zinf_adam_nvme_write_state(b, p0, m0, v0) == 0, "%s", zinf_adam_nvme_last_error(b));
	T_CHECK(zinf_adam_nvme_step(a, &bufs, &si, &r) == 0 && r.n_updated == N_SUB, "%s: step: %s",
		engine, zinf_adam_nvme_last_error(a));
	bufs.param_out = out_b;
	T_CHECK(zinf_adam_nvme_step(b, &bufs, &si, &r) == 0, "%s", zinf_adam_nvme_last_error(b));
	T_CHECK(memcmp(out_a, out_b, sizeof(out_a)) == 0, "%s: parameter copies differ", engine);
	T_CHECK_RC(zinf_adam_nvme_read_state(a, got_p, got_m, got_v));
	T_CHECK_RC(zinf_adam_nvme_read_state(b, ref_p, ref_m, ref_v));
	check_equal(got_p, ref_p, N, "master after a step");
	check_equal(got_m, ref_m, N, "m after a step");
	check_equal(got_v, ref_v, N, "v after a step");

	/* NULL moments: zeros; the other sub-groups keep theirs */
	T_CHECK_RC(zinf_adam_nvme_sub_group(a, 4, &first, &n, NULL));
	T_CHECK(zinf_adam_nvme_write_sub_group(a, 4, p0 + first, NULL, NULL) == 0, "%s",
		zinf_adam_nvme_last_error(a));
	T_CHECK_RC(zinf_adam_nvme_read_state(a, got_p, got_m, got_v));
	check_equal(got_p + first, p0 + first, n, "master of a rewritten sub-group");
	for (uint64_t i = first; i < N; i++)
		T_CHECK(got_m[i] == 0 && got_v[i] == 0, "%s: moment %llu not zeroed", engine,
			(unsigned long long)i);
	check_equal(got_m, ref_m, first, "m of the other sub-groups");
	check_equal(got_v, ref_v, first, "v of the other sub-groups");
	zinf_adam_nvme_destroy(a);
	zinf_adam_nvme_destroy(b);
}

/* Slot k's buffer for sub-group g: its master, m and v. */
static void slot_parts(struct zinf_adam_nvme *h, unsigned k, uint64_t g, float *part[3])
{
	uint64_t stride = 0;

	part[0] = zinf_adam_nvme_slot_parts(h, k, g, &stride);
	T_CHECK(part[0] && stride > 0, "slot %u for sub-group %llu", k, (unsigned long long)g);
	part[1] = part[0] + stride;
	part[2] = part[0] + 2 * stride;
}

/* Fill slot k's whole buffer (a full sub-group's three parts) with a byte pattern. */
static void pattern(struct zinf_adam_nvme *h, unsigned k)
{
	uint64_t stride = 0;
	float *b = zinf_adam_nvme_slot_parts(h, k, 0, &stride);

	T_CHECK(b, "slot %u", k);
	memset(b, 0x40 + (int)k, 3 * stride * sizeof(float));
}

static void pattern_kept(struct zinf_adam_nvme *h, unsigned k, const char *engine)
{
	uint64_t stride = 0;
	const unsigned char *b = (const void *)zinf_adam_nvme_slot_parts(h, k, 0, &stride);

	for (uint64_t i = 0; b && i < 3 * stride * sizeof(float); i++)
		T_CHECK(b[i] == 0x40 + k, "%s: slot %u byte %llu changed by another's I/O", engine,
			k, (unsigned long long)i);
}

/* Sub-groups written and read in place through the last slot, without fast_init (so
 * that the spare extents are zeroed once the state is complete): the state write_state
 * would give, and the other slots' buffers as they were. */
static void slots_in_place(struct zinf_adam *adam, struct zinf_io *io, const char *engine)
{
	bool crc = zinf_io_checksum_kind(io) == ZINF_IO_CHECKSUM_CRC32C;
	static const uint64_t order[N_SUB] = {4, 1, 0, 3, 2};
	struct zinf_adam_nvme *h = create_fast(adam, io, false);
	unsigned n_slots = zinf_adam_nvme_n_slots(h), last = n_slots - 1;
	uint64_t first, n, stride;
	float *part[3];

	T_CHECK(n_slots == 3, "%s: %u slots (pipelined read and write: 3)", engine, n_slots);
	fill(23);
	for (unsigned k = 0; k < last; k++) /* a pattern in the other slots */
		pattern(h, k);
	for (int j = 0; j < N_SUB; j++) {
		uint64_t g = order[j];
		bool moments = g != 1;
		T_CHECK(zinf_adam_nvme_zero_spares(h, last) == 0 && !h->spares_zeroed,
			"%s: spares zeroed with %d of %d sub-groups written", engine, j, N_SUB);
		T_CHECK_RC(zinf_adam_nvme_sub_group(h, g, &first, &n, NULL));
		slot_parts(h, last, g, part);
		memcpy(part[0], p0 + first, n * sizeof(float));
		memcpy(part[1], m0 + first, n * sizeof(float));
		memcpy(part[2], v0 + first, n * sizeof(float));
		T_CHECK(zinf_adam_nvme_write_from_slot(h, last, g, moments) == 0,
			"%s: write sub-group %llu from slot %u: %s", engine, (unsigned long long)g,
			last, zinf_adam_nvme_last_error(h));
		if (!moments) { /* what the state must now hold */
			memset(m0 + first, 0, n * sizeof(float));
			memset(v0 + first, 0, n * sizeof(float));
		}
	}
	T_CHECK(!h->spares_zeroed, "%s: the write from a slot zeroed the spares", engine);
	T_CHECK(zinf_adam_nvme_zero_spares(h, last) == 0 && h->spares_zeroed, "%s: zero spares: %s",
		engine, zinf_adam_nvme_last_error(h));
	for (unsigned k = 0; k < last; k++)
		pattern_kept(h, k, engine);
	T_CHECK(zinf_adam_nvme_read_state(h, got_p, got_m, got_v) == 0, "%s: %s", engine,
		zinf_adam_nvme_last_error(h));
	check_equal(got_p, p0, N, "master written from a slot");
	check_equal(got_m, m0, N, "m written from a slot (zeros without moments)");
	check_equal(got_v, v0, N, "v written from a slot (zeros without moments)");
	/* (read_state used every slot: the pattern again, and reads through slot 0) */
	for (unsigned k = 1; k < n_slots; k++)
		pattern(h, k);
	for (uint64_t g = 0; g < N_SUB; g++) {
		uint64_t len = 0;
		T_CHECK_RC(zinf_adam_nvme_sub_group(h, g, &first, &n, &len));
		T_CHECK(zinf_adam_nvme_read_into_slot(h, 0, g, false) == 0 &&
				h->read_bytes == (crc ? len : len / 3),
			"%s: master read into slot (CRC32C %d): %llu bytes of %llu: %s", engine,
			crc, (unsigned long long)h->read_bytes, (unsigned long long)len,
			zinf_adam_nvme_last_error(h));
		slot_parts(h, 0, g, part);
		check_equal(part[0], p0 + first, n, "master alone read into a slot");
		T_CHECK(zinf_adam_nvme_read_into_slot(h, 0, g, true) == 0 && h->read_bytes == len,
			"%s: read into slot: %llu bytes of %llu: %s", engine,
			(unsigned long long)h->read_bytes, (unsigned long long)len,
			zinf_adam_nvme_last_error(h));
		slot_parts(h, 0, g, part);
		check_equal(part[0], p0 + first, n, "master read into a slot");
		check_equal(part[1], m0 + first, n, "m read into a slot");
		check_equal(part[2], v0 + first, n, "v read into a slot");
	}
	for (unsigned k = 1; k < n_slots; k++)
		pattern_kept(h, k, engine);
	expect_error(h, zinf_adam_nvme_write_from_slot(h, n_slots, 0, true), -EINVAL,
		     "write sub-group 0: no staging slot 3 (the handle has 3)",
		     "slot out of range");
	expect_error(h, zinf_adam_nvme_zero_spares(h, n_slots), -EINVAL,
		     "zero the spare extents: no staging slot 3", "zero spares, slot out of range");
	expect_error(h, zinf_adam_nvme_read_into_slot(h, 0, N_SUB, true), -EINVAL,
		     "read sub-group 5: no such sub-group", "slot read out of range");
	T_CHECK(!zinf_adam_nvme_slot_parts(h, n_slots, 0, &stride) &&
			!zinf_adam_nvme_slot_parts(h, 0, N_SUB, &stride) &&
			!zinf_adam_nvme_slot_parts(NULL, 0, 0, &stride) &&
			zinf_adam_nvme_n_slots(NULL) == 0 &&
			zinf_adam_nvme_write_from_slot(NULL, 0, 0, true) == -EINVAL &&
			zinf_adam_nvme_read_into_slot(NULL, 0, 0, true) == -EINVAL &&
			zinf_adam_nvme_zero_spares(NULL, 0) == -EINVAL,
		"%s: slot calls out of range", engine);
	zinf_adam_nvme_destroy(h);
}

/* Sub-group g's new values (p0, m0, v0) into slot k, and into the ref_ arrays. */
static void stage(struct zinf_adam_nvme *h, unsigned k, uint64_t g)
{
	uint64_t first, n;
	float *part[3];

	T_CHECK_RC(zinf_adam_nvme_sub_group(h, g, &first, &n, NULL));
	slot_parts(h, k, g, part);
	memcpy(part[0], p0 + first, n * sizeof(float));
	memcpy(part[1], m0 + first, n * sizeof(float));
	memcpy(part[2], v0 + first, n * sizeof(float));
	memcpy(ref_p + first, p0 + first, n * sizeof(float));
	memcpy(ref_m + first, m0 + first, n * sizeof(float));
	memcpy(ref_v + first, v0 + first, n * sizeof(float));
}

/* Writes started from slots (zinf_adam_nvme_write_from_slot_start), two in flight at
 * once: the busy slots, and every call that may use any slot, are refused (ZINF_ESTATE,
 * one line naming the slot and sub-group) until zinf_adam_nvme_slot_wait; a free slot
 * still reads; the state is then the one written. A started write that fails is the
 * error of its start or its wait, naming the sub-group, and leaves the sub-group's old
 * state and the slot's buffer as they were; started again it succeeds. */
static void started_writes(struct zinf_adam *adam, struct zinf_io *io, const char *engine)
{
	struct zinf_adam_nvme *h = create(adam, io);
	uint64_t first, n;
	float *part[3];
	int rc;

	fill(31);
	T_CHECK_RC(zinf_adam_nvme_write_state(h, p0, m0, v0));
	memcpy(ref_p, p0, sizeof(p0));
	memcpy(ref_m, m0, sizeof(m0));
	memcpy(ref_v, v0, sizeof(v0));
	fill(32);
	for (unsigned k = 0; k < 2; k++) {
		stage(h, k, k + 1);
		T_CHECK(zinf_adam_nvme_write_from_slot_start(h, k, k + 1, true) == 0,
			"%s: start the write of sub-group %u: %s", engine, k + 1,
			zinf_adam_nvme_last_error(h));
	}
	expect_error(h, zinf_adam_nvme_read_into_slot(h, 0, 0, true), ZINF_ESTATE,
		     "staging slot 0's write of sub-group 1 is in flight", "read into a busy slot");
	expect_error(h, zinf_adam_nvme_write_from_slot_start(h, 1, 2, true), ZINF_ESTATE,
		     "staging slot 1's write of sub-group 2 is in flight",
		     "write from a busy slot");
	expect_error(h, zinf_adam_nvme_zero_spares(h, 1), ZINF_ESTATE, "is in flight",
		     "zero spares through a busy slot");
	expect_error(h, zinf_adam_nvme_read_state(h, got_p, got_m, got_v), ZINF_ESTATE,
		     "read state: staging slot 0's write", "read state");
	expect_error(h, zinf_adam_nvme_write_state(h, p0, m0, v0), ZINF_ESTATE, "is in flight",
		     "write state");
	expect_error(h, zinf_adam_nvme_read_sub_group(h, 3, got_p, NULL, NULL), ZINF_ESTATE,
		     "is in flight", "read sub-group");
	expect_error(h, zinf_adam_nvme_write_sub_group(h, 3, p0, NULL, NULL), ZINF_ESTATE,
		     "is in flight", "write sub-group");
	T_CHECK(zinf_adam_nvme_read_into_slot(h, 2, 0, true) == 0, "%s: a free slot: %s", engine,
		zinf_adam_nvme_last_error(h));
	for (unsigned k = 0; k < 3; k++) /* (the free slot: nothing to wait for) */
		T_CHECK(zinf_adam_nvme_slot_wait(h, k) == 0, "%s: wait for slot %u: %s", engine, k,
			zinf_adam_nvme_last_error(h));
	T_CHECK(zinf_adam_nvme_slot_wait(h, 0) == 0, "%s: wait again", engine);
	expect_error(h, zinf_adam_nvme_slot_wait(h, 3), -EINVAL, "wait: no staging slot 3",
		     "wait, slot out of range");
	T_CHECK_RC(zinf_adam_nvme_read_state(h, got_p, got_m, got_v));
	check_equal(got_p, ref_p, N, "master after started writes");
	check_equal(got_m, ref_m, N, "m after started writes");
	check_equal(got_v, ref_v, N, "v after started writes");

	fill(33);
	stage(h, 0, 3);
	memcpy(ref_p, got_p, sizeof(got_p)); /* the state stays as it was */
	memcpy(ref_m, got_m, sizeof(got_m));
	memcpy(ref_v, got_v, sizeof(got_v));
	zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_WRITE);
	rc = zinf_adam_nvme_write_from_slot_start(h, 0, 3, true);
	if (rc == 0)
		rc = zinf_adam_nvme_slot_wait(h, 0);
	zinf_io_fault_clear();
	expect_error(h, rc, -EIO, "sub-group 3 (elements 196608..262143): write of extent",
		     "started write fault");
	T_CHECK_RC(zinf_adam_nvme_sub_group(h, 3, &first, &n, NULL));
	slot_parts(h, 0, 3, part);
	check_equal(part[0], p0 + first, n, "master in the slot after a failed write");
	check_equal(part[2], v0 + first, n, "v in the slot after a failed write");
	T_CHECK_RC(zinf_adam_nvme_read_state(h, got_p, got_m, got_v));
	check_equal(got_p, ref_p, N, "master after a failed started write");
	check_equal(got_v, ref_v, N, "v after a failed started write");
	stage(h, 0, 3);
	T_CHECK(zinf_adam_nvme_write_from_slot_start(h, 0, 3, true) == 0 &&
			zinf_adam_nvme_slot_wait(h, 0) == 0,
		"%s: the write started again: %s", engine, zinf_adam_nvme_last_error(h));
	T_CHECK_RC(zinf_adam_nvme_read_state(h, got_p, got_m, got_v));
	check_equal(got_p, ref_p, N, "master after the write started again");
	check_equal(got_m, ref_m, N, "m after the write started again");
	T_CHECK(zinf_adam_nvme_write_from_slot_start(NULL, 0, 0, true) == -EINVAL &&
			zinf_adam_nvme_slot_wait(NULL, 0) == -EINVAL,
		"%s: NULL handle", engine);
	zinf_adam_nvme_destroy(h);
}

/* Faults: a failed write keeps the old state whole; reads and CRC mismatches named. */
static void faults(struct zinf_adam *adam, struct zinf_io *io, const char *engine)
{
	struct zinf_adam_nvme *h = create(adam, io);
	const char *path;
	uint64_t foff, first, n;
	int fd;

	fill(11);
	T_CHECK_RC(zinf_adam_nvme_write_state(h, p0, m0, v0));
	T_CHECK_RC(zinf_adam_nvme_sub_group(h, 1, &first, &n, NULL));
	zinf_io_fault_set(IO_FAULT_SHORT, 1, 0, 0, 1u << ZINF_IO_WRITE);
	expect_error(h, zinf_adam_nvme_write_sub_group(h, 1, ref_p, NULL, NULL), -EIO,
		     "sub-group 1 (elements 65536..131071): write of extent", "write fault");
	zinf_io_fault_clear();
	T_CHECK(zinf_adam_nvme_read_sub_group(h, 1, got_p, got_m, got_v) == 0,
		"%s: read after a failed write: %s", engine, zinf_adam_nvme_last_error(h));
	check_equal(got_p, p0 + first, n, "master after a failed write");
	check_equal(got_m, m0 + first, n, "m after a failed write");

	zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_READ);
	expect_error(h, zinf_adam_nvme_read_sub_group(h, 1, got_p, NULL, NULL), -EIO,
		     "sub-group 1 (elements 65536..131071): read of extent", "read fault");
	zinf_io_fault_clear();

	/* a full sub-group fills its extent, whose CRC32C the I/O layer keeps */
	T_CHECK_RC(zinf_io_extent_locate(io, h->group_extent[0], 0, &path, &foff));
	fd = open(path, O_WRONLY);
	T_CHECK(fd >= 0 && pwrite(fd, "XXXX", 4, (off_t)foff) == 4, "%s: corrupt %s", engine, path);
	fsync(fd);
	close(fd);
	expect_error(h, zinf_adam_nvme_read_sub_group(h, 0, got_p, NULL, NULL), ZINF_ECHECKSUM,
		     "CRC32C mismatch", "corrupted extent");
	T_CHECK(strstr(zinf_adam_nvme_last_error(h), "sub-group 0 (elements 0..65535)"),
		"%s: mismatch does not name the sub-group: %s", engine,
		zinf_adam_nvme_last_error(h));

	/* bad input */
	expect_error(h, zinf_adam_nvme_write_sub_group(h, 5, p0, NULL, NULL), -EINVAL,
		     "write sub-group 5: no such sub-group", "write out of range");
	expect_error(h, zinf_adam_nvme_read_sub_group(h, 9, got_p, NULL, NULL), -EINVAL,
		     "read sub-group 9: no such sub-group", "read out of range");
	expect_error(h, zinf_adam_nvme_write_sub_group(h, 0, NULL, m0, v0), -EINVAL,
		     "write sub-group 0: master is NULL", "write without master");
	T_CHECK(zinf_adam_nvme_write_sub_group(NULL, 0, p0, NULL, NULL) == -EINVAL &&
			zinf_adam_nvme_read_sub_group(NULL, 0, p0, NULL, NULL) == -EINVAL &&
			!zinf_adam_nvme_sub_group_written(NULL, 0) &&
			!zinf_adam_nvme_sub_group_written(h, 5),
		"NULL handle or range");
	zinf_adam_nvme_destroy(h);
}

/* A CRC32C-checking handle with 64 KiB pieces (12 pieces per sub-group request). */
static struct zinf_io *io_create(int e, char **dir)
{
	return t_create_crc(e, 64 << 10, dir);
}

int main(void)
{
	struct zinf_adam_opts ao;
	struct zinf_adam *adam;
	int ran = 0;

	zinf_log_set_level(ZINF_LOG_ERROR);
	zinf_adam_opts_init(&ao);
	T_CHECK_RC(zinf_adam_create(&adam, &ao));
	for (int e = 0; e < T_N_ENGINES; e++) {
		/* One I/O handle per part: each part's first NVMe optimizer handle registers
		 * its pinned pool with a handle that never had one (see docs/optim.md). */
		char *dir;
		struct zinf_io *io = io_create(e, &dir);

		if (!io)
			continue;
		ranged_matches_whole(adam, io, t_engine_names[e]);
		zinf_io_destroy(io);
		t_rmrf(dir);
		for (int crc = 0; crc < 2; crc++) {
			io = t_create_in_dir(e, 64 << 10,
					     crc ? ZINF_IO_CHECKSUM_CRC32C : ZINF_IO_CHECKSUM_NONE,
					     &dir);
			slots_in_place(adam, io, t_engine_names[e]);
			zinf_io_destroy(io);
			t_rmrf(dir);
		}
		io = io_create(e, &dir);
		started_writes(adam, io, t_engine_names[e]);
		zinf_io_destroy(io);
		t_rmrf(dir);
		io = io_create(e, &dir);
		faults(adam, io, t_engine_names[e]);
		zinf_io_destroy(io);
		t_rmrf(dir);
		ran++;
	}
	zinf_adam_destroy(adam);
	if (!ran)
		T_SKIP("no I/O backend available");
	return T_EXIT_PASS;
}

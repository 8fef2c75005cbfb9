/*
 * fast_init: a state written with zero moments puts only its master parts on NVMe, and
 * everything read back is the same bits as with fast_init off:
 *  - write_state(master, NULL, NULL) writes exactly the master parts (nothing for a
 *    sub-group whose master is all zero; the spare extents are not zeroed), a third of
 *    the bytes with fast_init off or less; read_state gives the same bits both ways;
 *  - three steps give the same state and parameter copy both ways; the first step
 *    reads the master parts alone;
 *  - a sub-group rewritten with NULL moments through a staging buffer that held
 *    non-zero moments reads back zero moments;
 *  - a failed write (full, or master-only, over a full or a master-only state) leaves
 *    the previous state readable, its CRC32C too;
 *  - with CRC32C on, a byte flipped in the master part of a master-only sub-group (the
 *    last, short one included, which the I/O layer's per-extent CRC never covers) is
 *    reported by read_sub_group and by the step as a mismatch naming the sub-group;
 *    bytes in its unwritten m part are never read.
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
#define ZERO_SUB 3 /* its master is all zero: nothing written with fast_init */

static float p0[N], p1[N], m1[N], v1[N];
static float a_p[N], a_m[N], a_v[N], b_p[N], b_m[N], b_v[N];
static uint16_t grad[N], out_a[N], out_b[N];

static void fill(uint32_t seed)
{
	for (uint64_t i = 0; i < N; i++) {
		seed = seed * 1664525u + 1013904223u;
		p0[i] = i / SUB_GROUP == ZERO_SUB ? 0.0f : (float)(seed >> 8) / 16777216.0f - 0.5f;
		p1[i] = p0[i] * 0.5f + 0.25f;
		m1[i] = p1[i] * 1e-3f;
		v1[i] = p1[i] * p1[i] * 1e-4f;
	}
}

static void new_grads(uint32_t seed)
{
	for (uint64_t i = 0; i < N; i++) {
		seed = seed * 1664525u + 1013904223u;
		grad[i] = (uint16_t)(0x3a00u + (seed >> 21)); /* bf16 around 5e-4 .. 1e-2 */
	}
}

static struct zinf_adam_nvme *create(struct zinf_adam *adam, struct zinf_io *io, bool fast_init)
{
	struct zinf_adam_nvme_opts no;
	struct zinf_adam_nvme *h;
	char err[512];

	zinf_adam_nvme_opts_init(&no);
	T_CHECK(no.fast_init && !no.crc32c, "opts defaults: fast_init %d, crc32c %d", no.fast_init,
		no.crc32c);
	no.adam = adam;
	no.io = io;
	no.n_elems = N;
	no.sub_group_size = SUB_GROUP;
	no.fast_init = fast_init;
	no.crc32c = true;
	T_CHECK(zinf_adam_nvme_create(&no, &h, err, sizeof(err)) == 0, "create: %s", err);
	return h;
}

static uint64_t written_bytes(struct zinf_io *io)
{
	struct zinf_io_stats st;

	zinf_io_get_stats(io, &st);
	return st.write_bytes;
}

static void same(const float *a, const float *b, uint64_t n, const char *engine, const char *what)
{
	T_CHECK(memcmp(a, b, n * sizeof(float)) == 0, "%s: %s differs", engine, what);
}

static void read_both(struct zinf_adam_nvme *a, struct zinf_adam_nvme *b, const char *engine,
		      const char *when)
{
	memset(a_p, 0xff, sizeof(a_p));
	memset(a_m, 0xff, sizeof(a_m));
	memset(a_v, 0xff, sizeof(a_v));
	T_CHECK(zinf_adam_nvme_read_state(a, a_p, a_m, a_v) == 0, "%s: %s: read: %s", engine, when,
		zinf_adam_nvme_last_error(a));
	T_CHECK(zinf_adam_nvme_read_state(b, b_p, b_m, b_v) == 0, "%s: %s: read: %s", engine, when,
		zinf_adam_nvme_last_error(b));
	same(a_p, b_p, N, engine, when);
	same(a_m, b_m, N, engine, when);
	same(a_v, b_v, N, engine, when);
}

/* Written and stepped with fast_init on (a) and off (b): bytes and bits. */
static void on_matches_off(struct zinf_adam_nvme *a, struct zinf_adam_nvme *b, struct zinf_io *io,
			   const char *engine)
{
	struct zinf_adam_nvme_info info;
	uint64_t parts = 0, zero_part = 0, spares, w0, on, off;

	zinf_adam_nvme_get_info(a, &info);
	for (uint64_t g = 0; g < N_SUB; g++) {
		uint64_t req;

		T_CHECK_RC(zinf_adam_nvme_sub_group(a, g, NULL, NULL, &req));
		parts += req / 3;
		zero_part += g == ZERO_SUB ? req / 3 : 0;
	}
	spares = (info.n_extents - info.n_sub_groups) * info.extent_bytes;
	w0 = written_bytes(io);
	T_CHECK(zinf_adam_nvme_write_state(a, p0, NULL, NULL) == 0, "%s: %s", engine,
		zinf_adam_nvme_last_error(a));
	on = written_bytes(io) - w0;
	w0 = written_bytes(io);
	T_CHECK(zinf_adam_nvme_write_state(b, p0, NULL, NULL) == 0, "%s: %s", engine,
		zinf_adam_nvme_last_error(b));
	off = written_bytes(io) - w0;
	fprintf(stderr, "%s: write_state wrote %llu bytes with fast_init, %llu without (%.3f)\n",
		engine, (unsigned long long)on, (unsigned long long)off, (double)on / (double)off);
	T_CHECK(on == parts - zero_part && off == 3 * parts + spares,
		"%s: wrote %llu / %llu bytes, want %llu / %llu (master parts but sub-group %d; "
		"all parts and %llu of zeroed spares)",
		engine, (unsigned long long)on, (unsigned long long)off,
		(unsigned long long)(parts - zero_part), (unsigned long long)(3 * parts + spares),
		ZERO_SUB, (unsigned long long)spares);
	read_both(a, b, engine, "state as written");

	for (uint64_t t = 1; t <= 3; t++) {
		struct zinf_adam_step_info si = {t, 1e-3, 1.0f};
		struct zinf_adam_nvme_bufs bufs = {.grad = grad,
						   .param_out = out_a,
						   .grad_dtype = ZINF_DTYPE_BF16,
						   .param_dtype = ZINF_DTYPE_BF16};
		struct zinf_adam_nvme_result ra, rb;

		new_grads((uint32_t)t);
		T_CHECK(zinf_adam_nvme_step(a, &bufs, &si, &ra) == 0, "%s: step %llu: %s", engine,
			(unsigned long long)t, zinf_adam_nvme_last_error(a));
		bufs.param_out = out_b;
		T_CHECK(zinf_adam_nvme_step(b, &bufs, &si, &rb) == 0, "%s: step %llu: %s", engine,
			(unsigned long long)t, zinf_adam_nvme_last_error(b));
		T_CHECK(ra.read_bytes == (t == 1 ? parts - zero_part : 3 * parts) &&
				rb.read_bytes == 3 * parts && ra.write_bytes == 3 * parts,
			"%s: step %llu read %llu / %llu, wrote %llu bytes", engine,
			(unsigned long long)t, (unsigned long long)ra.read_bytes,
			(unsigned long long)rb.read_bytes, (unsigned long long)ra.write_bytes);
		T_CHECK(memcmp(out_a, out_b, sizeof(out_a)) == 0,
			"%s: step %llu: parameter copies differ", engine, (unsigned long long)t);
		read_both(a, b, engine, t == 1 ? "state after step 1" : "state after step 3");
	}
}

/* Sub-group g of h read back: its master, m and v against want (NULL m / v: zeros). */
static void expect_sub_group(struct zinf_adam_nvme *h, uint64_t g, const float *p, const float *m,
			     const float *v, const char *engine, const char *when)
{
	static float gp[SUB_GROUP], gm[SUB_GROUP], gv[SUB_GROUP];
	uint64_t first, n;

	T_CHECK_RC(zinf_adam_nvme_sub_group(h, g, &first, &n, NULL));
	memset(gm, 0xff, sizeof(gm));
	memset(gv, 0xff, sizeof(gv));
	T_CHECK(zinf_adam_nvme_read_sub_group(h, g, gp, gm, gv) == 0, "%s: %s: read: %s", engine,
		when, zinf_adam_nvme_last_error(h));
	same(gp, p + first, n, engine, when);
	for (uint64_t i = 0; i < n; i++)
		T_CHECK((m ? gm[i] == m[first + i] : gm[i] == 0) &&
				(v ? gv[i] == v[first + i] : gv[i] == 0),
			"%s: %s: element %llu: m %a, v %a", engine, when,
			(unsigned long long)(first + i), (double)gm[i], (double)gv[i]);
}

static void expect_error(struct zinf_adam_nvme *h, int rc, int want, const char *needle,
			 const char *engine, const char *what)
{
	const char *msg = zinf_adam_nvme_last_error(h);

	T_CHECK(rc == want, "%s: %s returned %d, want %d (%s)", engine, what, rc, want, msg);
	T_CHECK(strstr(msg, needle) && !strchr(msg, '\n'), "%s: %s: want one line with '%s': %s",
		engine, what, needle, msg);
}

/* A failed write leaves the previous state (and its CRC) readable. h has been stepped:
 * every sub-group holds a full state (saved in a_p, a_m, a_v by on_matches_off). */
static void failed_writes(struct zinf_adam_nvme *h, const char *engine)
{
	uint64_t first, n;

	/* through a staging buffer that held the step's non-zero moments */
	T_CHECK_RC(zinf_adam_nvme_sub_group(h, 1, &first, &n, NULL));
	T_CHECK(zinf_adam_nvme_write_sub_group(h, 1, p0 + first, NULL, NULL) == 0, "%s: %s", engine,
		zinf_adam_nvme_last_error(h));
	T_CHECK(h->zeroed[1] == NVME_ZERO_MOMENTS, "%s: sub-group 1 marked %d", engine,
		h->zeroed[1]);
	expect_sub_group(h, 1, p0, NULL, NULL, engine, "rewritten with NULL moments");

	/* a full write over a master-only state */
	zinf_io_fault_set(IO_FAULT_SHORT, 1, 0, 0, 1u << ZINF_IO_WRITE);
	expect_error(h, zinf_adam_nvme_write_sub_group(h, 1, p1 + first, m1 + first, v1 + first),
		     -EIO, "sub-group 1 (elements 65536..131071): write of extent", engine,
		     "full write fault");
	zinf_io_fault_clear();
	expect_sub_group(h, 1, p0, NULL, NULL, engine, "master-only state after a failed write");
	/* a master-only write over a master-only state: the old CRC stays */
	zinf_io_fault_set(IO_FAULT_SHORT, 1, 0, 0, 1u << ZINF_IO_WRITE);
	expect_error(h, zinf_adam_nvme_write_sub_group(h, 1, p1 + first, NULL, NULL), -EIO,
		     "write of extent", engine, "master-only write fault");
	zinf_io_fault_clear();
	expect_sub_group(h, 1, p0, NULL, NULL, engine,
			 "master-only state after a failed master-only write");
	/* a master-only write over a full state */
	zinf_io_fault_set(IO_FAULT_SHORT, 1, 0, 0, 1u << ZINF_IO_WRITE);
	expect_error(h, zinf_adam_nvme_write_sub_group(h, 2, p1 + 2 * SUB_GROUP, NULL, NULL), -EIO,
		     "sub-group 2 (elements 131072..196607): write of extent", engine,
		     "master-only write fault over a full state");
	zinf_io_fault_clear();
	T_CHECK(h->zeroed[2] == NVME_ZERO_NONE, "%s: sub-group 2 marked %d after a failed write",
		engine, h->zeroed[2]);
	expect_sub_group(h, 2, a_p, a_m, a_v, engine, "full state after a failed write");
	/* and the same writes succeeding */
	T_CHECK(zinf_adam_nvme_write_sub_group(h, 1, p1 + first, m1 + first, v1 + first) == 0,
		"%s: %s", engine, zinf_adam_nvme_last_error(h));
	expect_sub_group(h, 1, p1, m1, v1, engine, "full state over a master-only one");
	T_CHECK(zinf_adam_nvme_write_sub_group(h, 2, p1 + 2 * SUB_GROUP, NULL, NULL) == 0, "%s: %s",
		engine, zinf_adam_nvme_last_error(h));
	expect_sub_group(h, 2, p1, NULL, NULL, engine, "master-only state over a full one");
}

/* Write len bytes at offset off of extent id in its file (bypassing the I/O handle). */
static void poke(struct zinf_io *io, uint32_t id, uint64_t off, const void *bytes, size_t len,
		 const char *engine)
{
	const char *path;
	uint64_t foff;
	int fd;

	T_CHECK_RC(zinf_io_extent_locate(io, id, off, &path, &foff));
	fd = open(path, O_RDWR);
	T_CHECK(fd >= 0 && pwrite(fd, bytes, len, (off_t)foff) == (ssize_t)len, "%s: poke %s",
		engine, path);
	fsync(fd);
	close(fd);
}

static uint8_t peek(struct zinf_io *io, uint32_t id, uint64_t off)
{
	const char *path;
	uint64_t foff;
	uint8_t b = 0;
	int fd;

	T_CHECK_RC(zinf_io_extent_locate(io, id, off, &path, &foff));
	fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0 && pread(fd, &b, 1, (off_t)foff) == 1, "peek %s", path);
	close(fd);
	return b;
}

/* One byte of the master part of master-only sub-group g flipped: a mismatch. */
static void flipped_master_is_caught(struct zinf_adam_nvme *h, struct zinf_io *io, uint64_t g,
				     const char *engine)
{
	struct zinf_adam_step_info si = {4, 1e-3, 1.0f};
	struct zinf_adam_nvme_bufs bufs = {.grad = grad, .grad_dtype = ZINF_DTYPE_BF16};
	struct zinf_adam_nvme_result r;
	uint64_t first, n, at = 4 * 1001 + 2;
	uint8_t b;
	char want[96];

	T_CHECK_RC(zinf_adam_nvme_sub_group(h, g, &first, &n, NULL));
	T_CHECK(zinf_adam_nvme_write_sub_group(h, g, p0 + first, NULL, NULL) == 0, "%s: %s", engine,
		zinf_adam_nvme_last_error(h));
	expect_sub_group(h, g, p0, NULL, NULL, engine, "before the flip");
	b = peek(io, h->group_extent[g], at) ^ 0x01;
	poke(io, h->group_extent[g], at, &b, 1, engine);
	snprintf(want, sizeof(want), "sub-group %llu (elements %llu..%llu): read of extent",
		 (unsigned long long)g, (unsigned long long)first,
		 (unsigned long long)(first + n - 1));
	expect_error(h, zinf_adam_nvme_read_sub_group(h, g, a_p, NULL, NULL), ZINF_ECHECKSUM, want,
		     engine, "read of a flipped master");
	T_CHECK(strstr(zinf_adam_nvme_last_error(h), "CRC32C mismatch"), "%s: %s", engine,
		zinf_adam_nvme_last_error(h));
	expect_error(h, zinf_adam_nvme_step(h, &bufs, &si, &r), ZINF_ECHECKSUM, want, engine,
		     "step over a flipped master");
	T_CHECK(r.failed_sub_group == (int64_t)g && !r.updated[g], "%s: step failed at %lld",
		engine, (long long)r.failed_sub_group);
	b ^= 0x01;
	poke(io, h->group_extent[g], at, &b, 1, engine);
	expect_sub_group(h, g, p0, NULL, NULL, engine, "after the flip was undone");
}

static void crc(struct zinf_adam_nvme *h, struct zinf_io *io, const char *engine)
{
	struct zinf_adam_nvme_info info;
	static const char junk[8] = "JUNKJUNK";

	zinf_adam_nvme_get_info(h, &info);
	flipped_master_is_caught(h, io, 0, engine);
	flipped_master_is_caught(h, io, N_SUB - 1, engine); /* the short one */
	/* m and v of a master-only sub-group are not read: junk there changes nothing */
	T_CHECK(zinf_adam_nvme_write_sub_group(h, 0, p0, NULL, NULL) == 0, "%s: %s", engine,
		zinf_adam_nvme_last_error(h));
	poke(io, h->group_extent[0], info.extent_bytes / 3 + 64, junk, sizeof(junk), engine);
	poke(io, h->group_extent[0], info.extent_bytes - 64, junk, sizeof(junk), engine);
	expect_sub_group(h, 0, p0, NULL, NULL, engine, "junk in the unwritten moments");
}

/* A CRC32C-checking handle with 64 KiB pieces (4 pieces per master part). */
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
	fill(5);
	for (int e = 0; e < T_N_ENGINES; e++) {
		char *dir;
		struct zinf_io *io = io_create(e, &dir);
		struct zinf_adam_nvme *a, *b;

		if (!io)
			continue;
		a = create(adam, io, true);
		b = create(adam, io, false);
		on_matches_off(a, b, io, t_engine_names[e]);
		failed_writes(a, t_engine_names[e]);
		crc(a, io, t_engine_names[e]);
		zinf_adam_nvme_destroy(a);
		zinf_adam_nvme_destroy(b);
		zinf_io_destroy(io);
		t_rmrf(dir);
		ran++;
	}
	zinf_adam_destroy(adam);
	if (!ran)
		T_SKIP("no I/O backend available");
	return T_EXIT_PASS;
}

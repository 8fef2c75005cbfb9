/* On real small file systems (tmpfs mounts in a mount namespace of the test's own), a
 * layout the NVMe space check passed is laid out whole: with exactly the bytes it counts
 * free, finalize succeeds (no free tail of a data file is stranded, although each file
 * is made no larger than what fits), and a page less is refused by the check, before
 * any file is made. Two paths on two file systems, each with its even share and the
 * largest extent part free (round-robin striping fills paths unevenly; a part whose own
 * path is full goes to the other, and the margin makes sure one has room), lay out
 * too, and a page less on one is refused; and the I/O layer alone puts the parts whose
 * own path is full on the other. Skips (77) where the test may not make a mount
 * namespace.
 *
 * White-box: engine_nvme_drive_bytes (engine_internal.h). */
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "engine_internal.h"
#include "space_fixture.h"

#define BIG (64ull << 20)

static uint64_t free_bytes(const char *dir)
{
	struct statvfs fs;

	T_CHECK(statvfs(dir, &fs) == 0, "statvfs %s", dir);
	return (uint64_t)fs.f_bavail * fs.f_frsize;
}

static void size_to(const char *dir, uint64_t bytes)
{
	char opts[64];

	snprintf(opts, sizeof(opts), "size=%llu", (unsigned long long)bytes);
	T_CHECK(mount("none", dir, "tmpfs", MS_REMOUNT, opts) == 0, "remount %s %s: %s", dir, opts,
		strerror(errno));
}

/* Resize dir's tmpfs so that exactly want bytes are free (the run directory and its lock
 * file stay). */
static void leave_free(const char *dir, uint64_t want)
{
	struct statvfs fs;

	T_CHECK(statvfs(dir, &fs) == 0, "statvfs %s", dir);
	size_to(dir, (uint64_t)fs.f_blocks * fs.f_frsize - free_bytes(dir) + want);
	T_CHECK(free_bytes(dir) == want, "%s: %llu bytes free, want %llu", dir,
		(unsigned long long)free_bytes(dir), (unsigned long long)want);
}

/* A fresh engine on the paths, each on a BIG tmpfs, then each left with free[i]. */
static int finalize_with(const char *d0, const char *d1, uint64_t f0, uint64_t f1, uint64_t *need,
			 char *msg, size_t len)
{
	struct lf_engine le;
	int rc;

	T_CHECK(mount("none", d0, "tmpfs", 0, "size=64m") == 0, "mount %s: %s", d0,
		strerror(errno));
	T_CHECK(!d1 || mount("none", d1, "tmpfs", 0, "size=64m") == 0, "mount %s", d1);
	engine_make(&le, d0, d1);
	*need = engine_nvme_drive_bytes(le.e);
	if (f0 || f1) {
		leave_free(d0, f0);
		if (d1)
			leave_free(d1, f1);
	}
	rc = zinf_engine_finalize(le.e);
	snprintf(msg, len, "%s", rc ? zinf_last_error(le.e) : "");
	engine_free(&le);
	/* detached: io_uring's teardown may hold the files a moment after destroy */
	T_CHECK(umount2(d0, MNT_DETACH) == 0 && (!d1 || umount2(d1, MNT_DETACH) == 0), "umount: %s",
		strerror(errno));
	return rc;
}

/* The I/O layer alone: single-part extents alternate between the paths; once the first
 * path's file system is full, its parts go to the second. */
static void parts_spill(const char *d0, const char *d1)
{
	struct zinf_io_opts o;
	struct zinf_io_stats st;
	struct zinf_io *io;
	uint32_t id;

	T_CHECK(mount("none", d0, "tmpfs", 0, "size=64m") == 0, "mount %s", d0);
	T_CHECK(mount("none", d1, "tmpfs", 0, "size=64m") == 0, "mount %s", d1);
	zinf_io_opts_init(&o);
	o.nvme_paths[0] = d0;
	o.nvme_paths[1] = d1;
	o.n_paths = 2;
	o.block_size = 64 * 1024;
	o.engine = ZINF_IO_ENGINE_PSYNC;
	T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	leave_free(d0, 3 * 64 * 1024);
	for (int i = 0; i < 12; i++)
		T_CHECK(zinf_io_extent_alloc(io, 64 * 1024, &id) == 0,
			"extent %d, the first path full: %s", i, zinf_io_last_error(io));
	zinf_io_get_stats(io, &st);
	T_CHECK(st.space_bytes == 12 * 64 * 1024 && free_bytes(d0) == 0,
		"%llu bytes laid out, %llu left on the first path",
		(unsigned long long)st.space_bytes, (unsigned long long)free_bytes(d0));
	zinf_io_destroy(io);
	T_CHECK(umount2(d0, MNT_DETACH) == 0 && umount2(d1, MNT_DETACH) == 0, "umount");
}

int main(void)
{
	char d0[] = "/var/tmp/zinf-fullfs-XXXXXX", d1[] = "/var/tmp/zinf-fullfs-XXXXXX", msg[1024];
	uint64_t one, two;
	int rc;

	zinf_log_set_level(ZINF_LOG_ERROR);
	if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		T_SKIP("no mount namespace here (%s)", strerror(errno));
	T_CHECK(mkdtemp(d0) && mkdtemp(d1), "mkdtemp");
	/* the bytes each layout needs (a roomy file system) */
	T_CHECK(finalize_with(d0, NULL, 0, 0, &one, msg, sizeof(msg)) == 0, "%s", msg);
	T_CHECK(finalize_with(d0, d1, 0, 0, &two, msg, sizeof(msg)) == 0, "%s", msg);

	rc = finalize_with(d0, NULL, one, 0, &one, msg, sizeof(msg));
	T_CHECK(rc == 0, "one path, exactly %llu bytes free: %s", (unsigned long long)one, msg);
	rc = finalize_with(d0, NULL, one - 4096, 0, &one, msg, sizeof(msg));
	T_CHECK(rc == ZINF_EBUDGET && strstr(msg, "needs at least"),
		"one path, a page short: rc %d: %s", rc, msg);
	/* two file systems: each its share (the first takes the odd byte) and the largest
	 * part, 64 KiB (the largest extent, a sub-group's state of 86016 bytes, is 64 KiB +
	 * 20 KiB over two paths) */
	rc = finalize_with(d0, d1, two / 2 + two % 2 + 65536, two / 2 + 65536, &two, msg,
			   sizeof(msg));
	T_CHECK(rc == 0, "two file systems, each its share of %llu bytes and 64 KiB free: %s",
		(unsigned long long)two, msg);
	rc = finalize_with(d0, d1, two / 2 + two % 2 + 65536 - 4096, two / 2 + 65536, &two, msg,
			   sizeof(msg));
	T_CHECK(rc == ZINF_EBUDGET && strstr(msg, "room for the largest part"),
		"two file systems, the first a page short: rc %d: %s", rc, msg);
	parts_spill(d0, d1);
	fprintf(stderr, "one path: %llu bytes; two: %llu\n", (unsigned long long)one,
		(unsigned long long)two);
	T_CHECK(rmdir(d0) == 0 && rmdir(d1) == 0, "scratch directories left non-empty");
	return T_EXIT_PASS;
}

/*
 * Run directories: PATH/run_dir_name on each NVMe path, holding the lock file that names
 * the process using it and the data files (space.c). Taking one (a stale one a crashed
 * process of this boot left, or any with remove_stale, is emptied first), probing
 * O_DIRECT and the alignment there, and emptying and removing it at the end. docs/io.md,
 * "Lifetime", has the rules.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_internal.h"
#include "zinf/log.h"

static int path_join(char **out, const char *a, const char *b)
{
	if (asprintf(out, "%s/%s", a, b) < 0) {
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Whether name is one of a run directory's data files (space.c names them data.N). */
static bool is_data_name(const char *name)
{
	if (strncmp(name, "data.", 5) != 0 || !name[5])
		return false;
	return strspn(name + 5, "0123456789") == strlen(name + 5);
}

/* Remove (unless only counting) every data file of a run directory, whichever a stopped
 * run had removed already: its teardown unlinks them in order, and a kill can land
 * between. Returns how many there were, or -errno when the directory cannot be read.
 * Removing entries while reading the directory may hide others from that read (network
 * filesystems), so the removal reads it again until a read finds none. */
static int run_dir_data_files(const char *run_dir, bool remove)
{
	char name[PATH_MAX];
	int total = 0;

	for (int pass = 0; pass < 64; pass++) {
		DIR *d = opendir(run_dir);
		struct dirent *e;
		int n = 0;

		if (!d)
			return -errno;
		while ((e = readdir(d)) != NULL) {
			if (!is_data_name(e->d_name))
				continue;
			n++;
			if (remove && snprintf(name, sizeof(name), "%s/%s", run_dir, e->d_name) <
					      (int)sizeof(name))
				unlink(name);
		}
		closedir(d);
		total += n;
		if (!remove || n == 0)
			break;
	}
	return total;
}

/* Remove the data files and (unless keep_lock) the lock file of a run directory (stale
 * or ours). */
static void run_dir_clear(const char *run_dir, bool keep_lock)
{
	char name[PATH_MAX];

	run_dir_data_files(run_dir, true);
	snprintf(name, sizeof(name), "%s/direct.probe", run_dir);
	unlink(name);
	if (keep_lock)
		return;
	snprintf(name, sizeof(name), "%s/lock", run_dir);
	unlink(name);
}

/* This kernel's boot id ("" when unreadable): processes that share it share flock. */
static void this_boot(char *out, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	out[0] = 0;
	if (f) {
		if (!fgets(out, (int)len, f))
			out[0] = 0;
		fclose(f);
	}
	out[strcspn(out, "\n")] = 0;
}

/* What a run directory's lock file says of the process that made it: "pid P boot B host
 * H" (a line only of the pid before this record, or nothing: unknown). */
struct run_owner {
	long pid;
	char boot[64], host[256];
};

/* Whether the lock file fd holds nothing (a process stopped between creating and writing
 * it: it never made a data file either). */
static bool owner_empty(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && st.st_size == 0;
}

static bool owner_read(int fd, struct run_owner *o)
{
	char line[400];
	ssize_t n = pread(fd, line, sizeof(line) - 1, 0);

	memset(o, 0, sizeof(*o));
	if (n <= 0)
		return false;
	line[n] = 0;
	return sscanf(line, "pid %ld boot %63s host %255s", &o->pid, o->boot, o->host) == 3;
}

static int owner_write(int fd)
{
	char boot[64], host[256] = "", rec[400];
	int n;

	this_boot(boot, sizeof(boot));
	if (gethostname(host, sizeof(host) - 1) != 0 || !host[0])
		snprintf(host, sizeof(host), "unknown");
	host[strcspn(host, " \t\n")] = 0;
	n = snprintf(rec, sizeof(rec), "pid %ld boot %s host %s\n", (long)getpid(),
		     boot[0] ? boot : "unknown", host);
	/* written over the old record, then cut to length: never an empty record */
	if (pwrite(fd, rec, (size_t)n, 0) != n)
		return errno ? -errno : -EIO;
	return ftruncate(fd, n) == 0 ? 0 : -errno;
}

/* A run directory nobody holds the lock of (fd, held now by us): may it be emptied? Yes
 * when asked to (remove_stale), or when the process that made it ran on this kernel since
 * its boot: every process here sees that lock, so with it free that process is gone. Any
 * other (another machine or boot, a filesystem whose flock may not reach other
 * machines, an older record) is refused with what the record says. */
static int stale_take(struct zinf_io *io, struct io_path *p, int fd)
{
	struct run_owner o;
	char boot[64];
	bool known = owner_read(fd, &o);
	int n_data;

	this_boot(boot, sizeof(boot));
	n_data = run_dir_data_files(p->run_dir, false);
	if (n_data < 0) {
		io_set_error(io, "run directory %s: cannot read it: %s", p->run_dir,
			     strerror(-n_data));
		return n_data;
	}
	if (!known && owner_empty(fd) && n_data == 0) {
		/* nothing to lose, and most often no crash: a run starting beside this one
		 * made the directory and has not locked it yet (it will find it busy) */
		zinf_logf(ZINF_LOG_INFO,
			  "zinf io: taking run directory %s, empty (made by a run starting beside "
			  "this one, or left by one stopped before writing its lock file)",
			  p->run_dir);
	} else if (known && boot[0] && strcmp(o.boot, boot) == 0) {
		zinf_logf(ZINF_LOG_WARN,
			  "zinf io: emptying run directory %s left by process %ld, which has "
			  "exited (on this machine since its boot)",
			  p->run_dir, o.pid);
	} else if (io->opts.remove_stale) {
		zinf_logf(ZINF_LOG_WARN, "zinf io: emptying stale run directory %s", p->run_dir);
	} else if (known) {
		io_set_error(io,
			     "run directory %s is left from a crashed run (process %ld on host %s, "
			     "%s): remove it, or set zinf.remove_stale_run_dir: true",
			     p->run_dir, o.pid, o.host,
			     boot[0] ? "before this machine's boot, or another machine"
				     : "this machine's boot id unknown");
		return -EEXIST;
	} else {
		io_set_error(io,
			     "run directory %s is left from a crashed run (its lock file names no "
			     "process of this machine): remove it, or set "
			     "zinf.remove_stale_run_dir: true",
			     p->run_dir);
		return -EEXIST;
	}
	run_dir_clear(p->run_dir, true);
	n_data = run_dir_data_files(p->run_dir, false);
	if (n_data != 0) { /* (a file that would not go: the run's own data.N would fail) */
		io_set_error(io, "run directory %s: cannot empty it: %s", p->run_dir,
			     n_data < 0 ? strerror(-n_data) : "a data file stays");
		return n_data < 0 ? n_data : -EEXIST;
	}
	return 0;
}

/* Open and flock (not waiting) a run directory's lock file: 0 with *out, -EBUSY when a
 * live process holds it, -EAGAIN when the file locked is no longer the one of that name
 * (its owner's destroy removed it, and maybe the directory, between the open and the
 * flock: a lock on it would guard nothing), or -errno (-ENOENT: the directory went). */
static int lock_open(const char *run_dir, const char *lock_name, int *out)
{
	struct stat a, b;
	int fd = open(lock_name, O_RDWR | O_CREAT | O_CLOEXEC, 0600), rc = 0;

	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0)
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
	else if (io_fault_take(IO_FAULT_LOCK_GONE, 0, NULL, NULL) && /* as destroy does */
		 (run_dir_clear(run_dir, false), rmdir(run_dir) != 0))
		rc = -errno;
	else if (fstat(fd, &a) != 0 || stat(lock_name, &b) != 0 || a.st_dev != b.st_dev ||
		 a.st_ino != b.st_ino)
		rc = -EAGAIN;
	if (rc) {
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

static int run_dir_take(struct zinf_io *io, struct io_path *p)
{
	char *lock_name = NULL;
	int rc, fd = -1;
	bool made;

	rc = path_join(&lock_name, p->run_dir, "lock");
	if (rc)
		return rc;
	for (int tries = 0;; tries++) {
		made = mkdir(p->run_dir, 0700) == 0;
		if (!made && errno != EEXIST) {
			rc = -errno;
			io_set_error(io, "nvme path %s: cannot create run directory %s: %s", p->dir,
				     p->run_dir, strerror(-rc));
			goto out_free;
		}
		rc = lock_open(p->run_dir, lock_name, &fd);
		if ((rc == -EAGAIN || rc == -ENOENT) && tries < 16)
			continue; /* a run ending there removed it meanwhile */
		break;
	}
	if (rc == -EBUSY) {
		/* (not waiting on a lock that is not a file: a FIFO) */
		struct run_owner o = {0};
		int lfd = open(lock_name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		struct stat st;
		char who[320] = "", boot[64];
		bool known;

		this_boot(boot, sizeof(boot));
		known = lfd >= 0 && fstat(lfd, &st) == 0 && S_ISREG(st.st_mode) &&
			owner_read(lfd, &o);
		if (lfd >= 0)
			close(lfd);
		if (known && o.pid == (long)getpid() && strcmp(o.boot, boot) == 0)
			snprintf(who, sizeof(who), "this process already (one drive given twice?)");
		else if (known)
			snprintf(who, sizeof(who), "another live process (process %ld on host %s)",
				 o.pid, o.host);
		else
			snprintf(who, sizeof(who), "another live process");
		io_set_error(io,
			     "run directory %s is in use by %s: give this run another NVMe path "
			     "(or another run_dir_name)",
			     p->run_dir, who);
		goto out_free;
	}
	if (rc) {
		io_set_error(io, "run directory %s: cannot lock %s: %s", p->run_dir, lock_name,
			     strerror(-rc));
		if (made)
			rmdir(p->run_dir);
		goto out_free;
	}
	/* The lock taken here is kept: two runs starting at once on a stale directory cannot
	 * both clear it. */
	if (!made) {
		rc = stale_take(io, p, fd);
		if (rc) {
			close(fd);
			goto out_free;
		}
	}
	rc = owner_write(fd);
	if (rc) {
		close(fd);
		io_set_error(io, "run directory %s: cannot write %s: %s", p->run_dir, lock_name,
			     strerror(-rc));
		if (made) {
			unlink(lock_name);
			rmdir(p->run_dir);
		}
		goto out_free;
	}
	p->lock_fd = fd;
out_free:
	free(lock_name);
	return rc;
}

/* Probe O_DIRECT and the alignment on a path with a scratch file. */
static int path_probe(struct zinf_io *io, struct io_path *p)
{
	char *name = NULL;
	bool direct = false;
	int fd, rc;

	rc = path_join(&name, p->run_dir, "direct.probe");
	if (rc)
		return rc;
	fd = io_open_maybe_direct(name, O_CREAT | O_TRUNC, 0600, io->opts.direct, &direct);
	if (fd < 0) {
		io_set_error(io, "nvme path %s: cannot create %s: %s", p->dir, name, strerror(-fd));
		free(name);
		return fd;
	}
	p->direct = direct;
	if (io->opts.direct && !direct) {
		zinf_logf(ZINF_LOG_WARN,
			  "zinf io: %s refuses O_DIRECT (tmpfs?); using buffered I/O there",
			  p->dir);
		io->warned_direct = true;
	}
	if (direct) {
		uint64_t a = io_file_alignment(fd);

		if (a > io->align)
			io->align = a;
	}
	close(fd);
	unlink(name);
	free(name);
	return 0;
}

int io_run_dir_open(struct zinf_io *io, struct io_path *p)
{
	struct stat st;
	int rc;

	rc = stat(p->dir, &st) != 0 ? -errno : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (rc) { /* (-ENOTDIR: a file, a device, a FIFO) */
		io_set_error(io, "%s %s: not a usable directory: %s", p->name, p->dir,
			     strerror(-rc));
		return rc;
	}
	rc = path_join(&p->run_dir, p->dir, io->opts.run_dir_name);
	if (!rc)
		rc = run_dir_take(io, p);
	if (!rc)
		rc = path_probe(io, p);
	return rc;
}

void io_run_dir_close(struct io_path *p, bool remove)
{
	if (p->lock_fd >= 0) {
		/* (a directory that cannot go, its files made read-only or taken: said, as the
		 * next run on the path empties it) */
		if (remove) {
			run_dir_clear(p->run_dir, false);
			if (rmdir(p->run_dir) != 0 && errno != ENOENT)
				zinf_logf(ZINF_LOG_WARN,
					  "zinf io: run directory %s: cannot remove it: %s (its "
					  "files stay until the next run on this path)",
					  p->run_dir, strerror(errno));
		}
		close(p->lock_fd);
		p->lock_fd = -1;
	}
	free(p->run_dir);
	p->run_dir = NULL;
}

/*
 * Run directories: created 0700 with 0600 files, removed on a clean destroy; one held
 * by a live handle is -EBUSY. One left by a crashed run is emptied and reused when its
 * lock file names a process of this machine's current boot (nobody here holds the lock,
 * so that process is gone); one of another boot or machine, or whose lock file names no
 * process, is reported (-EEXIST, naming the key) and left untouched unless remove_stale.
 * A lock file removed between its open and flock (a run ending there) is locked anew, so
 * no two handles share the directory; an empty lock file with no data is taken. Every
 * data file of a stale directory is emptied, whichever went first. A second handle is
 * told who holds the directory; a path that is no directory is said to be none.
 */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io_test_util.h"

/* A crashed run's directory (made, or kept): the lock file with record, and a data file. */
static void plant(const char *run, const char *lock, const char *data, const char *record)
{
	FILE *f;

	T_CHECK(mkdir(run, 0700) == 0 || errno == EEXIST, "mkdir %s", run);
	f = fopen(lock, "w");
	T_CHECK(f != NULL && fputs(record, f) >= 0 && fclose(f) == 0, "write %s", lock);
	f = fopen(data, "w");
	T_CHECK(f != NULL && fclose(f) == 0, "write %s", data);
}

/* The pid of a process that has exited (and been reaped). */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	T_CHECK(pid >= 0, "fork");
	if (pid == 0)
		_exit(0);
	T_CHECK(waitpid(pid, NULL, 0) == pid, "waitpid");
	return pid;
}

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp"), *run = NULL, *lock = NULL, *data = NULL, *data1 = NULL;
	char err[512];
	char line[400], boot[64] = "", owner_boot[64];
	long pid;
	struct zinf_io_opts o;
	struct zinf_io *io, *io2;
	const char *path;
	uint64_t off;
	uint32_t ext;
	struct stat st;
	FILE *f;
	int rc;

	T_CHECK(dir, "scratch directory");
	T_CHECK(asprintf(&run, "%s/zinf-run", dir) > 0 && asprintf(&lock, "%s/lock", run) > 0 &&
			asprintf(&data, "%s/data.0", run) > 0 &&
			asprintf(&data1, "%s/data.1", run) > 0,
		"asprintf");
	f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (!f || !fgets(boot, sizeof(boot), f)) {
		fprintf(stderr, "skip: no boot id\n");
		return 77;
	}
	fclose(f);
	boot[strcspn(boot, "\n")] = 0;
	zinf_log_set_level(ZINF_LOG_ERROR);
	zinf_io_opts_init(&o);
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	o.file_size = 1 << 20;
	T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	T_CHECK(stat(run, &st) == 0 && (st.st_mode & 0777) == 0700, "run dir mode %o",
		st.st_mode & 0777);
	T_CHECK_RC(zinf_io_extent_alloc(io, 4096, &ext));
	T_CHECK_RC(zinf_io_extent_locate(io, ext, 0, &path, &off));
	T_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "data file mode %o",
		st.st_mode & 0777);

	/* a second handle on the same run directory: in use */
	rc = zinf_io_create(&o, &io2, err, sizeof(err));
	T_CHECK(rc == -EBUSY && io2 == NULL, "second handle: %d", rc);
	T_CHECK(strstr(err, run) && strstr(err, "in use by this process already") &&
			strstr(err, "another NVMe path"),
		"the holder or the way out not named: %s", err);
	{ /* held by another process: named by its pid */
		int ready[2], go[2];
		pid_t child;
		char c = 0;

		zinf_io_destroy(io);
		T_CHECK(pipe(ready) == 0 && pipe(go) == 0, "pipe");
		child = fork();
		T_CHECK(child >= 0, "fork");
		if (child == 0) {
			struct zinf_io *held;
			if (zinf_io_create(&o, &held, NULL, 0) != 0)
				_exit(1);
			(void)!write(ready[1], "r", 1);
			(void)!read(go[0], &c, 1);
			zinf_io_destroy(held);
			_exit(0);
		}
		T_CHECK(read(ready[0], &c, 1) == 1, "the child did not take the directory");
		rc = zinf_io_create(&o, &io2, err, sizeof(err));
		snprintf(line, sizeof(line), "in use by another live process (process %ld on host ",
			 (long)child);
		T_CHECK(rc == -EBUSY && strstr(err, line), "another process's handle: %d (%s)", rc,
			err);
		T_CHECK(write(go[1], "g", 1) == 1 && waitpid(child, NULL, 0) == child, "child");
		T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	}
	zinf_io_destroy(io);
	T_CHECK(stat(run, &st) != 0 && errno == ENOENT, "run directory kept after destroy");

	/* the lock file a live handle writes names its process and this boot */
	T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	f = fopen(lock, "r");
	T_CHECK(f && fgets(line, sizeof(line), f), "read %s", lock);
	fclose(f);
	T_CHECK(sscanf(line, "pid %ld boot %63s", &pid, owner_boot) == 2 && pid == getpid() &&
			strcmp(owner_boot, boot) == 0,
		"lock file record: %s", line);
	zinf_io_destroy(io);

	/* crashed runs: a directory, an unlocked lock file and a data file left behind */
	plant(run, lock, data, "12345\n"); /* a record of an older zinf: names no boot */
	rc = zinf_io_create(&o, &io, err, sizeof(err));
	T_CHECK(rc == -EEXIST && io == NULL, "stale directory reused: %d", rc);
	T_CHECK(strstr(err, run) && strstr(err, "crashed") &&
			strstr(err, "zinf.remove_stale_run_dir"),
		"%s", err);
	T_CHECK(stat(lock, &st) == 0 && stat(data, &st) == 0, "stale directory was touched");
	/* another boot's (or machine's) process: its flock may not be seen here */
	plant(run, lock, data,
	      "pid 12345 boot 00000000-0000-0000-0000-000000000000 host elsewhere\n");
	rc = zinf_io_create(&o, &io, err, sizeof(err));
	T_CHECK(rc == -EEXIST && io == NULL, "another boot's directory reused: %d", rc);
	T_CHECK(strstr(err, run) && strstr(err, "process 12345 on host elsewhere") &&
			strstr(err, "zinf.remove_stale_run_dir"),
		"%s", err);
	T_CHECK(stat(lock, &st) == 0 && stat(data, &st) == 0, "stale directory was touched");
	/* a process of this boot that no longer holds the lock: emptied and reused */
	snprintf(line, sizeof(line), "pid %ld boot %s host here\n", (long)dead_pid(), boot);
	plant(run, lock, data, line);
	T_CHECK_RC(zinf_io_create(&o, &io, err, sizeof(err)));
	T_CHECK(stat(data, &st) != 0 && errno == ENOENT, "this boot's crashed run not emptied");
	zinf_io_destroy(io);
	T_CHECK(stat(run, &st) != 0 && errno == ENOENT, "run directory kept after destroy");
	/* killed in its teardown, after data.0 went: data.1 is emptied too, not left to make
	 * the next run's second file fail */
	snprintf(line, sizeof(line), "pid %ld boot %s host here\n", (long)dead_pid(), boot);
	plant(run, lock, data1, line);
	T_CHECK_RC(zinf_io_create(&o, &io, err, sizeof(err)));
	T_CHECK(stat(data1, &st) != 0 && errno == ENOENT, "data.1 left after data.0 went");
	zinf_io_destroy(io);
	/* an empty lock file beside data.1 alone: data was written, so it is not taken as a
	 * process that stopped before writing any */
	plant(run, lock, data1, "");
	rc = zinf_io_create(&o, &io, err, sizeof(err));
	T_CHECK(rc == -EEXIST && io == NULL && strstr(err, "zinf.remove_stale_run_dir"),
		"an empty lock file beside data.1 taken: %d (%s)", rc, err);
	T_CHECK(stat(data1, &st) == 0, "stale directory was touched");
	unlink(data1);
	unlink(lock);
	T_CHECK(rmdir(run) == 0, "rmdir %s", run);
	/* a path that is there but no directory (a device, a FIFO): said so */
	T_CHECK(mkfifo(run, 0600) == 0, "mkfifo");
	o.nvme_paths[0] = run;
	rc = zinf_io_create(&o, &io, err, sizeof(err));
	T_CHECK(rc == -ENOTDIR && io == NULL &&
			strstr(err, "not a usable directory: Not a directory"),
		"a FIFO as the path: %d (%s)", rc, err);
	o.nvme_paths[0] = dir;
	unlink(run);

	/* the lock file removed between the open and the flock (a run ending there): the
	 * lock is taken again on the file of that name, so a second handle is refused */
	snprintf(line, sizeof(line), "pid %ld boot %s host here\n", (long)dead_pid(), boot);
	plant(run, lock, data, line);
	zinf_io_fault_set(IO_FAULT_LOCK_GONE, 1, 0, 0, 0);
	T_CHECK_RC(zinf_io_create(&o, &io, err, sizeof(err)));
	zinf_io_fault_clear();
	rc = zinf_io_create(&o, &io2, err, sizeof(err));
	T_CHECK(rc == -EBUSY && io2 == NULL,
		"a second handle on the directory after a lock file went: %d (%s)", rc, err);
	zinf_io_destroy(io);
	/* an empty lock file and no data: a process stopped before writing either */
	T_CHECK(mkdir(run, 0700) == 0, "mkdir");
	f = fopen(lock, "w");
	T_CHECK(f && fclose(f) == 0, "empty %s", lock);
	T_CHECK_RC(zinf_io_create(&o, &io, err, sizeof(err)));
	zinf_io_destroy(io);

	/* another boot's directory again, asked to remove it */
	plant(run, lock, data,
	      "pid 12345 boot 00000000-0000-0000-0000-000000000000 host elsewhere\n");
	/* asked to remove it: works, and cleans up at the end */
	o.remove_stale = true;
	T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	T_CHECK_RC(zinf_io_extent_alloc(io, 4096, &ext));
	zinf_io_destroy(io);
	T_CHECK(rmdir(dir) == 0, "scratch directory not empty after destroy");
	free(dir);
	free(run);
	free(lock);
	free(data);
	free(data1);
	return 0;
}

/*
 * Run directories: created 0700 with 0600 files, removed on a clean destroy; one left
 * by a crashed run is reported (-EEXIST) and not reused unless remove_stale; one held
 * by a live handle is -EBUSY.
 */
#include <sys/stat.h>

#include "io_test_util.h"

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp"), *run = NULL, *lock = NULL, err[512];
	struct zinf_io_opts o;
	struct zinf_io *io, *io2;
	const char *path;
	uint64_t off;
	uint32_t ext;
	struct stat st;
	FILE *f;
	int rc;

	T_CHECK(dir, "scratch directory");
	T_CHECK(asprintf(&run, "%s/zinf-run", dir) > 0 && asprintf(&lock, "%s/lock", run) > 0,
		"asprintf");
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
	T_CHECK(strstr(err, run) && strstr(err, "in use"), "%s", err);
	zinf_io_destroy(io);
	T_CHECK(stat(run, &st) != 0 && errno == ENOENT, "run directory kept after destroy");

	/* a crashed run: directory, unlocked lock file and a data file left behind */
	T_CHECK(mkdir(run, 0700) == 0, "mkdir");
	f = fopen(lock, "w");
	T_CHECK(f != NULL, "lock file");
	fprintf(f, "12345\n");
	fclose(f);
	rc = zinf_io_create(&o, &io, err, sizeof(err));
	T_CHECK(rc == -EEXIST && io == NULL, "stale directory reused: %d", rc);
	T_CHECK(strstr(err, run) && strstr(err, "crashed"), "%s", err);
	T_CHECK(stat(lock, &st) == 0, "stale directory was touched");
	/* asked to remove it: works, and cleans up at the end */
	o.remove_stale = true;
	T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	T_CHECK_RC(zinf_io_extent_alloc(io, 4096, &ext));
	zinf_io_destroy(io);
	T_CHECK(rmdir(dir) == 0, "scratch directory not empty after destroy");
	free(dir);
	free(run);
	free(lock);
	return 0;
}

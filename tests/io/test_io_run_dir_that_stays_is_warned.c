/*
 * A run directory that cannot be removed at destroy (a file zinf did not make is in it,
 * or it was made read-only) is said in a warning naming it and why, instead of being
 * left without a word; zinf's own files in it are gone all the same.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "io_test_util.h"

static char said[1024];

static void catch_warning(enum zinf_log_level level, const char *msg, void *user)
{
	(void)user;
	if (level == ZINF_LOG_WARN && !said[0])
		snprintf(said, sizeof(said), "%s", msg);
}

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp"), *run = NULL, *extra = NULL, *data = NULL;
	char err[512];
	struct zinf_io_opts o;
	struct zinf_io *io;
	uint32_t ext;
	FILE *f;

	T_CHECK(dir, "scratch directory");
	T_CHECK(asprintf(&run, "%s/zinf-run", dir) > 0 &&
			asprintf(&extra, "%s/mine.txt", run) > 0 &&
			asprintf(&data, "%s/data.0", run) > 0,
		"asprintf");
	zinf_io_opts_init(&o);
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	o.file_size = 1 << 20;
	T_CHECK(zinf_io_create(&o, &io, err, sizeof(err)) == 0, "create: %s", err);
	T_CHECK(zinf_io_extent_alloc(io, 4096, &ext) == 0, "alloc: %s", zinf_io_last_error(io));
	f = fopen(extra, "w"); /* a user's file in the run directory */
	T_CHECK(f && fclose(f) == 0, "write %s", extra);
	zinf_log_set_callback(catch_warning, NULL);
	zinf_io_destroy(io);
	zinf_log_set_callback(NULL, NULL);
	T_CHECK(strstr(said, run) && strstr(said, "cannot remove it") && !strchr(said, '\n'),
		"no one-line warning naming %s: '%s'", run, said);
	T_CHECK(access(data, F_OK) != 0, "zinf's data file stayed beside the user's");
	T_CHECK(access(extra, F_OK) == 0, "the user's file was removed");
	T_CHECK(unlink(extra) == 0 && rmdir(run) == 0 && rmdir(dir) == 0, "cleanup");
	free(run);
	free(extra);
	free(data);
	free(dir);
	return T_EXIT_PASS;
}

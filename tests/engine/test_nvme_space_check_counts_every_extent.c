/* Before it lays anything out, finalize checks the NVMe paths' free space against every
 * byte the layout will take: the parameters' chunks, each optimizer group's sub-groups
 * and its spare extents (one per staging buffer), the gradient sub-groups, and the
 * padding of each path's part of a striped extent. The count is exact (the extents
 * allocated hold as many drive bytes as it said, over two paths striped in 64 KiB
 * units); a file system one byte short is refused before step 1 with the bytes needed
 * and free (no data file is made), and called again with exactly that much free, the
 * same engine finalizes. The old
 * bound (parameters plus 12 bytes a parameter) missed the spares and the gradients.
 *
 * White-box: engine_nvme_drive_bytes (engine_internal.h), the I/O fault hook's small
 * file system (io_internal.h). */
#include <dirent.h>
#include <unistd.h>

#include "engine_internal.h"
#include "io_internal.h"
#include "space_fixture.h"

/* Data files in dir's run directory. */
static int data_files(const char *dir)
{
	char run[600];
	struct dirent *d;
	DIR *h;
	int n = 0;

	snprintf(run, sizeof(run), "%s/zinf-run", dir);
	h = opendir(run);
	if (!h)
		return 0;
	while ((d = readdir(h)))
		n += strncmp(d->d_name, "data.", 5) == 0;
	closedir(h);
	return n;
}

int main(void)
{
	char dir0[] = "/var/tmp/zinf-space-test-XXXXXX", dir1[] = "/var/tmp/zinf-space-test-XXXXXX";
	struct zinf_io_stats io;
	struct lf_engine le;
	uint64_t need, old_bound = 0;
	char want[64];
	const char *msg;
	int rc;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir0) && mkdtemp(dir1), "mkdtemp");
	for (int m = 0; m < LF_N_MOD; m++)
		old_bound += lf_elems(m, 0) * (2 + 12) + lf_elems(m, 1) * (4 + 12);

	/* two paths: the count is what the layout takes */
	engine_make(&le, dir0, dir1);
	need = engine_nvme_drive_bytes(le.e);
	T_CHECK(zinf_engine_finalize(le.e) == 0, "%s", zinf_last_error(le.e));
	zinf_io_get_stats(le.e->io, &io);
	T_CHECK(io.space_bytes == need,
		"two paths: the extents hold %llu bytes, the check counted %llu",
		(unsigned long long)io.space_bytes, (unsigned long long)need);
	engine_free(&le);
	fprintf(stderr, "two paths: %llu bytes (old bound %llu)\n", (unsigned long long)need,
		(unsigned long long)old_bound);

	/* one path */
	engine_make(&le, dir0, NULL);
	need = engine_nvme_drive_bytes(le.e);
	T_CHECK(need > old_bound + old_bound / 4,
		"one path: %llu bytes counted, not above the old bound %llu by the gradients "
		"and spares",
		(unsigned long long)need, (unsigned long long)old_bound);
	T_CHECK(zinf_engine_finalize(le.e) == 0, "%s", zinf_last_error(le.e));
	zinf_io_get_stats(le.e->io, &io);
	T_CHECK(io.space_bytes == need,
		"one path: the extents hold %llu bytes, the check counted %llu",
		(unsigned long long)io.space_bytes, (unsigned long long)need);
	engine_free(&le);

	/* a file system one byte short: refused before any file is made */
	engine_make(&le, dir0, NULL);
	zinf_io_fault_set(IO_FAULT_NOSPACE, 1, ENOSPC, need - 1, 0);
	rc = zinf_engine_finalize(le.e);
	zinf_io_fault_clear();
	msg = zinf_last_error(le.e);
	snprintf(want, sizeof(want), "needs at least %llu B", (unsigned long long)need);
	T_CHECK(rc == ZINF_EBUDGET && strstr(msg, want) && strstr(msg, "free") &&
			!strchr(msg, '\n'),
		"one byte short: rc %d, want ZINF_EBUDGET and one line with \"%s\": %s", rc, want,
		msg);
	T_CHECK(data_files(dir0) == 0, "the refused run made %d data files", data_files(dir0));
	fprintf(stderr, "one byte short: %s\n", msg);

	/* a refusal before the layout changes nothing: with exactly enough free, the same
	 * engine finalizes */
	zinf_io_fault_set(IO_FAULT_NOSPACE, 1, ENOSPC, need, 0);
	rc = zinf_engine_finalize(le.e);
	zinf_io_fault_clear();
	T_CHECK(rc == 0, "exactly the bytes needed free, called again: %s", zinf_last_error(le.e));
	engine_free(&le);

	T_CHECK(rmdir(dir0) == 0 && rmdir(dir1) == 0, "scratch directories left non-empty");
	return T_EXIT_PASS;
}

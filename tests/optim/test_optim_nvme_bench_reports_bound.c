/*
 * `zinf bench adam --nvme DIR --json` times the pipelined NVMe step and reports it
 * against the bound read_bytes / read_bw + write_bytes / write_bw measured in the same
 * run: the fields are there and consistent (bytes = the layout's, bound recomputed from
 * the bandwidths, ratio = step / bound), the scratch files under DIR are gone afterwards,
 * and bad --nvme options (a missing directory among them) exit 2 with one line naming the
 * option or the path. argv[1] is the zinf binary.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "cli_util.h"
#include "io/io_test_util.h"

static void expect_error(const char *zinf, const char *args, int want_rc, const char *needle)
{
	char cmd[4096], out[4096];
	int rc;

	snprintf(cmd, sizeof(cmd), "%s bench adam %s 2>&1", zinf, args);
	rc = t_run(cmd, out, sizeof(out));
	T_CHECK(rc == want_rc, "'%s' exited %d: %s", args, rc, out);
	T_CHECK(strstr(out, needle) && strchr(out, '\n') == out + strlen(out) - 1,
		"'%s' said '%s', want one line with '%s'", args, out, needle);
}

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	T_CHECK(d, "cannot list %s", dir);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	char cmd[4096], out[8192], args[512];
	char *dir = t_mkdtemp("/var/tmp");
	double step, bound, rbw, wbw, rbytes, wbytes;
	int rc;

	T_CHECK(argc == 2, "usage: %s ZINF_BINARY", argv[0]);
	T_CHECK(dir, "cannot make a scratch directory under /var/tmp");
	snprintf(cmd, sizeof(cmd),
		 "%s bench adam --nvme %s --elems 2000000 --sub-group 300000 --iters 3 --json",
		 argv[1], dir);
	rc = t_run(cmd, out, sizeof(out));
	T_CHECK(rc == 0, "bench exited %d: %s", rc, out);
	T_CHECK(out[0] == '{' && strstr(out, "}\n"), "not one JSON object: %s", out);
	T_CHECK(strstr(out, "\"mode\": \"nvme\""), "mode: %s", out);
	T_CHECK(t_json_number(out, "elems") == 2000000 &&
			t_json_number(out, "sub_group_size") == 300000 &&
			t_json_number(out, "n_sub_groups") == 7 &&
			t_json_number(out, "pinned_buffers") == 3,
		"run parameters: %s", out);
	step = t_json_number(out, "nvme_step_seconds");
	bound = t_json_number(out, "nvme_bound_seconds");
	rbw = t_json_number(out, "nvme_read_bytes_per_second");
	wbw = t_json_number(out, "nvme_write_bytes_per_second");
	rbytes = t_json_number(out, "nvme_read_bytes");
	wbytes = t_json_number(out, "nvme_write_bytes");
	/* 6 sub-groups of 300000 (3 x 1200128 B) and one of 200000 (3 x 802816 B) */
	T_CHECK(rbytes == 6 * 3 * 1200128.0 + 3 * 802816.0 && wbytes == rbytes,
		"bytes per step: read %.0f, written %.0f", rbytes, wbytes);
	T_CHECK(step > 0 && rbw > 0 && wbw > 0 && bound > 0, "%s", out);
	T_CHECK(fabs(bound - (rbytes / rbw + wbytes / wbw)) <= 1e-3 * bound + 2e-6,
		"bound %.6f is not read/read_bw + written/write_bw (%.6f)", bound,
		rbytes / rbw + wbytes / wbw);
	T_CHECK(fabs(t_json_number(out, "nvme_step_to_bound") - step / bound) <=
			1e-3 * step / bound,
		"ratio %.4f vs %.4f", t_json_number(out, "nvme_step_to_bound"), step / bound);
	T_CHECK(t_json_number(out, "nvme_update_seconds") > 0 &&
			t_json_number(out, "nvme_update_seconds") < step,
		"update time %.6f of a %.6f s step", t_json_number(out, "nvme_update_seconds"),
		step);
	fprintf(stderr, "%s", out);
	T_CHECK(entries(dir) == 0, "the bench left %d entries in %s", entries(dir), dir);

	/* text mode names the bound */
	snprintf(cmd, sizeof(cmd),
		 "%s bench adam --nvme %s --elems 600000 --sub-group 200000 --iters 1 "
		 "--io-engine psync --no-pipeline-write",
		 argv[1], dir);
	rc = t_run(cmd, out, sizeof(out));
	T_CHECK(rc == 0 && strstr(out, "step / bound:") && strstr(out, "psync") &&
			strstr(out, "2 pinned buffers"),
		"text mode exited %d: %s", rc, out);
	T_CHECK(entries(dir) == 0, "the bench left files in %s", dir);

	expect_error(argv[1], "--nvme ''", 2, "--nvme ''");
	expect_error(argv[1], "--nvme /var/tmp --sub-group 0", 2, "--sub-group 0");
	expect_error(argv[1], "--nvme /var/tmp --io-engine spdk", 2, "--io-engine spdk");
	/* a missing directory is bad input, refused before anything starts: one line */
	snprintf(cmd, sizeof(cmd), "%s bench adam --nvme %s/missing/deeper --elems 1000 2>&1",
		 argv[1], dir);
	rc = t_run(cmd, out, sizeof(out));
	snprintf(args, sizeof(args),
		 "zinf bench adam: --nvme %s/missing/deeper: No such file or directory\n", dir);
	T_CHECK(rc == 2 && strcmp(out, args) == 0, "missing directory: exit %d: %s", rc, out);
	t_rmrf(dir);
	return T_EXIT_PASS;
}

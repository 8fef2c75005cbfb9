/* zinf train under the process's own limits (argv[1] is the CLI): a file-size limit
 * (ulimit -f) below the NVMe files' 1 GiB preallocation unit no longer ends the run by
 * SIGXFSZ: at 100 MB the files are made smaller and the run trains and saves; at 20 KB it
 * fails with exit 1 (not 2: the input is fine) and one line saying "File too large".
 * Too few file descriptors (ulimit -n 12 down to 6: the NVMe files, the final save's
 * files or its commit run short) fail with exit 1 on one line, and leave neither the
 * --save directory the run made (the final save's .partial removed once the engine has
 * let its descriptors go) nor the NVMe run directory. An address-space limit (ulimit -v)
 * too low for OpenBLAS's buffers is said on one line, exit 1, before anything runs
 * (OpenBLAS spun for ever). */
#include <sys/wait.h>

#include "cli_util.h"
#include "train_fixture.h"

static struct tf_dir d;
static const char *zinf_bin;

/* zinf train under `ulimit LIMIT` with --save d.root/out; its exit status (-1: a signal)
 * and its stderr in err. */
static int run_limited(const char *limit, int steps, char *err, size_t len)
{
	char cmd[2048], errpath[200];
	FILE *f;
	size_t n;
	int status;

	/* (stderr opened first: the shell's own descriptors count against the limit) */
	snprintf(errpath, sizeof(errpath), "%s/stderr.txt", d.root);
	snprintf(cmd, sizeof(cmd),
		 "exec 2>'%s' && ulimit %s && exec '%s' train --init '%s' --config '%s' "
		 "--data-format text --data '%s' --seq-len 16 --steps %d --save '%s/out' "
		 "--save-state -q",
		 errpath, limit, zinf_bin, d.model, d.ds, d.data, steps, d.root);
	status = system(cmd);
	f = fopen(errpath, "r");
	T_CHECK(f, "%s", errpath);
	n = fread(err, 1, len - 1, f);
	err[n] = 0;
	fclose(f);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The CLI runs on clang's OpenMP runtime (libomp), not GCC's (libgomp). */
static bool uses_libomp(void)
{
	char cmd[600], out[8192];

	snprintf(cmd, sizeof(cmd), "LD_TRACE_LOADED_OBJECTS=1 '%s' 2>&1", zinf_bin);
	t_run(cmd, out, sizeof(out));
	return strstr(out, "libomp") != NULL;
}

int main(int argc, char **argv)
{
	char err[2048], path[200];

	T_CHECK(argc == 2, "usage: %s ZINF_BINARY", argv[0]);
	zinf_bin = argv[1];
	tf_setup(&d, NULL);
	tf_write_ds(&d, "nvme", "nvme", false);
	snprintf(path, sizeof(path), "%s/out/model.safetensors", d.root);

	T_CHECK(run_limited("-f 100000", 2, err, sizeof(err)) == 0,
		"under ulimit -f 100000 (100 MB): %s", err);
	T_CHECK(access(path, F_OK) == 0, "no save under ulimit -f 100000");
	T_CHECK(t_count(err, "\n") == 0, "said: %s", err);
	snprintf(path, sizeof(path), "rm -rf '%s/out'", d.root);
	T_CHECK(system(path) == 0, "rm");

	T_CHECK(run_limited("-f 20", 2, err, sizeof(err)) == 1,
		"under ulimit -f 20: not exit 1: %s", err);
	T_CHECK(t_count(err, "\n") == 1 && strstr(err, "File too large"),
		"under ulimit -f 20: not one line saying so: %s", err);
	/* too few descriptors: wherever the run meets the limit (opening the NVMe files, or
	 * the final save's, or committing it), the failure is one line (beside a warning
	 * at most) and nothing it made is left; at least one of these limits is met */
	for (int n = 12, failed = 0; n >= 6; n--) {
		char limit[16], *last;
		int rc;

		snprintf(limit, sizeof(limit), "-n %d", n);
		rc = run_limited(limit, 2, err, sizeof(err));
		if (strstr(err, "OMP: Error")) { /* (clang's libomp aborts short of descriptors
						    for its shared memory: not zinf's to say) */
			char rm[400];

			snprintf(rm, sizeof(rm), "rm -rf '%s/out' '%s/zinf-run'", d.root, d.nvme);
			T_CHECK(system(rm) == 0, "rm");
			continue;
		}
		failed += rc != 0;
		T_CHECK(n > 6 || failed, "no run failed for too few descriptors");
		if (rc == 0) {
			snprintf(path, sizeof(path), "rm -rf '%s/out'", d.root);
			T_CHECK(system(path) == 0, "rm");
			continue;
		}
		T_CHECK(rc == 1, "under ulimit %s: exit %d: %s", limit, rc, err);
		last = strstr(err, "zinf train: ");
		T_CHECK(last && strstr(last, "Too many open files") && t_count(last, "\n") == 1 &&
				t_count(err, "\n") == 1 + t_count(err, "zinf: warn: "),
			"under ulimit %s: not one line saying so: %s", limit, err);
		snprintf(path, sizeof(path), "%s/out", d.root);
		T_CHECK(access(path, F_OK) != 0,
			"under ulimit %s: the --save directory the run made is left", limit);
		snprintf(path, sizeof(path), "%s/zinf-run", d.nvme);
		T_CHECK(access(path, F_OK) != 0, "under ulimit %s: the NVMe run directory is left",
			limit);
	}
	/* a save the file-size limit is below (the state in host memory: no NVMe file
	 * meets it first): one line naming the file and what it could not do. (Not with
	 * clang's libomp, as the ThreadSanitizer build has: it sizes a shared-memory file
	 * of its own as its threads start, and under the limit reads past its end, SIGBUS.) */
	if (!uses_libomp()) {
		tf_write_ds(&d, "cpu", "cpu", false);
		T_CHECK(run_limited("-f 20", 2, err, sizeof(err)) == 1,
			"a save under ulimit -f 20: not exit 1: %s", err);
		T_CHECK(t_count(err, "\n") == 1 &&
				strstr(err, "safetensors.tmp: cannot size it to ") &&
				strstr(err, "File too large"),
			"a save under ulimit -f 20: not one line saying so: %s", err);
		snprintf(path, sizeof(path), "%s/out", d.root);
		T_CHECK(access(path, F_OK) != 0, "a failed save left the --save directory it made");
	}
	/* an address-space limit too low for OpenBLAS (which spun for ever): one line, exit 1,
	 * from the CLI before any command and from the run (a sanitizer's build cannot
	 * start under such a limit at all: not asked there) */
	{
		char cmd[600], out[2048];
		int rc;

		snprintf(cmd, sizeof(cmd), "ulimit -v 300000 && exec timeout 60 '%s' version 2>&1",
			 zinf_bin);
		rc = t_run(cmd, out, sizeof(out));
		if (!strstr(out, "Sanitizer")) {
			T_CHECK(rc == 1 && t_count(out, "\n") == 1 &&
					strstr(out,
					       "zinf: address space: the limit (ulimit -v, 300000 "
					       "KiB) leaves less than"),
				"under ulimit -v 300000: exit %d: %s", rc, out);
			rc = run_limited("-v 300000", 2, err, sizeof(err));
			T_CHECK(rc == 1 && t_count(err, "\n") == 1 &&
					strstr(err, "address space: the limit"),
				"a run under ulimit -v 300000: exit %d: %s", rc, err);
		}
	}
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

/* `zinf check` exits 2 with exactly one line on stderr (the .expect message) and nothing
 * on stdout for every bad config; exits 0 and lists every key for every sample config;
 * and refuses bad command lines with exit 2 (numbers out of range or with a leading space,
 * a WORLD_SIZE that is no number, a FIFO as the config); --json gives null for a batch
 * size not set and the resolved "auto" pinned limit; with ZINF_LOG set, each of the
 * config's warnings is printed once; output that cannot reach stdout exits 1 with one
 * line. argv: zinf-binary bad-dir examples-dir. */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "zinf/zinf.h"

struct run {
	int status;
	char out[65536];
	char err[8192];
};

static void read_file(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;

	buf[n] = 0;
	if (f)
		fclose(f);
}

static const char *run_env = ""; /* NAME=VALUE given to the run after ZINF_LOG is unset */

static void run(struct run *r, const char *zinf, const char *args)
{
	char cmd[8192];
	int rc;

	snprintf(cmd, sizeof(cmd),
		 "env -u ZINF_LOG %s %s %s >cli_check.out 2>cli_check.err </dev/null", run_env,
		 zinf, args);
	rc = system(cmd);
	T_CHECK(rc != -1 && WIFEXITED(rc), "could not run: %s", cmd);
	r->status = WEXITSTATUS(rc);
	read_file("cli_check.out", r->out, sizeof(r->out));
	read_file("cli_check.err", r->err, sizeof(r->err));
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

int main(int argc, char **argv)
{
	static struct run r;
	char args[4096], want[4096], expect[2048];
	struct dirent *e;
	int n_bad = 0, n_good = 0;
	DIR *d;

	T_CHECK(argc == 4, "usage: %s ZINF BAD_DIR EXAMPLES_DIR", argv[0]);
	d = opendir(argv[2]);
	T_CHECK(d, "opendir %s", argv[2]);
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0)
			continue;
		snprintf(args, sizeof(args), "check %s/%s", argv[2], e->d_name);
		run(&r, argv[1], args);
		snprintf(want, sizeof(want), "%s/%.*s.expect", argv[2], (int)(n - 5), e->d_name);
		read_file(want, expect, sizeof(expect));
		snprintf(want, sizeof(want), "%s/%s: %s", argv[2], e->d_name, expect);
		T_CHECK(r.status == 2, "%s: exit %d, want 2", e->d_name, r.status);
		T_CHECK(r.out[0] == 0, "%s: stdout not empty: %s", e->d_name, r.out);
		T_CHECK(count_lines(r.err) == 1, "%s: %d lines on stderr:\n%s", e->d_name,
			count_lines(r.err), r.err);
		T_CHECK_STR(r.err, want);
		n_bad++;
	}
	closedir(d);
	T_CHECK(n_bad >= 40, "only %d bad configs", n_bad);

	d = opendir(argv[3]);
	T_CHECK(d, "opendir %s", argv[3]);
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0)
			continue;
		snprintf(args, sizeof(args), "check %s/%s", argv[3], e->d_name);
		run(&r, argv[1], args);
		T_CHECK(r.status == 0, "%s: exit %d: %s", e->d_name, r.status, r.err);
		T_CHECK(strstr(r.out, "zero_optimization.stage") &&
				strstr(r.out, "zinf.chunk_size"),
			"%s: listing incomplete", e->d_name);
		for (const char *p = r.err; *p; p = strchr(p, '\n') + 1)
			T_CHECK(strncmp(p, "warning: ", 9) == 0,
				"%s: stderr line is not a warning: %s", e->d_name, p);
		n_good++;
	}
	closedir(d);
	T_CHECK(n_good >= 4, "only %d sample configs", n_good);

	snprintf(args, sizeof(args), "check --json %s/zero3-nvme.json", argv[3]);
	run(&r, argv[1], args);
	T_CHECK(r.status == 0 && r.out[0] == '{' &&
			strstr(r.out, "\"aio.queue_depth\": {\"value\": 32, \"source\": \"file\"}"),
		"--json output: %s", r.out);
	/* a batch size not set is null in JSON (0 is no valid value), "unset" in text; an
	 * "auto" pinned limit shows the value it resolves to on this machine */
	{
		FILE *f = fopen("cli_check_empty.json", "w");
		T_CHECK(f && fputs("{}\n", f) >= 0 && fclose(f) == 0, "write cli_check_empty.json");
	}
	run(&r, argv[1], "check --json cli_check_empty.json");
	unlink("cli_check_empty.json");
	T_CHECK(r.status == 0 &&
			strstr(r.out, "\"train_batch_size\": {\"value\": null, \"source\": "
				      "\"default\"}") &&
			strstr(r.out, "\"zinf.pinned_memory_limit\": {\"value\": ") &&
			!strstr(r.out, "\"zinf.pinned_memory_limit\": {\"value\": \"auto\""),
		"--json unset and auto values: %s", r.out);
	/* with ZINF_LOG set, each config warning is still printed once */
	run_env = "ZINF_LOG=info";
	snprintf(
		args, sizeof(args),
		"check -q --set zero_optimization.sub_group_size=1000 --set "
		"zero_optimization.offload_optimizer.device=nvme --set "
		"zero_optimization.offload_optimizer.nvme_path=/tmp --set zero_optimization.stage=3 "
		"%s/minimal.json",
		argv[3]);
	run(&r, argv[1], args);
	run_env = "";
	T_CHECK(r.status == 0 && strstr(r.err, "warning: ") && count_lines(r.err) == 1,
		"ZINF_LOG=info: one warning line expected: exit %d: %s", r.status, r.err);

	static const char *const usage_errors[] = {
		"check",
		"check a.json b.json",
		"check --world-size abc x.json",
		"check --world-size 0 x.json",
		"check --world-size 4294967298 x.json", /* was cut to int: 2 */
		"check --world-size ' 2' x.json",
		"check --hidden-size 4294967296 x.json", /* its square wrapped */
		"check --set novalue x.json",
		"check --no-such-flag x.json",
		"no-such-command",
		"",
	};
	for (size_t i = 0; i < sizeof(usage_errors) / sizeof(usage_errors[0]); i++) {
		run(&r, argv[1], usage_errors[i]);
		T_CHECK(r.status == 2, "'zinf %s': exit %d, want 2", usage_errors[i], r.status);
		T_CHECK(r.err[0] != 0, "'zinf %s': no message", usage_errors[i]);
	}
	run(&r, argv[1], "check --no-such-flag x.json");
	T_CHECK(count_lines(r.err) == 1 && strstr(r.err, "--no-such-flag: unknown"),
		"an unknown flag: one line naming it: %s", r.err);
	run(&r, argv[1], "check -xq x.json"); /* inside a cluster of short flags */
	T_CHECK(count_lines(r.err) == 1 && strstr(r.err, "check: -x: unknown"),
		"an unknown short flag in a cluster: one line naming it: %s", r.err);
	run(&r, argv[1], "check --world-size 2 --world-size 4 x.json");
	T_CHECK(r.status == 2 && count_lines(r.err) == 1 &&
			strstr(r.err, "zinf check: --world-size: given twice (expected once)"),
		"--world-size twice: exit %d: %s", r.status, r.err);
	run(&r, argv[1], "check --hidden-size 64 --hidden-size=128 x.json");
	T_CHECK(r.status == 2 && count_lines(r.err) == 1 &&
			strstr(r.err, "zinf check: --hidden-size: given twice (expected once)"),
		"--hidden-size twice: exit %d: %s", r.status, r.err);
	run(&r, argv[1], "check x.json --world-size");
	T_CHECK(r.status == 2 && count_lines(r.err) == 1 && strstr(r.err, "--world-size"),
		"a flag without its value: one line naming it: %s", r.err);
	run(&r, argv[1], "check /nonexistent/ds.json");
	T_CHECK(r.status == 2 && count_lines(r.err) == 1 &&
			strstr(r.err, "/nonexistent/ds.json: cannot open"),
		"missing file: exit %d: %s", r.status, r.err);
	snprintf(args, sizeof(args), "check --set zero_optimization.stage=9 %s/minimal.json",
		 argv[3]);
	run(&r, argv[1], args);
	T_CHECK(r.status == 2 && strstr(r.err, "zero_optimization.stage: 9 is out of range"),
		"--set checked: %s", r.err);
	setenv("WORLD_SIZE", "garbage", 1); /* was taken as 1 */
	snprintf(args, sizeof(args), "check %s/minimal.json", argv[3]);
	run(&r, argv[1], args);
	T_CHECK(r.status == 2 && count_lines(r.err) == 1 &&
			strstr(r.err, "WORLD_SIZE: 'garbage' is not a whole number"),
		"WORLD_SIZE=garbage: exit %d: %s", r.status, r.err);
	snprintf(args, sizeof(args), "check --world-size 1 %s/minimal.json", argv[3]);
	run(&r, argv[1], args); /* --world-size says: the variable is not read */
	T_CHECK(r.status == 0, "WORLD_SIZE=garbage with --world-size 1: exit %d: %s", r.status,
		r.err);
	run(&r, argv[1], "check --help");
	T_CHECK(r.status == 0, "WORLD_SIZE=garbage with --help: exit %d", r.status);
	setenv("WORLD_SIZE", "2", 1); /* two launchers' variables that disagree */
	setenv("PMI_SIZE", "3", 1);
	snprintf(args, sizeof(args), "check %s/minimal.json", argv[3]);
	run(&r, argv[1], args);
	T_CHECK(r.status == 2 && count_lines(r.err) == 1 &&
			strstr(r.err,
			       "WORLD_SIZE=2 but PMI_SIZE=3: the launcher's world sizes disagree"),
		"WORLD_SIZE=2 beside PMI_SIZE=3: exit %d: %s", r.status, r.err);
	unsetenv("PMI_SIZE");
	unsetenv("WORLD_SIZE");
	unlink("cli_check.fifo");
	T_CHECK(mkfifo("cli_check.fifo", 0644) == 0, "mkfifo");
	run(&r, argv[1], "check cli_check.fifo"); /* refused, not waited on */
	unlink("cli_check.fifo");
	T_CHECK(r.status == 2 && count_lines(r.err) == 1 && strstr(r.err, "not a regular file"),
		"a FIFO: exit %d: %s", r.status, r.err);
	run(&r, argv[1], "check --help");
	T_CHECK(r.status == 0 && strstr(r.out, "usage: zinf check"), "check --help");
	run(&r, argv[1], "help check");
	T_CHECK(r.status == 0 && strstr(r.out, "usage: zinf check"), "help check");
	run(&r, argv[1], "help --help"); /* help's own usage, as every command's --help */
	T_CHECK(r.status == 0 && strncmp(r.out, "usage: zinf help ", 17) == 0, "help --help: %s",
		r.out);
	run(&r, argv[1], "help bench io"); /* the benchmark's own, not zinf bench's */
	T_CHECK(r.status == 0 && strstr(r.out, "usage: zinf bench io"), "help bench io: %s", r.out);
	run(&r, argv[1], "help config extra");
	T_CHECK(r.status == 2 && count_lines(r.err) == 1 && strstr(r.err, "extra"),
		"help config extra: exit %d: %s", r.status, r.err);
	run(&r, argv[1], "version");
	T_CHECK(r.status == 0 && strncmp(r.out, "zinf ", 5) == 0, "version");
	if (access("/dev/full", W_OK) == 0) { /* what cannot reach stdout fails, said once */
		for (int i = 0; i < 2; i++) {
			int rc;
			if (i)
				snprintf(args, sizeof(args),
					 "%s version >/dev/full 2>cli_check.err", argv[1]);
			else
				snprintf(args, sizeof(args),
					 "%s check %s/minimal.json >/dev/full 2>cli_check.err",
					 argv[1], argv[3]);
			rc = system(args);
			read_file("cli_check.err", r.err, sizeof(r.err));
			T_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1 && count_lines(r.err) == 1 &&
					strstr(r.err, "zinf: cannot write to stdout: "),
				"%s: exit %d: %s", args, WEXITSTATUS(rc), r.err);
		}
	}
	return T_EXIT_PASS;
}

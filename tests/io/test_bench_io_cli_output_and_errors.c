/*
 * `zinf bench io` (the CLI binary, given as argv[1]): a small run prints one JSON object
 * with bytes_per_second and iops and leaves no files (a 64 KiB pass too); bad options
 * exit 2 with a one-line message naming the option and the value (a --dir list with an
 * empty path, one directory twice, a path that is no directory; a --size past 16 TiB for
 * each path; a value flag given twice; --qd and --threads beyond the I/O layer's limits;
 * a --file that is no regular file or cannot be made); a --file holding data is written
 * over (a write mode, --sweep, filled when short) only with --force, and is left
 * unchanged when refused; a run stopped by SIGTERM removes its run directory and ends by
 * the signal.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli_util.h"
#include "io_test_util.h"

static char out[8192];

/* Run the CLI with args through the shell; capture stdout+stderr; return exit code. */
static int run(const char *zinf, const char *args)
{
	char cmd[1024];
	FILE *p;
	size_t n;
	int st;

	snprintf(cmd, sizeof(cmd), "'%s' bench io %s 2>&1", zinf, args);
	p = popen(cmd, "r");
	T_CHECK(p != NULL, "popen %s", cmd);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Whether dir's filesystem takes O_DIRECT (what the benchmark should report). */
static bool direct_here(const char *dir)
{
	char path[600];
	int fd;

	snprintf(path, sizeof(path), "%s/direct-probe", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_DIRECT, 0600);
	if (fd >= 0)
		close(fd);
	unlink(path);
	return fd >= 0;
}

/* zinf bench io ARGS (NULL-ended) in the background, SIGTERM usec after path appears:
 * it must end by that signal. */
static void stop_when_made(const char *zinf, const char *path, useconds_t usec,
			   const char *const *args)
{
	const char *argv[32] = {zinf, "bench", "io"};
	int n = 3;

	while (*args && n < 31)
		argv[n++] = *args++;
	argv[n] = NULL;
	t_stop_when_made(argv, path, usec);
}

static void want_usage_error(const char *zinf, const char *args, const char *want)
{
	int rc = run(zinf, args);

	T_CHECK(rc == 2, "'%s': exit %d, expected 2; output: %s", args, rc, out);
	T_CHECK(strstr(out, want) != NULL, "'%s': output lacks '%s': %s", args, want, out);
	T_CHECK(strchr(out, '\n') == out + strlen(out) - 1, "'%s': not one line: %s", args, out);
}

int main(int argc, char **argv)
{
	char *dir = t_mkdtemp("/var/tmp"), args[1024];
	int rc;

	T_CHECK(argc == 2, "usage: %s PATH_TO_ZINF", argv[0]);
	T_CHECK(dir, "scratch directory");
	snprintf(args, sizeof(args),
		 "--dir %s --size 8MiB --bs 1MiB --qd 4 --loops 3 --rw randread --json", dir);
	rc = run(argv[1], args);
	T_CHECK(rc == 0, "bench run: exit %d: %s", rc, out);
	T_CHECK(out[0] == '{' && strstr(out, "\"bytes_per_second\": ") &&
			strstr(out, "\"iops\": ") && strstr(out, "\"rw\": \"randread\"") &&
			strstr(out, direct_here(dir) ? "\"direct\": true" : "\"direct\": false"),
		"JSON output (O_DIRECT %s here): %s", direct_here(dir) ? "works" : "refused", out);
	/* a pass smaller than the I/O layer's least file (1 MiB) */
	snprintf(args, sizeof(args), "--dir %s --size 64KiB --bs 4KiB --qd 2 --loops 1 --json",
		 dir);
	rc = run(argv[1], args);
	T_CHECK(rc == 0 && out[0] == '{', "a 64 KiB pass: exit %d: %s", rc, out);
	T_CHECK(rmdir(dir) == 0, "bench left files in %s", dir);
	free(dir);

	/* SIGTERM during the passes: the run directory removed, the end by the signal; and a
	 * --file it made, stopped before it was filled, not left behind (its holes would read
	 * faster than the drive next time) */
	{
		char path[600];
		struct stat st;

		dir = t_mkdtemp("/var/tmp");
		T_CHECK(dir, "scratch directory");
		snprintf(path, sizeof(path), "%s/zinf-bench-io", dir);
		stop_when_made(argv[1], path, 100000,
			       (const char *[]){"--dir", dir, "--size", "16MiB", "--bs", "1MiB",
						"--qd", "4", "--loops", "60000", "--rw", "write",
						NULL});
		T_CHECK(rmdir(dir) == 0, "a stopped bench io left files in %s", dir);
		T_CHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
		snprintf(path, sizeof(path), "%s/new.bin", dir);
		stop_when_made(
			argv[1], path, 0,
			(const char *[]){"--file", path, "--size", "1GiB", "--qd", "2", NULL});
		T_CHECK(stat(path, &st) != 0, "a --file stopped in its fill is left");
		T_CHECK(rmdir(dir) == 0, "files left in %s", dir);
		free(dir);
	}

	want_usage_error(argv[1], "--dir /tmp --bs 1000", "--bs 1000");
	want_usage_error(argv[1], "--dir /tmp --bs banana", "--bs banana");
	want_usage_error(argv[1], "--dir /tmp --qd 0", "--qd 0");
	want_usage_error(argv[1], "--dir /tmp --rw sideways", "--rw sideways");
	want_usage_error(argv[1], "--dir /tmp --engine spdk", "--engine spdk");
	want_usage_error(argv[1], "--size 1GiB", "--file PATH or --dir PATH");
	want_usage_error(argv[1], "--dir /tmp --frobnicate", "--frobnicate");
	want_usage_error(argv[1], "--dir /tmp --size 1GiB --bs 3MiB", "multiple of --bs");
	want_usage_error(argv[1], "--dir /tmp --size 20TiB",
			 "--size 21990232555520: expected at most 16TiB for each --dir path");
	want_usage_error(argv[1], "--dir /tmp,/var/tmp --size 40TiB", "--size 43980465111040");
	want_usage_error(argv[1], "--dir /tmp --size 18446744073708503040", /* 2^64 - 1 MiB */
			 "--size 18446744073708503040: expected at most 16TiB");
	want_usage_error(argv[1], "--dir /tmp --size 8MiB --size 16MiB",
			 "--size: given twice (expected once)");
	want_usage_error(argv[1], "--dir '' --size 8MiB", "--dir : an empty path");
	want_usage_error(argv[1], "--dir , --size 8MiB", "--dir ,: an empty path");
	want_usage_error(argv[1], "--dir /tmp,,/var/tmp --size 8MiB", "an empty path");
	want_usage_error(argv[1], "--dir /tmp,/tmp/ --size 8MiB",
			 "/tmp and /tmp/ are the same directory");
	want_usage_error(argv[1], "--dir /nonexistent/zinf --size 8MiB",
			 "--dir /nonexistent/zinf: No such file or directory");
	want_usage_error(argv[1], "--dir /tmp --threads 300",
			 "--threads 300: expected a whole number from 1 to 256");
	want_usage_error(argv[1], "--dir /tmp --qd 5000",
			 "--qd 5000: expected a whole number from 1 to 4096");
	want_usage_error(argv[1], "--dir /tmp --qd -1", "--qd -1");
	want_usage_error(argv[1], "--file /nonexistent/zinf/x --size 8MiB",
			 "--file /nonexistent/zinf/x: cannot be made");
	want_usage_error(argv[1], "--file /tmp --size 8MiB", "--file /tmp: not a regular file");

	/* a --file with data: written over only with --force, else refused and unchanged */
	{
		static const char keep[] = "a user's data\n";
		char file[256], got[64] = "";
		FILE *f;

		dir = t_mkdtemp("/var/tmp");
		T_CHECK(dir, "scratch directory");
		snprintf(file, sizeof(file), "%s/data.txt", dir);
		f = fopen(file, "w");
		T_CHECK(f && fputs(keep, f) >= 0 && fclose(f) == 0, "write %s", file);
		snprintf(args, sizeof(args), "--file %s --dir %s --size 8MiB --loops 1", file, dir);
		want_usage_error(argv[1], args, "exactly one of --file");
		snprintf(args, sizeof(args), "--file %s --dir x,%s --size 8MiB", file, dir);
		want_usage_error(argv[1], args, "--dir");
		snprintf(args, sizeof(args), "--dir %s --size 8MiB", file);
		want_usage_error(argv[1], args, "not a directory");
		snprintf(args, sizeof(args), "--file %s --size 8MiB --loops 1", file);
		want_usage_error(argv[1], args,
				 "holds 14 bytes that the benchmark would write over (shorter than "
				 "--size, so filled; --force allows it)");
		snprintf(args, sizeof(args), "--file %s --size 8MiB --loops 1 --rw randwrite",
			 file);
		want_usage_error(argv[1], args, "(a write mode; --force allows it)");
		snprintf(args, sizeof(args), "--file %s --sweep --size 8MiB --loops 1", file);
		want_usage_error(argv[1], args, "(--sweep writes; --force allows it)");
		f = fopen(file, "r");
		T_CHECK(f && fgets(got, sizeof(got), f) && fgetc(f) == EOF && fclose(f) == 0 &&
				strcmp(got, keep) == 0,
			"%s was changed by a refused run: %s", file, got);
		snprintf(args, sizeof(args), "--file %s --size 8MiB --loops 1 --rw write --force",
			 file);
		rc = run(argv[1], args);
		T_CHECK(rc == 0 && strstr(out, "write 8 MiB"), "--force: exit %d: %s", rc, out);
		/* a file the benchmark made is long enough: read again without --force */
		snprintf(args, sizeof(args), "--file %s --size 8MiB --loops 1", file);
		rc = run(argv[1], args);
		T_CHECK(rc == 0 && strstr(out, "read 8 MiB"), "read again: exit %d: %s", rc, out);
		T_CHECK(unlink(file) == 0 && rmdir(dir) == 0, "cleanup %s", dir);
		free(dir);
	}
	return 0;
}

/*
 * `zinf bench adam --json` prints one JSON object with positive params_per_second,
 * bytes_per_second, triad_bytes_per_second and their ratio, and bad options exit 2 with
 * one line naming the option and the value (a value flag given twice among them; --json
 * given twice says the same, and --type takes any case). argv[1] is the zinf binary.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <unistd.h>

#include "cli_util.h"

static void expect_usage_error(const char *zinf, const char *args, const char *needle)
{
	char cmd[4096], out[4096];
	int rc;

	snprintf(cmd, sizeof(cmd), "%s bench adam %s 2>&1", zinf, args);
	rc = t_run(cmd, out, sizeof(out));
	T_CHECK(rc == 2, "'%s' exited %d", args, rc);
	T_CHECK(strstr(out, needle) && strchr(out, '\n') == out + strlen(out) - 1,
		"'%s' said '%s', want one line with '%s'", args, out, needle);
}

int main(int argc, char **argv)
{
	char cmd[4096], out[8192];
	int rc;

	T_CHECK(argc == 2, "usage: %s ZINF_BINARY", argv[0]);
	snprintf(
		cmd, sizeof(cmd),
		"%s bench adam --elems 1000000 --threads 2 --grad-dtype fp32 --iters 2 --json --json "
		"--type adamw",
		argv[1]);
	rc = t_run(cmd, out, sizeof(out));
	T_CHECK(rc == 0, "bench exited %d: %s", rc, out);
	T_CHECK(out[0] == '{' && strstr(out, "}\n"), "not one JSON object: %s", out);
	T_CHECK(t_json_number(out, "params_per_second") > 0, "params_per_second");
	T_CHECK(t_json_number(out, "bytes_per_second") > 0, "bytes_per_second");
	T_CHECK(t_json_number(out, "triad_bytes_per_second") > 0, "triad_bytes_per_second");
	T_CHECK(t_json_number(out, "ratio_to_triad") > 0, "ratio_to_triad");
	T_CHECK(t_json_number(out, "bytes_per_param") == 30,
		"fp32 grads + bf16 copy is 30 B/param");
	T_CHECK(t_json_number(out, "elems") == 1000000, "elems");

	expect_usage_error(argv[1], "--elems 0", "--elems 0");
	expect_usage_error(argv[1], "--grad-dtype fp8", "--grad-dtype fp8");
	expect_usage_error(argv[1], "--threads 0", "--threads 0");
	expect_usage_error(argv[1], "--isa sse9", "--isa sse9");
	expect_usage_error(argv[1], "--type SGD", "--type SGD");
	expect_usage_error(argv[1], "--elems 1e20",
			   "--elems 1e20: not a positive count below 2^64");
	expect_usage_error(argv[1], "extra", "unexpected argument 'extra'");
	expect_usage_error(argv[1], "--bogus", "--bogus: unknown");
	expect_usage_error(argv[1], "--elems 1000 --threads 1 --elems 2000",
			   "--elems: given twice (expected once)");
	expect_usage_error(argv[1], "--iters", "--iters");
	/* what works only with --nvme is refused without it, not ignored; a --nvme that is
	 * no directory is bad input (exit 2) */
	expect_usage_error(argv[1], "--sub-group 1000", "--sub-group: needs --nvme DIR");
	expect_usage_error(argv[1], "--no-pipeline-write", "--no-pipeline-write: needs --nvme DIR");
	expect_usage_error(argv[1], "--nvme /nonexistent/zinf-bench",
			   "--nvme /nonexistent/zinf-bench: No such file");
	/* a node the machine lacks: refused, not run unbound (no machine has 1024 nodes) */
	if (access("/sys/devices/system/node/node0", F_OK) == 0) /* (the kernel lists them) */
		expect_usage_error(argv[1], "--numa-node 1023",
				   "--numa-node 1023: this process may use NUMA");
	return T_EXIT_PASS;
}

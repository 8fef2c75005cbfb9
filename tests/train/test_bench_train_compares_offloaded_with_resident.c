/*
 * `zinf bench train --json` runs the offloaded config beside its resident baseline and
 * prints one JSON object: both runs' losses identical step by step, the offloaded run's
 * peak device bytes within its limit while the resident run's peak exceeds that limit
 * (it really holds everything), positive times and ratio, and every step but the first
 * measured; a warning about the config printed once, not once a run; a --set zinf.trace
 * file is the offloaded run's; the resident run drops what only offload uses
 * (zinf.nvme_paths, gradients on NVMe, max_in_cpu), without a word. Bad input (--steps 1 or past 100000, a bad --resident-set key or one with no value, a missing config, an unknown
 * flag) exits 2 with one line naming it. argv: the zinf binary, the demo model's config.json
 * and the demo's DeepSpeed config (parameters and optimizer on NVMe, a 1.5 MiB device
 * budget).
 */
#include "cli_util.h"
#include "train_fixture.h"

static const char *zinf_bin, *model, *ds;
static struct tf_dir d;

static int run(const char *args, char *out, size_t len)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd),
		 "'%s' bench train --init '%s' --data '%s' --data-format text --seq-len 32 "
		 "--set zero_optimization.offload_param.nvme_path='%s' "
		 "--set zero_optimization.offload_optimizer.nvme_path='%s' %s 2>&1",
		 zinf_bin, model, d.data, d.nvme, d.nvme, args);
	return t_run(cmd, out, len);
}

/* The object after "name": {. */
static const char *object(const char *json, const char *name)
{
	char key[96];
	const char *p;

	snprintf(key, sizeof(key), "\"%s\": {", name);
	p = strstr(json, key);
	T_CHECK(p, "no object %s in %s", name, json);
	return p;
}

static void expect_usage_error(const char *args, const char *needle)
{
	char out[4096];
	int rc = run(args, out, sizeof(out));

	T_CHECK(rc == 2, "'%s' exited %d: %s", args, rc, out);
	T_CHECK(strstr(out, needle) && strchr(out, '\n') == out + strlen(out) - 1,
		"'%s' said '%s', want one line with '%s'", args, out, needle);
}

int main(int argc, char **argv)
{
	char args[1024], out[8192];
	const char *off, *res;
	int rc;

	T_CHECK(argc == 4, "usage: %s ZINF_BINARY MODEL.json DS.json", argv[0]);
	zinf_bin = argv[1];
	model = argv[2];
	ds = argv[3];
	tf_setup(&d, NULL);
	snprintf(args, sizeof(args), "--config '%s' --steps 3 --json", ds);
	rc = run(args, out, sizeof(out));
	T_CHECK(rc == 0, "bench exited %d: %s", rc, out);
	T_CHECK(out[0] == '{' && strstr(out, "}\n"), "not one JSON object: %s", out);
	T_CHECK(strstr(out, "\"losses_identical\": true"), "losses differ: %s", out);
	T_CHECK(t_json_number(out, "measured_steps") == 2, "steps 2 and 3 are measured");
	T_CHECK(t_json_number(out, "fwd_bwd_ratio") > 0, "ratio");
	off = object(out, "offloaded");
	res = object(out, "resident");
	T_CHECK(t_json_number(off, "fwd_bwd_median_s") > 0 &&
			t_json_number(res, "fwd_bwd_median_s") > 0,
		"times");
	T_CHECK(t_json_number(off, "peak_device_bytes") <= t_json_number(off, "device_limit_bytes"),
		"offloaded peak within its limit");
	T_CHECK(t_json_number(res, "peak_device_bytes") > t_json_number(off, "device_limit_bytes"),
		"the resident run holds more than the offloaded limit: %s", out);
	T_CHECK(t_json_number(off, "nvme_read_bytes_per_step") > 0, "the offloaded run reads NVMe");

	/* a key with no effect warns once, though both runs load the config; a --set trace
	 * is the offloaded run's (NVMe reads on its lane 1), not written over by the
	 * resident run's */
	snprintf(
		args, sizeof(args),
		"--config '%s' --steps 2 --json --set zero_optimization.offload_param.buffer_count=9 "
		"--set zinf.trace='%s/bench.trace.json'",
		ds, d.root);
	rc = run(args, out, sizeof(out));
	T_CHECK(rc == 0, "bench exited %d: %s", rc, out);
	T_CHECK(t_count(out, "buffer_count") == 1, "want the warning once: %s", out);
	{
		char path[300], *trace;
		size_t n;

		snprintf(path, sizeof(path), "%s/bench.trace.json", d.root);
		tf_read_all(path, &trace, &n);
		T_CHECK(strstr(trace, "\"ph\": \"X\", \"pid\": 1, \"tid\": 1,"),
			"the trace has no NVMe read: the resident run's?");
		free(trace);
	}
	/* what only offload uses is reset for the resident run: zinf.nvme_paths (it had
	 * locked the offloaded run's run directory: "in use by another live process"),
	 * gradients on NVMe (refused without the optimizer there), max_in_cpu (a warning
	 * blamed on a --set the user never gave) */
	snprintf(args, sizeof(args),
		 "--config '%s' --steps 2 --json --set 'zinf.nvme_paths=[\"%s\"]'"
		 " --set zinf.offload_gradients=nvme"
		 " --set zero_optimization.offload_param.max_in_cpu=1000",
		 ds, d.nvme);
	rc = run(args, out, sizeof(out));
	T_CHECK(rc == 0 && strstr(out, "\"losses_identical\": true"),
		"nvme_paths, gradients on NVMe: bench exited %d: %s", rc, out);
	T_CHECK(!strstr(out, "warn"), "a warning from the resident run's own settings: %s", out);

	snprintf(args, sizeof(args), "--config '%s' --steps 1", ds);
	expect_usage_error(args, "--steps: too few, at least 2");
	snprintf(args, sizeof(args), "--config '%s' --steps 18446744073709551615", ds);
	expect_usage_error(args,
			   "--steps 18446744073709551615: at most 100000"); /* was OOM, exit 1 */
	snprintf(args, sizeof(args), "--config '%s'", ds);
	expect_usage_error(args, "--steps: required, at least 2");
	{ /* nothing given: the model is named first */
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "'%s' bench train 2>&1", zinf_bin);
		rc = t_run(cmd, out, sizeof(out));
		T_CHECK(rc == 2 && strstr(out, "give --model DIR or --init CONFIG.json") &&
				strchr(out, '\n') == out + strlen(out) - 1,
			"no arguments: exit %d: %s", rc, out);
	}
	snprintf(args, sizeof(args), "--config '%s' --steps 3 --resident-set zinf.bogus=1", ds);
	expect_usage_error(args, "zinf.bogus");
	snprintf(args, sizeof(args), "--config '%s' --steps 3 --resident-set foo", ds);
	expect_usage_error(args, "--resident-set foo: expected KEY=VALUE");
	snprintf(args, sizeof(args), "--config '%s/missing.json' --steps 3", d.root);
	expect_usage_error(args, "missing.json");
	snprintf(args, sizeof(args), "--config '%s' --steps 3 --fast", ds);
	expect_usage_error(args, "--fast");
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

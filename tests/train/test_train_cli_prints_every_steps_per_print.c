/* zinf train without a terminal prints a progress line for the run's first and last
 * steps and every steps_per_print'th (DeepSpeed's key, default 10), while --log-json
 * still has every step: 7 steps at steps_per_print 3 print steps 1, 3, 6, 7; at the
 * default, 1 and 7; at 1, all of them. A line shows the NVMe rate when the run moves
 * NVMe bytes, and not when nothing is there (no "nvme 0.00 GB/s"). */
#include "train_fixture.h"

static const char *zinf_bin;
static struct tf_dir d;

static int nvme_lines; /* progress lines of the last run with an NVMe rate */

/* Run 7 steps with extra flags; the step numbers of stdout's progress lines, as a
 * comma-separated list in got, and the --log-json line count. */
static int run(const char *extra, char *got, size_t len)
{
	char cmd[2048], out[200], log[200], line[4096];
	int n_log = 0;
	FILE *f;

	snprintf(out, sizeof(out), "%s/stdout.txt", d.root);
	snprintf(log, sizeof(log), "%s/log.jsonl", d.root);
	snprintf(cmd, sizeof(cmd),
		 "'%s' train --init '%s' --config '%s' --data-format text --seq-len 16 --data "
		 "'%s' --steps 7 --log-json '%s' %s >'%s' 2>/dev/null </dev/null",
		 zinf_bin, d.model, d.ds, d.data, log, extra, out);
	T_CHECK(system(cmd) == 0, "%s failed", cmd);
	*got = 0;
	nvme_lines = 0;
	f = fopen(out, "r");
	T_CHECK(f, "%s", out);
	while (fgets(line, sizeof(line), f)) {
		unsigned step, steps;
		if (sscanf(line, "step %u/%u ", &step, &steps) == 2)
			snprintf(got + strlen(got), len - strlen(got), "%s%u", *got ? "," : "",
				 step);
		nvme_lines += strstr(line, " tok/s nvme ") && strstr(line, " GB/s eta ");
	}
	fclose(f);
	f = fopen(log, "r");
	T_CHECK(f, "%s", log);
	while (fgets(line, sizeof(line), f))
		n_log++;
	fclose(f);
	return n_log;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *extra, *want;
	} cases[] = {
		{"--set steps_per_print=3", "1,3,6,7"},
		{"", "1,7"},
		{"--set steps_per_print=1", "1,2,3,4,5,6,7"},
	};
	char got[128];

	T_CHECK(argc == 2, "usage: %s ZINF_BINARY", argv[0]);
	zinf_bin = argv[1];
	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n_log = run(cases[i].extra, got, sizeof(got));
		T_CHECK(strcmp(got, cases[i].want) == 0, "'%s': lines for steps %s, expected %s",
			cases[i].extra, got, cases[i].want);
		T_CHECK(n_log == 7, "'%s': %d --log-json lines, expected 7", cases[i].extra, n_log);
		T_CHECK(nvme_lines == 0, "'%s': %d lines show an NVMe rate, nothing is on NVMe",
			cases[i].extra, nvme_lines);
	}
	tf_write_ds(&d, "nvme", "nvme", true);
	run("--set steps_per_print=3", got, sizeof(got));
	T_CHECK(strcmp(got, "1,3,6,7") == 0 && nvme_lines == 4,
		"on NVMe: lines for steps %s, %d of them with the NVMe rate (expected 1,3,6,7, 4)",
		got, nvme_lines);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

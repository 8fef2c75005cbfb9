/*
 * Eight optimizer steps of `zinf train` follow an independent torch run step by step:
 * every step's loss (before its update), rate and gradient norm in --log-json equal
 * torch's within 1e-5 relative. The pieces (gradients, Adam, clipping, schedules) have
 * tests of their own; this one checks them together, as DeepSpeed and Hugging Face define
 * the run: the --shuffle none windows (wrapping mid-file), micro batch 2 with gradient
 * accumulation 2 (the mean gradient), clipping of the global norm (on four of the eight
 * steps), AdamW with non-default betas and eps and weight decay on the 2-D parameters
 * only (the checkpoint has norm weights and q/k/v/o and MLP biases, which do not decay),
 * and WarmupDecayLR with its log warmup and linear decay, optimizer step k at iteration
 * k - 2 (DeepSpeed's engine steps the scheduler after the optimizer).
 *
 * tests/train/gen_train_trajectory_fixture.py wrote the fixture (committed: CI has no
 * torch): tokens.bin, ds.json and expected.txt, for the checkpoint of
 * tests/model/fixtures/llama_mlp_bias, in float64; zinf trains in fp32. The run is done
 * with everything resident (parameters and optimizer state on the device), in host
 * memory, and with both on NVMe (sub-groups of 4096 elements); each run prints nothing on
 * stderr (no warning about the config).
 *
 * Usage: test_train_trajectory_matches_torch ZINF_BIN MODEL_DIR FIXTURE_DIR
 */
#include <cjson/cJSON.h>
#include <sys/wait.h>

#include "train_fixture.h"

#define MAX_STEPS 32
#define TOL 1e-5

struct expected {
	int seq_len, steps;
	double loss[MAX_STEPS], lr[MAX_STEPS], norm[MAX_STEPS], coef[MAX_STEPS];
};

static struct tf_dir d;

static void read_expected(const char *path, struct expected *e)
{
	char line[512];
	FILE *f = fopen(path, "r");
	int n = 0;

	T_CHECK(f != NULL, "open %s", path);
	memset(e, 0, sizeof(*e));
	while (fgets(line, sizeof(line), f)) {
		int k;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "seq_len %d", &e->seq_len) == 1 ||
		    sscanf(line, "steps %d", &e->steps) == 1)
			continue;
		T_CHECK(n < MAX_STEPS &&
				sscanf(line, "step %d %lf %lf %lf %lf", &k, &e->loss[n], &e->lr[n],
				       &e->norm[n], &e->coef[n]) == 5 &&
				k == n + 1,
			"%s: bad line %s", path, line);
		n++;
	}
	fclose(f);
	T_CHECK(e->seq_len > 0 && e->steps > 0 && n == e->steps, "%s: %d steps of %d, seq_len %d",
		path, n, e->steps, e->seq_len);
}

/* The fixture covers what it claims: some steps clipped, some not; the rate changes. */
static void check_coverage(const struct expected *e)
{
	int clipped = 0, lrs = 1;

	for (int i = 0; i < e->steps; i++) {
		clipped += e->coef[i] < 1.0;
		if (i && e->lr[i] != e->lr[i - 1])
			lrs++;
	}
	T_CHECK(clipped > 0 && clipped < e->steps, "fixture: %d of %d steps clipped", clipped,
		e->steps);
	T_CHECK(lrs >= 4, "fixture: %d distinct rates", lrs);
}

static double rel(double got, double want)
{
	return fabs(got - want) / fabs(want);
}

/* Run zinf train with the fixture's config and `sets`; compare its log with torch's.
 * Prints the largest relative difference of each over the steps. */
static void run(const char *zinf_bin, const char *model, const char *fixture,
		const struct expected *e, const char *home, const char *sets, bool nvme)
{
	char cmd[8192], log[160], errpath[160], line[4096];
	double worst[3] = {0, 0, 0}, nvme_read = 0;
	int status, n = 0;
	FILE *f;

	snprintf(log, sizeof(log), "%s/log-%s.jsonl", d.root, home);
	snprintf(errpath, sizeof(errpath), "%s/stderr-%s.txt", d.root, home);
	snprintf(cmd, sizeof(cmd),
		 "'%s' train --model '%s' --config '%s/ds.json' --data '%s/tokens.bin'"
		 " --seq-len %d --steps %d --shuffle none --log-json '%s' %s -q >/dev/null 2>'%s'",
		 zinf_bin, model, fixture, fixture, e->seq_len, e->steps, log, sets, errpath);
	status = system(cmd);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char buf[2048] = "";

		f = fopen(errpath, "r");
		if (f) {
			buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
			fclose(f);
		}
		T_CHECK(0, "%s: zinf train failed: %s", home, buf);
	}
	f = fopen(errpath, "r");
	T_CHECK(f != NULL && fgetc(f) == EOF, "%s: zinf train wrote on stderr (see %s)", home,
		errpath);
	fclose(f);
	f = fopen(log, "r");
	T_CHECK(f != NULL, "%s: no log %s", home, log);
	while (fgets(line, sizeof(line), f)) {
		cJSON *j = cJSON_Parse(line);
		const cJSON *step, *loss, *lr, *norm, *bytes, *rd;
		double el, er, en;

		T_CHECK(j != NULL, "%s: log line %d does not parse: %s", home, n + 1, line);
		step = cJSON_GetObjectItemCaseSensitive(j, "step");
		loss = cJSON_GetObjectItemCaseSensitive(j, "loss");
		lr = cJSON_GetObjectItemCaseSensitive(j, "lr");
		norm = cJSON_GetObjectItemCaseSensitive(j, "grad_norm");
		bytes = cJSON_GetObjectItemCaseSensitive(j, "bytes");
		rd = cJSON_GetObjectItemCaseSensitive(bytes, "nvme_read");
		T_CHECK(n < e->steps && cJSON_IsNumber(step) && step->valuedouble == n + 1 &&
				cJSON_IsNumber(loss) && cJSON_IsNumber(lr) &&
				cJSON_IsNumber(norm) && cJSON_IsNumber(rd),
			"%s: log line %d: %s", home, n + 1, line);
		el = rel(loss->valuedouble, e->loss[n]);
		er = rel(lr->valuedouble, e->lr[n]);
		en = rel(norm->valuedouble, e->norm[n]);
		printf("%s step %d: loss %.9f (torch %.9f, rel %.1e), lr %.9g (rel %.1e),"
		       " grad_norm %.7f (rel %.1e)%s\n",
		       home, n + 1, loss->valuedouble, e->loss[n], el, lr->valuedouble, er,
		       norm->valuedouble, en, e->coef[n] < 1 ? ", clipped" : "");
		T_CHECK(el <= TOL, "%s: step %d loss %.9g, torch's %.9g (rel %.2e)", home, n + 1,
			loss->valuedouble, e->loss[n], el);
		T_CHECK(er <= TOL, "%s: step %d lr %.9g, torch's %.9g (rel %.2e)", home, n + 1,
			lr->valuedouble, e->lr[n], er);
		T_CHECK(en <= TOL, "%s: step %d grad_norm %.9g, torch's %.9g (rel %.2e)", home,
			n + 1, norm->valuedouble, e->norm[n], en);
		worst[0] = fmax(worst[0], el);
		worst[1] = fmax(worst[1], er);
		worst[2] = fmax(worst[2], en);
		nvme_read += rd->valuedouble;
		cJSON_Delete(j);
		n++;
	}
	fclose(f);
	T_CHECK(n == e->steps, "%s: %d steps logged of %d", home, n, e->steps);
	T_CHECK(nvme ? nvme_read > 0 : nvme_read == 0, "%s: %.0f NVMe bytes read", home, nvme_read);
	printf("%s: max relative difference: loss %.2e, lr %.2e, grad_norm %.2e\n", home, worst[0],
	       worst[1], worst[2]);
}

int main(int argc, char **argv)
{
	struct expected e;
	char path[1024], nvme_sets[1024];

	T_CHECK(argc == 4, "usage: %s ZINF_BIN MODEL_DIR FIXTURE_DIR", argv[0]);
	snprintf(path, sizeof(path), "%s/expected.txt", argv[3]);
	read_expected(path, &e);
	check_coverage(&e);
	tf_setup(&d, NULL);
	/* ds.json: parameters and optimizer state on the device */
	run(argv[1], argv[2], argv[3], &e, "resident", "", false);
	run(argv[1], argv[2], argv[3], &e, "host",
	    "--set zero_optimization.offload_param.device=cpu"
	    " --set zero_optimization.offload_optimizer.device=cpu",
	    false);
	snprintf(nvme_sets, sizeof(nvme_sets),
		 "--set zero_optimization.offload_param.device=nvme"
		 " --set zero_optimization.offload_param.nvme_path='%s'"
		 " --set zero_optimization.offload_optimizer.device=nvme"
		 " --set zero_optimization.offload_optimizer.nvme_path='%s'",
		 d.nvme, d.nvme);
	run(argv[1], argv[2], argv[3], &e, "nvme", nvme_sets, true);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

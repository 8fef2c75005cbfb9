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
 * The same run with bf16 parameters (ds_bf16.json) follows torch's run of the bf16 model as
 * zinf defines it (docs/engine.md, "Loading"; docs/optim.md): fp32 master weights loaded
 * from the fp32 checkpoint, forward and backward in fp32 from their bf16 copies (each
 * the master rounded to nearest even, after the load and after every update), fp32
 * gradients, Adam on the masters: step 1 (before any update) and eval_loss_before within
 * 1e-5 relative, on every home (skipping the rounding moves step 1 by 3.8e-4); later steps
 * and evaluations within TOL_FP16_LOSS and TOL_FP16_NORM, as fp16's (see MAX_BF16_L2 for
 * why: an exact match is not to be had, and how close it comes depends on the BLAS
 * kernels). The bf16 run on NVMe saves with --save-dtype bf16 (the default save of this
 * run would be fp32, the checkpoint's torch_dtype): torch's final copies within
 * MAX_BF16_L2.
 *
 * With --eval-data eval.bin, --eval-every 3 and --eval-batches 3 (expected_eval.txt for
 * fp32, in expected_bf16.txt for bf16), eval_loss_before on step 1 and eval_loss after
 * steps 3, 6 and 8 (the last), and on no other step, equal torch's mean loss of the first
 * three micro-batches of eval.bin (--shuffle none windows from its start) within 1e-5
 * relative (bf16's after step 1: TOL_FP16_LOSS).
 *
 * fp16 with dynamic loss scaling (ds_fp16.json, expected_fp16.txt; 142 steps, resident, in
 * host memory and on NVMe) follows torch's run of it as zinf defines fp16 (fp32 masters,
 * fp16 copies, fp32 gradients: a step overflows once the scale passes fp32's range) with
 * DeepSpeed's DynamicLossScaler and engine: a skipped step consumes its micro-batches and
 * steps neither the optimizer nor the schedule. From 2^63 the scale doubles every two
 * steps to 2^128, where a skip keeps it (hysteresis 2), the next halves it and two clean
 * steps double it again. Every step's skipped flag is torch's (a skipped step logs the
 * rate it holds and grad_norm null), each skip's info line (ZINF_LOG=info) names torch's scale and the
 * one after it, the final save's scaler state is torch's exactly, the rates are within
 * 1e-5; loss and grad_norm within TOL_FP16_LOSS and TOL_FP16_NORM (see there).
 *
 * Usage: test_train_trajectory_matches_torch ZINF_BIN MODEL_DIR FIXTURE_DIR
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/wait.h>

#include "safetensors.h"
#include "train_fixture.h"

#define MAX_STEPS 160
#define TOL 1e-5
/* fp16 over 142 steps (ds_fp16.json): loss and grad_norm drift from torch's float64 masters
 * as fp16 copies round the other way (measured max 1.7e-4 and 1.5e-3; torch's own run of
 * it with fp32 masters is as far from its float64 run: 1.8e-4 and 1.5e-3). The rates, the
 * skipped steps and the loss scales stay exact. */
#define TOL_FP16_LOSS 1e-3
#define TOL_FP16_NORM 1e-2
/* bf16 after step 1 (its first update) is held to the fp16 bounds too: a copy that rounds
 * the other way changes that weight's gradient a little, and Adam's first steps move a
 * weight by about the rate whatever its gradient's size, so one such rounding changes the
 * weights' paths by full rates. How many do depends on the fp32 sums of the BLAS kernels:
 * with OpenBLAS's SkylakeX kernels the run is within 3.5e-8 (loss), 1.6e-7 (norm) and 1
 * of the 8080 saved weights differs from torch's; with Haswell, Zen, SandyBridge and
 * older ones 6.7e-5, 5.2e-4 and 628 weights do (up to 649 bf16 steps apart), a relative
 * L2 distance of 6.3e-4. The saved weights are held to MAX_BF16_L2, 8 times that; torch's
 * weights before the last update are 1e-1 away. */
#define MAX_BF16_L2 5e-3

struct expected {
	int seq_len, steps, n;
	double loss[MAX_STEPS], lr[MAX_STEPS], norm[MAX_STEPS], coef[MAX_STEPS];
	/* fp16 (expected_fp16.txt): per step skipped and the loss scale its backward used;
	 * the scaler after the last step (DeepSpeed's cur_scale, cur_iter,
	 * last_overflow_iter, cur_hysteresis) */
	bool fp16, skipped[MAX_STEPS];
	/* bf16 (expected_bf16.txt): every step after the first within the 16-bit bounds */
	bool bf16;
	double scale[MAX_STEPS], final_scale;
	long long final_iter, final_last_overflow, final_hysteresis;
	int eval_every, eval_batches, n_evals; /* no evaluation: n_evals 0 */
	int eval_step[MAX_STEPS + 1];	       /* 0: before step 1 */
	double eval_loss[MAX_STEPS + 1];
};

static struct tf_dir d;

/* Add the lines of path to e (zeroed before the first file). */
static void read_expected(const char *path, struct expected *e)
{
	char line[512];
	FILE *f = fopen(path, "r");
	int n = e->n;

	T_CHECK(f != NULL, "open %s", path);
	while (fgets(line, sizeof(line), f)) {
		int k, v = e->n_evals;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "seq_len %d", &e->seq_len) == 1 ||
		    sscanf(line, "steps %d", &e->steps) == 1 ||
		    sscanf(line, "eval_every %d", &e->eval_every) == 1 ||
		    sscanf(line, "eval_batches %d", &e->eval_batches) == 1)
			continue;
		if (!strncmp(line, "eval ", 5)) {
			T_CHECK(v <= MAX_STEPS &&
					sscanf(line, "eval %d %lf", &e->eval_step[v],
					       &e->eval_loss[v]) == 2 &&
					(v ? e->eval_step[v] > e->eval_step[v - 1]
					   : e->eval_step[v] == 0),
				"%s: bad line %s", path, line);
			e->n_evals++;
			continue;
		}
		if (!strncmp(line, "scaler ", 7)) {
			T_CHECK(sscanf(line, "scaler %lf %lld %lld %lld", &e->final_scale,
				       &e->final_iter, &e->final_last_overflow,
				       &e->final_hysteresis) == 4,
				"%s: bad line %s", path, line);
			continue;
		}
		T_CHECK(n < MAX_STEPS &&
				sscanf(line, "step %d %lf %lf %lf %lf", &k, &e->loss[n], &e->lr[n],
				       &e->norm[n], &e->coef[n]) == 5 &&
				k == n + 1,
			"%s: bad line %s", path, line);
		if (e->fp16) {
			int skip;

			T_CHECK(sscanf(line, "step %*d %*f %*f %*f %*f %d %lf", &skip,
				       &e->scale[n]) == 2 &&
					(skip == 0 || skip == 1),
				"%s: bad line %s", path, line);
			e->skipped[n] = skip;
		}
		n++;
	}
	fclose(f);
	e->n = n;
}

/* The evaluations the run logs: before step 1, after every eval_every steps and after
 * the last (docs/train.md), each once. */
static void check_complete(const char *what, const struct expected *e)
{
	int v = 0;

	T_CHECK(e->seq_len > 0 && e->steps > 0 && e->n == e->steps,
		"%s: %d steps of %d, seq_len %d", what, e->n, e->steps, e->seq_len);
	if (!e->n_evals)
		return;
	T_CHECK(e->eval_every > 0 && e->eval_batches > 0, "%s: eval_every %d, eval_batches %d",
		what, e->eval_every, e->eval_batches);
	for (int k = 0; k <= e->steps; k++)
		if (k == 0 || k % e->eval_every == 0 || k == e->steps) {
			T_CHECK(v < e->n_evals && e->eval_step[v] == k,
				"%s: no evaluation after step %d", what, k);
			v++;
		}
	T_CHECK(v == e->n_evals, "%s: %d evaluations, expected %d", what, e->n_evals, v);
}

/* The index of the evaluation after step k (0: before step 1), or -1. */
static int eval_at(const struct expected *e, int k)
{
	for (int v = 0; v < e->n_evals; v++)
		if (e->eval_step[v] == k)
			return v;
	return -1;
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

/* The fp16 fixture covers what it claims: steps skipped and not; the scale held once
 * (hysteresis), lowered, and raised again after a drop; the rate changes. */
static void check_coverage_fp16(const struct expected *e)
{
	int skipped = 0, held = 0, lowered = 0, raised = 0, lrs = 1;

	for (int i = 0; i < e->steps; i++) {
		skipped += e->skipped[i];
		if (i && e->lr[i] != e->lr[i - 1] && !e->skipped[i] && !e->skipped[i - 1])
			lrs++;
		if (i + 1 == e->steps)
			continue;
		held += e->skipped[i] && e->scale[i + 1] == e->scale[i];
		lowered += e->skipped[i] && e->scale[i + 1] < e->scale[i];
		raised += lowered && e->scale[i + 1] > e->scale[i];
	}
	T_CHECK(skipped > 0 && skipped < e->steps && held && lowered && raised,
		"fixture: %d of %d steps skipped, scale held %d, lowered %d, raised %d", skipped,
		e->steps, held, lowered, raised);
	T_CHECK(lrs >= 4, "fixture: %d distinct rates", lrs);
	T_CHECK(e->final_iter == e->steps && e->final_scale > 0, "fixture: no scaler line");
}

/* fp16: each info line of the run's stderr (ZINF_LOG=info) that the scaler writes for a
 * skipped step names that step's scale and what became of it (lowered to the next step's,
 * or kept with the hysteresis counted down): torch's; one such line per skipped step. No
 * warning or error. */
static void check_fp16_stderr(const char *home, const char *errpath, const struct expected *e)
{
	char line[1024];
	int lines = 0, skipped = 0;
	FILE *f = fopen(errpath, "r");

	T_CHECK(f != NULL, "%s: open %s", home, errpath);
	for (int i = 0; i < e->steps; i++)
		skipped += e->skipped[i];
	while (fgets(line, sizeof(line), f)) {
		unsigned long long it;
		double was, now, next;
		unsigned h0, h1;
		int i;

		T_CHECK(!strncmp(line, "zinf: info: ", 12), "%s: stderr: %s", home, line);
		if (sscanf(line,
			   "zinf: info: fp16: gradient overflow at step %llu, step skipped; loss scale %lf",
			   &it, &was) != 2)
			continue;
		i = (int)it; /* the scaler's iteration: step i + 1 */
		T_CHECK(i >= 0 && i < e->steps && e->skipped[i], "%s: step %d reported skipped: %s",
			home, i + 1, line);
		next = i + 1 < e->steps ? e->scale[i + 1] : e->final_scale;
		/* %g: six digits, enough to tell powers of two apart */
		T_CHECK(rel(was, e->scale[i]) < 1e-5, "%s: step %d loss scale %g, torch's %g: %s",
			home, i + 1, was, e->scale[i], line);
		if (strstr(line, " kept, hysteresis ")) {
			T_CHECK(sscanf(strstr(line, " kept, hysteresis "),
				       " kept, hysteresis %u -> %u", &h0, &h1) == 2 &&
					h1 + 1 == h0 && next == e->scale[i],
				"%s: step %d kept the scale, torch's next %g: %s", home, i + 1,
				next, line);
		} else {
			T_CHECK(strstr(line, " -> ") &&
					sscanf(strstr(line, " -> "), " -> %lf", &now) == 1 &&
					rel(now, next) < 1e-5,
				"%s: step %d lowered the scale, torch's next %g: %s", home, i + 1,
				next, line);
		}
		printf("%s step %d: skipped at loss scale %g (torch's %g), then %g\n", home, i + 1,
		       was, e->scale[i], next);
		lines++;
	}
	fclose(f);
	T_CHECK(lines == skipped, "%s: %d overflow lines, torch skipped %d steps", home, lines,
		skipped);
}

/* fp16: the scaler in the final save's zinf_state.json is torch's, exactly. */
static void check_fp16_state(const char *home, const char *dir, const struct expected *e)
{
	char path[512], buf[8192];
	const cJSON *o, *v;
	double scale;
	int skipped = 0;
	size_t len;
	cJSON *j;
	FILE *f;

	for (int i = 0; i < e->steps; i++)
		skipped += e->skipped[i];
	snprintf(path, sizeof(path), "%s/zinf_state.json", dir);
	f = fopen(path, "r");
	T_CHECK(f != NULL, "%s: open %s", home, path);
	len = fread(buf, 1, sizeof(buf) - 1, f);
	buf[len] = '\0';
	fclose(f);
	j = cJSON_Parse(buf);
	o = cJSON_GetObjectItemCaseSensitive(j, "optimizer");
	v = cJSON_GetObjectItemCaseSensitive(o, "loss_scale");
	T_CHECK(cJSON_IsString(v), "%s: %s: no optimizer.loss_scale", home, path);
	scale = strtod(v->valuestring, NULL);
#define FIELD(name, want)                                                                          \
	do {                                                                                       \
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);                        \
		T_CHECK(cJSON_IsNumber(x) && x->valuedouble == (double)(want),                     \
			"%s: %s %s %g, torch's %lld", home, path, name,                            \
			cJSON_IsNumber(x) ? x->valuedouble : -1.0, (long long)(want));             \
	} while (0)
	T_CHECK(scale == e->final_scale, "%s: final loss scale %.17g, torch's %.17g", home, scale,
		e->final_scale);
	FIELD("scaler_iteration", e->final_iter);
	FIELD("scaler_last_overflow_iter", e->final_last_overflow);
	FIELD("scaler_hysteresis_left", e->final_hysteresis);
	FIELD("skipped_steps", skipped);
	FIELD("optimizer_steps", e->steps - skipped);
#undef FIELD
	printf("%s: final loss scale %.17g, %d of %d steps skipped, hysteresis %lld: torch's\n",
	       home, scale, skipped, e->steps, e->final_hysteresis);
	cJSON_Delete(j);
}

/* Run zinf train with the fixture's config file `config` and `sets` (with e's
 * evaluations: on eval.bin); compare its log with torch's. Prints the largest relative
 * difference of each over the steps. */
static void run(const char *zinf_bin, const char *model, const char *fixture,
		const struct expected *e, const char *home, const char *config, const char *sets,
		bool nvme)
{
	char cmd[8192], log[160], errpath[160], line[4096], evals[1200] = "";
	double worst[4] = {0, 0, 0, 0}, nvme_read = 0;
	int status, n = 0, n_evals = 0;
	double tol_loss = e->fp16 ? TOL_FP16_LOSS : TOL, tol_norm = e->fp16 ? TOL_FP16_NORM : TOL;
	double tol_eval = TOL;
	FILE *f;

	snprintf(log, sizeof(log), "%s/log-%s.jsonl", d.root, home);
	snprintf(errpath, sizeof(errpath), "%s/stderr-%s.txt", d.root, home);
	if (e->n_evals)
		snprintf(evals, sizeof(evals),
			 " --eval-data '%s/eval.bin' --eval-every %d --eval-batches %d", fixture,
			 e->eval_every, e->eval_batches);
	snprintf(
		cmd, sizeof(cmd),
		"%s'%s' train --model '%s' --config '%s/%s' --data '%s/tokens.bin'"
		" --seq-len %d --steps %d --shuffle none%s --log-json '%s' %s -q >/dev/null 2>'%s'",
		e->fp16 ? "ZINF_LOG=info " : "", zinf_bin, model, fixture, config, fixture,
		e->seq_len, e->steps, evals, log, sets, errpath);
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
	if (e->fp16) {
		check_fp16_stderr(home, errpath, e);
	} else {
		f = fopen(errpath, "r");
		T_CHECK(f != NULL && fgetc(f) == EOF, "%s: zinf train wrote on stderr (see %s)",
			home, errpath);
		fclose(f);
	}
	f = fopen(log, "r");
	T_CHECK(f != NULL, "%s: no log %s", home, log);
	while (fgets(line, sizeof(line), f)) {
		cJSON *j = cJSON_Parse(line);
		const cJSON *step, *loss, *lr, *norm, *bytes, *rd, *ev[2], *skipped;
		double el, er, en;

		T_CHECK(j != NULL, "%s: log line %d does not parse: %s", home, n + 1, line);
		step = cJSON_GetObjectItemCaseSensitive(j, "step");
		loss = cJSON_GetObjectItemCaseSensitive(j, "loss");
		lr = cJSON_GetObjectItemCaseSensitive(j, "lr");
		norm = cJSON_GetObjectItemCaseSensitive(j, "grad_norm");
		bytes = cJSON_GetObjectItemCaseSensitive(j, "bytes");
		rd = cJSON_GetObjectItemCaseSensitive(bytes, "nvme_read");
		skipped = cJSON_GetObjectItemCaseSensitive(j, "skipped");
		T_CHECK(n < e->steps && cJSON_IsNumber(step) && step->valuedouble == n + 1 &&
				cJSON_IsNumber(loss) && cJSON_IsNumber(lr) &&
				cJSON_IsBool(skipped) && cJSON_IsNumber(rd),
			"%s: log line %d: %s", home, n + 1, line);
		/* every step's skipped flag is torch's; a skipped step logs the rate it holds
		 * (DeepSpeed's get_lr()) and no norm (the overflowed sum: null), its loss is
		 * still the step's */
		T_CHECK(cJSON_IsTrue(skipped) == e->skipped[n],
			"%s: step %d skipped %s, torch's %s", home, n + 1,
			cJSON_IsTrue(skipped) ? "true" : "false", e->skipped[n] ? "true" : "false");
		el = rel(loss->valuedouble, e->loss[n]);
		if (e->skipped[n]) {
			T_CHECK(rel(lr->valuedouble, e->lr[n]) <= TOL && cJSON_IsNull(norm),
				"%s: skipped step %d: lr %g, grad_norm %s: %s", home, n + 1,
				lr->valuedouble, cJSON_IsNull(norm) ? "null" : "a number", line);
			printf("%s step %d: loss %.9f (torch %.9f, rel %.1e), skipped\n", home,
			       n + 1, loss->valuedouble, e->loss[n], el);
			T_CHECK(el <= tol_loss, "%s: step %d loss %.9g, torch's %.9g (rel %.2e)",
				home, n + 1, loss->valuedouble, e->loss[n], el);
			worst[0] = fmax(worst[0], el);
			cJSON_Delete(j);
			n++;
			continue;
		}
		T_CHECK(cJSON_IsNumber(norm), "%s: log line %d: %s", home, n + 1, line);
		if (e->bf16 && n == 1) { /* from step 2 on: after an update of bf16 copies */
			tol_loss = tol_eval = TOL_FP16_LOSS;
			tol_norm = TOL_FP16_NORM;
		}
		er = rel(lr->valuedouble, e->lr[n]);
		en = rel(norm->valuedouble, e->norm[n]);
		printf("%s step %d: loss %.9f (torch %.9f, rel %.1e), lr %.9g (rel %.1e),"
		       " grad_norm %.7f (rel %.1e)%s\n",
		       home, n + 1, loss->valuedouble, e->loss[n], el, lr->valuedouble, er,
		       norm->valuedouble, en, e->coef[n] < 1 ? ", clipped" : "");
		T_CHECK(el <= tol_loss, "%s: step %d loss %.9g, torch's %.9g (rel %.2e)", home,
			n + 1, loss->valuedouble, e->loss[n], el);
		T_CHECK(er <= TOL, "%s: step %d lr %.9g, torch's %.9g (rel %.2e)", home, n + 1,
			lr->valuedouble, e->lr[n], er);
		T_CHECK(en <= tol_norm, "%s: step %d grad_norm %.9g, torch's %.9g (rel %.2e)", home,
			n + 1, norm->valuedouble, e->norm[n], en);
		/* eval_loss_before: the evaluation before step 1; eval_loss: the one after */
		ev[0] = cJSON_GetObjectItemCaseSensitive(j, "eval_loss_before");
		ev[1] = cJSON_GetObjectItemCaseSensitive(j, "eval_loss");
		for (int a = 0; a < 2; a++) {
			int v = (n == 0 || a) ? eval_at(e, a ? n + 1 : 0) : -1;
			double rv;

			T_CHECK(v < 0 ? ev[a] == NULL : cJSON_IsNumber(ev[a]),
				"%s: step %d %s %s: %s", home, n + 1,
				a ? "eval_loss" : "eval_loss_before", v < 0 ? "logged" : "missing",
				line);
			if (v < 0)
				continue;
			rv = rel(ev[a]->valuedouble, e->eval_loss[v]);
			printf("%s step %d: %s %.9f (torch %.9f, rel %.1e)\n", home, n + 1,
			       a ? "eval_loss" : "eval_loss_before", ev[a]->valuedouble,
			       e->eval_loss[v], rv);
			T_CHECK(rv <= (v ? tol_eval : TOL),
				"%s: step %d %s %.9g, torch's %.9g (rel %.2e)", home, n + 1,
				a ? "eval_loss" : "eval_loss_before", ev[a]->valuedouble,
				e->eval_loss[v], rv);
			worst[3] = fmax(worst[3], rv);
			n_evals++;
		}
		worst[0] = fmax(worst[0], el);
		worst[1] = fmax(worst[1], er);
		worst[2] = fmax(worst[2], en);
		nvme_read += rd->valuedouble;
		cJSON_Delete(j);
		n++;
	}
	fclose(f);
	T_CHECK(n == e->steps, "%s: %d steps logged of %d", home, n, e->steps);
	T_CHECK(n_evals == e->n_evals, "%s: %d evaluations logged of %d", home, n_evals,
		e->n_evals);
	T_CHECK(nvme ? nvme_read > 0 : nvme_read == 0, "%s: %.0f NVMe bytes read", home, nvme_read);
	printf("%s: max relative difference: loss %.2e, lr %.2e, grad_norm %.2e", home, worst[0],
	       worst[1], worst[2]);
	if (e->n_evals)
		printf(", eval_loss %.2e", worst[3]);
	printf("\n");
}

/* The bf16 model saved in dir is torch's final bf16 copies (want): every tensor, BF16, of
 * its size, the whole within MAX_BF16_L2 relative L2 distance. */
static void check_bf16_save(const char *dir, const char *want)
{
	struct zinf_st_reader *r[2];
	const char *paths[2] = {dir, want};
	uint16_t *buf[2];
	uint64_t elems = 0;
	int flips = 0;
	double diff2 = 0, norm2 = 0;

	for (int i = 0; i < 2; i++) {
		T_CHECK_RC(zinf_st_reader_create(&r[i]));
		T_CHECK(zinf_st_reader_open(r[i], paths[i]) == 0, "%s",
			zinf_st_reader_last_error(r[i]));
	}
	T_CHECK(zinf_st_reader_count(r[0]) == zinf_st_reader_count(r[1]),
		"%s: %d tensors, torch's %d", dir, zinf_st_reader_count(r[0]),
		zinf_st_reader_count(r[1]));
	for (int k = 0; k < zinf_st_reader_count(r[1]); k++) {
		const struct zinf_st_tensor_info *t[2];

		t[1] = zinf_st_reader_tensor(r[1], k);
		t[0] = zinf_st_reader_find(r[0], t[1]->name);
		T_CHECK(t[0] && t[0]->dtype == ZINF_ST_BF16 && t[1]->dtype == ZINF_ST_BF16 &&
				t[0]->n_elems == t[1]->n_elems,
			"%s: %s missing, not BF16 or not of %llu elements", dir, t[1]->name,
			(unsigned long long)t[1]->n_elems);
		for (int i = 0; i < 2; i++) {
			buf[i] = malloc(t[i]->n_elems * 2);
			T_CHECK(buf[i] != NULL, "malloc");
			T_CHECK(zinf_st_reader_read(r[i], t[i], buf[i], ZINF_ST_BF16) == 0, "%s",
				zinf_st_reader_last_error(r[i]));
		}
		for (uint64_t x = 0; x < t[1]->n_elems; x++) {
			uint16_t a = buf[0][x], b = buf[1][x];
			uint32_t fa = (uint32_t)a << 16, fb = (uint32_t)b << 16;
			float va, vb;

			memcpy(&va, &fa, 4);
			memcpy(&vb, &fb, 4);
			diff2 += ((double)va - vb) * ((double)va - vb);
			norm2 += (double)vb * vb;
			flips += a != b;
		}
		elems += t[1]->n_elems;
		free(buf[0]);
		free(buf[1]);
	}
	printf("saved bf16: %d of %llu weights differ from torch's; relative L2 distance %.2e\n",
	       flips, (unsigned long long)elems, sqrt(diff2 / norm2));
	T_CHECK(norm2 > 0 && sqrt(diff2 / norm2) <= MAX_BF16_L2,
		"%s: relative L2 distance %.2e from torch's final bf16 weights (at most %.0e)", dir,
		sqrt(diff2 / norm2), MAX_BF16_L2);
	zinf_st_reader_destroy(r[0]);
	zinf_st_reader_destroy(r[1]);
}

int main(int argc, char **argv)
{
	static struct expected e, e_eval, e_bf16, e_fp16;
	const char *host_sets = "--set zero_optimization.offload_param.device=cpu"
				" --set zero_optimization.offload_optimizer.device=cpu";
	char path[1024], nvme_sets[1024], save_sets[2048], want[1024];

	T_CHECK(argc == 4, "usage: %s ZINF_BIN MODEL_DIR FIXTURE_DIR", argv[0]);
	snprintf(path, sizeof(path), "%s/expected.txt", argv[3]);
	read_expected(path, &e);
	check_complete(path, &e);
	check_coverage(&e);
	e_eval = e; /* the same run, evaluated */
	snprintf(path, sizeof(path), "%s/expected_eval.txt", argv[3]);
	read_expected(path, &e_eval);
	check_complete(path, &e_eval);
	T_CHECK(e_eval.n_evals > 2, "%s: %d evaluations", path, e_eval.n_evals);
	snprintf(path, sizeof(path), "%s/expected_bf16.txt", argv[3]);
	e_bf16.bf16 = true;
	read_expected(path, &e_bf16);
	check_complete(path, &e_bf16);
	check_coverage(&e_bf16);
	T_CHECK(e_bf16.n_evals > 2, "%s: %d evaluations", path, e_bf16.n_evals);
	e_fp16.fp16 = true;
	snprintf(path, sizeof(path), "%s/expected_fp16.txt", argv[3]);
	read_expected(path, &e_fp16);
	check_complete(path, &e_fp16);
	check_coverage_fp16(&e_fp16);
	tf_setup(&d, NULL);
	/* ds.json: parameters and optimizer state on the device */
	run(argv[1], argv[2], argv[3], &e, "resident", "ds.json", "", false);
	run(argv[1], argv[2], argv[3], &e, "host", "ds.json", host_sets, false);
	snprintf(nvme_sets, sizeof(nvme_sets),
		 "--set zero_optimization.offload_param.device=nvme"
		 " --set zero_optimization.offload_param.nvme_path='%s'"
		 " --set zero_optimization.offload_optimizer.device=nvme"
		 " --set zero_optimization.offload_optimizer.nvme_path='%s'",
		 d.nvme, d.nvme);
	run(argv[1], argv[2], argv[3], &e, "nvme", "ds.json", nvme_sets, true);
	/* evaluated: the same steps, and torch's eval losses */
	run(argv[1], argv[2], argv[3], &e_eval, "eval-resident", "ds.json", "", false);
	/* bf16 parameters, evaluated; the NVMe run saves bf16 */
	run(argv[1], argv[2], argv[3], &e_bf16, "bf16-resident", "ds_bf16.json", "", false);
	run(argv[1], argv[2], argv[3], &e_bf16, "bf16-host", "ds_bf16.json", host_sets, false);
	snprintf(save_sets, sizeof(save_sets), "%s --save '%s/save-bf16' --save-dtype bf16",
		 nvme_sets, d.root);
	run(argv[1], argv[2], argv[3], &e_bf16, "bf16-nvme", "ds_bf16.json", save_sets, true);
	snprintf(path, sizeof(path), "%s/save-bf16", d.root);
	snprintf(want, sizeof(want), "%s/final_bf16.safetensors", argv[3]);
	check_bf16_save(path, want);
	/* fp16 with dynamic loss scaling; the final save carries the scaler */
	snprintf(save_sets, sizeof(save_sets), "--save '%s/save-fp16-resident' --save-state",
		 d.root);
	run(argv[1], argv[2], argv[3], &e_fp16, "fp16-resident", "ds_fp16.json", save_sets, false);
	snprintf(path, sizeof(path), "%s/save-fp16-resident", d.root);
	check_fp16_state("fp16-resident", path, &e_fp16);
	run(argv[1], argv[2], argv[3], &e_fp16, "fp16-host", "ds_fp16.json", host_sets, false);
	snprintf(save_sets, sizeof(save_sets), "%s --save '%s/save-fp16-nvme' --save-state",
		 nvme_sets, d.root);
	run(argv[1], argv[2], argv[3], &e_fp16, "fp16-nvme", "ds_fp16.json", save_sets, true);
	snprintf(path, sizeof(path), "%s/save-fp16-nvme", d.root);
	check_fp16_state("fp16-nvme", path, &e_fp16);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

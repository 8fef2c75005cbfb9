/* The training state a checkpoint carries goes out and back in exactly: with optimizer
 * state in host memory and on NVMe (small sub-groups that parameters span and modules
 * share), fp32 and bf16 parameters,
 *   - zinf_param_state_save after steps (whole, or in pieces of 777 elements that cross
 *     sub-groups and parameters' ends), loaded into a fresh engine with
 *     zinf_module_load_state, reads back bit-identical (master and both moments), and the
 *     next step on both engines gives bit-identical parameters;
 *   - a module reloaded with other state over a loaded one changes that module alone
 *     (NVMe: merged into the sub-groups it shares), and a plain zinf_module_load after it
 *     resets that module's moments to zero;
 *   - fp16 with dynamic loss scaling: after a step skipped for overflow, the progress
 *     (skipped count, last overflow, hysteresis) and state give a fresh engine the same
 *     next steps, skips and loss scales;
 *   - the masters read alone (no moment buffers) in pieces are the same;
 *   - zinf_engine_progress_set/get round-trip and refuse bad values with the field named;
 *     missing buffers are -EINVAL with one line, nothing changed. */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "load_fixture.h"

struct state {
	float *part[3]; /* master, exp_avg, exp_avg_sq: every parameter, registration order */
};

/* Every parameter's state, read in pieces of piece elements (odd, so that pieces cross
 * sub-groups and parameters' ends) or whole (0). */
static void state_save_by(struct lf_engine *le, struct state *s, uint64_t piece)
{
	uint64_t off = 0;

	for (int k = 0; k < 3; k++) {
		s->part[k] = malloc(lf_total() * 4);
		T_CHECK(s->part[k], "out of memory");
	}
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++) {
			uint64_t n = lf_elems(m, k), step = piece ? piece : n;
			for (uint64_t i = 0; i < n; i += step) {
				uint64_t c = n - i < step ? n - i : step;
				T_CHECK(zinf_param_state_save(
						le->e, le->par[m][k], i, c, s->part[0] + off + i,
						s->part[1] + off + i, s->part[2] + off + i) == 0,
					"state save: %s", zinf_last_error(le->e));
			}
			off += n;
		}
}

static void state_save(struct lf_engine *le, struct state *s)
{
	state_save_by(le, s, 0);
}

/* The masters alone (no moment buffers), read in pieces of 500, equal s's. */
static void same_masters_alone(struct lf_engine *le, const struct state *s, const char *what)
{
	float *got = malloc(lf_total() * 4);
	uint64_t off = 0;

	T_CHECK(got, "out of memory");
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++) {
			uint64_t n = lf_elems(m, k);
			for (uint64_t i = 0; i < n; i += 500) {
				uint64_t c = n - i < 500 ? n - i : 500;
				T_CHECK(zinf_param_state_save(le->e, le->par[m][k], i, c,
							      got + off + i, NULL, NULL) == 0,
					"%s: master alone: %s", what, zinf_last_error(le->e));
			}
			off += n;
		}
	T_CHECK(memcmp(got, s->part[0], lf_total() * 4) == 0, "%s: the masters read alone differ",
		what);
	free(got);
}

static uint64_t module_off(int m)
{
	uint64_t off = 0;

	for (int j = 0; j < m; j++)
		off += lf_elems(j, 0) + lf_elems(j, 1);
	return off;
}

static void module_load_state(struct lf_engine *le, int m, const struct state *s)
{
	const float *part[3][2];
	uint64_t off = module_off(m);

	for (int k = 0; k < 2; k++) {
		for (int p = 0; p < 3; p++)
			part[p][k] = s->part[p] + off;
		off += lf_elems(m, k);
	}
	T_CHECK(zinf_module_load_state(le->e, le->mod[m], 2, part[0], part[1], part[2]) == 0,
		"load state: %s", zinf_last_error(le->e));
}

/* zinf_module_load of module m with the fixture's fp32 values (variant: another set). */
static void load_plain(struct lf_engine *le, int m, int variant)
{
	void *w = lf_source(m, 0, ZINF_DTYPE_F32, variant);
	void *bias = lf_source(m, 1, ZINF_DTYPE_F32, variant);
	const void *srcs[2] = {w, bias};
	enum zinf_dtype dts[2] = {ZINF_DTYPE_F32, ZINF_DTYPE_F32};

	T_CHECK_RC(zinf_module_load(le->e, le->mod[m], 2, srcs, dts));
	free(w);
	free(bias);
}

static void state_free(struct state *s)
{
	for (int k = 0; k < 3; k++)
		free(s->part[k]);
}

/* a and b the same over [first, first + n) of every part (moments only: from 1). */
static void same_range(const struct state *a, const struct state *b, uint64_t first, uint64_t n,
		       int from_part, const char *what)
{
	for (int p = from_part; p < 3; p++)
		T_CHECK(memcmp(a->part[p] + first, b->part[p] + first, n * 4) == 0,
			"%s: part %d differs", what, p);
}

static void check(const char *opt_home, enum zinf_dtype dtype, const char *dir)
{
	struct lf_engine a, b;
	struct state sa, sb, other, after;
	struct zinf_engine_progress pa, pb;
	uint64_t total = lf_total(), m2 = module_off(2), n2 = lf_elems(2, 0) + lf_elems(2, 1);
	char what[64], dir_b[128];

	snprintf(what, sizeof(what), "%s/%s", opt_home, dtype == ZINF_DTYPE_F32 ? "f32" : "bf16");
	lf_create(&a, "cpu", opt_home, dtype, dir, 3000);
	for (int m = 0; m < LF_N_MOD; m++)
		load_plain(&a, m, 0);
	for (int i = 0; i < 3; i++)
		lf_step(&a);
	state_save(&a, &sa);
	T_CHECK(zinf_engine_progress_get(a.e, &pa) == 0 && pa.steps == 3, "%s: progress %llu", what,
		(unsigned long long)pa.steps);

	/* a fresh engine from the saved state (its own NVMe directory: both are live) */
	snprintf(dir_b, sizeof(dir_b), "%s/b", dir);
	T_CHECK(mkdir(dir_b, 0755) == 0 || errno == EEXIST, "mkdir %s", dir_b);
	lf_create(&b, "cpu", opt_home, dtype, dir_b, 3000);
	for (int m = 0; m < LF_N_MOD; m++)
		module_load_state(&b, m, &sa);
	T_CHECK(zinf_engine_progress_set(b.e, &pa) == 0, "%s", zinf_last_error(b.e));
	T_CHECK(zinf_engine_progress_get(b.e, &pb) == 0 && memcmp(&pa, &pb, sizeof(pa)) == 0,
		"%s: progress round trip", what);
	state_save_by(&b, &sb, 777);
	same_range(&sa, &sb, 0, total, 0, what);
	same_masters_alone(&b, &sb, what);
	T_CHECK(lf_step(&a) == lf_step(&b), "%s: the next step's loss differs", what);
	state_free(&sa);
	state_free(&sb);
	state_save(&a, &sa);
	state_save(&b, &sb);
	same_range(&sa, &sb, 0, total, 0, "after the next step");

	/* module 2 reloaded with other state: it alone changes */
	state_save(&b, &other);
	for (uint64_t i = 0; i < total; i++)
		for (int p = 0; p < 3; p++)
			other.part[p][i] = p ? (float)(0.001 * (double)(i % 97) + p) : -0.5f;
	module_load_state(&b, 2, &other);
	state_save(&b, &after);
	same_range(&sa, &after, 0, m2, 0, "modules before the reloaded one");
	same_range(&sa, &after, m2 + n2, total - m2 - n2, 0, "modules after the reloaded one");
	same_range(&other, &after, m2, n2, 0, "the reloaded module");
	state_free(&after);

	/* a plain load resets that module's moments */
	load_plain(&b, 2, 1);
	state_save(&b, &after);
	for (uint64_t i = m2; i < m2 + n2; i++)
		T_CHECK(after.part[1][i] == 0 && after.part[2][i] == 0, "%s: moment %llu kept",
			what, (unsigned long long)i);
	same_range(&sa, &after, 0, m2, 0, "other modules after a plain load");

	/* bad input: refused, one line, nothing changed */
	{
		const float *none[2] = {NULL, NULL};
		const float *some[2] = {other.part[0], other.part[0]};
		struct zinf_engine_progress bad = pa;
		T_CHECK(zinf_module_load_state(b.e, b.mod[1], 2, some, some, none) == -EINVAL &&
				strstr(zinf_last_error(b.e), "moments") &&
				!strchr(zinf_last_error(b.e), '\n'),
			"NULL moments: %s", zinf_last_error(b.e));
		T_CHECK(zinf_module_load_state(b.e, b.mod[1], 2, some, NULL, some) == -EINVAL,
			"no exp_avg");
		T_CHECK(zinf_param_state_save(b.e, b.par[0][0], 0, 1, other.part[0], NULL,
					      other.part[2]) == -EINVAL,
			"state save without exp_avg");
		T_CHECK(zinf_param_state_save(b.e, b.par[0][1], 1, lf_elems(0, 1), other.part[0],
					      other.part[1], other.part[2]) == -EINVAL &&
				strstr(zinf_last_error(b.e), "not inside"),
			"a range past the end: %s", zinf_last_error(b.e));
		T_CHECK(zinf_param_state_save(b.e, b.par[0][1], 0, 0, other.part[0], other.part[1],
					      other.part[2]) == -EINVAL,
			"an empty range");
		bad.loss_scale = 0;
		T_CHECK(zinf_engine_progress_set(b.e, &bad) == -EINVAL &&
				strstr(zinf_last_error(b.e), "loss_scale"),
			"loss scale 0: %s", zinf_last_error(b.e));
		bad = pa;
		bad.scaler_last_overflow_iter = 5;
		bad.scaler_iteration = 5;
		T_CHECK(zinf_engine_progress_set(b.e, &bad) == -EINVAL &&
				strstr(zinf_last_error(b.e), "scaler_last_overflow_iter"),
			"overflow after the iteration: %s", zinf_last_error(b.e));
		bad = pa; /* a step count the next step would wrap to 0 (bias correction / 0) */
		bad.steps = UINT64_MAX;
		T_CHECK(zinf_engine_progress_set(b.e, &bad) == -EINVAL &&
				strstr(zinf_last_error(b.e), "steps"),
			"steps 2^64 - 1: %s", zinf_last_error(b.e));
		bad = pa;
		bad.scaler_hysteresis_left = 1000;
		T_CHECK(zinf_engine_progress_set(b.e, &bad) == -EINVAL &&
				strstr(zinf_last_error(b.e), "hysteresis"),
			"hysteresis: %s", zinf_last_error(b.e));
		T_CHECK(zinf_engine_progress_get(b.e, &pb) == 0 && pb.steps == pa.steps + 1,
			"refused sets changed the progress");
		state_free(&sb);
		state_save(&b, &sb);
		same_range(&after, &sb, 0, total, 0, "after refused calls");
	}
	state_free(&sa);
	state_free(&sb);
	state_free(&other);
	state_free(&after);
	lf_destroy(&a);
	lf_destroy(&b);
}

/* One step whose gradients, with inf, overflow when inf is true; returns whether it was
 * skipped. */
static bool step_maybe_inf(struct lf_engine *le, bool inf)
{
	struct zinf_step_result r;

	for (int m = 0; m < LF_N_MOD; m++) {
		lf_module_grads(le, m);
		if (inf && m == 1)
			zinf_param_grad(le->e, le->par[m][0])[3] = INFINITY;
		T_CHECK_RC(zinf_module_grads_ready(le->e, le->mod[m]));
		T_CHECK_RC(zinf_module_release(le->e, le->mod[m]));
	}
	T_CHECK(zinf_step(le->e, &r) == 0, "step: %s", zinf_last_error(le->e));
	return r.skipped;
}

/* fp16 with dynamic loss scaling: a step skipped for overflow moves the scaler (last
 * overflow, hysteresis); the state and progress saved after it give a fresh engine the
 * same next steps and the same loss scale. */
static void check_fp16_skip(const char *opt_home, const char *dir)
{
	struct lf_engine a, b;
	struct state sa, sb;
	struct zinf_engine_progress pa, pb;
	char dir_b[128];

	lf_extra_top = ", \"fp16\": {\"enabled\": true, \"initial_scale_power\": 4,"
		       " \"hysteresis\": 2, \"loss_scale_window\": 3}";
	lf_create(&a, "cpu", opt_home, ZINF_DTYPE_F16, dir, 3000);
	for (int m = 0; m < LF_N_MOD; m++)
		load_plain(&a, m, 0);
	T_CHECK(!step_maybe_inf(&a, false), "%s: clean step skipped", opt_home);
	T_CHECK(step_maybe_inf(&a, true), "%s: overflow not skipped", opt_home);
	T_CHECK(!step_maybe_inf(&a, false), "%s: clean step skipped", opt_home);
	T_CHECK(zinf_engine_progress_get(a.e, &pa) == 0, "%s", zinf_last_error(a.e));
	T_CHECK(pa.steps == 2 && pa.skipped == 1 && pa.scaler_iteration == 3 &&
			pa.scaler_last_overflow_iter == 1 && pa.scaler_hysteresis_left == 1,
		"%s: progress after a skip: %llu steps, %llu skipped, iteration %llu, last "
		"overflow %lld, hysteresis %u",
		opt_home, (unsigned long long)pa.steps, (unsigned long long)pa.skipped,
		(unsigned long long)pa.scaler_iteration, (long long)pa.scaler_last_overflow_iter,
		pa.scaler_hysteresis_left);
	state_save(&a, &sa);

	snprintf(dir_b, sizeof(dir_b), "%s/b", dir);
	T_CHECK(mkdir(dir_b, 0755) == 0 || errno == EEXIST, "mkdir %s", dir_b);
	lf_create(&b, "cpu", opt_home, ZINF_DTYPE_F16, dir_b, 3000);
	for (int m = 0; m < LF_N_MOD; m++)
		module_load_state(&b, m, &sa);
	T_CHECK(zinf_engine_progress_set(b.e, &pa) == 0, "%s", zinf_last_error(b.e));
	T_CHECK(zinf_engine_progress_get(b.e, &pb) == 0 && memcmp(&pa, &pb, sizeof(pa)) == 0,
		"%s: fp16 progress round trip", opt_home);
	/* window 3 after the overflow at iteration 1: the scale doubles during these */
	for (int i = 0; i < 4; i++) {
		bool inf = i == 2;
		T_CHECK(zinf_loss_scale(a.e) == zinf_loss_scale(b.e), "%s: loss scale %g vs %g",
			opt_home, zinf_loss_scale(a.e), zinf_loss_scale(b.e));
		T_CHECK(step_maybe_inf(&a, inf) == step_maybe_inf(&b, inf), "%s: skips differ",
			opt_home);
	}
	state_free(&sa);
	state_save(&a, &sa);
	state_save(&b, &sb);
	same_range(&sa, &sb, 0, lf_total(), 0, "fp16 after a skip");
	T_CHECK(zinf_engine_progress_get(a.e, &pa) == 0 &&
			zinf_engine_progress_get(b.e, &pb) == 0 &&
			memcmp(&pa, &pb, sizeof(pa)) == 0,
		"%s: fp16 progress after the same steps", opt_home);
	{ /* what a step makes can be set back: no hysteresis of 0 (an overflow would wrap
	   * it), no scale past 1e42 (it stays there as it would double), no count past
	   * 2^53 */
		struct zinf_engine_progress bad = pb;

		bad.scaler_hysteresis_left = 0;
		T_CHECK(zinf_engine_progress_set(b.e, &bad) == -EINVAL &&
				strstr(zinf_last_error(b.e), "scaler_hysteresis_left 0"),
			"%s: hysteresis 0: %s", opt_home, zinf_last_error(b.e));
		bad = pb;
		bad.loss_scale = 1e43;
		T_CHECK(zinf_engine_progress_set(b.e, &bad) == -EINVAL &&
				strstr(zinf_last_error(b.e), "at most 1e42"),
			"%s: loss scale 1e43: %s", opt_home, zinf_last_error(b.e));
		bad.loss_scale = 1e42;
		T_CHECK_RC(zinf_engine_progress_set(b.e, &bad));
		for (int i = 0; i < 4; i++) /* a window of 3: the scale would double */
			T_CHECK(!step_maybe_inf(&b, false), "%s: clean step skipped", opt_home);
		T_CHECK(zinf_engine_progress_get(b.e, &bad) == 0 && bad.loss_scale == 1e42 &&
				zinf_engine_progress_set(b.e, &bad) == 0,
			"%s: a scale of 1e42 doubled to %g", opt_home, bad.loss_scale);
		bad.steps = 1ull << 53;
		T_CHECK_RC(zinf_engine_progress_set(b.e, &bad));
		for (int m = 0; m < LF_N_MOD; m++) {
			lf_module_grads(&b, m);
			T_CHECK_RC(zinf_module_grads_ready(b.e, b.mod[m]));
			T_CHECK_RC(zinf_module_release(b.e, b.mod[m]));
		}
		T_CHECK(zinf_step(b.e, NULL) == ZINF_ESTATE &&
				strstr(zinf_last_error(b.e), "at its limit of 2^53"),
			"%s: a step past 2^53 steps: %s", opt_home, zinf_last_error(b.e));
		T_CHECK(zinf_engine_progress_get(b.e, &pb) == 0 && pb.steps == 1ull << 53,
			"%s: the refused step changed the count", opt_home);
	}
	state_free(&sa);
	state_free(&sb);
	lf_destroy(&a);
	lf_destroy(&b);
	lf_extra_top = "";
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-state-test-XXXXXX";

	T_CHECK(mkdtemp(dir), "mkdtemp");
	for (int nvme = 0; nvme < 2; nvme++)
		for (int bf16 = nvme; bf16 < 2; bf16++) /* NVMe state: 16-bit parameters */
			check(nvme ? "nvme" : "cpu", bf16 ? ZINF_DTYPE_BF16 : ZINF_DTYPE_F32, dir);
	check_fp16_skip("cpu", dir);
	check_fp16_skip("nvme", dir);
	{
		char cmd[96];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		T_CHECK(system(cmd) == 0, "cleanup %s", dir);
	}
	return T_EXIT_PASS;
}

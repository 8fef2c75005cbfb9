/* A step whose update fails after it has changed some state (here every write after the
 * first fails: module 0 goes home to NVMe, or the first sub-group's optimizer state is
 * written, and then a write fails; the optimizer state in host memory, on NVMe (its
 * gradient accumulators in host memory or on NVMe too) and on the device; the update in
 * the background and not) leaves the modules a mix of two
 * steps. The engine is then torn: the step, the weights' save, the state's save and
 * the progress read are refused with ZINF_ESTATE on one line naming the failed step, while fetches
 * still work; loading all but one module whole and setting the progress is not enough
 * (the message counts the module left); once every module is loaded whole and the
 * progress set, the next step gives the bits of a fresh engine loaded with the same
 * state: the gradients left from the torn step, and those added while torn, are gone. */
#include <errno.h>

#include "io/io_test_util.h"
#include "load_fixture.h"

#define SUB 3000ull

struct state {
	float *v[LF_N_MOD][2][3]; /* master, exp_avg, exp_avg_sq */
};

static void state_get(struct lf_engine *le, struct state *st)
{
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++) {
			uint64_t n = lf_elems(m, k);
			for (int j = 0; j < 3; j++) {
				st->v[m][k][j] = malloc(n * 4);
				T_CHECK(st->v[m][k][j], "out of memory");
			}
			T_CHECK(zinf_param_state_save(le->e, le->par[m][k], 0, n, st->v[m][k][0],
						      st->v[m][k][1], st->v[m][k][2]) == 0,
				"state save: %s", zinf_last_error(le->e));
		}
}

static void state_load(struct lf_engine *le, const struct state *st, int m)
{
	const float *master[2] = {st->v[m][0][0], st->v[m][1][0]};
	const float *avg[2] = {st->v[m][0][1], st->v[m][1][1]};
	const float *sq[2] = {st->v[m][0][2], st->v[m][1][2]};

	T_CHECK(zinf_module_load_state(le->e, le->mod[m], 2, master, avg, sq) == 0,
		"load of module %d: %s", m, zinf_last_error(le->e));
}

static void state_free(struct state *st)
{
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++)
			for (int j = 0; j < 3; j++)
				free(st->v[m][k][j]);
}

/* One micro-batch's gradients, no step. */
static void micro(struct lf_engine *le)
{
	for (int m = 0; m < LF_N_MOD; m++) {
		lf_module_grads(le, m);
		T_CHECK_RC(zinf_module_grads_ready(le->e, le->mod[m]));
		T_CHECK_RC(zinf_module_release(le->e, le->mod[m]));
	}
}

/* The step and, in the background, its update. */
static int step_synced(struct lf_engine *le, struct zinf_step_result *r)
{
	int rc = zinf_step(le->e, r);

	return rc ? rc : zinf_engine_sync(le->e);
}

static void expect_refused(struct lf_engine *le, int rc, const char *what, const char *also,
			   const char *label)
{
	const char *msg = zinf_last_error(le->e);

	T_CHECK(rc == ZINF_ESTATE && strstr(msg, what) && strstr(msg, "update failed part way") &&
			strstr(msg, also) && !strchr(msg, '\n'),
		"%s: %s of a torn engine returned %d: %s", label, what, rc, msg);
}

static void run(const char *opt_home, bool overlap, bool grads_nvme, const char *dir,
		const char *dir_b)
{
	struct lf_engine a, b;
	struct state st;
	struct zinf_engine_progress pg, bad;
	struct zinf_step_result r;
	char label[96], extra[128];
	float *got, *want, one[3];
	int rc;

	snprintf(label, sizeof(label), "optimizer %s, overlap %d, gradients on nvme %d", opt_home,
		 overlap, grads_nvme);
	snprintf(extra, sizeof(extra), ", \"overlap_optimizer\": %s%s", overlap ? "true" : "false",
		 !strcmp(opt_home, "nvme") ? (grads_nvme ? ", \"offload_gradients\": \"nvme\""
							 : ", \"offload_gradients\": \"cpu\"")
					   : "");
	lf_extra_zinf = extra;
	lf_create(&a, "nvme", opt_home, ZINF_DTYPE_BF16, dir, SUB);
	for (int m = 0; m < LF_N_MOD; m++) {
		void *s[2] = {lf_source(m, 0, lf_src_dtype(m, 0), 0),
			      lf_source(m, 1, lf_src_dtype(m, 1), 0)};
		enum zinf_dtype t[2] = {lf_src_dtype(m, 0), lf_src_dtype(m, 1)};
		T_CHECK(zinf_module_load(a.e, a.mod[m], 2, (const void *const *)s, t) == 0,
			"%s: %s", label, zinf_last_error(a.e));
		free(s[0]);
		free(s[1]);
	}
	lf_step(&a); /* moments that are not zero */
	T_CHECK_RC(zinf_engine_sync(a.e));
	state_get(&a, &st);
	T_CHECK_RC(zinf_engine_progress_get(a.e, &pg));

	micro(&a);
	T_CHECK_RC(zinf_engine_sync(a.e)); /* the gradients' writes done (on NVMe) */
	/* the first write goes through: module 0 home, or the first sub-group's state */
	zinf_io_fault_set(IO_FAULT_ERRNO, 1000000, EIO, 0, 1u << ZINF_IO_WRITE);
	zinf_io_fault_pass(1);
	rc = step_synced(&a, &r);
	zinf_io_fault_clear();
	T_CHECK(rc != 0, "%s: the step with every write failing returned 0", label);
	fprintf(stderr, "%s: the failed step: %s\n", label, zinf_last_error(a.e));

	expect_refused(&a, zinf_step(a.e, &r), "step refused", "step 2's", label);
	expect_refused(&a, zinf_param_save(a.e, a.par[0][0], st.v[0][0][0], ZINF_DTYPE_F32),
		       "save refused", "", label);
	expect_refused(&a, zinf_param_state_save(a.e, a.par[1][1], 0, 1, one, one + 1, one + 2),
		       "state save refused", "", label);
	expect_refused(&a, zinf_engine_progress_get(a.e, &bad), "progress read refused", "", label);
	T_CHECK(bad.steps == 0 && bad.loss_scale == 0, "%s: a refused progress read filled it",
		label);
	micro(&a); /* fetches work; these gradients go with the reload */

	for (int m = 0; m < LF_N_MOD - 1; m++)
		state_load(&a, &st, m);
	T_CHECK_RC(zinf_engine_progress_set(a.e, &pg));
	expect_refused(&a, zinf_step(a.e, &r), "step refused", "1 not yet", label);
	state_load(&a, &st, LF_N_MOD - 1);
	T_CHECK_RC(zinf_engine_progress_set(a.e, &pg));
	micro(&a);
	T_CHECK(step_synced(&a, &r) == 0 && r.step == pg.steps + 1, "%s: step after the reload: %s",
		label, zinf_last_error(a.e));
	got = lf_save(&a);
	lf_destroy(&a);

	lf_create(&b, "nvme", opt_home, ZINF_DTYPE_BF16, dir_b, SUB);
	for (int m = 0; m < LF_N_MOD; m++)
		state_load(&b, &st, m);
	T_CHECK_RC(zinf_engine_progress_set(b.e, &pg));
	micro(&b);
	T_CHECK(step_synced(&b, &r) == 0, "%s: reference step: %s", label, zinf_last_error(b.e));
	want = lf_save(&b);
	lf_destroy(&b);
	T_CHECK(memcmp(got, want, lf_total() * 4) == 0,
		"%s: after the reload the step differs from a fresh engine's", label);
	free(got);
	free(want);
	state_free(&st);
}

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp"), *dir_b = t_mkdtemp("/var/tmp");
	static const char *const homes[] = {"cpu", "nvme", "none"};

	T_CHECK(dir && dir_b, "scratch directories");
	zinf_log_set_level(ZINF_LOG_ERROR);
	for (int h = 0; h < 3; h++)
		for (int overlap = 0; overlap < 2; overlap++)
			run(homes[h], overlap, false, dir, dir_b);
	for (int overlap = 0; overlap < 2; overlap++)
		run("nvme", overlap, true, dir, dir_b);
	t_rmrf(dir);
	t_rmrf(dir_b);
	return T_EXIT_PASS;
}

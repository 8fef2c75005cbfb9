/* With the optimizer state on NVMe, a step whose update fails before it has changed
 * anything (a read of the first sub-group's state fails, or every write fails, so that
 * no sub-group's new state is in place and no module has gone home) is undone: the step
 * counter and the fp16 loss scaler are as before it, so zinf_step called again with the
 * same gradients gives the bits, the step number and the scaler of a run without the
 * fault, and training goes on identically. In the background (zinf.overlap_optimizer)
 * and not. */
#include <errno.h>

#include "io/io_test_util.h"
#include "load_fixture.h"

#define SUB 3000ull

static void load(struct lf_engine *le)
{
	for (int m = 0; m < LF_N_MOD; m++) {
		void *s[2] = {lf_source(m, 0, lf_src_dtype(m, 0), 0),
			      lf_source(m, 1, lf_src_dtype(m, 1), 0)};
		enum zinf_dtype t[2] = {lf_src_dtype(m, 0), lf_src_dtype(m, 1)};
		T_CHECK(zinf_module_load(le->e, le->mod[m], 2, (const void *const *)s, t) == 0,
			"%s", zinf_last_error(le->e));
		free(s[0]);
		free(s[1]);
	}
}

static void micro(struct lf_engine *le)
{
	for (int m = 0; m < LF_N_MOD; m++) {
		lf_module_grads(le, m);
		T_CHECK_RC(zinf_module_grads_ready(le->e, le->mod[m]));
		T_CHECK_RC(zinf_module_release(le->e, le->mod[m]));
	}
}

static int step_synced(struct lf_engine *le, struct zinf_step_result *r)
{
	int rc = zinf_step(le->e, r);

	return rc ? rc : zinf_engine_sync(le->e);
}

static void same(struct lf_engine *a, struct lf_engine *b, const char *label, const char *when)
{
	struct zinf_engine_progress pa, pb;
	float *wa = lf_save(a), *wb = lf_save(b);

	T_CHECK(memcmp(wa, wb, lf_total() * 4) == 0, "%s: %s: the weights differ", label, when);
	T_CHECK_RC(zinf_engine_progress_get(a->e, &pa));
	T_CHECK_RC(zinf_engine_progress_get(b->e, &pb));
	T_CHECK(pa.steps == pb.steps && pa.scaler_iteration == pb.scaler_iteration &&
			pa.loss_scale == pb.loss_scale,
		"%s: %s: steps %llu, scaler iteration %llu, scale %g; without the fault %llu, "
		"%llu, %g",
		label, when, (unsigned long long)pa.steps, (unsigned long long)pa.scaler_iteration,
		pa.loss_scale, (unsigned long long)pb.steps,
		(unsigned long long)pb.scaler_iteration, pb.loss_scale);
	free(wa);
	free(wb);
}

static void run(enum zinf_io_op op, bool overlap, const char *dir, const char *dir_b)
{
	struct lf_engine a, b;
	struct zinf_step_result r;
	char label[64];
	int rc;

	snprintf(label, sizeof(label), "%s fault, overlap %d",
		 op == ZINF_IO_READ ? "read" : "write", overlap);
	lf_extra_top = ", \"fp16\": {\"enabled\": true, \"loss_scale_window\": 2}";
	lf_extra_zinf =
		overlap ? ", \"overlap_optimizer\": true" : ", \"overlap_optimizer\": false";
	lf_create(&a, "none", "nvme", ZINF_DTYPE_F16, dir, SUB);
	lf_create(&b, "none", "nvme", ZINF_DTYPE_F16, dir_b, SUB);
	load(&a);
	load(&b);
	lf_step(&a);
	lf_step(&b);
	T_CHECK_RC(zinf_engine_sync(a.e));
	T_CHECK_RC(zinf_engine_sync(b.e));

	micro(&a);
	micro(&b);
	zinf_io_fault_set(IO_FAULT_ERRNO, 1000000, EIO, 0, 1u << op);
	rc = step_synced(&a, &r);
	zinf_io_fault_clear();
	T_CHECK(rc != 0, "%s: the step returned 0", label);
	fprintf(stderr, "%s: the failed step: %s\n", label, zinf_last_error(a.e));
	T_CHECK(step_synced(&a, &r) == 0 && r.step == 2, "%s: the step repeated: step %llu, %s",
		label, (unsigned long long)r.step, zinf_last_error(a.e));
	T_CHECK(step_synced(&b, &r) == 0 && r.step == 2, "%s: step without the fault: %s", label,
		zinf_last_error(b.e));
	same(&a, &b, label, "after the repeated step");
	for (int s = 0; s < 2; s++) {
		lf_step(&a);
		lf_step(&b);
	}
	T_CHECK_RC(zinf_engine_sync(a.e));
	T_CHECK_RC(zinf_engine_sync(b.e));
	same(&a, &b, label, "two steps later");
	lf_destroy(&a);
	lf_destroy(&b);
	lf_extra_top = "";
}

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp"), *dir_b = t_mkdtemp("/var/tmp");

	T_CHECK(dir && dir_b, "scratch directories");
	zinf_log_set_level(ZINF_LOG_ERROR);
	for (int overlap = 0; overlap < 2; overlap++) {
		run(ZINF_IO_READ, overlap, dir, dir_b);
		run(ZINF_IO_WRITE, overlap, dir, dir_b);
	}
	t_rmrf(dir);
	t_rmrf(dir_b);
	return T_EXIT_PASS;
}

/* zinf.offload_gradients nvme under I/O faults, with the gradients added on the model's
 * thread and in the background (zinf.overlap_gradients). A gradient sub-group whose
 * write fails during backward stays in host memory (a warning; zinf_engine_sync, which
 * waits for the writes, returns 0 and leaves zinf_last_error alone) and the step writes it:
  * training is bit-identical to a run without the fault, also when one of the step's
 * own writes fails (it writes that one again). If the step's writes keep failing,
 * zinf_step is refused on one line naming the sub-group and the extent, changes nothing,
 * and can be called again. A failed read of a partial sum (a later micro-batch) fails
 * that zinf_module_grads_ready on one line (in the background: a later grads_ready or
 * zinf_engine_sync reports it, once); the step is then dropped (refused once, gradients
 * cleared) and training goes on as if that step had never been taken. */
#include <unistd.h>

#include "io_internal.h"
#include "load_fixture.h"

#define SUB 300ull
#define STEPS 3

static bool overlap; /* zinf.overlap_gradients of the engines made now */

static int kept; /* warnings: a gradient sub-group kept in host memory */

static void on_log(enum zinf_log_level level, const char *msg, void *user)
{
	(void)user;
	if (level == ZINF_LOG_WARN && strstr(msg, "kept in host memory") &&
	    strstr(msg, "write of extent"))
		kept++;
}

static void load_all(struct lf_engine *le)
{
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++) {
			void *src = lf_source(m, k, lf_src_dtype(m, k), 0);
			T_CHECK(zinf_param_load(le->e, le->par[m][k], src, lf_src_dtype(m, k)) == 0,
				"%s", zinf_last_error(le->e));
			free(src);
		}
	/* the load's optimizer-state writes go on after it returns: done before any fault
	 * is armed (one still queued would take a gradient write's fault), as zinf train
	 * syncs after its load */
	T_CHECK(zinf_engine_sync(le->e) == 0, "load: %s", zinf_last_error(le->e));
}

/* One backward pass (one micro-batch), then zinf_engine_sync; a fault of op_mask is
 * armed before module fault_m's grads_ready (count faults; none when fault_m < 0).
 * Returns that call's rc; in the background, the first error of any call. */
static int backward(struct lf_engine *le, int fault_m, unsigned op_mask, int count)
{
	struct zinf_engine *e = le->e;
	int ret = 0, rc;

	for (int m = LF_N_MOD - 1; m >= 0; m--) {
		lf_module_grads(le, m);
		if (m == fault_m)
			zinf_io_fault_set(IO_FAULT_ERRNO, count, EIO, 0, op_mask);
		rc = zinf_module_grads_ready(e, le->mod[m]);
		if (m == fault_m && op_mask & (1u << ZINF_IO_READ))
			zinf_io_fault_clear();
		if (m == fault_m || (overlap && rc && !ret))
			ret = rc;
		else
			T_CHECK(rc == 0, "module %d: %s", m, zinf_last_error(e));
		T_CHECK_RC(zinf_module_release(e, le->mod[m]));
	}
	rc = zinf_engine_sync(e); /* the gradients added in the background */
	T_CHECK(rc == 0 || (overlap && !ret), "sync: %s", zinf_last_error(e));
	return ret ? ret : rc;
}

static void step_ok(struct lf_engine *le)
{
	struct zinf_step_result r;

	T_CHECK(zinf_step(le->e, &r) == 0 && !r.skipped, "step: %s", zinf_last_error(le->e));
}

/* Steps 2..STEPS without faults, then the parameters must equal ref. */
static void finish(struct lf_engine *le, const float *ref, const char *what)
{
	float *out;

	for (int s = 1; s < STEPS; s++) {
		T_CHECK(backward(le, -1, 0, 0) == 0, "backward");
		step_ok(le);
	}
	out = lf_save(le);
	T_CHECK(memcmp(ref, out, lf_total() * 4) == 0, "%s", what);
	free(out);
	lf_destroy(le);
}

static void expect_line(struct lf_engine *le, int rc, const char *what, const char *needle)
{
	const char *msg = zinf_last_error(le->e);

	T_CHECK(rc == -EIO && strstr(msg, needle) && !strchr(msg, '\n'),
		"%s: rc %d, want one line with '%s': %s", what, rc, needle, msg);
	fprintf(stderr, "%s: %s\n", what, msg);
}

static void run(const char *dir)
{
	struct lf_engine le;
	float *ref;
	int rc;

	lf_extra_zinf = overlap ? ", \"offload_gradients\": \"nvme\""
				: ", \"offload_gradients\": \"nvme\", \"overlap_gradients\": false";
	kept = 0;

	lf_create(&le, "none", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	load_all(&le);
	for (int s = 0; s < STEPS; s++) {
		T_CHECK(backward(&le, -1, 0, 0) == 0, "backward");
		step_ok(&le);
	}
	ref = lf_save(&le);
	lf_destroy(&le);

	/* one write fails in backward: kept, written by the step */
	lf_create(&le, "none", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	load_all(&le);
	T_CHECK(backward(&le, 1, 1u << ZINF_IO_WRITE, 1) == 0, "a failed gradient write: %s",
		zinf_last_error(le.e));
	zinf_io_fault_clear();
	T_CHECK(kept == 1, "%d warnings of a gradient kept in host memory, want 1", kept);
	step_ok(&le);
	finish(&le, ref, "a failed gradient write changed the result");

	/* every write of the last module fails, the last ones those the sync waits for: it
	 * returns 0 and, in the background (where the failures never reached the model's
	 * thread), leaves the last error alone */
	kept = 0;
	lf_create(&le, "none", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	load_all(&le);
	T_CHECK(backward(&le, 0, 1u << ZINF_IO_WRITE, 1000000) == 0, "failed gradient writes: %s",
		zinf_last_error(le.e));
	zinf_io_fault_clear();
	T_CHECK(kept >= 1, "no warning of a gradient kept in host memory");
	T_CHECK(!overlap || !strstr(zinf_last_error(le.e), "write of extent"),
		"a sync that returned 0 left the kept write as the last error: %s",
		zinf_last_error(le.e));
	step_ok(&le);
	finish(&le, ref, "a failed gradient write changed the result");

	/* writes keep failing until after the step: the step is refused, then retried */
	lf_create(&le, "none", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	load_all(&le);
	T_CHECK(backward(&le, 2, 1u << ZINF_IO_WRITE, 1000000) == 0, "backward: %s",
		zinf_last_error(le.e));
	{
		struct zinf_step_result r;
		rc = zinf_step(le.e, &r);
	}
	zinf_io_fault_clear();
	expect_line(&le, rc, "step with failing writes", "gradients on nvme: sub-group ");
	T_CHECK(strstr(zinf_last_error(le.e), "write of extent"), "names the extent");
	step_ok(&le);
	finish(&le, ref, "a refused and repeated step changed the result");

	/* every write fails in backward, then one more while the step writes them: the
	 * step writes that one again (nothing lost, the result unchanged) */
	lf_create(&le, "none", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	load_all(&le);
	T_CHECK(backward(&le, 2, 1u << ZINF_IO_WRITE, 1000000) == 0, "backward: %s",
		zinf_last_error(le.e));
	zinf_io_fault_clear();
	zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_WRITE);
	step_ok(&le);
	zinf_io_fault_clear();
	finish(&le, ref, "a write failing during the step lost a gradient");

	/* a partial sum cannot be read back: that step is dropped, the others train */
	lf_create(&le, "none", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	load_all(&le);
	T_CHECK(backward(&le, -1, 0, 0) == 0, "backward");
	step_ok(&le);
	T_CHECK(backward(&le, -1, 0, 0) == 0, "micro-batch 1");
	rc = backward(&le, 1, 1u << ZINF_IO_READ, 1);
	expect_line(&le, rc, "micro-batch 2, a failed read", "read of extent");
	{
		struct zinf_step_result r;
		rc = zinf_step(le.e, &r);
	}
	expect_line(&le, rc, "the step after it", "step dropped");
	finish(&le, ref, "a dropped step left a trace in the result");
	free(ref);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-grad-fault-XXXXXX";

	zinf_log_set_level(ZINF_LOG_WARN);
	zinf_log_set_callback(on_log, NULL);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	overlap = false;
	run(dir);
	overlap = true;
	run(dir);
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");
	return T_EXIT_PASS;
}

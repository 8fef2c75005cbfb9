/* With optimizer state on NVMe, a write of a loaded sub-group that fails is an error of
 * the call that waits for it (the write goes on after the load call that completed the
 * sub-group: a later load into the group that needs its staging buffer, or the flush of a
 * save or step), on one line naming the sub-group, its elements and the extent, and the
 * call can simply be repeated: the run then trains exactly as one without the fault
 * (same losses, same saved parameters). A failed read while merging a
 * partial reload (at a save's flush) is named the same way, keeps the reloaded values in
 * host memory, and the next flush (the step's) merges them. Without fast_init, a write
 * failing anywhere in the load that completes the state (a sub-group's, or the zeroing
 * of the spare extents that follows the last one, through the staging buffer the
 * sub-group was assembled in) loses nothing loaded before: with the failed call
 * repeated, the load gives the masters of a load without the fault. */
#include <unistd.h>

#include "engine_internal.h" /* the engine's I/O handle, for its counters */
#include "io_internal.h"
#include "load_fixture.h"

#define SUB 300ull

static void *src[2][LF_N_MOD][2]; /* [variant][module][param] */

static int load_module(struct lf_engine *le, int m, int variant)
{
	const void *s[2] = {src[variant][m][0], src[variant][m][1]};
	enum zinf_dtype t[2] = {lf_src_dtype(m, 0), lf_src_dtype(m, 1)};

	return zinf_module_load(le->e, le->mod[m], 2, s, t);
}

static void expect_named(struct lf_engine *le, int rc, const char *op)
{
	const char *msg = zinf_last_error(le->e);

	T_CHECK(rc == -EIO, "%s fault: load returned %d (%s)", op, rc, msg);
	T_CHECK(strstr(msg, "optimizer on nvme: sub-group ") && strstr(msg, "(elements ") &&
			strstr(msg, op) && strstr(msg, "of extent") && !strchr(msg, '\n'),
		"%s fault: want one line naming the sub-group and the extent: %s", op, msg);
	fprintf(stderr, "%s fault: %s\n", op, msg);
}

/* Load (a write fault on the first sub-group written: the load is repeated), 2 steps,
 * reload the last module (a write fault on its last write, which goes on after the
 * reload: the step is refused and repeated), a step, reload a parameter and save it (a
 * read fault on the merge), 2 steps. */
static float *run(const char *dir, bool faults, double *loss)
{
	struct lf_engine le;
	float *out, *bias = malloc(lf_elems(2, 1) * 4);
	int rc;

	lf_create(&le, "none", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	if (faults) {
		zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_WRITE);
		rc = load_module(&le, 0, 0);
		zinf_io_fault_clear();
		expect_named(&le, rc, "write");
	}
	for (int m = 0; m < LF_N_MOD; m++)
		T_CHECK(load_module(&le, m, 0) == 0, "%s", zinf_last_error(le.e));
	loss[0] = lf_step(&le);
	loss[1] = lf_step(&le);
	/* the last module reloaded (its moments reset); with faults its last write, still
	 * going on when the reload returns, fails: the next step is refused for it, changing
	 * nothing, and repeated trains as the run without the fault */
	{
		struct zinf_io_stats io0, io1;
		struct zinf_step_result res;
		static uint64_t reload_writes; /* of the run without faults */
		double l = 0;

		/* step 2's update (in the background) done first: its writes would count
		 * among the reload's, and the fault hit one of them, as timing had it */
		T_CHECK_RC(zinf_engine_sync(le.e));
		zinf_io_get_stats(le.e->io, &io0);
		if (faults) {
			zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_WRITE);
			zinf_io_fault_pass((int)reload_writes - 1);
		}
		T_CHECK(load_module(&le, LF_N_MOD - 1, 0) == 0, "reload: %s",
			zinf_last_error(le.e));
		if (!faults) {
			T_CHECK_RC(zinf_engine_sync(le.e));
			zinf_io_get_stats(le.e->io, &io1);
			reload_writes = io1.write_reqs - io0.write_reqs;
			T_CHECK(reload_writes > 1, "the reload wrote %llu requests",
				(unsigned long long)reload_writes);
		}
		for (int m = 0; m < LF_N_MOD; m++) {
			l += lf_module_grads(&le, m);
			T_CHECK_RC(zinf_module_grads_ready(le.e, le.mod[m]));
			T_CHECK_RC(zinf_module_release(le.e, le.mod[m]));
		}
		rc = zinf_step(le.e, &res);
		zinf_io_fault_clear();
		if (faults)
			expect_named(&le, rc, "write");
		if (rc)
			rc = zinf_step(le.e, &res);
		T_CHECK(rc == 0 && !res.skipped, "step after the reload: %s",
			zinf_last_error(le.e));
		loss[2] = l;
	}
	/* block2's bias shares its sub-group with its neighbours: a merge at the flush */
	T_CHECK(zinf_param_load(le.e, le.par[2][1], src[1][2][1], lf_src_dtype(2, 1)) == 0, "%s",
		zinf_last_error(le.e));
	if (faults) {
		zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_READ);
		rc = zinf_param_save(le.e, le.par[2][1], bias, ZINF_DTYPE_F32);
		zinf_io_fault_clear();
		expect_named(&le, rc, "read");
	}
	loss[3] = lf_step(&le);
	loss[4] = lf_step(&le);
	out = lf_save(&le);
	lf_destroy(&le);
	free(bias);
	return out;
}

/* fast_init off: modules 0..3 loaded, then module 4 (completing the state) with every
 * write after the first `pass` failing, and its writes (which may go on after the load
 * returns) waited for by zinf_engine_sync; the load repeated if it failed; the masters
 * saved (the save's flush writes again what failed). */
static float *completing_load(const char *dir, int pass, int *rc)
{
	struct lf_engine le;
	float *out;
	bool load_failed;

	lf_create(&le, "none", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	for (int m = 0; m < LF_N_MOD - 1; m++)
		T_CHECK(load_module(&le, m, 0) == 0, "%s", zinf_last_error(le.e));
	if (pass >= 0) {
		zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_WRITE);
		zinf_io_fault_pass(pass);
	}
	*rc = load_module(&le, LF_N_MOD - 1, 0);
	load_failed = *rc != 0;
	if (!*rc)
		*rc = zinf_engine_sync(le.e);
	zinf_io_fault_clear();
	if (*rc) {
		T_CHECK(*rc == -EIO && strstr(zinf_last_error(le.e), "optimizer on nvme: ") &&
				strstr(zinf_last_error(le.e), "extent") &&
				!strchr(zinf_last_error(le.e), '\n'),
			"pass %d: %d, want one line naming the extent: %s", pass, *rc,
			zinf_last_error(le.e));
		T_CHECK(!load_failed || load_module(&le, LF_N_MOD - 1, 0) == 0,
			"pass %d: load repeated: %s", pass, zinf_last_error(le.e));
	}
	out = lf_save(&le);
	lf_destroy(&le);
	return out;
}

static void completing_load_faults_lose_nothing(const char *dir)
{
	int rc, failed = 0;
	float *clean;

	lf_extra_offload_optimizer = ", \"fast_init\": false";
	clean = completing_load(dir, -1, &rc);
	for (int pass = 0; pass < 16; pass++) {
		float *got = completing_load(dir, pass, &rc);
		uint64_t diff = 0;
		for (uint64_t i = 0; i < lf_total(); i++)
			diff += memcmp(&got[i], &clean[i], 4) != 0;
		T_CHECK(diff == 0,
			"a write failing after %d others in the completing load: %llu masters "
			"differ after it was repeated",
			pass, (unsigned long long)diff);
		failed += rc != 0;
		free(got);
	}
	free(clean);
	lf_extra_offload_optimizer = "";
	fprintf(stderr, "completing load: %d of 16 fault positions failed it\n", failed);
	T_CHECK(failed >= 8, "only %d of the fault positions failed the load", failed);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-nvme-load-fault-XXXXXX";
	double clean_loss[5], fault_loss[5];
	float *clean, *fault;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	for (int v = 0; v < 2; v++)
		for (int m = 0; m < LF_N_MOD; m++)
			for (int k = 0; k < 2; k++)
				src[v][m][k] = lf_source(m, k, lf_src_dtype(m, k), v);
	clean = run(dir, false, clean_loss);
	fault = run(dir, true, fault_loss);
	for (int s = 0; s < 5; s++)
		T_CHECK(clean_loss[s] == fault_loss[s], "step %d loss %.17g, %.17g with faults",
			s + 1, clean_loss[s], fault_loss[s]);
	T_CHECK(memcmp(clean, fault, lf_total() * 4) == 0,
		"saved parameters differ after the faults were retried");
	free(clean);
	free(fault);
	completing_load_faults_lose_nothing(dir);
	for (int v = 0; v < 2; v++)
		for (int m = 0; m < LF_N_MOD; m++)
			for (int k = 0; k < 2; k++)
				free(src[v][m][k]);
	T_CHECK(rmdir(dir) == 0, "scratch directory not empty after the engines closed");
	return T_EXIT_PASS;
}

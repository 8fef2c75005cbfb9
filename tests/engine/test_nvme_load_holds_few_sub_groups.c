/* With optimizer state on NVMe, loading streams the state one sub-group at a time
 * (sub-groups of 300 elements, about 300 of them in the weights' group):
 *  - loading module by module in registration order assembles every sub-group in the
 *    NVMe optimizer's pinned staging buffers: host memory holds no sub-group's values,
 *    only a bit per element of the sub-groups in them (being assembled, or written
 *    while the load goes on); saving reads into
 *    a staging buffer too, and saving the masters reads their parts of the sub-groups
 *    alone; the engine's stats count what loading wrote and saving read;
 *  - loading parameter by parameter in a shuffled order, they hold no more than the
 *    sub-groups partly loaded at the time (counted here independently) plus the one
 *    being filled, and the bits of those being written, far below the group;
 *  - a reload after steps (one parameter, and one module whose bias shares sub-groups
 *    with its neighbours) keeps every other parameter's value and Adam moments: the
 *    losses and saved parameters of the following steps equal those of the same run
 *    with the state in host memory, bit for bit; also with one staging buffer (no
 *    pipelining), loaded in a shuffled order, where the partly loaded sub-groups take
 *    turns in it and move out to host memory when it is needed for I/O;
 *  - a module never loaded before the first step has the value 0, its state is written
 *    with the rest at the step, and the step runs.
 * White-box: reads the engine's load-buffer counters (engine_internal.h). */
#include <unistd.h>

#include "engine_internal.h"
#include "load_fixture.h"

#define SUB 300ull
#define BITS (sizeof(struct esub) + (SUB + 63) / 64 * 8)
#define ONE_SUB (BITS + SUB * 4) /* values, bits */

static void *src[2][LF_N_MOD][2]; /* [variant][module][param] */

static void load_module(struct lf_engine *le, int m, int variant)
{
	const void *s[2] = {src[variant][m][0], src[variant][m][1]};
	enum zinf_dtype t[2] = {lf_src_dtype(m, 0), lf_src_dtype(m, 1)};

	T_CHECK(zinf_module_load(le->e, le->mod[m], 2, s, t) == 0, "module %d: %s", m,
		zinf_last_error(le->e));
}

static void in_order_holds_the_staged_sub_groups_bits(const char *dir)
{
	struct zinf_io_stats io0, io1;
	struct zinf_stats st0, st1;
	uint64_t masters = 0, slot_bits = 0;
	struct lf_engine le;

	lf_create(&le, "none", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	T_CHECK(le.e->n_groups == 2 && le.e->groups[0].n_sub > 250, "layout: %d groups, %llu subs",
		le.e->n_groups, (unsigned long long)le.e->groups[0].n_sub);
	for (int g = 0; g < le.e->n_groups; g++)
		slot_bits += zinf_adam_nvme_n_slots(le.e->groups[g].nvme) * BITS;
	for (int m = 0; m < LF_N_MOD; m++) {
		load_module(&le, m, 0);
		T_CHECK(le.e->load_bytes <= slot_bits, "after module %d: %llu bytes held", m,
			(unsigned long long)le.e->load_bytes);
	}
	T_CHECK_RC(zinf_engine_sync(le.e)); /* the last writes, still going on */
	zinf_io_get_stats(le.e->io, &io0);
	zinf_engine_get_stats(le.e, &st0);
	T_CHECK(st0.nvme_to_pinned.bytes == 0 && st0.nvme_to_pinned.seconds == 0,
		"loading in order read %llu bytes in %g s",
		(unsigned long long)st0.nvme_to_pinned.bytes, st0.nvme_to_pinned.seconds);
	T_CHECK(io0.write_bytes > 0 && st0.pinned_to_nvme.bytes == io0.write_bytes,
		"the engine's stats count %llu bytes of the load's %llu written",
		(unsigned long long)st0.pinned_to_nvme.bytes, (unsigned long long)io0.write_bytes);
	T_CHECK(le.e->load_peak_bytes > 0 && le.e->load_peak_bytes <= slot_bits,
		"in order: peak %llu bytes, more than the bits of a sub-group per staging buffer "
		"(%llu): values assembled outside the staging buffers",
		(unsigned long long)le.e->load_peak_bytes, (unsigned long long)slot_bits);
	fprintf(stderr, "in order: peak %llu bytes, a sub-group %llu, the group %llu\n",
		(unsigned long long)le.e->load_peak_bytes, (unsigned long long)ONE_SUB,
		(unsigned long long)(le.e->groups[0].elems * 4));
	lf_step(&le);
	T_CHECK(le.e->load_bytes == 0, "%llu bytes left after the step",
		(unsigned long long)le.e->load_bytes);
	T_CHECK_RC(engine_opt_drain(le.e)); /* (the step may still run in the background) */
	zinf_io_get_stats(le.e->io, &io0);
	zinf_engine_get_stats(le.e, &st0);
	free(lf_save(&le));
	zinf_io_get_stats(le.e->io, &io1);
	zinf_engine_get_stats(le.e, &st1);
	T_CHECK(st1.nvme_to_pinned.bytes - st0.nvme_to_pinned.bytes ==
			io1.read_bytes - io0.read_bytes,
		"the engine's stats count %llu bytes of the save's %llu read",
		(unsigned long long)(st1.nvme_to_pinned.bytes - st0.nvme_to_pinned.bytes),
		(unsigned long long)(io1.read_bytes - io0.read_bytes));
	for (int g = 0; g < le.e->n_groups; g++) {
		T_CHECK(le.e->groups[g].save_slot >= 0,
			"group %d: saving read no sub-group into a staging buffer", g);
		for (uint64_t s = 0; s < le.e->groups[g].n_sub; s++) {
			uint64_t first, n, len;
			T_CHECK_RC(zinf_adam_nvme_sub_group(le.e->groups[g].nvme, s, &first, &n,
							    &len));
			masters += len / 3;
		}
	}
	T_CHECK(io1.read_bytes - io0.read_bytes == masters,
		"saving the masters read %llu bytes (their parts of the sub-groups: %llu)",
		(unsigned long long)(io1.read_bytes - io0.read_bytes), (unsigned long long)masters);
	lf_destroy(&le);
}

/* Complete sub-groups whose writes go on after their load. */
static uint64_t writing(const struct lf_engine *le)
{
	uint64_t n = 0;

	for (int g = 0; g < le->e->n_groups; g++)
		for (uint64_t s = 0; s < le->e->groups[g].n_sub; s++)
			n += le->e->groups[g].pending[s] && le->e->groups[g].pending[s]->writing;
	return n;
}

static void shuffled_holds_partial_sub_groups(const char *dir)
{
	static const int order[2 * LF_N_MOD] = {7, 2, 9, 0, 4, 8, 1, 6, 3, 5};
	uint64_t goff[LF_N_MOD][2], gelems[2] = {0, 0}, most = 0, bound = 0;
	uint32_t *covered[2];
	struct lf_engine le;

	/* the groups as the engine forms them: weights decay, biases do not */
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++) {
			goff[m][k] = gelems[k];
			gelems[k] += lf_elems(m, k);
		}
	for (int k = 0; k < 2; k++)
		covered[k] = calloc(gelems[k] / SUB + 1, sizeof(uint32_t));
	lf_create(&le, "none", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	for (int j = 0; j < 2 * LF_N_MOD; j++) {
		int m = order[j] / 2, k = order[j] % 2;
		uint64_t partial = 0;
		T_CHECK(zinf_param_load(le.e, le.par[m][k], src[0][m][k], lf_src_dtype(m, k)) == 0,
			"%s", zinf_last_error(le.e));
		for (uint64_t i = goff[m][k]; i < goff[m][k] + lf_elems(m, k); i++)
			covered[k][i / SUB]++;
		for (int g = 0; g < 2; g++)
			for (uint64_t s = 0; s * SUB < gelems[g]; s++) {
				uint64_t len =
					gelems[g] - s * SUB < SUB ? gelems[g] - s * SUB : SUB;
				partial += covered[g][s] > 0 && covered[g][s] < len;
			}
		T_CHECK(le.e->load_bytes <= partial * ONE_SUB + writing(&le) * BITS,
			"after %d loads: %llu bytes held for %llu partly loaded sub-groups and %llu "
			"being written",
			j + 1, (unsigned long long)le.e->load_bytes, (unsigned long long)partial,
			(unsigned long long)writing(&le));
		if (partial > most)
			most = partial;
	}
	for (int g = 0; g < le.e->n_groups; g++) /* complete ones being written */
		bound += zinf_adam_nvme_n_slots(le.e->groups[g].nvme) * BITS;
	bound += (most + 1) * ONE_SUB;
	fprintf(stderr, "shuffled: peak %llu bytes, at most %llu sub-groups partly loaded\n",
		(unsigned long long)le.e->load_peak_bytes, (unsigned long long)most);
	T_CHECK(le.e->load_peak_bytes <= bound,
		"shuffled: peak %llu bytes, more than %llu partly loaded sub-groups + 1 and the "
		"bits of those being written (%llu)",
		(unsigned long long)le.e->load_peak_bytes, (unsigned long long)most,
		(unsigned long long)bound);
	T_CHECK(bound * 10 < gelems[0] * 4, "the order tried is no test: %llu partial",
		(unsigned long long)most);
	T_CHECK_RC(zinf_engine_sync(le.e));
	T_CHECK(le.e->load_bytes == 0, "%llu bytes held with everything loaded and written",
		(unsigned long long)le.e->load_bytes);
	lf_destroy(&le);
	free(covered[0]);
	free(covered[1]);
}

/* Load (module by module, or parameter by parameter in a shuffled order), 2 steps,
 * reload a parameter and a module, 2 steps: losses and saved params. */
static float *reload_run(const char *opt_home, const char *dir, bool shuffled, double *loss)
{
	static const int order[2 * LF_N_MOD] = {3, 8, 0, 5, 9, 1, 6, 2, 7, 4};
	struct lf_engine le;
	float *out;

	lf_create(&le, "none", opt_home, ZINF_DTYPE_BF16, dir, SUB);
	for (int j = 0; j < 2 * LF_N_MOD; j++) {
		int m = order[j] / 2, k = order[j] % 2;
		if (!shuffled && j < LF_N_MOD)
			load_module(&le, j, 0);
		else if (shuffled)
			T_CHECK(zinf_param_load(le.e, le.par[m][k], src[0][m][k],
						lf_src_dtype(m, k)) == 0,
				"%s", zinf_last_error(le.e));
	}
	loss[0] = lf_step(&le);
	loss[1] = lf_step(&le);
	T_CHECK(zinf_param_load(le.e, le.par[1][0], src[1][1][0], lf_src_dtype(1, 0)) == 0, "%s",
		zinf_last_error(le.e));
	load_module(&le, 3, 1);
	loss[2] = lf_step(&le);
	loss[3] = lf_step(&le);
	out = lf_save(&le);
	lf_destroy(&le);
	return out;
}

static void reload_keeps_other_moments(const char *dir, bool shuffled, const char *what)
{
	double host_loss[4], nvme_loss[4];
	float *host = reload_run("cpu", dir, shuffled, host_loss);
	float *nvme = reload_run("nvme", dir, shuffled, nvme_loss);

	for (int s = 0; s < 4; s++)
		T_CHECK(host_loss[s] == nvme_loss[s],
			"%s: step %d loss %.17g (host state) vs "
			"%.17g (nvme state)",
			what, s + 1, host_loss[s], nvme_loss[s]);
	T_CHECK(memcmp(host, nvme, lf_total() * 4) == 0,
		"%s: saved parameters differ between host and nvme optimizer state", what);
	free(host);
	free(nvme);
}

static void never_loaded_is_zero(const char *dir)
{
	struct lf_engine le;
	struct zinf_step_result r;
	float *w = calloc(lf_elems(2, 0), 4);

	lf_create(&le, "cpu", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	for (int m = 0; m < LF_N_MOD; m++)
		if (m != 2)
			load_module(&le, m, 0);
	for (int k = 0; k < 2; k++) {
		memset(w, 0x55, lf_elems(2, k) * 4);
		T_CHECK(zinf_param_save(le.e, le.par[2][k], w, ZINF_DTYPE_F32) == 0, "%s",
			zinf_last_error(le.e));
		for (uint64_t i = 0; i < lf_elems(2, k); i++)
			T_CHECK(w[i] == 0.0f, "never loaded: element %llu is %g",
				(unsigned long long)i, w[i]);
	}
	T_CHECK(zinf_step(le.e, &r) == 0, "step: %s", zinf_last_error(le.e));
	lf_destroy(&le);
	free(w);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-nvme-load-XXXXXX";

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	for (int v = 0; v < 2; v++)
		for (int m = 0; m < LF_N_MOD; m++)
			for (int k = 0; k < 2; k++)
				src[v][m][k] = lf_source(m, k, lf_src_dtype(m, k), v);
	in_order_holds_the_staged_sub_groups_bits(dir);
	shuffled_holds_partial_sub_groups(dir);
	reload_keeps_other_moments(dir, false, "reload");
	lf_extra_offload_optimizer = ", \"pipeline_read\": false, \"pipeline_write\": false";
	reload_keeps_other_moments(dir, true, "one staging buffer, shuffled, reload");
	lf_extra_offload_optimizer = "";
	never_loaded_is_zero(dir);
	for (int v = 0; v < 2; v++)
		for (int m = 0; m < LF_N_MOD; m++)
			for (int k = 0; k < 2; k++)
				free(src[v][m][k]);
	T_CHECK(rmdir(dir) == 0, "scratch directory not empty after the engines closed");
	return T_EXIT_PASS;
}

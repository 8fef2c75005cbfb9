/* zinf_step refuses (ZINF_ESTATE, nothing changed) while the model still holds a module:
 * fetched and not released, or its gradient buffers taken and zinf_module_grads_ready
 * not called. The one-line message names the first such module and what is outstanding.
 * Once released and ready, the step runs and gives bit-identical parameters and the same
 * step result as a run that never made the refused calls, with the optimizer in the
 * background and not. zinf_module_load and zinf_param_load into a fetched module are
 * refused the same way (-EBUSY, as documented for them), and a release the model never
 * fetched is refused. */
#include "config_fixture.h"
#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

#define ELEMS 96

struct run {
	float w[2][ELEMS];
	struct zinf_step_result r[2];
};

static void expect(struct zinf_engine *e, int rc, int want, const char *needle, const char *what)
{
	const char *msg = zinf_last_error(e);

	T_CHECK(rc == want, "%s: returned %d, want %d (%s)", what, rc, want, msg);
	T_CHECK(strstr(msg, needle) && !strchr(msg, '\n'), "%s: want one line with '%s': %s", what,
		needle, msg);
}

static float init_value(int i)
{
	return 0.02f * (float)(i % 13) - 0.1f;
}

static void fill_grads(struct zinf_engine *e, uint32_t param, int step)
{
	float *g = zinf_param_grad(e, param);

	T_CHECK(g, "no gradient buffer for param %u", param);
	for (int i = 0; i < ELEMS; i++)
		g[i] = 0.01f * (float)((i * 7 + (int)param * 3 + step) % 11) - 0.05f;
}

/* Two steps of one micro-batch over modules "embed" and "block"; with misuse, the first
 * step is first called while modules are held, and loads are tried into a held module. */
static void train(struct zinf_config *cfg, bool misuse, struct run *out)
{
	struct zinf_engine *e;
	uint64_t shape[2] = {8, ELEMS / 8};
	float init[ELEMS];
	const void *srcs[1] = {init};
	enum zinf_dtype dts[1] = {ZINF_DTYPE_F32};
	char err[512];
	uint32_t m[2], p[2];

	for (int i = 0; i < ELEMS; i++)
		init[i] = init_value(i);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "embed", &m[0]));
	T_CHECK_RC(zinf_param_add(e, m[0], "embed.weight", ZINF_DTYPE_BF16, 2, shape, 0, &p[0]));
	T_CHECK_RC(zinf_module_add(e, "block", &m[1]));
	T_CHECK_RC(zinf_param_add(e, m[1], "block.weight", ZINF_DTYPE_F32, 2, shape, 0, &p[1]));
	T_CHECK(zinf_engine_finalize(e) == 0, "%s", zinf_last_error(e));
	for (int k = 0; k < 2; k++)
		T_CHECK(zinf_module_load(e, m[k], 1, srcs, dts) == 0, "%s", zinf_last_error(e));

	for (int step = 0; step < 2; step++) {
		for (int k = 0; k < 2; k++)
			T_CHECK(zinf_module_fetch(e, m[k]) == 0 && zinf_module_wait(e, m[k]) == 0,
				"fetch %d: %s", k, zinf_last_error(e));
		T_CHECK_RC(zinf_module_grads(e, m[0]));
		fill_grads(e, p[0], step);
		T_CHECK_RC(zinf_module_grads_ready(e, m[0]));
		T_CHECK_RC(zinf_module_grads(e, m[1]));
		fill_grads(e, p[1], step);
		if (misuse && step == 0) {
			expect(e, zinf_step(e, &out->r[0]), ZINF_ESTATE,
			       "step refused: module 0 (embed): fetched, not released",
			       "step with two modules fetched");
			expect(e, zinf_module_load(e, m[0], 1, srcs, dts), -EBUSY,
			       "module load refused: module 0 (embed): fetched, not released",
			       "module load into a fetched module");
			expect(e, zinf_param_load(e, p[1], init, ZINF_DTYPE_F32), -EBUSY,
			       "param load refused: module 1 (block): fetched, not released",
			       "param load into a fetched module");
			T_CHECK_RC(zinf_module_release(e, m[0]));
			expect(e, zinf_module_release(e, m[0]), ZINF_ESTATE,
			       "module 0 (embed): released more often than fetched",
			       "release without a fetch");
			expect(e, zinf_step(e, &out->r[0]), ZINF_ESTATE,
			       "step refused: module 1 (block): fetched, not released",
			       "step with one module fetched");
			T_CHECK_RC(zinf_module_release(e, m[1]));
			expect(e, zinf_step(e, &out->r[0]), ZINF_ESTATE,
			       "step refused: module 1 (block): gradients taken, "
			       "zinf_module_grads_ready not called",
			       "step with gradients out");
		} else {
			T_CHECK_RC(zinf_module_release(e, m[0]));
			T_CHECK_RC(zinf_module_release(e, m[1]));
		}
		T_CHECK_RC(zinf_module_grads_ready(e, m[1]));
		T_CHECK(zinf_step(e, &out->r[step]) == 0, "step %d: %s", step, zinf_last_error(e));
	}
	T_CHECK(zinf_engine_sync(e) == 0, "%s", zinf_last_error(e));
	for (int k = 0; k < 2; k++)
		T_CHECK_RC(zinf_param_save(e, p[k], out->w[k], ZINF_DTYPE_F32));
	zinf_engine_destroy(e);
}

int main(void)
{
	char json[512];

	zinf_log_set_level(ZINF_LOG_ERROR);
	for (int overlap = 0; overlap < 2; overlap++) {
		struct zinf_config *cfg;
		struct run clean, refused;

		snprintf(json, sizeof(json),
			 "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_clipping\": 1.0,"
			 " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
			 " \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"1MiB\","
			 " \"pinned_memory_limit\": \"2MiB\", \"overlap_optimizer\": %s}}",
			 overlap ? "true" : "false");
		cfg = t_config(json, "step.json", false);
		train(cfg, false, &clean);
		train(cfg, true, &refused);
		T_CHECK(memcmp(clean.w, refused.w, sizeof(clean.w)) == 0,
			"overlap %d: refused steps changed the trained parameters", overlap);
		T_CHECK(clean.w[1][5] != init_value(5) && clean.r[1].step == 2,
			"overlap %d: nothing trained (%g, %llu steps)", overlap, clean.w[1][5],
			(unsigned long long)clean.r[1].step);
		for (int s = 0; s < 2; s++)
			T_CHECK(refused.r[s].step == clean.r[s].step &&
					refused.r[s].grad_norm == clean.r[s].grad_norm &&
					refused.r[s].lr == clean.r[s].lr && !refused.r[s].skipped,
				"overlap %d step %d: step %llu norm %g lr %g, want %llu %g %g",
				overlap, s, (unsigned long long)refused.r[s].step,
				refused.r[s].grad_norm, refused.r[s].lr,
				(unsigned long long)clean.r[s].step, clean.r[s].grad_norm,
				clean.r[s].lr);
		zinf_config_destroy(cfg);
	}
	return T_EXIT_PASS;
}

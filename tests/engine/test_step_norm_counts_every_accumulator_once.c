/*
 * The step's gradient norm counts every parameter's accumulator once, in parameter order,
 * wherever the accumulators are: with the optimizer state on the device (the norm sums
 * runs of device accumulators several at a time, one wait each), in host memory, or split
 * between the two by offload_optimizer.ratio, the norm of 151 parameters (runs longer
 * than one batch, a module of one parameter between two long ones) is the same bits, and
 * within 1e-12 of an independent long-double sum. Each parameter adds a share of the sum
 * far above that, so one left out or counted twice shows.
 */
#include <math.h>

#include "config_fixture.h"
#include "engine_internal.h" /* dev_first: the split */
#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

#define N_MOD 3
static const int n_params[N_MOD] = {70, 1, 80};

static uint64_t param_elems(int m, int k)
{
	return 1 + (uint64_t)((m * 131 + k * 37) % 300);
}

/* Full mantissas over a range of magnitudes: a sum regrouped shows in the last bits. */
static float grad_at(int m, int k, uint64_t i)
{
	return (float)((0.5 + 0.25 * sin(0.3 * (double)i + m + 0.1 * k)) *
		       (1 + (double)((m * 7 + k * 13 + i * 5) % 97) / 97.0 * 3.14159));
}

/* One step's gradient norm with the optimizer state on opt_home at ratio, the modules
 * from dev_first on keeping theirs on the device. */
static double step_norm(const char *opt_home, double ratio, uint32_t dev_first)
{
	char json[1024], err[512], name[32];
	struct zinf_config *cfg;
	struct zinf_engine *e;
	struct zinf_step_result r;
	uint32_t mod[N_MOD], par[N_MOD][80];

	snprintf(json, sizeof(json),
		 "{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 1,"
		 " \"gradient_clipping\": 1.0, \"optimizer\": {\"type\": \"AdamW\","
		 " \"params\": {\"lr\": 0.01}}, \"zero_optimization\": {\"stage\": 3,"
		 " \"offload_param\": {\"device\": \"none\"},"
		 " \"offload_optimizer\": {\"device\": \"%s\", \"ratio\": %g}},"
		 " \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"4MiB\","
		 " \"pinned_memory_limit\": \"4MiB\", \"chunk_size\": \"64KiB\"}}",
		 opt_home, ratio);
	cfg = t_config(json, "norm.json", true);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	for (int m = 0; m < N_MOD; m++) {
		snprintf(name, sizeof(name), "block%d", m);
		T_CHECK_RC(zinf_module_add(e, name, &mod[m]));
		for (int k = 0; k < n_params[m]; k++) {
			uint64_t shape[1] = {param_elems(m, k)};
			snprintf(name, sizeof(name), "block%d.p%d", m, k);
			T_CHECK(zinf_param_add(e, mod[m], name, ZINF_DTYPE_F32, 1, shape, 0,
					       &par[m][k]) == 0,
				"%s", zinf_last_error(e));
		}
	}
	T_CHECK(zinf_engine_finalize(e) == 0, "%s", zinf_last_error(e));
	T_CHECK(e->dev_first == dev_first,
		"%s ratio %g: state on the device from module %u, not %u", opt_home, ratio,
		e->dev_first, dev_first);
	for (int m = 0; m < N_MOD; m++) {
		T_CHECK(zinf_module_fetch(e, mod[m]) == 0 && zinf_module_wait(e, mod[m]) == 0, "%s",
			zinf_last_error(e));
		T_CHECK_RC(zinf_module_grads(e, mod[m]));
		for (int k = 0; k < n_params[m]; k++) {
			float *g = zinf_param_grad(e, par[m][k]);
			T_CHECK(g != NULL, "grad pointer of block%d.p%d", m, k);
			for (uint64_t i = 0; i < param_elems(m, k); i++)
				g[i] = grad_at(m, k, i);
		}
		T_CHECK_RC(zinf_module_grads_ready(e, mod[m]));
		T_CHECK_RC(zinf_module_release(e, mod[m]));
	}
	T_CHECK(zinf_step(e, &r) == 0, "%s", zinf_last_error(e));
	T_CHECK(!r.skipped && r.step == 1, "the step was not taken");
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	return r.grad_norm;
}

int main(void)
{
	long double want = 0;
	double all_dev, all_host, split;

	zinf_log_set_level(ZINF_LOG_ERROR);
	for (int m = 0; m < N_MOD; m++)
		for (int k = 0; k < n_params[m]; k++)
			for (uint64_t i = 0; i < param_elems(m, k); i++)
				want += (long double)grad_at(m, k, i) * grad_at(m, k, i);
	want = sqrtl(want);
	all_dev = step_norm("none", 1, 0);
	all_host = step_norm("cpu", 1, N_MOD);
	split = step_norm("cpu", 0.46, 1); /* block0 in host memory, block1 and 2 on the device */
	T_CHECK(memcmp(&all_dev, &all_host, sizeof(double)) == 0 &&
			memcmp(&split, &all_host, sizeof(double)) == 0,
		"norms: %.17g state on the device, %.17g in host memory, %.17g split", all_dev,
		all_host, split);
	T_CHECK(fabsl(all_host - want) <= 1e-12L * want, "norm %.17g, the reference %.17Lg",
		all_host, want);
	printf("ok: norm %.17g with the state on the device, in host memory and split\n", all_dev);
	return T_EXIT_PASS;
}

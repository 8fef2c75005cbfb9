/* Trace-based prefetch changes when data moves, never what the model computes: training
 * with parameters on NVMe gives bit-identical parameters with prefetch off (bucket 0),
 * at its most aggressive settings, and with an eval pass in another module order
 * inserted between steps (a divergence: the trace is recorded anew). With prefetch on,
 * modules are fetched ahead and the model's fetches find them started; the device never
 * holds more than its budget. */
#include <math.h>
#include <unistd.h>

#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

#define N_MOD 6
#define ELEMS (512 * 400) /* bf16: 400 KiB a module; fp32 gradients 800 KiB */
#define STEPS 5

struct run {
	float *params;
	struct zinf_stats st;
};

static float weight(const void *w, uint64_t i)
{
	uint32_t u = (uint32_t)((const uint16_t *)w)[i] << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Forward-only pass over the modules in `order` (reads every weight, no update). */
static double eval_pass(struct zinf_engine *e, const uint32_t *mod, const uint32_t *par,
			const int *order)
{
	double sum = 0;

	for (int k = 0; k < N_MOD; k++) {
		int m = order[k];
		T_CHECK(zinf_module_fetch(e, mod[m]) == 0 && zinf_module_wait(e, mod[m]) == 0,
			"eval: %s", zinf_last_error(e));
		for (uint64_t i = 0; i < ELEMS; i += 97)
			sum += weight(zinf_param_data(e, par[m]), i);
		T_CHECK_RC(zinf_module_release(e, mod[m]));
	}
	return sum;
}

static void train(const char *dir, uint64_t bucket, bool with_eval, struct run *out)
{
	static const int eval_order[N_MOD] = {5, 0, 4, 1, 3, 2};
	char json[1024], err[512];
	struct zinf_config *cfg;
	struct zinf_engine *e;
	struct zinf_config_resolve_info info = {.world_size = 1, .require_all = true};
	uint32_t mod[N_MOD], par[N_MOD];
	uint64_t shape[2] = {512, 400};
	float *buf = malloc(ELEMS * 4);

	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"cpu\"}, \"stage3_prefetch_bucket_size\": %llu,"
		"  \"stage3_max_live_parameters\": 1e12},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"2MiB\", \"pinned_memory_limit\": \"4MiB\","
		"  \"chunk_size\": \"64KiB\"}}",
		dir, (unsigned long long)bucket);
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_string(cfg, json, "prefetch.json") == 0, "%s",
		zinf_config_last_error(cfg));
	T_CHECK(zinf_config_resolve(cfg, &info) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	for (int m = 0; m < N_MOD; m++) {
		char name[32];
		snprintf(name, sizeof(name), "layers.%d", m);
		T_CHECK_RC(zinf_module_add(e, name, &mod[m]));
		T_CHECK_RC(zinf_param_add(e, mod[m], name, ZINF_DTYPE_BF16, 2, shape, 0, &par[m]));
	}
	T_CHECK(zinf_engine_finalize(e) == 0, "%s", zinf_last_error(e));
	for (int m = 0; m < N_MOD; m++) {
		for (uint64_t i = 0; i < ELEMS; i++)
			buf[i] = (float)(0.1 * sin(0.01 * (double)i + m));
		T_CHECK_RC(zinf_param_load(e, par[m], buf, ZINF_DTYPE_F32));
	}
	for (int s = 0; s < STEPS; s++) {
		struct zinf_step_result r;
		if (with_eval && s == 3)
			eval_pass(e, mod, par, eval_order);
		for (int m = 0; m < N_MOD; m++) { /* forward */
			T_CHECK(zinf_module_fetch(e, mod[m]) == 0 &&
					zinf_module_wait(e, mod[m]) == 0,
				"%s", zinf_last_error(e));
			T_CHECK_RC(zinf_module_release(e, mod[m]));
		}
		for (int m = N_MOD - 1; m >= 0; m--) { /* backward: grad = w - target */
			const void *w;
			float *g;
			T_CHECK(zinf_module_fetch(e, mod[m]) == 0 &&
					zinf_module_wait(e, mod[m]) == 0,
				"%s", zinf_last_error(e));
			T_CHECK_RC(zinf_module_grads(e, mod[m]));
			w = zinf_param_data(e, par[m]);
			g = zinf_param_grad(e, par[m]);
			for (uint64_t i = 0; i < ELEMS; i++)
				g[i] += weight(w, i) - (float)cos(0.003 * (double)i * (m + 1));
			T_CHECK_RC(zinf_module_grads_ready(e, mod[m]));
			T_CHECK_RC(zinf_module_release(e, mod[m]));
		}
		T_CHECK(zinf_step(e, &r) == 0, "%s", zinf_last_error(e));
	}
	out->params = malloc((size_t)N_MOD * ELEMS * 4);
	for (int m = 0; m < N_MOD; m++)
		T_CHECK_RC(zinf_param_save(e, par[m], out->params + (size_t)m * ELEMS,
					   ZINF_DTYPE_F32));
	zinf_engine_get_stats(e, &out->st);
	T_CHECK(out->st.device_peak <= out->st.device_limit,
		"device peak %llu over the budget %llu", (unsigned long long)out->st.device_peak,
		(unsigned long long)out->st.device_limit);
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	free(buf);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-prefetch-test-XXXXXX";
	struct run off, on, diverge;
	size_t bytes = (size_t)N_MOD * ELEMS * 4;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	train(dir, 0, false, &off);
	train(dir, 1000000000000ull, false, &on);
	train(dir, 1000000000000ull, true, &diverge);
	T_CHECK(memcmp(off.params, on.params, bytes) == 0, "prefetch changed the result");
	T_CHECK(memcmp(off.params, diverge.params, bytes) == 0, "an eval pass changed the result");
	T_CHECK(off.st.prefetches == 0 && off.st.prefetch_hits == 0, "bucket 0 still prefetched");
	T_CHECK(on.st.prefetches > 0 && on.st.prefetch_hits > 0,
		"no prefetch: %llu issued, %llu hits", (unsigned long long)on.st.prefetches,
		(unsigned long long)on.st.prefetch_hits);
	T_CHECK(on.st.trace_divergences == 0, "%llu divergences without an eval pass",
		(unsigned long long)on.st.trace_divergences);
	T_CHECK(diverge.st.trace_divergences >= 1, "the eval pass was not seen as a divergence");
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");
	free(off.params);
	free(on.params);
	free(diverge.params);
	return T_EXIT_PASS;
}

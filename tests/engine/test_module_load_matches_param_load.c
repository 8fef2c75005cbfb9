/* Loading a module at once (zinf_module_load) gives what loading each parameter does
 * (zinf_param_load, in registration order), bit for bit, on every home: parameters on
 * the device, in host memory or on NVMe, optimizer state in host memory or on NVMe (with
 * sub-groups of 300 elements, so parameters span and share sub-groups); and so does
 * loading in a shuffled order, parameter by parameter or module by module. Sources come
 * in fp32, bf16 and fp16. Compared: the loss the model sees at each of 3 steps and every
 * parameter's fp32 master saved after them; bf16 parameters also agree across homes. */
#include <unistd.h>

#include "load_fixture.h"

#define STEPS 3

enum mode { PARAM_IN_ORDER, PARAM_SHUFFLED, MODULE_IN_ORDER, MODULE_SHUFFLED, N_MODES };

static const char *const mode_name[N_MODES] = {"param in order", "param shuffled",
					       "module in order", "module shuffled"};

struct result {
	double loss[STEPS];
	float *params;
};

static void *src[LF_N_MOD][2];

static void load(struct lf_engine *le, enum mode mode)
{
	static const int param_order[2 * LF_N_MOD] = {7, 2, 9, 0, 4, 8, 1, 6, 3, 5};
	static const int module_order[LF_N_MOD] = {3, 0, 4, 2, 1};
	struct zinf_engine *e = le->e;

	for (int j = 0; j < 2 * LF_N_MOD && mode <= PARAM_SHUFFLED; j++) {
		int q = mode == PARAM_SHUFFLED ? param_order[j] : j, m = q / 2, k = q % 2;
		T_CHECK(zinf_param_load(e, le->par[m][k], src[m][k], lf_src_dtype(m, k)) == 0,
			"%s: %s", mode_name[mode], zinf_last_error(e));
	}
	for (int j = 0; j < LF_N_MOD && mode >= MODULE_IN_ORDER; j++) {
		int m = mode == MODULE_SHUFFLED ? module_order[j] : j;
		const void *s[2] = {src[m][0], src[m][1]};
		enum zinf_dtype t[2] = {lf_src_dtype(m, 0), lf_src_dtype(m, 1)};
		T_CHECK(zinf_module_load(e, le->mod[m], 2, s, t) == 0, "%s: %s", mode_name[mode],
			zinf_last_error(e));
	}
}

static struct result run(const char *param_home, const char *opt_home, enum zinf_dtype dtype,
			 enum mode mode, const char *dir)
{
	struct lf_engine le;
	struct result r;

	lf_create(&le, param_home, opt_home, dtype, dir, 300);
	load(&le, mode);
	for (int s = 0; s < STEPS; s++)
		r.loss[s] = lf_step(&le);
	r.params = lf_save(&le);
	lf_destroy(&le);
	return r;
}

static void check_same(const struct result *a, const struct result *b, const char *what)
{
	for (int s = 0; s < STEPS; s++)
		T_CHECK(a->loss[s] == b->loss[s], "%s: step %d loss %.17g vs %.17g", what, s + 1,
			a->loss[s], b->loss[s]);
	T_CHECK(memcmp(a->params, b->params, lf_total() * 4) == 0, "%s: saved parameters differ",
		what);
}

int main(void)
{
	static const char *const homes[][2] = {
		{"none", "cpu"},  {"cpu", "cpu"},   {"nvme", "cpu"},  {"none", "nvme"},
		{"nvme", "nvme"}, {"none", "none"}, {"nvme", "none"},
	};
	char dir[] = "/var/tmp/zinf-module-load-XXXXXX", what[128];
	struct result bf16_ref = {0};

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++)
			src[m][k] = lf_source(m, k, lf_src_dtype(m, k), 0);
	for (int h = 0; h < 9; h++) {
		/* the last two rounds: fp32 parameters, state in host memory and on the
		 * device (nvme state needs 16-bit parameters) */
		enum zinf_dtype dtype = h < 7 ? ZINF_DTYPE_BF16 : ZINF_DTYPE_F32;
		const char *ph = h < 7 ? homes[h][0] : "nvme";
		const char *oh = h < 7 ? homes[h][1] : h == 7 ? "cpu" : "none";
		struct result ref = run(ph, oh, dtype, PARAM_IN_ORDER, dir);

		for (int mode = PARAM_SHUFFLED; mode < N_MODES; mode++) {
			struct result r = run(ph, oh, dtype, (enum mode)mode, dir);
			snprintf(what, sizeof(what), "params %s, optimizer %s, %s: %s", ph, oh,
				 dtype == ZINF_DTYPE_F32 ? "fp32" : "bf16", mode_name[mode]);
			check_same(&ref, &r, what);
			free(r.params);
		}
		if (dtype == ZINF_DTYPE_BF16 && !bf16_ref.params) {
			bf16_ref = ref;
			continue;
		}
		if (dtype == ZINF_DTYPE_BF16) {
			snprintf(what, sizeof(what), "bf16: params %s, optimizer %s vs none/cpu",
				 ph, oh);
			check_same(&bf16_ref, &ref, what);
		}
		free(ref.params);
	}
	free(bf16_ref.params);
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++)
			free(src[m][k]);
	T_CHECK(rmdir(dir) == 0, "scratch directory not empty after the engines closed");
	return T_EXIT_PASS;
}

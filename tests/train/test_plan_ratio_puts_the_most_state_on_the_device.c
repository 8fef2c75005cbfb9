/* zinf plan's row with the parameters on the device and the optimizer state in host
 * memory moves as much of that state to the device as fits (offload_optimizer.ratio,
 * DeepSpeed's Twin-Flow): given a device budget between the all-on-device row's figure
 * and this row's at ratio 1, the row is chosen with a ratio between 0 and 1 and a device
 * figure within the budget, and a ratio that moves one module more of the state to the
 * device does not fit it (at two budgets). The config it writes trains within the budget, with the
 * losses of the run with all the state in host memory. A ratio the user's config sets is kept,
 * and with room for everything the all-on-device row is chosen. */
#include "train_fixture.h"
#include "zinf/config.h"

#define DEV_DEV_ROW 0 /* everything on the device */
#define DEV_CPU_ROW 1 /* parameters on the device, the optimizer state in host memory */

static void plan(const struct tf_dir *d, const char *set, uint64_t device,
		 struct zinf_plan_result *r)
{
	struct zinf_plan_opts o;
	char err[512];

	zinf_plan_opts_init(&o);
	o.init_config = d->model;
	o.config_path = d->ds;
	o.config_sets = &set;
	o.n_config_sets = set ? 1 : 0;
	o.seq_len = 16;
	o.device_bytes = device;
	T_CHECK(zinf_train_plan(&o, r, err, sizeof(err)) == 0, "plan: %s", err);
	T_CHECK(!strcmp(r->rows[DEV_DEV_ROW].param, "none") &&
			!strcmp(r->rows[DEV_DEV_ROW].optimizer, "none") &&
			!strcmp(r->rows[DEV_CPU_ROW].param, "none") &&
			!strcmp(r->rows[DEV_CPU_ROW].optimizer, "cpu"),
		"the rows' order changed");
}

/* Train 3 steps with config (and set); the peak device bytes. */
static uint64_t train(const struct tf_dir *d, const char *config, const char *set,
		      struct tf_losses *l)
{
	struct zinf_train_opts o;
	struct zinf_train_result res;

	tf_opts(d, &o, 3, l);
	o.config_path = config;
	o.config_sets = &set;
	o.n_config_sets = set ? 1 : 0;
	tf_run(&o, &res);
	T_CHECK(l->n == 3, "%d steps", l->n);
	return res.peak_device_bytes;
}

/* The plan at budget (between the figures of the state all on the device and
 * host_state, all in host memory): the row with the state split is chosen, within the
 * budget, and a ratio that moves one module more to the device does not fit it; r is the
 * plan at budget again. */
static void most_on_device(const struct tf_dir *d, struct zinf_plan_result *r, uint64_t budget,
			   uint64_t host_state)
{
	uint64_t figure;
	double ratio, lower;
	char set[96];

	plan(d, NULL, budget, r);
	ratio = r->rows[DEV_CPU_ROW].ratio;
	figure = r->rows[DEV_CPU_ROW].need.device_bytes;
	T_CHECK(r->chosen == DEV_CPU_ROW && ratio > 0 && ratio < 1 && figure <= budget &&
			figure > host_state,
		"budget %llu: chosen %d, ratio %g, device figure %llu (%llu at ratio 1)",
		(unsigned long long)budget, r->chosen, ratio, (unsigned long long)figure,
		(unsigned long long)host_state);
	fprintf(stderr, "budget %llu: ratio %g, device figure %llu\n", (unsigned long long)budget,
		ratio, (unsigned long long)figure);
	/* lowered in steps below any module's share (the smallest, the embedding's, is 4%),
	 * the first ratio with another device figure keeps one module fewer in host memory */
	for (lower = ratio - 0.005; lower > 0; lower -= 0.005) {
		snprintf(set, sizeof(set), "zero_optimization.offload_optimizer.ratio=%.9g", lower);
		plan(d, set, budget, r);
		if (r->rows[DEV_CPU_ROW].need.device_bytes != figure)
			break;
	}
	T_CHECK(lower > 0 && r->rows[DEV_CPU_ROW].need.device_bytes > figure &&
			!r->rows[DEV_CPU_ROW].need.fits &&
			r->rows[DEV_CPU_ROW].need.refused_tier == ZINF_PLAN_DEVICE &&
			fabs(r->rows[DEV_CPU_ROW].ratio - lower) < 1e-9,
		"budget %llu: ratio %g (a module fewer than the plan's %g in host memory): device "
		"figure %llu, fits %d, refused tier %d",
		(unsigned long long)budget, lower, ratio,
		(unsigned long long)r->rows[DEV_CPU_ROW].need.device_bytes,
		r->rows[DEV_CPU_ROW].need.fits, (int)r->rows[DEV_CPU_ROW].need.refused_tier);
	plan(d, NULL, budget, r);
}

int main(void)
{
	struct zinf_plan_result *r = calloc(1, sizeof(*r));
	const char *one = "zero_optimization.offload_optimizer.ratio=1";
	uint64_t all_dev, host_state, budget, peak;
	struct tf_losses l0, l1;
	struct zinf_plan_opts o;
	char written[256], err[512];
	const char *user_set;
	struct zinf_config *cfg;
	struct tf_dir d;
	FILE *f;

	T_CHECK(r != NULL, "calloc");
	tf_setup(&d, NULL);
	/* a model whose state takes some MiB (budgets are whole MiB at least): 0.8M
	 * parameters, 4 layers */
	f = fopen(d.model, "w");
	T_CHECK(f != NULL, "write %s", d.model);
	fprintf(f, "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 128,"
		   " \"intermediate_size\": 352, \"num_hidden_layers\": 4,"
		   " \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
		   " \"max_position_embeddings\": 64}\n");
	fclose(f);
	tf_write_ds(&d, "none", "cpu", true);

	/* the two figures with room for everything: the all-on-device row is chosen */
	plan(&d, one, 64ull << 20, r);
	all_dev = r->rows[DEV_DEV_ROW].need.device_bytes;
	host_state = r->rows[DEV_CPU_ROW].need.device_bytes;
	T_CHECK(r->chosen == DEV_DEV_ROW && host_state < all_dev,
		"chosen %d; device figures %llu all on the device, %llu with the state in host "
		"memory",
		r->chosen, (unsigned long long)all_dev, (unsigned long long)host_state);

	/* budgets between them: the row with the state split, within the budget, with the
	 * most of it on the device that fits; near the all-on-device figure (little in host
	 * memory), and half way */
	most_on_device(&d, r, all_dev - (all_dev - host_state) / 8 / 4096 * 4096, host_state);
	budget = (all_dev + host_state) / 2 / 4096 * 4096;
	most_on_device(&d, r, budget, host_state);

	/* the config it writes: within the budget, the losses of the state in host memory */
	zinf_plan_opts_init(&o);
	o.init_config = d.model;
	o.config_path = d.ds;
	o.seq_len = 16;
	o.device_bytes = budget;
	snprintf(written, sizeof(written), "%s/planned.json", d.root);
	T_CHECK(zinf_plan_write_config(&o, r, DEV_CPU_ROW, written, false, err, sizeof(err)) == 0,
		"write: %s", err);
	train(&d, d.ds, "zinf.device_memory_limit=64MiB", &l0);
	peak = train(&d, written, NULL, &l1);
	T_CHECK(peak <= budget, "peak device %llu, budget %llu", (unsigned long long)peak,
		(unsigned long long)budget);
	for (int i = 0; i < 3; i++)
		T_CHECK(fabs(l0.loss[i] - l1.loss[i]) <= 1e-5 * fabs(l0.loss[i]),
			"step %d: loss %.9g, %.9g with the state in host memory", i + 1, l1.loss[i],
			l0.loss[i]);

	/* the user's value is kept; a config written for the all-on-device row sets 1
	 * instead (the user's would have no effect there, and warn) */
	plan(&d, "zero_optimization.offload_optimizer.ratio=0.9", budget, r);
	T_CHECK(r->rows[DEV_CPU_ROW].ratio == 0.9, "the config's ratio 0.9 became %g",
		r->rows[DEV_CPU_ROW].ratio);
	user_set = "zero_optimization.offload_optimizer.ratio=0.9";
	o.config_sets = &user_set;
	o.n_config_sets = 1;
	for (int row = DEV_DEV_ROW; row <= DEV_CPU_ROW; row++) {
		double got = 0;
		snprintf(written, sizeof(written), "%s/planned-%d.json", d.root, row);
		T_CHECK(zinf_plan_write_config(&o, r, row, written, false, err, sizeof(err)) == 0,
			"write: %s", err);
		T_CHECK(zinf_config_create(&cfg) == 0 && zinf_config_load_file(cfg, written) == 0 &&
				zinf_config_get_double(cfg,
						       "zero_optimization.offload_optimizer.ratio",
						       &got) == 0,
			"%s: %s", written, zinf_config_last_error(cfg));
		T_CHECK(got == (row == DEV_CPU_ROW ? 0.9 : 1), "row %d: written ratio %g", row,
			got);
		zinf_config_destroy(cfg);
	}
	tf_cleanup(&d);
	free(r);
	return T_EXIT_PASS;
}

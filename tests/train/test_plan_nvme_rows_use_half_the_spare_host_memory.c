/* zinf plan's rows with parameters on NVMe keep in host memory, with
 * offload_param.max_in_cpu, the elements that half the host memory the row leaves free
 * holds: given a host 60000 bytes larger than the row needs with every module on NVMe,
 * the row's max_in_cpu is 15000 bf16 elements, its host figure grows by no more than the
 * 30000 bytes given to them and its NVMe figure shrinks; a host that holds every
 * parameter twice over gets them all. A max_in_cpu the user's config sets is kept as
 * given. The config the plan writes for the row trains, with fewer NVMe bytes read than
 * with every module on NVMe and the same losses. */
#include "train_fixture.h"

#define NVME_CPU_ROW 3 /* parameters on NVMe, the optimizer state in host memory */
#define NVME_NVME_ROW 6

static void plan(const struct tf_dir *d, const char *set, uint64_t host, struct zinf_plan_result *r)
{
	struct zinf_plan_opts o;
	char err[512];

	zinf_plan_opts_init(&o);
	o.init_config = d->model;
	o.config_path = d->ds;
	o.config_sets = &set;
	o.n_config_sets = set ? 1 : 0;
	o.seq_len = 16;
	o.host_bytes = host;
	T_CHECK(zinf_train_plan(&o, r, err, sizeof(err)) == 0, "plan: %s", err);
	T_CHECK(!strcmp(r->rows[NVME_CPU_ROW].param, "nvme") &&
			!strcmp(r->rows[NVME_CPU_ROW].optimizer, "cpu") &&
			!strcmp(r->rows[NVME_NVME_ROW].param, "nvme") &&
			!strcmp(r->rows[NVME_NVME_ROW].optimizer, "nvme"),
		"the rows' order changed");
}

/* Train 3 steps with config (and set); the NVMe bytes read. */
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
	return res.nvme_read_bytes;
}

int main(void)
{
	struct zinf_plan_result *all = calloc(1, sizeof(*all)), *r = calloc(1, sizeof(*r));
	const struct zinf_plan_need *n0, *n1;
	const char *zero = "zero_optimization.offload_param.max_in_cpu=0";
	struct tf_losses l0, l1;
	struct zinf_plan_opts o;
	char written[256], err[512];
	uint64_t host, reads0, reads1;
	struct tf_dir d;

	T_CHECK(all && r, "calloc");
	tf_setup(&d, NULL);
	tf_write_ds(&d, "nvme", "cpu", true);

	/* every module on NVMe: the user's 0 is kept */
	plan(&d, zero, 8ull << 30, all);
	n0 = &all->rows[NVME_CPU_ROW].need;
	T_CHECK(all->rows[NVME_CPU_ROW].need.fits && all->rows[NVME_CPU_ROW].max_in_cpu == 0,
		"nvme/cpu with max_in_cpu 0: fits %d, max_in_cpu %llu", n0->fits,
		(unsigned long long)all->rows[NVME_CPU_ROW].max_in_cpu);

	/* 60000 bytes to spare: half of it, 15000 bf16 elements */
	host = n0->host_bytes + 60000;
	plan(&d, NULL, host, r);
	n1 = &r->rows[NVME_CPU_ROW].need;
	T_CHECK(r->rows[NVME_CPU_ROW].max_in_cpu == 15000,
		"max_in_cpu %llu with 60000 bytes to spare (expected 15000 bf16 elements)",
		(unsigned long long)r->rows[NVME_CPU_ROW].max_in_cpu);
	T_CHECK(n1->fits && n1->host_bytes > n0->host_bytes &&
			n1->host_bytes <= n0->host_bytes + 30000 && n1->host_bytes <= host,
		"host figure %llu, %llu with every module on NVMe, %llu there",
		(unsigned long long)n1->host_bytes, (unsigned long long)n0->host_bytes,
		(unsigned long long)host);
	T_CHECK(n1->nvme_bytes < n0->nvme_bytes, "NVMe figure %llu, %llu with every module there",
		(unsigned long long)n1->nvme_bytes, (unsigned long long)n0->nvme_bytes);

	/* the written config: the same losses, fewer NVMe bytes read */
	zinf_plan_opts_init(&o);
	o.init_config = d.model;
	o.config_path = d.ds;
	o.seq_len = 16;
	o.host_bytes = host;
	snprintf(written, sizeof(written), "%s/planned.json", d.root);
	T_CHECK(zinf_plan_write_config(&o, r, NVME_CPU_ROW, written, false, err, sizeof(err)) == 0,
		"write: %s", err);
	reads0 = train(&d, d.ds, NULL, &l0);
	reads1 = train(&d, written, NULL, &l1);
	for (int i = 0; i < 3; i++)
		T_CHECK(l0.loss[i] == l1.loss[i],
			"step %d: loss %.9g, %.9g with every module on NVMe", i + 1, l1.loss[i],
			l0.loss[i]);
	T_CHECK(reads1 < reads0, "NVMe bytes read: %llu, %llu with every module there",
		(unsigned long long)reads1, (unsigned long long)reads0);

	/* room for every parameter twice over: all of them, whatever the rounding */
	plan(&d, NULL, n0->host_bytes + 8 * 2 * all->param_elems, r);
	T_CHECK(r->rows[NVME_CPU_ROW].max_in_cpu == all->param_elems &&
			r->rows[NVME_CPU_ROW].need.nvme_bytes == 0,
		"max_in_cpu %llu of %llu parameters, NVMe %llu bytes",
		(unsigned long long)r->rows[NVME_CPU_ROW].max_in_cpu,
		(unsigned long long)all->param_elems,
		(unsigned long long)r->rows[NVME_CPU_ROW].need.nvme_bytes);

	/* the user's value is kept, on both NVMe rows */
	plan(&d, "zero_optimization.offload_param.max_in_cpu=5000", host, r);
	T_CHECK(r->rows[NVME_CPU_ROW].max_in_cpu == 5000 &&
			r->rows[NVME_NVME_ROW].max_in_cpu == 5000,
		"the config's max_in_cpu 5000 became %llu / %llu",
		(unsigned long long)r->rows[NVME_CPU_ROW].max_in_cpu,
		(unsigned long long)r->rows[NVME_NVME_ROW].max_in_cpu);
	tf_cleanup(&d);
	free(all);
	free(r);
	return T_EXIT_PASS;
}

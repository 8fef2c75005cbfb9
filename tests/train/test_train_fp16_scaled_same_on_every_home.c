/*
 * zinf train with fp16 parameters (fp16.enabled): the loss falls, loss scaling works, and
 * the run is the same whether the parameters live on the device, in host memory or on
 * NVMe, and the optimizer state in host memory or on the device.
 *
 * - Dynamic loss scaling (2^16 to start) on each home: the same losses and gradient norms
 *   (1e-5 relative), no step skipped, and the mean loss of the last five of 30 steps is
 *   under 0.7 of the first.
 * - The scale is undone before clipping and the update: static scales 1 and 2^20 give the
 *   dynamic run's gradient norms and losses (power-of-two scales are exact in the fp32
 *   gradients; 1e-5 relative). A scale applied but not undone changes the norm by 2^k.
 * - Overflow is detected: a static scale of 1e39 (beyond fp32) overflows the gradients, so every
 *   step must be reported skipped, with a finite loss; with the optimizer state on the
 *   device too (the norm summed there, the accumulators cleared there).
 */
#include "train_fixture.h"

#define STEPS 30

struct fp16_run {
	int n;
	double loss[STEPS], norm[STEPS];
	bool skipped[STEPS];
};

static void on_step(const struct zinf_train_step *s, void *user)
{
	struct fp16_run *r = user;

	if (s->step == 0 || r->n >= STEPS)
		return;
	r->loss[r->n] = s->loss;
	r->norm[r->n] = s->grad_norm;
	r->skipped[r->n] = s->skipped;
	r->n++;
}

/* fp16 parameters homed on param_home, optimizer state in host memory (or, opt_dev, on
 * the device, with room for it); loss_scale 0 is dynamic (from 2^16). */
static void write_ds(struct tf_dir *d, const char *param_home, bool opt_dev, double loss_scale)
{
	FILE *f;

	snprintf(d->ds, sizeof(d->ds), "%s/ds-fp16-%s-%d-%g.json", d->root, param_home, opt_dev,
		 loss_scale);
	f = fopen(d->ds, "w");
	T_CHECK(f != NULL, "write %s", d->ds);
	fprintf(f,
		"{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2,"
		" \"gradient_clipping\": 1.0, \"bf16\": {\"enabled\": false},"
		" \"fp16\": {\"enabled\": true, \"loss_scale\": %.17g, \"initial_scale_power\": 16},"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003, \"weight_decay\": 0.01}},"
		" \"zero_optimization\": {\"stage\": 3,"
		"  \"offload_param\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"%s\"},"
		"  \"sub_group_size\": 20000},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"%s\","
		"  \"pinned_memory_limit\": \"4MiB\", \"chunk_size\": \"64KiB\"}}\n",
		loss_scale, param_home, d->nvme, opt_dev ? "none" : "cpu",
		opt_dev ? "2MiB" : "1MiB");
	fclose(f);
}

static void run_opt(struct tf_dir *d, const char *home, bool opt_dev, double loss_scale,
		    struct fp16_run *r)
{
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses unused;

	write_ds(d, home, opt_dev, loss_scale);
	tf_opts(d, &o, STEPS, &unused);
	memset(r, 0, sizeof(*r));
	o.on_step = on_step;
	o.on_step_user = r;
	tf_run(&o, &res);
	T_CHECK(r->n == STEPS && res.steps == STEPS, "%s: %d steps reported", home, r->n);
	if (strcmp(home, "nvme") == 0)
		T_CHECK(res.nvme_read_bytes > 0, "%s: no NVMe reads", home);
}

static void run(struct tf_dir *d, const char *home, double loss_scale, struct fp16_run *r)
{
	run_opt(d, home, false, loss_scale, r);
}

static void same(const struct fp16_run *a, const struct fp16_run *b, const char *what)
{
	for (int i = 0; i < STEPS; i++) {
		T_CHECK(!a->skipped[i] && !b->skipped[i], "%s: step %d skipped", what, i + 1);
		T_CHECK(fabs(a->loss[i] - b->loss[i]) <= 1e-5 * fabs(a->loss[i]),
			"%s: step %d loss %.9g vs %.9g", what, i + 1, a->loss[i], b->loss[i]);
		T_CHECK(fabs(a->norm[i] - b->norm[i]) <= 1e-5 * fabs(a->norm[i]),
			"%s: step %d grad norm %.9g vs %.9g", what, i + 1, a->norm[i], b->norm[i]);
	}
}

int main(void)
{
	struct tf_dir d;
	struct fp16_run dev, host, nvme, s1, s20, over, opt_dev, opt_dev_over;
	double tail = 0.0;

	tf_setup(&d, NULL);
	run(&d, "none", 0, &dev);
	run(&d, "cpu", 0, &host);
	run(&d, "nvme", 0, &nvme);
	same(&dev, &host, "device vs host");
	same(&dev, &nvme, "device vs nvme");
	run_opt(&d, "nvme", true, 0, &opt_dev);
	same(&dev, &opt_dev, "optimizer state in host memory vs on the device");
	for (int i = STEPS - 5; i < STEPS; i++)
		tail += dev.loss[i] / 5;
	printf("fp16: loss %.4f -> %.4f (mean of the last 5), grad norm %.4f -> %.4f\n",
	       dev.loss[0], tail, dev.norm[0], dev.norm[STEPS - 1]);
	T_CHECK(tail < 0.7 * dev.loss[0], "fp16 loss %.4f -> %.4f: not falling", dev.loss[0], tail);

	run(&d, "none", 1.0, &s1);
	run(&d, "none", 1048576.0, &s20);
	same(&dev, &s1, "dynamic vs static scale 1");
	same(&dev, &s20, "dynamic vs static scale 2^20");

	run(&d, "none", 1e39, &over);
	for (int i = 0; i < STEPS; i++) {
		T_CHECK(over.skipped[i], "scale 1e39: step %d not skipped (overflow undetected)",
			i + 1);
		T_CHECK(isfinite(over.loss[i]), "scale 1e39: step %d loss %g", i + 1, over.loss[i]);
	}
	T_CHECK(fabs(over.loss[0] - dev.loss[0]) <= 1e-5 * dev.loss[0],
		"step 1 loss differs with scale 1e39: %g vs %g", over.loss[0], dev.loss[0]);
	run_opt(&d, "none", true, 1e39, &opt_dev_over);
	for (int i = 0; i < STEPS; i++)
		T_CHECK(opt_dev_over.skipped[i] && opt_dev_over.loss[i] == over.loss[i],
			"scale 1e39, optimizer state on the device: step %d skipped %d, loss %.9g "
			"(%.9g in host memory)",
			i + 1, opt_dev_over.skipped[i], opt_dev_over.loss[i], over.loss[i]);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

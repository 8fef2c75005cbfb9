/* The loss of a few steps of zinf train on a tiny fp32 model is the same (1e-5 relative)
 * whether the parameters live on the device, in host memory or on NVMe, and whether
 * activation checkpointing is on or off; bf16 parameters with the optimizer state on NVMe
 * (the pipelined step), with the gradient accumulators in host memory or on NVMe too,
 * train like bf16 parameters on the device with it in host memory, and fp32 parameters
 * with it on NVMe (DeepSpeed's fp32 NVMe example) like fp32 on the device; so do bf16
 * parameters on NVMe with offload_param.max_in_cpu keeping the embedding and the first
 * layer in host memory.
 * Every run's loss changes from step to step (the updates take effect). */
#include "train_fixture.h"

#define STEPS 4

/* Returns the run's NVMe bytes read. */
static uint64_t run_set(struct tf_dir *d, const char *home, const char *opt, bool bf16, bool ckpt,
			const char *set, struct tf_losses *l)
{
	struct zinf_train_opts o;
	struct zinf_train_result res;

	tf_write_ds(d, home, opt, bf16);
	tf_opts(d, &o, STEPS, l);
	o.activation_checkpointing = ckpt;
	o.config_sets = &set;
	o.n_config_sets = set ? 1 : 0;
	tf_run(&o, &res);
	T_CHECK(l->n == STEPS && res.steps == STEPS, "%s/%s: %d steps reported", home, opt, l->n);
	T_CHECK(res.peak_device_bytes <= res.device_limit_bytes &&
			res.peak_pinned_bytes <= res.pinned_limit_bytes,
		"%s/%s: peaks within the budgets", home, opt);
	if (strcmp(home, "nvme") == 0)
		T_CHECK(res.nvme_read_bytes > 0, "%s: no NVMe reads", home);
	return res.nvme_read_bytes;
}

static void run(struct tf_dir *d, const char *home, const char *opt, bool bf16, bool ckpt,
		struct tf_losses *l)
{
	run_set(d, home, opt, bf16, ckpt, NULL, l);
}

static void same(const struct tf_losses *a, const struct tf_losses *b, const char *what)
{
	for (int i = 0; i < STEPS; i++)
		T_CHECK(fabs(a->loss[i] - b->loss[i]) <= 1e-5 * fabs(a->loss[i]),
			"%s: step %d loss %.9g vs %.9g", what, i + 1, a->loss[i], b->loss[i]);
}

int main(void)
{
	struct tf_dir d;
	struct tf_losses dev, host, nvme, ckpt, b_dev, b_nvme, b_grads, b_all, b_split, f_nvme,
		f_grads, s_nvme, s_b_dev, s_half;
	uint64_t all_reads, split_reads;

	tf_setup(&d, NULL);
	run(&d, "none", "cpu", false, false, &dev);
	run(&d, "cpu", "cpu", false, false, &host);
	run(&d, "nvme", "cpu", false, false, &nvme);
	run(&d, "nvme", "cpu", false, true, &ckpt);
	same(&dev, &host, "device vs host");
	same(&dev, &nvme, "device vs nvme");
	same(&dev, &ckpt, "without vs with activation checkpointing");
	T_CHECK(fabs(dev.loss[0] - dev.loss[STEPS - 1]) > 1e-3, "loss did not move: %g -> %g",
		dev.loss[0], dev.loss[STEPS - 1]);
	T_CHECK(fabs(dev.loss[0] - log(256.0)) < 0.1, "first loss %g, expected about ln 256",
		dev.loss[0]);
	/* the optimizer state on the device (its 16 bytes a parameter need a larger budget) */
	run_set(&d, "nvme", "none", false, true, "zinf.device_memory_limit=2MiB", &s_nvme);
	same(&dev, &s_nvme, "device+cpu vs nvme+device with activation checkpointing");
	/* ... and split by offload_optimizer.ratio: the state of the first modules, up to
	 * half the elements, in host memory, the others' (the head's at least) on the
	 * device */
	run_set(&d, "nvme", "cpu", false, false, "zero_optimization.offload_optimizer.ratio=0.5",
		&s_half);
	same(&dev, &s_half, "device+cpu vs nvme+cpu with ratio 0.5");
	run(&d, "none", "cpu", true, false, &b_dev);
	run_set(&d, "none", "none", true, false, "zinf.device_memory_limit=2MiB", &s_b_dev);
	same(&b_dev, &s_b_dev, "bf16: device+cpu vs device+device");
	run(&d, "nvme", "nvme", true, true, &b_nvme);
	same(&b_dev, &b_nvme, "bf16: device+cpu vs nvme+nvme");
	run_set(&d, "nvme", "nvme", true, false, "zinf.offload_gradients=nvme", &b_grads);
	same(&b_dev, &b_grads, "bf16: device+cpu vs nvme+nvme with gradients on nvme");
	/* the embedding (8192 elements) and layer 0 (10304) fit in 20000; layer 1 and the
	 * head stay on NVMe (run_set checks that it is still read) */
	all_reads = run_set(&d, "nvme", "nvme", true, false, NULL, &b_all);
	split_reads = run_set(&d, "nvme", "nvme", true, false,
			      "zero_optimization.offload_param.max_in_cpu=20000", &b_split);
	same(&b_dev, &b_split, "bf16: device+cpu vs nvme+nvme split by max_in_cpu");
	T_CHECK(split_reads < all_reads, "max_in_cpu: %llu NVMe bytes read, %llu without",
		(unsigned long long)split_reads, (unsigned long long)all_reads);
	run(&d, "nvme", "nvme", false, false, &f_nvme);
	same(&dev, &f_nvme, "fp32: device+cpu vs nvme+nvme");
	run_set(&d, "none", "nvme", false, false, "zinf.offload_gradients=nvme", &f_grads);
	same(&dev, &f_grads, "fp32: device+cpu vs device+nvme with gradients on nvme");
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

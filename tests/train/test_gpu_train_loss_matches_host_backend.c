/* zinf train on the cuda device backend (the cuda model runtime, activations from the
 * device budget) gives the losses the host backend gives: 3 steps of a tiny fp32 model
 * with parameters on NVMe agree within 1e-4 relative, with and without activation
 * checkpointing, and with the checkpoints in host memory (within 1e-6 of keeping them on
 * the device, with a device peak lower by the L - 1 layer inputs no longer there); so do
 * 3 steps in bf16 with parameters, optimizer state and gradients on NVMe, and in fp32
 * with the parameters in page-locked host memory (offload_param cpu with pin_memory,
 * copied to the device by DMA, asynchronously on the simulator too); with zinf.tf32
 * the losses stay within 1e-3; the loss moves (the updates take effect) and the device
 * peak, activations included, stays within zinf.device_memory_limit. Skips (77) without
 * a GPU (a ZINF_CUDA=SIM build runs it on the CUDA simulator). */
#include "device.h"
#include "gpu_test.h"
#include "train_fixture.h"

#define STEPS 3

/* tf_write_ds with the device backend named: fp32, params on NVMe, optimizer on the CPU;
 * or (nvme_all) bf16 with params, optimizer state and gradients on NVMe. */
static void write_ds(struct tf_dir *d, const char *device, bool nvme_all)
{
	FILE *f;

	snprintf(d->ds, sizeof(d->ds), "%s/ds-%s.json", d->root, device);
	f = fopen(d->ds, "w");
	T_CHECK(f != NULL, "write %s", d->ds);
	fprintf(f,
		"{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2,"
		" \"gradient_clipping\": 1.0, \"bf16\": {\"enabled\": %s},"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003, \"weight_decay\": 0.01}},"
		" \"zero_optimization\": {\"stage\": 3,"
		"  \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
		"  \"sub_group_size\": 20000},"
		" \"zinf\": {\"device\": \"%s\", \"device_memory_limit\": \"4MiB\","
		"  \"pinned_memory_limit\": \"4MiB\", \"chunk_size\": \"64KiB\","
		"  \"offload_gradients\": \"%s\"}}\n",
		nvme_all ? "true" : "false", d->nvme, nvme_all ? "nvme" : "cpu", d->nvme, device,
		nvme_all ? "nvme" : "cpu");
	fclose(f);
}

/* L 2, B 2, T 16, C 32 (train_fixture.h): one layer input, in bytes */
#define LAYER_INPUT_BYTES (2 * 16 * 32 * sizeof(float))

#define CPU_CKPT "activation_checkpointing.cpu_checkpointing=true"
#define TF32 "zinf.tf32=true"

/* Prefetching off: no module fetched ahead by the background mover, whose timing would
 * otherwise decide the device peak between two runs. */
#define NO_PREFETCH "zero_optimization.stage3_prefetch_bucket_size=0"

/* One run; set, set2: NULL or a --set KEY=VALUE each. Returns the peak device bytes. */
static uint64_t run(struct tf_dir *d, const char *device, bool ckpt, bool nvme_all, const char *set,
		    const char *set2, struct tf_losses *l)
{
	const char *sets[2];
	struct zinf_train_opts o;
	struct zinf_train_result res;
	int n = 0;

	if (set)
		sets[n++] = set;
	if (set2)
		sets[n++] = set2;
	write_ds(d, device, nvme_all);
	tf_opts(d, &o, STEPS, l);
	o.activation_checkpointing = ckpt;
	o.config_sets = sets;
	o.n_config_sets = n;
	tf_run(&o, &res);
	T_CHECK(l->n == STEPS && res.steps == STEPS, "%s: %d steps reported", device, l->n);
	printf("%s%s%s%s%s%s%s: losses %.9g %.9g %.9g, peak device %llu of %llu bytes\n", device,
	       ckpt ? " (checkpointing)" : "", set ? " --set " : "", set ? set : "",
	       set2 ? " --set " : "", set2 ? set2 : "", nvme_all ? " (bf16, all on NVMe)" : "",
	       l->loss[0], l->loss[1], l->loss[2], (unsigned long long)res.peak_device_bytes,
	       (unsigned long long)res.device_limit_bytes);
	T_CHECK(res.peak_device_bytes <= res.device_limit_bytes, "%s: peak %llu > limit %llu",
		device, (unsigned long long)res.peak_device_bytes,
		(unsigned long long)res.device_limit_bytes);
	T_CHECK(res.peak_device_bytes > 0, "%s: no device use counted", device);
	return res.peak_device_bytes;
}

static void same(const struct tf_losses *a, const struct tf_losses *b, const char *what)
{
	for (int i = 0; i < STEPS; i++)
		T_CHECK(fabs(a->loss[i] - b->loss[i]) <= 1e-4 * fabs(a->loss[i]),
			"%s: step %d loss %.9g vs %.9g", what, i + 1, a->loss[i], b->loss[i]);
}

int main(void)
{
	struct tf_dir d;
	struct tf_losses host, cuda, cuda_ckpt, cuda_cpu_ckpt, host_nvme, cuda_nvme, cuda_tf32,
		cuda_pinned;
	uint64_t peak_ckpt, peak_cpu_ckpt;

	t_require_gpu();
	tf_setup(&d, NULL);
	run(&d, "host", false, false, NULL, NULL, &host);
	run(&d, "cuda", false, false, NULL, NULL, &cuda);
	peak_ckpt = run(&d, "cuda", true, false, NO_PREFETCH, NULL, &cuda_ckpt);
	peak_cpu_ckpt = run(&d, "cuda", true, false, NO_PREFETCH, CPU_CKPT, &cuda_cpu_ckpt);
	run(&d, "host", false, true, NULL, NULL, &host_nvme);
	run(&d, "cuda", false, true, NULL, NULL, &cuda_nvme);
	run(&d, "cuda", false, false, TF32, NULL, &cuda_tf32);
	run(&d, "cuda", false, false, "zero_optimization.offload_param.device=cpu",
	    "zero_optimization.offload_param.pin_memory=true", &cuda_pinned);
	same(&host, &cuda, "host vs cuda");
	same(&host, &cuda_ckpt, "host vs cuda with activation checkpointing");
	same(&host_nvme, &cuda_nvme, "host vs cuda in bf16 with everything on NVMe");
	same(&host, &cuda_cpu_ckpt, "host vs cuda with checkpoints in host memory");
	same(&host, &cuda_pinned, "host vs cuda with parameters in page-locked host memory");
	for (int i = 0; i < STEPS; i++) /* the same ops on the same data (bit for bit on the
					  * simulator; cuBLAS promises it too, allow rounding) */
		T_CHECK(fabs(cuda_cpu_ckpt.loss[i] - cuda_ckpt.loss[i]) <=
				1e-6 * fabs(cuda_ckpt.loss[i]),
			"cuda step %d: loss %.9g with checkpoints in host memory, %.9g on the device",
			i + 1, cuda_cpu_ckpt.loss[i], cuda_ckpt.loss[i]);
	T_CHECK(peak_cpu_ckpt + LAYER_INPUT_BYTES <= peak_ckpt,
		"checkpoints in host memory: device peak %llu, not %zu below %llu",
		(unsigned long long)peak_cpu_ckpt, LAYER_INPUT_BYTES,
		(unsigned long long)peak_ckpt);
	/* TF32 products: close to fp32 (whether they differ at all depends on the kernels
	 * cuBLAS picks for these tiny shapes: test_gpu_tf32_changes_the_simulated_products) */
	for (int i = 0; i < STEPS; i++)
		T_CHECK(fabs(cuda_tf32.loss[i] - host.loss[i]) <= 1e-3 * fabs(host.loss[i]),
			"tf32: step %d loss %.9g vs %.9g", i + 1, cuda_tf32.loss[i], host.loss[i]);
	T_CHECK(fabs(cuda.loss[0] - cuda.loss[STEPS - 1]) > 1e-3, "loss did not move: %g -> %g",
		cuda.loss[0], cuda.loss[STEPS - 1]);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

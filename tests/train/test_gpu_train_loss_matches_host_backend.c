/* zinf train on the cuda device backend (the cuda model runtime, activations from the
 * device budget) gives the losses the host backend gives: 3 steps of a tiny fp32 model
 * with parameters on NVMe agree within 1e-4 relative, with and without activation
 * checkpointing, and with the checkpoints in host memory (within 1e-6 of keeping them on
 * the device, with a device peak lower by the L - 1 layer inputs no longer there); so do
 * 3 steps in bf16 with parameters, optimizer state and gradients on NVMe (and, for a
 * 4-layer model, bit for bit whether gradients are copied in the background or at
 * once, and with its layer inputs checkpointed in host memory, where the ring of two
 * device buffers wraps), and in fp32
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

/* Prefetching off and gradients copied at once: no module fetched ahead by the
 * background mover and no gradient buffer freed by the gradient worker, whose timing
 * would otherwise decide the device peak between two runs. */
#define NO_PREFETCH "zero_optimization.stage3_prefetch_bucket_size=0"
#define GRADS_AT_ONCE "zinf.overlap_gradients=false"
#define OPT_ON_DEVICE "zero_optimization.offload_optimizer.device=none"

/* One run; set, set2: NULL or a --set KEY=VALUE each (NO_PREFETCH brings GRADS_AT_ONCE
 * along). Returns the peak device bytes. */
static uint64_t run(struct tf_dir *d, const char *device, bool ckpt, bool nvme_all, const char *set,
		    const char *set2, struct tf_losses *l)
{
	const char *sets[3];
	struct zinf_train_opts o;
	struct zinf_train_result res;
	int n = 0;

	if (set)
		sets[n++] = set;
	if (set2)
		sets[n++] = set2;
	if (set && !strcmp(set, NO_PREFETCH))
		sets[n++] = GRADS_AT_ONCE;
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

/* A 4-layer model (hidden 64) in bf16 on cuda at a budget just over the 8x rule for
 * copying gradients in the background (largest gradient buffer 144.5 KiB): with
 * zinf.overlap_gradients, the device buffers being copied are freed by the gradient
 * worker after their copy, and the next ones land beside them; with it off, copied at
 * once. The same operations on the same data: bit-identical losses (with
 * ZINF_DEVICE_POISON=1, as CI runs the simulator, a buffer freed before its copy ran
 * is reused and the losses differ). */
static void four_layers(struct tf_dir *d, bool overlap, bool cpu_ckpt, struct tf_losses *l)
{
	const char *sets[3] = {
		"zinf.device_memory_limit=1600KiB",
		overlap ? "zinf.overlap_gradients=true" : "zinf.overlap_gradients=false", CPU_CKPT};
	struct zinf_train_opts o;
	struct zinf_train_result res;
	char model[192];
	FILE *f;

	snprintf(model, sizeof(model), "%s/four.json", d->root);
	f = fopen(model, "w");
	T_CHECK(f != NULL, "write %s", model);
	fprintf(f, "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 64,"
		   " \"intermediate_size\": 128, \"num_hidden_layers\": 4,"
		   " \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
		   " \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-5}\n");
	fclose(f);
	write_ds(d, "cuda", true);
	tf_opts(d, &o, STEPS, l);
	o.init_config = model;
	o.config_sets = sets;
	o.n_config_sets = cpu_ckpt ? 3 : 2;
	o.activation_checkpointing = cpu_ckpt;
	tf_run(&o, &res);
	T_CHECK(l->n == STEPS, "four layers: %d steps reported", l->n);
	printf("cuda, 4 layers, overlap_gradients %d, checkpoints in host memory %d: losses %.9g "
	       "%.9g %.9g\n",
	       overlap, cpu_ckpt, l->loss[0], l->loss[1], l->loss[2]);
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
		cuda_pinned, four_async, four_sync, four_cpu_ckpt, host_dstate, cuda_dstate,
		cuda_half;
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
	/* The optimizer state on the device: the update, the gradients' sums and their norm
	 * in the device's kernels. On the host backend the CPU's loops, to the bit. */
	run(&d, "host", false, false, OPT_ON_DEVICE, NULL, &host_dstate);
	run(&d, "cuda", false, false, OPT_ON_DEVICE, NULL, &cuda_dstate);
	for (int i = 0; i < STEPS; i++)
		T_CHECK(host_dstate.loss[i] == host.loss[i],
			"host: step %d loss %.9g with the optimizer state on the device, %.9g in "
			"host memory",
			i + 1, host_dstate.loss[i], host.loss[i]);
	same(&host, &cuda_dstate, "host vs cuda with the optimizer state on the device");
	run(&d, "cuda", false, false, "zero_optimization.offload_optimizer.ratio=0.5", NULL,
	    &cuda_half);
	same(&host, &cuda_half, "host vs cuda with the optimizer state split by ratio 0.5");
	four_layers(&d, true, false, &four_async);
	four_layers(&d, false, false, &four_sync);
	four_layers(&d, true, true, &four_cpu_ckpt);
	for (int i = 0; i < STEPS; i++)
		T_CHECK(four_cpu_ckpt.loss[i] == four_sync.loss[i],
			"4 layers: step %d loss %.9g with checkpoints in host memory, %.9g without",
			i + 1, four_cpu_ckpt.loss[i], four_sync.loss[i]);
	for (int i = 0; i < STEPS; i++)
		T_CHECK(four_async.loss[i] == four_sync.loss[i],
			"4 layers: step %d loss %.9g with gradients copied in the background, %.9g at once",
			i + 1, four_async.loss[i], four_sync.loss[i]);
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

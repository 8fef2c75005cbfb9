/* The demo's model and config (docs/examples) train with bf16 parameters and AdamW state
 * on NVMe when the training state (bf16 parameters, fp32 master, m, v and gradient
 * accumulators: 18 bytes per parameter) is at least 8 times the device budget: peak
 * device and pinned bytes stay within their limits, NVMe is read and written every step,
 * and the loss is finite and moves. argv: demo-llama.json train-demo.json. */
#include "train_fixture.h"

int main(int argc, char **argv)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char set_p[192], set_o[192];
	const char *sets[4];

	T_CHECK(argc == 3, "usage: %s MODEL.json DS.json", argv[0]);
	tf_setup(&d, NULL);
	snprintf(set_p, sizeof(set_p), "zero_optimization.offload_param.nvme_path=%s", d.nvme);
	snprintf(set_o, sizeof(set_o), "zero_optimization.offload_optimizer.nvme_path=%s", d.nvme);
	sets[0] = set_p;
	sets[1] = set_o;
	sets[2] = "train_micro_batch_size_per_gpu=2";
	sets[3] = "scheduler.params.warmup_num_steps=0";
	tf_opts(&d, &o, 3, &l);
	o.init_config = argv[1];
	o.config_path = argv[2];
	o.config_sets = sets;
	o.n_config_sets = 4;
	o.seq_len = 32;
	tf_run(&o, &res);
	T_CHECK(res.param_elems * 18 >= 8 * res.device_limit_bytes,
		"training state %llu B is not 8x the device budget %llu B",
		(unsigned long long)(res.param_elems * 18),
		(unsigned long long)res.device_limit_bytes);
	T_CHECK(res.peak_device_bytes <= res.device_limit_bytes && res.peak_device_bytes > 0,
		"device peak %llu of %llu", (unsigned long long)res.peak_device_bytes,
		(unsigned long long)res.device_limit_bytes);
	T_CHECK(res.peak_pinned_bytes <= res.pinned_limit_bytes, "pinned peak %llu of %llu",
		(unsigned long long)res.peak_pinned_bytes,
		(unsigned long long)res.pinned_limit_bytes);
	T_CHECK(l.n == 3 && l.last.nvme_read_bytes > 0 && l.last.nvme_write_bytes > 0,
		"NVMe traffic in the last step: read %llu, written %llu",
		(unsigned long long)l.last.nvme_read_bytes,
		(unsigned long long)l.last.nvme_write_bytes);
	T_CHECK(isfinite(l.loss[2]) && l.loss[2] != l.loss[0], "loss %g -> %g", l.loss[0],
		l.loss[2]);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

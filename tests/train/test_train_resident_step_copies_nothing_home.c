/* With the parameters and the optimizer state both on the device (offload_param and
 * offload_optimizer none), a step's new parameter copies go device to device: such a
 * run moves exactly the parameters' bf16 bytes less, device to host, each step, than
 * one with the parameters homed in host memory (whose new copies go home through the
 * host), and nothing more to the device; both train the same losses, bit for bit.
 * With --device=cuda the same on the CUDA backend (skips, 77, without a GPU). */
#include "gpu_test.h"
#include "train_fixture.h"

#define STEPS 3

/* on the CUDA backend, room for the model runtime's activations */
static const char *const cuda_sets[] = {"zinf.device=cuda", "zinf.device_memory_limit=8MiB"};

static void run(struct tf_dir *d, const char *home, bool cuda, struct tf_losses *l,
		struct zinf_train_result *res)
{
	struct zinf_train_opts o;

	tf_write_ds(d, home, "none", true);
	tf_opts(d, &o, STEPS, l);
	if (cuda) {
		o.config_sets = cuda_sets;
		o.n_config_sets = 2;
	}
	tf_run(&o, res);
	T_CHECK(l->n == STEPS, "%s: %d steps reported", home, l->n);
}

int main(int argc, char **argv)
{
	bool cuda = argc > 1 && strcmp(argv[1], "--device=cuda") == 0;
	struct tf_losses dev, host;
	struct zinf_train_result rd, rh;
	struct tf_dir d;
	uint64_t bf16_bytes;

	if (cuda)
		t_require_gpu();
	tf_setup(&d, NULL);
	run(&d, "none", cuda, &dev, &rd);
	run(&d, "cpu", cuda, &host, &rh);
	bf16_bytes = rd.param_elems * 2;
	T_CHECK(rd.param_elems == rh.param_elems && bf16_bytes > 0, "parameter counts");
	for (int i = 0; i < STEPS; i++)
		T_CHECK(memcmp(&dev.loss[i], &host.loss[i], sizeof(double)) == 0,
			"step %d: loss %.9g on the device, %.9g with host homes", i + 1,
			dev.loss[i], host.loss[i]);
	T_CHECK(dev.last.d2h_bytes + bf16_bytes == host.last.d2h_bytes,
		"device to host in a step: %llu with device homes, %llu with host homes, "
		"parameters %llu bytes",
		(unsigned long long)dev.last.d2h_bytes, (unsigned long long)host.last.d2h_bytes,
		(unsigned long long)bf16_bytes);
	T_CHECK(dev.last.h2d_bytes <= host.last.h2d_bytes,
		"host to device in a step: %llu with device homes, %llu with host homes",
		(unsigned long long)dev.last.h2d_bytes, (unsigned long long)host.last.h2d_bytes);
	tf_cleanup(&d);
	return 0;
}

/* zinf.tf32 reaches cuBLAS: on the CUDA simulator, whose cuBLAS rounds GEMM inputs to
 * TF32 in CUBLAS_TF32_TENSOR_OP_MATH mode, 3 steps of the tiny model give other losses
 * than with exact fp32 products (within 1e-3). On a real GPU cuBLAS may pick kernels
 * without tensor cores for shapes this small, so it skips (77) there, and without CUDA. */
#include "cuda_sim_only.h"
#include "train_fixture.h"

#define STEPS 3

static void run(struct tf_dir *d, const char *tf32, struct tf_losses *l)
{
	const char *sets[] = {"zinf.device=cuda", "zinf.device_memory_limit=8MiB", tf32};
	struct zinf_train_opts o;
	struct zinf_train_result res;

	tf_write_ds(d, "nvme", "cpu", false);
	tf_opts(d, &o, STEPS, l);
	o.config_sets = sets;
	o.n_config_sets = 3;
	tf_run(&o, &res);
	T_CHECK(l->n == STEPS, "%d steps", l->n);
}

int main(void)
{
	struct tf_losses exact, tf32;
	struct tf_dir d;
	int differ = 0;

	require_cuda_simulator("a real GPU may run shapes this small without tensor cores");
	zinf_log_set_level(ZINF_LOG_ERROR);
	tf_setup(&d, NULL);
	run(&d, "zinf.tf32=false", &exact);
	run(&d, "zinf.tf32=true", &tf32);
	for (int i = 0; i < STEPS; i++) {
		printf("step %d: fp32 %.9g tf32 %.9g\n", i + 1, exact.loss[i], tf32.loss[i]);
		T_CHECK(fabs(tf32.loss[i] - exact.loss[i]) <= 1e-3 * fabs(exact.loss[i]),
			"step %d: %.9g vs %.9g", i + 1, tf32.loss[i], exact.loss[i]);
		differ += tf32.loss[i] != exact.loss[i];
	}
	T_CHECK(differ > 0, "zinf.tf32 changed no loss: the math mode did not reach cuBLAS");
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

/* activation_checkpointing.cpu_checkpointing keeps each decoder layer's saved input in
 * host memory instead of the runtime's: with --activation-checkpointing the per-step
 * losses are bit-identical to checkpoints kept in the runtime's memory (fp32 and bf16,
 * gradient accumulation 2, an eval pass in between), and without that flag the run is
 * refused before it starts, naming the key and the flag. */
#include "train_fixture.h"
#include "zinf/error.h"

#define STEPS 3

static void run(struct tf_dir *d, bool bf16, bool cpu_ckpt, struct tf_losses *l)
{
	static const char *const sets[] = {"activation_checkpointing.cpu_checkpointing=true"};
	struct zinf_train_opts o;
	struct zinf_train_result res;

	tf_write_ds(d, "nvme", "cpu", bf16);
	tf_opts(d, &o, STEPS, l);
	o.activation_checkpointing = true;
	o.eval_data_path = d->data;
	o.eval_every = 2;
	if (cpu_ckpt) {
		o.config_sets = sets;
		o.n_config_sets = 1;
	}
	tf_run(&o, &res);
	T_CHECK(l->n == STEPS, "%d steps", l->n);
}

int main(void)
{
	static const char *const sets[] = {"activation_checkpointing.cpu_checkpointing=true"};
	struct tf_dir d;
	struct tf_losses dev, host;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	char err[1024];

	zinf_log_set_level(ZINF_LOG_ERROR);
	tf_setup(&d, NULL);
	for (int bf16 = 0; bf16 < 2; bf16++) {
		run(&d, bf16, false, &dev);
		run(&d, bf16, true, &host);
		for (int i = 0; i < STEPS; i++)
			T_CHECK(dev.loss[i] == host.loss[i],
				"%s step %d: loss %.9g with checkpoints in runtime memory, %.9g in "
				"host memory",
				bf16 ? "bf16" : "fp32", i + 1, dev.loss[i], host.loss[i]);
		T_CHECK(dev.loss[0] != dev.loss[STEPS - 1], "the loss moved");
	}

	tf_write_ds(&d, "nvme", "cpu", false);
	tf_opts(&d, &o, STEPS, &dev);
	o.config_sets = sets;
	o.n_config_sets = 1;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == ZINF_ECONFIG,
		"cpu_checkpointing without --activation-checkpointing is refused");
	T_CHECK(strstr(err, "activation_checkpointing.cpu_checkpointing") &&
			strstr(err, "--activation-checkpointing") && !strchr(err, '\n'),
		"one line naming the key and the flag: %s", err);
	T_CHECK(dev.n == 0, "no step ran");
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

/* With the optimizer state on NVMe, `--save --save-state` reads the state once: the
 * model's masters are written from the pieces the optimizer state's save reads (12 bytes
 * a parameter), not read again in a pass of their own (4 more). The final save reads
 * three times what `--save` alone reads (the master part of each sub-group), and the
 * model files the two write are byte for byte the same. */
#include "train_fixture.h"

static void run(struct tf_dir *d, const char *save, bool state, struct zinf_train_result *res)
{
	struct zinf_train_opts o;
	struct tf_losses l;

	tf_opts(d, &o, 2, &l);
	o.save_dir = save;
	o.save_state = state;
	tf_run(&o, res);
	T_CHECK(res->save_seconds > 0, "%s: the save's time is %g s", save, res->save_seconds);
}

int main(void)
{
	struct zinf_train_result model, state;
	char save_m[192], save_s[192], a[256], b[256];
	struct tf_dir d;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "nvme", "nvme", true);
	snprintf(save_m, sizeof(save_m), "%s/model", d.root);
	snprintf(save_s, sizeof(save_s), "%s/state", d.root);
	run(&d, save_m, false, &model);
	run(&d, save_s, true, &state);

	T_CHECK(model.save_nvme_read_bytes >= 4 * model.param_elems,
		"--save read %llu B for %llu parameters' masters",
		(unsigned long long)model.save_nvme_read_bytes,
		(unsigned long long)model.param_elems);
	T_CHECK(state.save_nvme_read_bytes == 3 * model.save_nvme_read_bytes,
		"--save --save-state read %llu B, not 3 x the %llu B of the masters alone",
		(unsigned long long)state.save_nvme_read_bytes,
		(unsigned long long)model.save_nvme_read_bytes);
	T_CHECK(state.nvme_read_bytes == model.nvme_read_bytes,
		"the steps' reads %llu and %llu B differ",
		(unsigned long long)state.nvme_read_bytes,
		(unsigned long long)model.nvme_read_bytes);

	snprintf(a, sizeof(a), "%s/model.safetensors", save_m);
	snprintf(b, sizeof(b), "%s/model.safetensors", save_s);
	tf_same_file(a, b);
	snprintf(a, sizeof(a), "%s/config.json", save_m);
	snprintf(b, sizeof(b), "%s/config.json", save_s);
	tf_same_file(a, b);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

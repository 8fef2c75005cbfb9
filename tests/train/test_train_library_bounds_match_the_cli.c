/* zinf_train_run refuses, before any work and with the CLI's one line, what the CLI's
 * flags cannot express: more --eval-batches than the CLI takes (2^64 - 1 evaluated for
 * ever), and a count of --set overrides with no list (was read through). Nothing is
 * left in the run's directories. */
#include "train_fixture.h"

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char err[512];

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	tf_opts(&d, &o, 2, &l);
	o.eval_data_path = d.data;
	o.eval_batches = UINT64_MAX;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINVAL && res.bad_input &&
			strstr(err,
			       "--eval-batches 18446744073709551615: expected 1 to 1000000000") &&
			!strchr(err, '\n'),
		"eval_batches 2^64 - 1: %s", err);
	tf_opts(&d, &o, 2, &l);
	o.n_config_sets = 3;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINVAL && res.bad_input &&
			strstr(err, "--set: 3 overrides in a NULL list"),
		"3 overrides, no list: %s", err);
	tf_opts(&d, &o, 2, &l); /* and the same opts within bounds train */
	o.eval_data_path = d.data;
	o.eval_batches = 2;
	tf_run(&o, &res);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

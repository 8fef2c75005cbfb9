/* zinf_train_run, called from a program that did not raise its open-file limit (only the
 * zinf CLI does at start), loads a checkpoint of over 300 safetensors shards under a soft
 * limit of 64: the reader, which keeps every shard open, raises the soft limit to the
 * hard one when it runs out. Skipped when the hard limit is itself that low. */
#include <dirent.h>
#include <sys/resource.h>

#include "train_fixture.h"

static int count_shards(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	T_CHECK(d, "%s", dir);
	while ((e = readdir(d)))
		n += strncmp(e->d_name, "model-", 6) == 0;
	closedir(d);
	return n;
}

int main(void)
{
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	struct tf_dir d;
	struct rlimit rl;
	static const char *const sets[] = {"zinf.device_memory_limit=16MiB"};
	char ck[200], model[200], err[1024];

	T_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 1024)
		return T_EXIT_SKIP;
	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	tf_write_deep_model(&d, model, sizeof(model));
	snprintf(ck, sizeof(ck), "%s/ck", d.root);
	tf_opts(&d, &o, 1, &l);
	o.init_config = model;
	o.config_sets = sets;
	o.n_config_sets = 1;
	o.save_dir = ck;
	o.save_max_shard_bytes = 1; /* a shard a tensor */
	tf_run(&o, &res);
	T_CHECK(count_shards(ck) > 300, "only %d shards", count_shards(ck));

	rl.rlim_cur = 64;
	T_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
	tf_opts(&d, &o, 1, &l);
	o.init_config = NULL;
	o.model_dir = ck;
	o.config_sets = sets;
	o.n_config_sets = 1;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == 0,
		"loading %d shards under a soft limit of 64: %s", count_shards(ck), err);
	T_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 64, "the limit stayed at %llu",
		(unsigned long long)rl.rlim_cur);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

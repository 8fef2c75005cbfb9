/* zinf train raises its soft limit on open files to the hard one: a checkpoint of 365
 * safetensors shards (one tensor each), whose reader keeps every shard open, loads with
 * --model under a soft limit of 64 (Debian's default is 1024; checkpoints of thousands
 * of shards exist). Skipped when the hard limit is itself that low. */
#include <sys/resource.h>
#include <sys/wait.h>

#include "train_fixture.h"

int main(int argc, char **argv)
{
	struct tf_dir d;
	struct rlimit rl;
	char model[200], cmd[4096], common[2048];

	T_CHECK(argc == 2, "usage: %s ZINF_BINARY", argv[0]);
	T_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 1024)
		return T_EXIT_SKIP;
	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	tf_write_deep_model(&d, model, sizeof(model));
	snprintf(common, sizeof(common),
		 "--config '%s' --set zinf.device_memory_limit=16MiB --data '%s' --data-format "
		 "text --seq-len 16 --steps 1 -q",
		 d.ds, d.data);
	snprintf(cmd, sizeof(cmd),
		 "'%s' train --init '%s' %s --save '%s/ck' --save-shard-size 1 && test $(ls "
		 "'%s/ck' | grep -c '^model-') -gt 300",
		 argv[1], model, common, d.root, d.root);
	T_CHECK(system(cmd) == 0, "saving a checkpoint of over 300 shards: %s", cmd);
	snprintf(cmd, sizeof(cmd), "ulimit -Sn 64 && '%s' train --model '%s/ck' %s", argv[1],
		 d.root, common);
	T_CHECK(system(cmd) == 0, "loading it under a soft limit of 64 open files: %s", cmd);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

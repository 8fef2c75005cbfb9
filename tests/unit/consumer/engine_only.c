/* Links the engine alone (pkg-config zinf): loads a config and opens the I/O layer on
 * the directory argv[1] (liburing, libaio), then prints "engine: ok". */
#include <stdio.h>

#include <zinf/zinf.h>

int main(int argc, char **argv)
{
	struct zinf_config *cfg;
	struct zinf_io_opts o;
	struct zinf_io *io;
	char err[512];

	if (argc != 2 || zinf_config_create(&cfg))
		return 2;
	if (zinf_config_load_string(cfg, "{\"train_micro_batch_size_per_gpu\": 1}", "c.json")) {
		fprintf(stderr, "%s\n", zinf_config_last_error(cfg));
		return 1;
	}
	zinf_io_opts_init(&o);
	o.nvme_paths[0] = argv[1];
	o.n_paths = 1;
	if (zinf_io_create(&o, &io, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	printf("engine: ok (%s)\n", zinf_io_engine_name(io));
	zinf_io_destroy(io);
	zinf_config_destroy(cfg);
	return 0;
}

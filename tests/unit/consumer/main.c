/* Trains 2 steps of a seeded model through the installed library and prints the first
 * and last loss. argv: init config.json, DeepSpeed config, text data. */
#include <stdio.h>

#include <zinf/train.h>

int main(int argc, char **argv)
{
	struct zinf_train_opts o;
	struct zinf_train_result r;
	char err[1024];

	if (argc != 4)
		return 2;
	zinf_train_opts_init(&o);
	o.init_config = argv[1];
	o.config_path = argv[2];
	o.data_path = argv[3];
	o.data_text = true;
	o.seq_len = 16;
	o.steps = 2;
	if (zinf_train_run(&o, &r, err, sizeof(err))) {
		fprintf(stderr, "consumer: %s\n", err);
		return 1;
	}
	printf("trained: loss %.4f -> %.4f\n", r.first_loss, r.last_loss);
	return 0;
}

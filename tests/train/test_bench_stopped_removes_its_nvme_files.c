/* `zinf bench adam --nvme DIR` and `zinf bench train` with parameters and optimizer state
 * on NVMe, stopped by SIGTERM once their run directory is made, end by that signal and
 * leave nothing under the NVMe path (their GiBs of scratch files were left for the next
 * run to find). argv[1] is the zinf binary. */
#include "cli_util.h"
#include "train_fixture.h"

static void want_empty(const char *dir, const char *what)
{
	char cmd[300], out[256];

	snprintf(cmd, sizeof(cmd), "ls -A '%s'", dir);
	T_CHECK(t_run(cmd, out, sizeof(out)) == 0 && out[0] == 0, "a stopped %s left in %s: %s",
		what, dir, out);
}

int main(int argc, char **argv)
{
	struct tf_dir d;
	char made[200];

	T_CHECK(argc == 2, "usage: %s ZINF_BINARY", argv[0]);
	tf_setup(&d, NULL);
	tf_write_ds(&d, "nvme", "nvme", false);

	snprintf(made, sizeof(made), "%s/zinf-bench-adam", d.nvme);
	t_stop_when_made((const char *[]){argv[1], "bench", "adam", "--elems", "4e6", "--nvme",
					  d.nvme, "--sub-group", "1e6", "--iters", "1024", NULL},
			 made, 300000);
	want_empty(d.nvme, "bench adam --nvme");

	snprintf(made, sizeof(made), "%s/zinf-run", d.nvme);
	t_stop_when_made((const char *[]){argv[1], "bench", "train", "--init", d.model, "--config",
					  d.ds, "--data", d.data, "--data-format", "text",
					  "--seq-len", "16", "--steps", "100000", NULL},
			 made, 300000);
	want_empty(d.nvme, "bench train");
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

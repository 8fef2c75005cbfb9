/* A run whose --save directory holds one of its inputs under a name a save writes is
 * refused before step 1, on one line naming the input, its flag and the directory, and
 * the input is left byte-identical: --config as DIR/config.json, --data as
 * DIR/model.safetensors, --eval-data as DIR/zinf_state.json, --init as DIR/config.json, and
 * a --config link elsewhere that leads to DIR/config.json. The same files outside a save
 * name, or beside another --save directory, train. */
#include <errno.h>

#include "train_fixture.h"

static void want_refused(struct zinf_train_opts *o, const char *input, const char *flag)
{
	struct zinf_train_result res;
	char err[1024], *before, *after;
	size_t nb, na;

	tf_read_all(input, &before, &nb);
	T_CHECK(zinf_train_run(o, &res, err, sizeof(err)) == -EINVAL && res.bad_input,
		"%s %s: not refused: %s", flag, input, err);
	T_CHECK(strstr(err, flag) && strstr(err, o->save_dir) && !strchr(err, '\n'),
		"%s: not one line naming the flag and the directory: %s", flag, err);
	tf_read_all(input, &after, &na);
	T_CHECK(nb == na && !memcmp(before, after, na), "%s %s changed", flag, input);
	free(before);
	free(after);
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char save[160], other[160], cfg[200], data[200], state[200], link[200];
	char *text;
	size_t n;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(save, sizeof(save), "%s/out", d.root);
	snprintf(other, sizeof(other), "%s/other", d.root);
	snprintf(cfg, sizeof(cfg), "%s/config.json", save);
	snprintf(data, sizeof(data), "%s/model.safetensors", save);
	snprintf(state, sizeof(state), "%s/zinf_state.json", save);
	snprintf(link, sizeof(link), "%s/ds-link.json", d.root);
	T_CHECK(mkdir(save, 0755) == 0, "mkdir %s", save);
	tf_read_all(d.ds, &text, &n);
	tf_write_all(cfg, text, n);
	free(text);
	tf_read_all(d.data, &text, &n);
	tf_write_all(data, text, n);
	tf_write_all(state, text, n);
	free(text);
	T_CHECK(symlink(cfg, link) == 0, "symlink %s", link);

	tf_opts(&d, &o, 2, &l);
	o.save_dir = save;
	o.config_path = cfg;
	want_refused(&o, cfg, "--config");
	o.config_path = link;
	want_refused(&o, cfg, "--config");
	o.config_path = d.ds;
	o.data_path = data;
	want_refused(&o, data, "--data");
	o.data_path = d.data;
	o.eval_data_path = state;
	o.eval_every = 1;
	want_refused(&o, state, "--eval-data");
	o.eval_data_path = NULL;
	o.eval_every = 0;
	tf_read_all(d.model, &text, &n);
	tf_write_all(cfg, text, n);
	free(text);
	o.init_config = cfg;
	want_refused(&o, cfg, "--init");
	T_CHECK(l.n == 0, "%d steps ran", l.n);

	/* the same inputs beside another --save directory: they train */
	tf_opts(&d, &o, 2, &l);
	o.save_dir = other;
	o.init_config = link; /* (now a model's config.json) */
	o.data_path = data;
	tf_run(&o, &res);
	T_CHECK(l.n == 2, "%d steps", l.n);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

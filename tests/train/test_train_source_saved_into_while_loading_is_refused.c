/* A --model or --resume directory that a save moved into while the run was loading it is
 * refused before step 1, on one line naming the directory (what was loaded may mix the
 * two saves' files): a model file replaced by another (a new inode, as a move-in renames
 * it), and a final save being moved in (final.ready present). What a save does not write
 * (another file, a final.partial of a save still being written) does not count, and a
 * directory left alone loads as before, also when resumed in place with a stale
 * final.done that the run's own setup removes. The load's end is reached through
 * train_loaded_hook, which here plays the run that saves into the directory. */
#include <errno.h>

#include "train_fixture.h"
#include "train_internal.h" /* train_loaded_hook */

enum change { REPLACED, MOVING_IN, UNRELATED, NONE };
static enum change change; /* what the hook does to the directory */

static void at(const char *dir, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* Play the run that saves into dir, as change says. */
static void saved_into(const char *dir)
{
	char a[300], b[300];
	char *data;
	size_t len;

	at(dir, "model.safetensors", a, sizeof(a));
	at(dir, "model.safetensors.new", b, sizeof(b));
	switch (change) {
	case REPLACED: /* the same bytes under a new inode, as a move-in renames one over */
		tf_read_all(a, &data, &len);
		tf_write_all(b, data, len);
		free(data);
		T_CHECK(rename(b, a) == 0, "rename %s", b);
		break;
	case MOVING_IN:
		at(dir, "final.ready", a, sizeof(a));
		T_CHECK(mkdir(a, 0755) == 0, "mkdir %s", a);
		break;
	case UNRELATED:
		at(dir, "notes.txt", a, sizeof(a));
		tf_write_all(a, "x", 1);
		at(dir, "final.partial", a, sizeof(a));
		T_CHECK(mkdir(a, 0755) == 0, "mkdir %s", a);
		break;
	case NONE:
		break;
	}
}

/* A run from dir (--model, or --resume with resume) with the hook's change: refused with
 * -ESTALE naming dir and the flag, or (refused false) run. */
static void load(struct tf_dir *d, const char *dir, bool resume, enum change what, bool refused)
{
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char err[1024] = "";
	int rc;

	tf_opts(d, &o, 3, &l);
	o.init_config = NULL;
	if (resume)
		o.resume_dir = dir;
	else
		o.model_dir = dir;
	change = what;
	train_loaded_hook = saved_into;
	rc = zinf_train_run(&o, &res, err, sizeof(err));
	train_loaded_hook = NULL;
	if (!refused) {
		T_CHECK(rc == 0 && l.n == (resume ? 1 : 3), "change %d: not run (%d steps): %s",
			what, l.n, err);
		return;
	}
	T_CHECK(rc == -ESTALE, "change %d: not refused (%d): %s", what, rc, err);
	T_CHECK(strstr(err, dir) && strstr(err, resume ? "--resume" : "--model") &&
			strstr(err, "a save moved into it") && !strchr(err, '\n'),
		"change %d: one line naming the directory and flag: %s", what, err);
	T_CHECK(l.n == 0 && res.bad_input, "change %d: %d steps ran", what, l.n);
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char save[256];

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(save, sizeof(save), "%s/saved", d.root);
	tf_opts(&d, &o, 2, &l);
	o.save_dir = save;
	o.save_state = true;
	tf_run(&o, &res);

	for (int resume = 0; resume < 2; resume++) {
		char path[300];

		load(&d, save, resume, REPLACED, true);
		load(&d, save, resume, MOVING_IN, true);
		at(save, "final.ready", path, sizeof(path));
		T_CHECK(rmdir(path) == 0, "rmdir %s", path);
		load(&d, save, resume, UNRELATED, false);
		at(save, "final.partial", path, sizeof(path));
		T_CHECK(rmdir(path) == 0, "rmdir %s", path);
		at(save, "notes.txt", path, sizeof(path));
		T_CHECK(unlink(path) == 0, "unlink %s", path);
		load(&d, save, resume, NONE, false);
	}
	{ /* resumed in place: the stale final.done a stopped move left, removed by the run's
	   * own setup, is no change */
		char done[300];

		at(save, "final.done", done, sizeof(done));
		T_CHECK(mkdir(done, 0755) == 0, "mkdir %s", done);
		tf_opts(&d, &o, 3, &l);
		o.init_config = NULL;
		o.resume_dir = save;
		o.save_dir = save;
		o.save_state = true;
		tf_run(&o, &res);
		T_CHECK(l.n == 1 && access(done, F_OK) != 0, "%d steps, final.done left", l.n);
	}
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

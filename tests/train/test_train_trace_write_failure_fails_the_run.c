/*
 * A zinf.trace file that cannot be written at the end of a run fails the run (a non-zero
 * code with one line naming the file), as a --log-json that cannot be written does,
 * rather than a log line and success; with the directory there, the same run writes
 * its trace and succeeds.
 */
#include <errno.h>

#include "train_fixture.h"

static char trace_dir[200];

/* At the last step: the trace's directory goes (the check before step 1 passed). */
static void remove_dir_at_end(const struct zinf_train_step *s, void *user)
{
	tf_on_step(s, user);
	if (s->step == s->steps)
		T_CHECK(rmdir(trace_dir) == 0, "rmdir %s: %s", trace_dir, strerror(errno));
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char set[400], path[300], err[1024];
	const char *sets[1] = {set};
	struct stat st;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(trace_dir, sizeof(trace_dir), "%s/traces", d.root);
	snprintf(path, sizeof(path), "%s/t.json", trace_dir);
	snprintf(set, sizeof(set), "zinf.trace=%s", path);
	T_CHECK(mkdir(trace_dir, 0755) == 0, "mkdir %s", trace_dir);

	tf_opts(&d, &o, 2, &l);
	o.config_sets = sets;
	o.n_config_sets = 1;
	tf_run(&o, &res);
	T_CHECK(stat(path, &st) == 0 && st.st_size > 0, "no trace written at %s", path);
	T_CHECK(unlink(path) == 0, "unlink %s", path);

	tf_opts(&d, &o, 2, &l);
	o.config_sets = sets;
	o.n_config_sets = 1;
	o.on_step = remove_dir_at_end;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) != 0, "the run succeeded");
	T_CHECK(strstr(err, "zinf.trace: cannot write") && strstr(err, path) && !strchr(err, '\n'),
		"err: %s", err);
	T_CHECK(l.n == 2, "%d steps ran", l.n);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

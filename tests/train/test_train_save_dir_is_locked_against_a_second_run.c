/* One run saves into a --save directory at a time: while a live process holds the
 * directory's .zinf-save.lock, a run saving there is refused before step 1 on one line
 * (a failure, not bad input: the CLI exits 1),
 * and its .partial snapshots (which a live run may be writing) are left untouched; once
 * the lock is free, the same run goes on (and removes a stopped run's .partial). */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>

#include "train_fixture.h"

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char save[256], partial[300], lock[300], err[1024];
	int fd;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(save, sizeof(save), "%s/out", d.root);
	snprintf(partial, sizeof(partial), "%s/checkpoint-2.partial", save);
	snprintf(lock, sizeof(lock), "%s/.zinf-save.lock", save);
	T_CHECK(mkdir(save, 0755) == 0 && mkdir(partial, 0755) == 0, "mkdir %s", partial);
	/* as a live run writing checkpoint-2 holds it */
	fd = open(lock, O_RDWR | O_CREAT, 0644);
	T_CHECK(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0, "lock %s", lock);

	tf_opts(&d, &o, 4, &l);
	o.save_dir = save;
	o.save_every = 2;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EBUSY, "not refused: %s", err);
	T_CHECK(strstr(err, save) && strstr(err, "another live zinf train") && !strchr(err, '\n'),
		"one line naming the directory: %s", err);
	T_CHECK(!res.bad_input && l.n == 0, "no step ran, not blamed on the input");
	T_CHECK(access(partial, F_OK) == 0, "the live run's .partial was removed");

	close(fd); /* the other run ends */
	tf_opts(&d, &o, 4, &l);
	o.save_dir = save;
	o.save_every = 2;
	tf_run(&o, &res);
	T_CHECK(l.n == 4, "%d steps", l.n);
	snprintf(partial, sizeof(partial), "%s/checkpoint-2/model.safetensors", save);
	T_CHECK(access(partial, F_OK) == 0, "the stopped run's .partial was not replaced");
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

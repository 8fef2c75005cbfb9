/* The NVMe bytes of the per-step figures (--log-json's "bytes") add up to the run's
 * totals less what the load moved before step 1, though each step's update runs in the
 * background and the caller's callback takes time between steps (here 30 ms, in which
 * the update's reads and writes land): a step's figures start where the previous
 * step's ended. The load's share is measured by a 1-step run of the same config. */
#include <time.h>

#include "train_fixture.h"

struct sums {
	uint64_t read, write;
	int n;
};

static void on_step(const struct zinf_train_step *s, void *user)
{
	struct sums *t = user;
	struct timespec ts = {0, 30 * 1000 * 1000};

	if (!s->step)
		return;
	t->read += s->nvme_read_bytes;
	t->write += s->nvme_write_bytes;
	t->n++;
	nanosleep(&ts, NULL);
}

static void run(struct tf_dir *d, uint64_t steps, struct sums *t, struct zinf_train_result *res)
{
	struct zinf_train_opts o;
	struct tf_losses unused;

	tf_opts(d, &o, steps, &unused);
	memset(t, 0, sizeof(*t));
	o.on_step = on_step;
	o.on_step_user = t;
	tf_run(&o, res);
	T_CHECK(t->n == (int)steps, "%d steps reported", t->n);
}

int main(void)
{
	struct zinf_train_result one, five;
	struct sums s1, s5;
	struct tf_dir d;
	uint64_t load_read, load_write;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "nvme", "nvme", true);
	run(&d, 1, &s1, &one);
	load_read = one.nvme_read_bytes - s1.read;
	load_write = one.nvme_write_bytes - s1.write;
	run(&d, 5, &s5, &five);
	T_CHECK(s5.write > s1.write && s5.read > s1.read, "5 steps moved no more than 1");
	T_CHECK(s5.read == five.nvme_read_bytes - load_read,
		"steps read %llu bytes, the run %llu less the load's %llu",
		(unsigned long long)s5.read, (unsigned long long)five.nvme_read_bytes,
		(unsigned long long)load_read);
	T_CHECK(s5.write == five.nvme_write_bytes - load_write,
		"steps wrote %llu bytes, the run %llu less the load's %llu",
		(unsigned long long)s5.write, (unsigned long long)five.nvme_write_bytes,
		(unsigned long long)load_write);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

/* scheduler.params.last_batch_iteration resumes the schedule where it was: a linear
 * WarmupLR over 10 iterations from 0 to 1e-3 gives steps 1-3 the rates of iterations
 * -1, 0, 1 (0, 0, 1e-4) by default and of iterations 5, 6, 7 (5e-4, 6e-4, 7e-4) at
 * last_batch_iteration 5, as a DeepSpeed run resumed at iteration 5 has them (a scheduler
 * freshly constructed there leaves step 1 at the optimizer's rate; docs/optim.md). */
#include <math.h>

#include "train_fixture.h"

struct lrs {
	int n;
	double lr[4];
};

static void on_step(const struct zinf_train_step *s, void *user)
{
	struct lrs *l = user;

	if (s->step >= 1 && l->n < 4)
		l->lr[l->n++] = s->lr;
}

static void run(const struct tf_dir *d, const char *lbi, const double want[3])
{
	const char *sets[] = {
		"scheduler.type=WarmupLR",
		"scheduler.params.warmup_min_lr=0",
		"scheduler.params.warmup_max_lr=1e-3",
		"scheduler.params.warmup_num_steps=10",
		"scheduler.params.warmup_type=linear",
		lbi,
	};
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses unused;
	struct lrs l = {0};

	tf_opts(d, &o, 3, &unused);
	o.config_sets = sets;
	o.n_config_sets = 6;
	o.on_step = on_step;
	o.on_step_user = &l;
	tf_run(&o, &res);
	T_CHECK(l.n == 3, "%s: %d steps", lbi, l.n);
	for (int i = 0; i < 3; i++)
		T_CHECK(fabs(l.lr[i] - want[i]) <= 1e-12, "%s: step %d lr %.17g, want %.17g", lbi,
			i + 1, l.lr[i], want[i]);
}

int main(void)
{
	static const double start[3] = {0, 0, 1e-4}, after5[3] = {5e-4, 6e-4, 7e-4};
	struct tf_dir d;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	run(&d, "scheduler.params.last_batch_iteration=-1", start);
	run(&d, "scheduler.params.last_batch_iteration=5", after5);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

/* --save-every K writes save_dir/checkpoint-<step> after every K steps before the last,
 * each byte-identical to what a run stopped at that step saves at its end (fp32 and a
 * bf16 save dtype; bf16 parameters and optimizer state on NVMe, the optimizer
 * overlapping the next forward), marks those steps "saved" for --log-json, and leaves no .partial name;
 * the final save is the run's own. A run that would write over an existing checkpoint,
 * or --save-every without --save, is refused before step 1 on one line. With --steps
 * 2^53 the run starts at once (the check lists the directory, not every step). A
 * stop raised as the final save begins lets it finish (the run succeeds, its state
 * saved). */
#include "train_fixture.h"
#include "zinf/error.h"

static void on_step(const struct zinf_train_step *s, void *user)
{
	uint64_t *saved = user;

	if (s->saved)
		*saved |= 1ull << s->step;
}

static volatile int stop;

static void stop_after_one(const struct zinf_train_step *s, void *user)
{
	tf_on_step(s, user);
	stop = s->step >= 1;
}

static void stop_at_two(const struct zinf_train_step *s, void *user)
{
	tf_on_step(s, user);
	stop = s->step >= 2;
}

static void run(struct tf_dir *d, uint64_t steps, uint64_t every, const char *dir,
		enum zinf_dtype dtype, uint64_t *saved)
{
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;

	tf_write_ds(d, "nvme", "nvme", true); /* bf16 parameters */
	tf_opts(d, &o, steps, &l);
	o.save_dir = dir;
	o.save_every = every;
	o.save_dtype = dtype;
	o.on_step = on_step;
	o.on_step_user = saved;
	*saved = 0;
	tf_run(&o, &res);
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	struct stat st;
	char every[256], upto[256], a[512], b[512], err[1024];
	uint64_t saved;

	zinf_log_set_level(ZINF_LOG_ERROR);
	tf_setup(&d, NULL);
	for (int bf16 = 0; bf16 < 2; bf16++) {
		enum zinf_dtype dt = bf16 ? ZINF_DTYPE_BF16 : ZINF_DTYPE_F32;

		snprintf(every, sizeof(every), "%s/every-%d", d.root, bf16);
		run(&d, 5, 2, every, dt, &saved);
		T_CHECK(saved == (1u << 2 | 1u << 4), "saved after steps 2 and 4 only (%#llx)",
			(unsigned long long)saved);
		for (int k = 2; k <= 4; k += 2) {
			snprintf(upto, sizeof(upto), "%s/upto-%d-%d", d.root, bf16, k);
			run(&d, (uint64_t)k, 0, upto, dt, &saved);
			T_CHECK(saved == 0, "no snapshot without --save-every");
			snprintf(a, sizeof(a), "%s/checkpoint-%d/model.safetensors", every, k);
			snprintf(b, sizeof(b), "%s/model.safetensors", upto);
			tf_same_file(a, b);
			snprintf(a, sizeof(a), "%s/checkpoint-%d/config.json", every, k);
			snprintf(b, sizeof(b), "%s/config.json", upto);
			tf_same_file(a, b);
			snprintf(a, sizeof(a), "%s/checkpoint-%d.partial", every, k);
			T_CHECK(stat(a, &st) != 0, "%s is left", a);
		}
		snprintf(a, sizeof(a), "%s/model.safetensors", every);
		T_CHECK(stat(a, &st) == 0, "the final save");
	}

	/* the same directory again: checkpoint-2 exists */
	tf_opts(&d, &o, 5, &l);
	o.save_dir = every;
	o.save_every = 2;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EEXIST, "over an old checkpoint");
	T_CHECK(strstr(err, "checkpoint-2") && strstr(err, "--save-every") && !strchr(err, '\n'),
		"one line naming it: %s", err);
	T_CHECK(l.n == 0, "no step ran");
	o.save_dir = NULL;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINVAL && strstr(err, "--save"),
		"--save-every without --save: %s", err);

	/* --steps 2^53 (the most a run takes) with --save-every 1: the check lists the
	 * directory once (it looked for every step's checkpoint, for ever), and the run,
	 * stopped after its first step, saved checkpoint-1 */
	snprintf(every, sizeof(every), "%s/forever", d.root);
	tf_opts(&d, &o, 1ull << 53, &l);
	o.save_dir = every;
	o.save_every = 1;
	o.on_step = stop_after_one;
	o.on_step_user = &l;
	o.stop = &stop;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINTR && res.stopped && l.n == 1,
		"a run of 2^53 steps, stopped after one: %d steps: %s", l.n, err);
	snprintf(a, sizeof(a), "%s/checkpoint-1/model.safetensors", every);
	T_CHECK(stat(a, &st) == 0, "%s not saved", a);

	/* a stop raised in the last step's report, as the final save begins: snapshots can
	 * be stopped, the final save is not (it is the run's result) */
	snprintf(every, sizeof(every), "%s/final", d.root);
	stop = 0;
	tf_opts(&d, &o, 2, &l);
	o.save_dir = every;
	o.save_every = 1;
	o.save_state = true;
	o.on_step = stop_at_two;
	o.on_step_user = &l;
	o.stop = &stop;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == 0 && !res.stopped && l.n == 2,
		"a stop as the final save begins: %d steps: %s", l.n, err);
	snprintf(a, sizeof(a), "%s/zinf_state.json", every);
	T_CHECK(stat(a, &st) == 0, "%s: the final save stopped", a);
	snprintf(a, sizeof(a), "%s/checkpoint-1/zinf_state.json", every);
	T_CHECK(stat(a, &st) == 0, "%s not saved", a);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

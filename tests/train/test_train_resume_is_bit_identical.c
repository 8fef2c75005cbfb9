/* A run stopped at a checkpoint saved with --save-state and resumed from it (--resume)
 * ends bit-identical to the run never stopped: the same loss, rate and gradient norm at
 * every later step, and byte-identical final model.safetensors, optimizer.safetensors
 * (fp32 masters and Adam moments) and zinf_state.json. Checked with a seeded shuffle,
 * gradient accumulation, a warmup-decay schedule and clipping, for
 *   - bf16 parameters and optimizer state on NVMe, resumed from the first and from a
 *     later checkpoint, and resumed with everything in host memory instead (the tiers
 *     may change between runs);
 *   - fp32 parameters and optimizer state on NVMe, resumed from both checkpoints;
 *   - fp16 parameters with dynamic loss scaling whose scale doubles every 2 steps (the
 *     scaler's state is part of the checkpoint: a reset scale shows in zinf_state.json),
 *     saved in shards of 100 kB (the optimizer state's index and shards compared too),
 *     its state written in pieces of 1000 elements (across sub-groups and tensors' ends)
 *     and resumed parameter by parameter in pieces of 777 (the bf16 runs resume module
 *     by module).
 * A run resumed with --save the --resume directory itself ends with the same files there.
 * With --device=cuda first the runs use the cuda device backend and model runtime
 * (test_gpu_resume_is_bit_identical; skips with 77 without a GPU), and a checkpoint saved
 * there is refused on the host backend (the runtimes compute different bits).
 */
#include <dirent.h>

#include "device.h" /* zinf_device_cuda_count */
#include "gpu_test.h"
#include "train_fixture.h"
#include "train_internal.h" /* train_state_piece_elems */
#include "zinf/error.h"

#define STEPS 5

static const char *device = "host"; /* zinf.device of every run */

struct trace {
	int n;
	uint64_t step[STEPS];
	double loss[STEPS], lr[STEPS], norm[STEPS];
	uint64_t resumed_from;
};

static void on_step(const struct zinf_train_step *s, void *user)
{
	struct trace *t = user;

	if (s->step == 0 || t->n >= STEPS)
		return;
	t->step[t->n] = s->step;
	t->loss[t->n] = s->loss;
	t->lr[t->n] = s->lr;
	t->norm[t->n] = s->grad_norm;
	t->resumed_from = s->resumed_from;
	t->n++;
}

/* precision "bf16" or "fp16"; params and optimizer state on home (nvme or cpu). */
static void write_ds(struct tf_dir *d, const char *precision, const char *home)
{
	bool fp16 = strcmp(precision, "fp16") == 0, bf16 = strcmp(precision, "bf16") == 0;
	FILE *f;

	snprintf(d->ds, sizeof(d->ds), "%s/ds-%s-%s.json", d->root, precision, home);
	f = fopen(d->ds, "w");
	T_CHECK(f != NULL, "write %s", d->ds);
	fprintf(f,
		"{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2,"
		" \"gradient_clipping\": 0.5, \"bf16\": {\"enabled\": %s},"
		" \"fp16\": {\"enabled\": %s, \"initial_scale_power\": 12, \"loss_scale_window\": 2},"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003, \"weight_decay\": 0.01}},"
		" \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_num_steps\": 2,"
		"  \"total_num_steps\": \"auto\"}},"
		" \"zero_optimization\": {\"stage\": 3,"
		"  \"offload_param\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
		"  \"sub_group_size\": 20000},"
		" \"zinf\": {\"device\": \"%s\", \"device_memory_limit\": \"%s\","
		"  \"pinned_memory_limit\": \"4MiB\", \"chunk_size\": \"64KiB\"}}\n",
		bf16 ? "true" : "false", fp16 ? "true" : "false", home, d->nvme, home, d->nvme,
		device,
		strcmp(home, "nvme")	      ? "64MiB"
		: strcmp(device, "cuda") == 0 ? "4MiB" /* activations too */
					      : "1MiB");
	fclose(f);
}

/* STEPS steps into save_dir (state saved, and every 2 steps with save_every), from the
 * start or from resume. */
static uint64_t shard_bytes; /* --save-shard-size of the next runs (0: default) */

static void run(struct tf_dir *d, const char *resume, const char *save_dir, uint64_t every,
		struct trace *t)
{
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses unused;

	tf_opts(d, &o, STEPS, &unused);
	o.shuffle = true;
	if (resume) {
		o.init_config = NULL;
		o.resume_dir = resume;
	}
	o.save_dir = save_dir;
	o.save_every = every;
	o.save_state = true;
	o.save_dtype = ZINF_DTYPE_F32;
	o.save_max_shard_bytes = shard_bytes;
	memset(t, 0, sizeof(*t));
	o.on_step = on_step;
	o.on_step_user = t;
	tf_run(&o, &res);
	T_CHECK(res.steps == (uint64_t)t->n, "%llu steps run, %d reported",
		(unsigned long long)res.steps, t->n);
}

/* The files a save wrote into directory a (not the checkpoint-* snapshots in it): the
 * same names in b, byte for byte, and the optimizer state and manifest among them. */
static void same_files(const char *a, const char *b)
{
	DIR *dir = opendir(a);
	struct dirent *de;
	int n_a = 0, n_b = 0, state = 0;

	T_CHECK(dir != NULL, "open %s", a);
	while ((de = readdir(dir))) {
		char pa[512], pb[512], *x, *y;
		size_t nx, ny;

		if (de->d_name[0] == '.' || strncmp(de->d_name, "checkpoint-", 11) == 0)
			continue;
		snprintf(pa, sizeof(pa), "%s/%s", a, de->d_name);
		snprintf(pb, sizeof(pb), "%s/%s", b, de->d_name);
		tf_read_all(pa, &x, &nx);
		tf_read_all(pb, &y, &ny);
		T_CHECK(nx == ny && memcmp(x, y, nx) == 0, "%s and %s differ (%zu, %zu bytes)", pa,
			pb, nx, ny);
		free(x);
		free(y);
		state += strcmp(de->d_name, "zinf_state.json") == 0 ||
			 strncmp(de->d_name, "optimizer", 9) == 0;
		n_a++;
	}
	closedir(dir);
	dir = opendir(b);
	T_CHECK(dir != NULL, "open %s", b);
	while ((de = readdir(dir)))
		n_b += de->d_name[0] != '.';
	closedir(dir);
	T_CHECK(n_a == n_b, "%s has %d files, %s %d", a, n_a, b, n_b);
	T_CHECK(state >= 2, "%s: no optimizer state or zinf_state.json", a);
}

/* The resumed run's steps are the whole run's last ones, bit for bit. */
static void same_tail(const struct trace *whole, const struct trace *resumed, uint64_t from,
		      const char *what)
{
	T_CHECK(resumed->n == STEPS - (int)from, "%s: %d steps after step %llu", what, resumed->n,
		(unsigned long long)from);
	T_CHECK(resumed->resumed_from == from, "%s: resumed_from %llu", what,
		(unsigned long long)resumed->resumed_from);
	for (int i = 0; i < resumed->n; i++) {
		int j = (int)from + i;
		T_CHECK(resumed->step[i] == whole->step[j], "%s: step %llu reported as %llu", what,
			(unsigned long long)whole->step[j], (unsigned long long)resumed->step[i]);
		T_CHECK(resumed->loss[i] == whole->loss[j] && resumed->lr[i] == whole->lr[j] &&
				resumed->norm[i] == whole->norm[j],
			"%s: step %llu: loss %.17g lr %.17g norm %.17g, never stopped %.17g %.17g %.17g",
			what, (unsigned long long)whole->step[j], resumed->loss[i], resumed->lr[i],
			resumed->norm[i], whole->loss[j], whole->lr[j], whole->norm[j]);
	}
}

static void check_precision(struct tf_dir *d, const char *precision)
{
	char whole[256], ck[300], out[300], cmd[700];
	struct trace t_whole, t;

	write_ds(d, precision, "nvme");
	snprintf(whole, sizeof(whole), "%s/whole-%s", d->root, precision);
	run(d, NULL, whole, 2, &t_whole);
	T_CHECK(t_whole.n == STEPS, "%s: %d steps", precision, t_whole.n);
	for (uint64_t from = 2; from <= 4; from += 2) {
		snprintf(ck, sizeof(ck), "%s/checkpoint-%llu", whole, (unsigned long long)from);
		snprintf(out, sizeof(out), "%s/resumed-%s-%llu", d->root, precision,
			 (unsigned long long)from);
		run(d, ck, out, 0, &t);
		same_tail(&t_whole, &t, from, precision);
		same_files(whole, out);
	}
	/* resumed into the checkpoint's own directory: the final save replaces it */
	snprintf(ck, sizeof(ck), "%s/checkpoint-2", whole);
	snprintf(out, sizeof(out), "%s/in-place-%s", d->root, precision);
	snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", ck, out);
	T_CHECK(system(cmd) == 0, "%s", cmd);
	run(d, out, out, 0, &t);
	same_tail(&t_whole, &t, 2, "resumed into its own directory");
	same_files(whole, out);
	/* resumed with everything on the device: the optimizer state loaded there and
	 * saved from there (in pieces, for fp16), the bits of the run on NVMe (on the host
	 * backend; a GPU sums the norm in its own order) */
	if (strcmp(device, "host") == 0) {
		write_ds(d, precision, "none");
		snprintf(ck, sizeof(ck), "%s/checkpoint-2", whole);
		snprintf(out, sizeof(out), "%s/resumed-%s-device", d->root, precision);
		run(d, ck, out, 0, &t);
		same_tail(&t_whole, &t, 2, "resumed with everything on the device");
		same_files(whole, out);
	}
	if (strcmp(precision, "bf16"))
		return;
	if (strcmp(device, "cuda") == 0) {
		/* the host runtime computes other bits: refused before step 1 */
		struct zinf_train_opts o;
		struct zinf_train_result res;
		struct tf_losses l;
		char err[1024];

		device = "host";
		write_ds(d, precision, "nvme");
		device = "cuda";
		tf_opts(d, &o, STEPS, &l);
		o.init_config = NULL;
		snprintf(ck, sizeof(ck), "%s/checkpoint-2", whole);
		o.resume_dir = ck;
		o.shuffle = true;
		T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == ZINF_ECONFIG &&
				strstr(err, "saved on the cuda device, resumed on host") &&
				l.n == 0,
			"cuda checkpoint resumed on the host: %s", err);
	}
	/* the same run with its parameters and optimizer state in host memory */
	write_ds(d, precision, "cpu");
	snprintf(ck, sizeof(ck), "%s/checkpoint-2", whole);
	snprintf(out, sizeof(out), "%s/resumed-%s-cpu", d->root, precision);
	run(d, ck, out, 0, &t);
	same_tail(&t_whole, &t, 2, "bf16 resumed on cpu");
	same_files(whole, out);
}

int main(int argc, char **argv)
{
	struct tf_dir d;

	if (argc > 1 && strcmp(argv[1], "--device=cuda") == 0) {
		device = "cuda";
		t_require_gpu();
	}

	tf_setup(&d, NULL);
	check_precision(&d, "bf16");
	check_precision(&d, "fp32");
	shard_bytes = 100000; /* model and optimizer state in shards, with their indexes */
	train_state_piece_elems = 1000; /* the state saved in many pieces of odd size */
	train_load_piece_elems = 777;	/* and resumed in pieces, parameter by parameter */
	check_precision(&d, "fp16");
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

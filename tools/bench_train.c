/*
 * zinf bench train: the offloaded run against the same run resident on the device. Both
 * trainers live in one process and take turns, step by step (each one's per-step
 * callback hands the turn to the other), so that the noise of a shared machine falls on
 * both alike. Step 1 of each (trace recording, warm-up) is left out of the figures.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "train_flags.h"
#include "zinf/config.h"
#include "zinf/log.h"
#include "zinf/train.h"

const char bench_train_usage[] =
	"usage: zinf bench train (--model DIR | --init CONFIG.json) --config DS.json\n"
	"                        --data FILE --seq-len T --steps N [options]\n"
	"Offloaded training beside the same run resident on the device. Runs the config as\n"
	"given and a resident baseline (the same config with offload_param and\n"
	"offload_optimizer off, zinf.nvme_paths, zinf.offload_gradients, max_in_cpu and\n"
	"ratio at their defaults, device_memory_limit auto and no zinf.trace: a --set trace\n"
	"file is the offloaded run's), alternating their steps in one process, and reports\n"
	"the median forward+backward time of each, their ratio and the share of the\n"
	"offloaded step that compute waited for data. Step 1 is left out. SIGINT or SIGTERM\n"
	"stops the run under way at its next module (its NVMe run directory removed).\n"
	"options:\n"
	"  --model DIR, --init CONFIG.json, --config DS.json, --set KEY=VALUE, --data FILE,\n"
	"  --data-format llmc|text, --seq-len T, --micro-batch-size B,\n"
	"  --gradient-accumulation-steps G, --steps N (2 to 100000), --seed S,\n"
	"  --shuffle none|seeded, --activation-checkpointing   as for zinf train\n"
	"  --resident-set KEY=VALUE  an override for the resident run only (repeatable)\n"
	"  --json                    one JSON object instead of the table\n";

enum { BT_RESIDENT_SET = TF_FIRST_FREE, BT_JSON };
#define BT_MAX_STEPS 100000

static const char *const resident_sets[] = {
	"zero_optimization.offload_param.device=none",
	"zero_optimization.offload_optimizer.device=none",
	"zinf.device_memory_limit=auto",
	"zinf.trace=null", /* a --set trace file is the offloaded run's (--resident-set: its own) */
	/* what only offload uses, back to the defaults: nvme_paths would lock the offloaded
	 * run's run directories, gradients on nvme need the optimizer there, and the others
	 * would warn that they have no effect */
	"zinf.nvme_paths=null",
	"zinf.offload_gradients=null",
	"zero_optimization.offload_param.max_in_cpu=null",
	"zero_optimization.offload_optimizer.ratio=null",
};
#define N_RESIDENT_SETS (int)(sizeof(resident_sets) / sizeof(resident_sets[0]))

/* Whose turn it is to step; a run that has ended never takes its turn back. */
struct baton {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int turn;
	bool done[2];
	double cpu_at_pass; /* process CPU seconds when the turn last passed */
};

struct run {
	struct baton *b;
	int me; /* 0 offloaded (goes first), 1 resident */
	struct zinf_train_opts o;
	struct zinf_train_step *steps; /* [o.steps] */
	double *cpu;		       /* [o.steps] process CPU seconds of each step */
	struct zinf_train_result res;
	int rc;
	char err[2048];
};

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pass_turn(struct run *r, bool done)
{
	pthread_mutex_lock(&r->b->mu);
	/* Only the run that steps restarts the clock: one that has handed the turn on after
	 * its last step and then ends (its save, its teardown) must not reset it while the
	 * other is in a step. */
	if (r->b->turn == r->me || r->b->done[!r->me]) {
		r->b->cpu_at_pass = cpu_seconds();
		r->b->turn = !r->me;
	}
	r->b->done[r->me] |= done;
	pthread_cond_broadcast(&r->b->cv);
	pthread_mutex_unlock(&r->b->mu);
}

static void wait_turn(struct run *r)
{
	pthread_mutex_lock(&r->b->mu);
	while (r->b->turn != r->me && !r->b->done[!r->me])
		pthread_cond_wait(&r->b->cv, &r->b->mu);
	pthread_mutex_unlock(&r->b->mu);
}

static void on_step(const struct zinf_train_step *s, void *user)
{
	struct run *r = user;

	if (s->step == 0 || s->step > r->o.steps)
		return;
	r->steps[s->step - 1] = *s;
	/* Only this run has worked since the other passed the turn to it (the other
	 * run's threads are idle while it waits). */
	pthread_mutex_lock(&r->b->mu);
	r->cpu[s->step - 1] = cpu_seconds() - r->b->cpu_at_pass;
	pthread_mutex_unlock(&r->b->mu);
	pass_turn(r, false);
	if (s->step < s->steps)
		wait_turn(r);
}

static void *run_thread(void *arg)
{
	struct run *r = arg;

	bool alone;

	wait_turn(r);
	pthread_mutex_lock(&r->b->mu);
	alone = r->b->done[!r->me] && r->me == 1;
	r->b->cpu_at_pass = cpu_seconds(); /* setup is not part of step 1's figure */
	pthread_mutex_unlock(&r->b->mu);
	if (alone) {
		/* The offloaded run failed (its input is the resident run's too): do not
		 * train on alone. */
		r->rc = -1;
		pass_turn(r, true);
		return NULL;
	}
	r->rc = zinf_train_run(&r->o, &r->res, r->err, sizeof(r->err));
	pass_turn(r, true);
	return NULL;
}

static volatile sig_atomic_t bench_stop;

/* SIGINT, SIGTERM: the run under way stops at its next module and tears down (its NVMe
 * run directory removed); the other does not start. */
static void on_stop(int sig)
{
	__atomic_store_n(&bench_stop, sig, __ATOMIC_RELAXED);
}

/* Both runs load one config, so a warning about it (a key with no effect) would print
 * twice: each warning line prints once, as the library's stderr logger would print it.
 * Called under the logger's lock. */
#define SEEN_MAX 64
static char *seen[SEEN_MAX];
static int n_seen;

static void log_warnings_once(enum zinf_log_level level, const char *msg, void *user)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};

	(void)user;
	if (level == ZINF_LOG_WARN) {
		for (int i = 0; i < n_seen; i++)
			if (strcmp(seen[i], msg) == 0)
				return;
		if (n_seen < SEEN_MAX && (seen[n_seen] = strdup(msg)))
			n_seen++;
	}
	fprintf(stderr, "zinf: %s: %s\n", names[level], msg);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of the n values v[i * stride] (doubles), via tmp (n doubles). */
static double median(const double *v, size_t stride, uint64_t n, double *tmp)
{
	for (uint64_t i = 0; i < n; i++)
		tmp[i] = v[i * stride];
	qsort(tmp, n, sizeof(*tmp), cmp_double);
	return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

struct figures {
	double fb_res, fb_off, fb_min_res, fb_min_off, step_res, step_off;
	double ratio, ratio_paired, ratio_min, wait_off, wait_share, opt_off;
	double cpu_res, cpu_off;	/* process CPU seconds per step, median */
	uint64_t nvme_read, nvme_write; /* per offloaded step, median */
	bool losses_identical;
};

/* Per-step columns of the steps after the first, as arrays of doubles. */
enum {
	COL_FB_RES,
	COL_FB_OFF,
	COL_STEP_RES,
	COL_STEP_OFF,
	COL_RATIO,
	COL_WAIT,
	COL_WAIT_SHARE,
	COL_OPT,
	COL_READ,
	COL_WRITE,
	COL_CPU_RES,
	COL_CPU_OFF,
	N_COLS
};

static int compute(const struct run *off, const struct run *res, struct figures *f)
{
	uint64_t n = off->o.steps - 1;
	double *col = malloc(n * N_COLS * sizeof(*col)), *tmp = malloc(n * sizeof(*tmp));

	if (!col || !tmp) {
		free(col);
		free(tmp);
		return -1;
	}
	memset(f, 0, sizeof(*f));
	f->losses_identical = true;
	f->fb_min_res = f->fb_min_off = INFINITY;
	for (uint64_t k = 0; k < off->o.steps; k++)
		f->losses_identical &= off->steps[k].loss == res->steps[k].loss;
	for (uint64_t i = 0; i < n; i++) {
		const struct zinf_train_step *a = &off->steps[i + 1], *b = &res->steps[i + 1];
		double *c = col + i * N_COLS;

		c[COL_FB_RES] = b->fwd_bwd_seconds;
		c[COL_FB_OFF] = a->fwd_bwd_seconds;
		c[COL_STEP_RES] = b->step_seconds;
		c[COL_STEP_OFF] = a->step_seconds;
		c[COL_RATIO] = b->fwd_bwd_seconds > 0 ? a->fwd_bwd_seconds / b->fwd_bwd_seconds : 0;
		c[COL_WAIT] = a->wait_seconds;
		c[COL_WAIT_SHARE] = a->step_seconds > 0 ? a->wait_seconds / a->step_seconds : 0;
		c[COL_OPT] = a->optimizer_seconds;
		c[COL_READ] = (double)a->nvme_read_bytes;
		c[COL_WRITE] = (double)a->nvme_write_bytes;
		c[COL_CPU_RES] = res->cpu[i + 1];
		c[COL_CPU_OFF] = off->cpu[i + 1];
		f->fb_min_res = fmin(f->fb_min_res, b->fwd_bwd_seconds);
		f->fb_min_off = fmin(f->fb_min_off, a->fwd_bwd_seconds);
	}
	f->fb_res = median(col + COL_FB_RES, N_COLS, n, tmp);
	f->fb_off = median(col + COL_FB_OFF, N_COLS, n, tmp);
	f->step_res = median(col + COL_STEP_RES, N_COLS, n, tmp);
	f->step_off = median(col + COL_STEP_OFF, N_COLS, n, tmp);
	f->ratio_paired = median(col + COL_RATIO, N_COLS, n, tmp);
	f->wait_off = median(col + COL_WAIT, N_COLS, n, tmp);
	f->wait_share = median(col + COL_WAIT_SHARE, N_COLS, n, tmp);
	f->opt_off = median(col + COL_OPT, N_COLS, n, tmp);
	f->nvme_read = (uint64_t)median(col + COL_READ, N_COLS, n, tmp);
	f->nvme_write = (uint64_t)median(col + COL_WRITE, N_COLS, n, tmp);
	f->cpu_res = median(col + COL_CPU_RES, N_COLS, n, tmp);
	f->cpu_off = median(col + COL_CPU_OFF, N_COLS, n, tmp);
	f->ratio = f->fb_res > 0 ? f->fb_off / f->fb_res : 0;
	f->ratio_min = f->fb_min_res > 0 ? f->fb_min_off / f->fb_min_res : 0;
	free(col);
	free(tmp);
	return 0;
}

static void print_json(const struct run *off, const struct run *res, const struct figures *f)
{
	printf("{\"steps\": %" PRIu64 ", \"measured_steps\": %" PRIu64 ", ", off->o.steps,
	       off->o.steps - 1);
	printf("\"resident\": {\"fwd_bwd_median_s\": %.6f, \"fwd_bwd_min_s\": %.6f, "
	       "\"step_median_s\": %.6f, \"cpu_seconds_per_step\": %.6f, "
	       "\"peak_device_bytes\": %" PRIu64 "}, ",
	       f->fb_res, f->fb_min_res, f->step_res, f->cpu_res, res->res.peak_device_bytes);
	printf("\"offloaded\": {\"fwd_bwd_median_s\": %.6f, \"fwd_bwd_min_s\": %.6f, "
	       "\"step_median_s\": %.6f, \"cpu_seconds_per_step\": %.6f, "
	       "\"optimizer_median_s\": %.6f, \"wait_median_s\": %.6f, "
	       "\"nvme_read_bytes_per_step\": %" PRIu64 ", \"nvme_write_bytes_per_step\": %" PRIu64
	       ", \"peak_device_bytes\": %" PRIu64 ", \"device_limit_bytes\": %" PRIu64
	       ", \"peak_pinned_bytes\": %" PRIu64 ", \"pinned_limit_bytes\": %" PRIu64 "}, ",
	       f->fb_off, f->fb_min_off, f->step_off, f->cpu_off, f->opt_off, f->wait_off,
	       f->nvme_read, f->nvme_write, off->res.peak_device_bytes, off->res.device_limit_bytes,
	       off->res.peak_pinned_bytes, off->res.pinned_limit_bytes);
	printf("\"fwd_bwd_ratio\": %.4f, \"fwd_bwd_ratio_paired_median\": %.4f, "
	       "\"fwd_bwd_ratio_of_minima\": %.4f, \"wait_share_median\": %.4f, "
	       "\"losses_identical\": %s}\n",
	       f->ratio, f->ratio_paired, f->ratio_min, f->wait_share,
	       f->losses_identical ? "true" : "false");
}

static void print_table(const struct run *off, const struct run *res, const struct figures *f)
{
	printf("step  resident fwd+bwd s  offloaded fwd+bwd s  ratio  wait/step  cpu s res/off  "
	       "loss\n");
	for (uint64_t k = 1; k < off->o.steps; k++) {
		const struct zinf_train_step *a = &off->steps[k], *b = &res->steps[k];

		printf("%4" PRIu64 "  %18.3f  %19.3f  %5.2f  %8.2f%%  %6.2f/%6.2f  %.4f%s\n", k + 1,
		       b->fwd_bwd_seconds, a->fwd_bwd_seconds,
		       b->fwd_bwd_seconds > 0 ? a->fwd_bwd_seconds / b->fwd_bwd_seconds : 0,
		       a->step_seconds > 0 ? 100 * a->wait_seconds / a->step_seconds : 0,
		       res->cpu[k], off->cpu[k], a->loss, a->loss == b->loss ? "" : " (differs)");
	}
	printf("median %16.3f  %19.3f  %5.2f  %8.2f%%  %6.2f/%6.2f\n", f->fb_res, f->fb_off,
	       f->ratio, 100 * f->wait_share, f->cpu_res, f->cpu_off);
	printf("fwd+bwd offloaded / resident: %.3f (median of step ratios %.3f, of minima "
	       "%.3f); losses %s; offloaded peak device %.1f of %.1f MiB\n",
	       f->ratio, f->ratio_paired, f->ratio_min,
	       f->losses_identical ? "identical" : "DIFFER",
	       (double)off->res.peak_device_bytes / 1048576.0,
	       (double)off->res.device_limit_bytes / 1048576.0);
}

/* Load the resident run's config with its overrides, so that a bad --resident-set fails
 * before the offloaded run has trained. Returns 0, or -1 after printing the error. */
static int check_resident_config(const struct zinf_train_opts *o)
{
	struct zinf_config *cfg;
	int rc = -1;

	if (!o->config_path)
		return 0; /* the run itself says what is missing */
	if (zinf_config_create(&cfg)) {
		fprintf(stderr, "zinf bench train: out of memory\n");
		return -1;
	}
	if (zinf_config_load_file(cfg, o->config_path)) {
		rc = 0; /* the offloaded run reports it */
		goto out;
	}
	for (int i = 0; i < o->n_config_sets; i++) {
		char kv[1024], *eq;

		snprintf(kv, sizeof(kv), "%s", o->config_sets[i]);
		eq = strchr(kv, '=');
		if (!eq) {
			fprintf(stderr, "zinf bench train: --set %s: expected KEY=VALUE\n", kv);
			goto out;
		}
		*eq = '\0';
		if (zinf_config_set(cfg, kv, eq + 1)) {
			fprintf(stderr, "zinf bench train: resident run: %s\n",
				zinf_config_last_error(cfg));
			goto out;
		}
	}
	rc = 0;
out:
	zinf_config_destroy(cfg);
	return rc;
}

static int parse(int argc, char **argv, struct run *off, struct run *res, bool *json)
{
	static const struct option longopts[] = {
		TRAIN_FLAG_RUN_OPTIONS,
		{"resident-set", required_argument, NULL, BT_RESIDENT_SET},
		{"json", no_argument, NULL, BT_JSON},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	static struct train_flags fo, fr;
	const char *extra[TRAIN_FLAGS_MAX_SETS];
	bool given[CMD_FLAG_CODES] = {false}; /* (cmd_flag_once) */
	int c, n_extra = 0;

	fo = (struct train_flags){.prog = "zinf bench train", .o = &off->o};
	fr = (struct train_flags){.prog = "zinf bench train", .o = &res->o};
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(bench_train_usage, stdout);
			return 1;
		}
		if (c == '?' || c == ':') {
			fprintf(stderr,
				"zinf bench train: %s: unknown option or missing value (try 'zinf "
				"bench train --help')\n",
				cmd_bad_flag(argv, argc));
			return -1;
		}
		if (cmd_flag_once(given, longopts, c, (const int[]){TF_SET, BT_RESIDENT_SET, 0},
				  "zinf bench train"))
			return -1;
		if (c == BT_JSON) {
			*json = true;
		} else if (c == BT_RESIDENT_SET) {
			if (n_extra == TRAIN_FLAGS_MAX_SETS - N_RESIDENT_SETS) {
				fprintf(stderr, "zinf bench train: --resident-set: too many\n");
				return -1;
			}
			if (!strchr(optarg, '=')) {
				fprintf(stderr,
					"zinf bench train: --resident-set %s: expected KEY=VALUE\n",
					optarg);
				return -1;
			}
			extra[n_extra++] = optarg;
		} else if (train_flag_apply(&fo, c, optarg) || train_flag_apply(&fr, c, optarg)) {
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zinf bench train: %s: unexpected argument\n", argv[optind]);
		return -1;
	}
	if (!off->o.model_dir && !off->o.init_config) {
		fprintf(stderr,
			"zinf bench train: the model: give --model DIR or --init CONFIG.json (try 'zinf bench train --help')\n");
		return -1;
	}
	if (off->o.steps < 2) {
		fprintf(stderr,
			"zinf bench train: --steps: %s, at least 2 (step 1 is not measured)\n",
			given[TF_STEPS] ? "too few" : "required");
		return -1;
	}
	if (off->o.steps > BT_MAX_STEPS) { /* each step's figures are kept for the medians */
		fprintf(stderr, "zinf bench train: --steps %llu: at most %d\n",
			(unsigned long long)off->o.steps, BT_MAX_STEPS);
		return -1;
	}
	/* The resident run: the shared overrides, then the baseline's, then the user's. */
	for (int i = 0; i < N_RESIDENT_SETS + n_extra; i++)
		if (train_flag_apply(&fr, TF_SET,
				     i < N_RESIDENT_SETS ? resident_sets[i]
							 : extra[i - N_RESIDENT_SETS]))
			return -1;
	return check_resident_config(&res->o);
}

int bench_train(int argc, char **argv)
{
	struct baton b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	struct run off = {.b = &b, .me = 0}, res = {.b = &b, .me = 1};
	struct figures f;
	pthread_t t[2];
	bool json = false;
	int rc;

	zinf_train_opts_init(&off.o);
	zinf_train_opts_init(&res.o);
	rc = parse(argc, argv, &off, &res, &json);
	if (rc)
		return rc > 0 ? ZINF_EXIT_OK : ZINF_EXIT_USAGE;
	off.o.on_step = res.o.on_step = on_step;
	off.o.on_step_user = &off;
	res.o.on_step_user = &res;
	off.steps = calloc(off.o.steps, sizeof(*off.steps));
	res.steps = calloc(res.o.steps, sizeof(*res.steps));
	off.cpu = calloc(off.o.steps, sizeof(*off.cpu));
	res.cpu = calloc(res.o.steps, sizeof(*res.cpu));
	if (!off.steps || !res.steps || !off.cpu || !res.cpu) {
		fprintf(stderr, "zinf bench train: out of memory\n");
		rc = ZINF_EXIT_FAIL;
		goto out;
	}
	zinf_log_set_callback(log_warnings_once, NULL);
	off.o.stop = res.o.stop = &bench_stop;
	cmd_catch_stop_signals(on_stop);
	if (pthread_create(&t[0], NULL, run_thread, &off)) {
		fprintf(stderr, "zinf bench train: cannot start a thread\n");
		rc = ZINF_EXIT_FAIL;
		goto out;
	}
	if (pthread_create(&t[1], NULL, run_thread, &res)) {
		pass_turn(&res, true);
		pthread_join(t[0], NULL);
		fprintf(stderr, "zinf bench train: cannot start a thread\n");
		rc = ZINF_EXIT_FAIL;
		goto out;
	}
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	if (__atomic_load_n(&bench_stop, __ATOMIC_RELAXED)) { /* cleaned up: end by the signal */
		int sig = __atomic_load_n(&bench_stop, __ATOMIC_RELAXED);

		fprintf(stderr, "zinf bench train: stopped (asked to stop); the runs' NVMe run "
				"directories removed\n");
		fflush(NULL);
		raise(sig);
		rc = 128 + sig;
		goto out;
	}
	if (off.rc || res.rc) {
		struct run *bad = off.rc ? &off : &res;

		fprintf(stderr, "zinf bench train: %s run: %s\n",
			bad == &off ? "offloaded" : "resident", bad->err);
		rc = bad->res.bad_input ? ZINF_EXIT_USAGE : ZINF_EXIT_FAIL;
		goto out;
	}
	if (compute(&off, &res, &f)) {
		fprintf(stderr, "zinf bench train: out of memory\n");
		rc = ZINF_EXIT_FAIL;
		goto out;
	}
	if (json)
		print_json(&off, &res, &f);
	else
		print_table(&off, &res, &f);
	rc = ZINF_EXIT_OK;
out:
	zinf_log_set_callback(NULL, NULL);
	while (n_seen)
		free(seen[--n_seen]);
	free(off.steps);
	free(res.steps);
	free(off.cpu);
	free(res.cpu);
	return rc;
}

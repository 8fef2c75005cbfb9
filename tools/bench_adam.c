/*
 * zinf bench adam: the in-memory CPU Adam/AdamW step (zinf_adam_step) against the memory
 * bandwidth of the same machine, measured in the same run by a STREAM-triad-like loop
 * (a[i] = b[i] + s * c[i] over doubles, on as many threads, counted as STREAM counts it:
 * 24 bytes per element). The step is counted at the bytes it must move per parameter:
 * master, m and v read and written (24), the grad read (2 or 4) and the param copy
 * written (0, 2 or 4). The two alternate, one run each per round; both report the best of
 * --iters timed runs, as STREAM does, and the median.
 *
 * With --nvme DIR: the pipelined NVMe step (state on a drive under DIR) against the
 * drive's read and write bandwidth, measured in the same run through the same I/O handle
 * (same engine and settings, same files) with requests of the step's sizes; the step's
 * time is compared with read_bytes / read_bw + write_bytes / write_bw. Medians.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "cmd.h"
#include "zinf/config.h"
#include "zinf/error.h"
#include "zinf/io.h"
#include "zinf/optim.h"

const char bench_adam_usage[] =
	"usage: zinf bench adam [options]\n"
	"Time the in-memory CPU Adam/AdamW step and compare it with the memory bandwidth\n"
	"(STREAM-triad-like loop over at least 16M elements, beyond most caches) measured in\n"
	"the same run (a shard that fits in the last-level cache can beat it).\n"
	"  --elems N          parameters in the shard (default 67108864; 5e7, 64MiB accepted)\n"
	"  --threads T        threads for the step and for the triad (default 2)\n"
	"  --grad-dtype D     bf16 | fp32 | fp16 (default bf16)\n"
	"  --param-dtype D    bf16 | fp16 | fp32 | none: the parameter copy written (default bf16)\n"
	"  --type T           AdamW | Adam, any case (default AdamW)\n"
	"  --isa I            auto | scalar | avx2 | avx512 (default auto)\n"
	"  --iters K          timed repetitions of each (default 10)\n"
	"  --numa-node K      bind step threads to cores of NUMA node K (default unbound)\n"
	"  --json             print one JSON object instead of text\n"
	"  --nvme DIR         time the pipelined NVMe step with its state in DIR instead, against\n"
	"                     the drive's read and write bandwidth measured in the same run\n"
	"                     (its run directory removed afterwards, and when SIGINT or\n"
	"                     SIGTERM stops it)\n"
	"  --sub-group N      with --nvme: elements per sub-group (default 4194304)\n"
	"  --io-engine E      with --nvme: auto | io_uring | libaio | psync (default auto)\n"
	"  --no-pipeline-read, --no-pipeline-write   with --nvme: turn a pipeline off\n";

#define ALIGN_BYTES (2u << 20) /* 2 MiB: lets the kernel back buffers with huge pages */

struct triad_job {
	double *a, *b, *c;
	uint64_t begin, end;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *buffer_alloc(uint64_t bytes)
{
	void *p = NULL;

	bytes = (bytes + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES;
	if (posix_memalign(&p, ALIGN_BYTES, bytes))
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE); /* advice only */
	return p;
}

/* Vectorised like an optimised STREAM build, at the widest width this CPU has. The
 * variants are chosen by cpuid here rather than by an ifunc (target_clones), which
 * would run before a sanitizer runtime starts. */
#ifdef __clang__ /* vectorises at -O2 already; has no optimize attribute */
#define TRIAD_ATTRS(isa) __attribute__((target(isa)))
#else
#define TRIAD_ATTRS(isa) __attribute__((target(isa), optimize("tree-vectorize")))
#endif
#define TRIAD_LOOP(name, isa)                                                                      \
	TRIAD_ATTRS(isa)                                                                           \
	static void name(double *restrict a, const double *restrict b, const double *restrict c,   \
			 uint64_t begin, uint64_t end)                                             \
	{                                                                                          \
		for (uint64_t i = begin; i < end; i++)                                             \
			a[i] = b[i] + 3.0 * c[i];                                                  \
	}
TRIAD_LOOP(triad_avx512, "avx512f")
TRIAD_LOOP(triad_avx2, "avx2")
TRIAD_LOOP(triad_sse2, "sse2")
#undef TRIAD_LOOP
#undef TRIAD_ATTRS

static void triad_loop(double *a, const double *b, const double *c, uint64_t begin, uint64_t end)
{
	if (__builtin_cpu_supports("avx512f"))
		triad_avx512(a, b, c, begin, end);
	else if (__builtin_cpu_supports("avx2"))
		triad_avx2(a, b, c, begin, end);
	else
		triad_sse2(a, b, c, begin, end);
}

static void *triad_slice(void *arg)
{
	const struct triad_job *j = arg;

	triad_loop(j->a, j->b, j->c, j->begin, j->end);
	return NULL;
}

/* One timed triad pass over n doubles on `threads` threads; returns seconds or < 0. */
static double triad_run(double *a, double *b, double *c, uint64_t n, unsigned threads,
			struct triad_job *jobs, pthread_t *tids)
{
	double t0 = now_s();

	for (unsigned t = 0; t < threads; t++) {
		jobs[t] = (struct triad_job){a, b, c, n * t / threads, n * (t + 1) / threads};
		if (t + 1 < threads && pthread_create(&tids[t], NULL, triad_slice, &jobs[t]))
			return -1;
	}
	triad_slice(&jobs[threads - 1]);
	for (unsigned t = 0; t + 1 < threads; t++)
		pthread_join(tids[t], NULL);
	return now_s() - t0;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

static int parse_dtype(const char *s, enum zinf_dtype *out, bool allow_none)
{
	if (strcmp(s, "bf16") == 0)
		*out = ZINF_DTYPE_BF16;
	else if (strcmp(s, "fp16") == 0)
		*out = ZINF_DTYPE_F16;
	else if (strcmp(s, "fp32") == 0)
		*out = ZINF_DTYPE_F32;
	else if (strcmp(s, "none") == 0 && allow_none)
		*out = ZINF_DTYPE_NONE;
	else
		return -EINVAL;
	return 0;
}

static uint64_t dtype_bytes(enum zinf_dtype t)
{
	return t == ZINF_DTYPE_F32 ? 4 : t == ZINF_DTYPE_NONE ? 0 : 2;
}

struct bench_args {
	uint64_t elems;
	unsigned threads, iters;
	const char *grad_name, *param_name;
	struct zinf_adam_opts opts;
	enum zinf_dtype grad_dtype, param_dtype;
	bool json;
	/* --nvme */
	const char *nvme_dir;
	uint64_t sub_group;
	enum zinf_io_engine io_engine;
	bool pipeline_read, pipeline_write;
};

static int parse_args(int argc, char **argv, struct bench_args *b)
{
	static const struct option longopts[] = {
		{"elems", required_argument, NULL, 'n'},
		{"threads", required_argument, NULL, 't'},
		{"grad-dtype", required_argument, NULL, 'g'},
		{"param-dtype", required_argument, NULL, 'p'},
		{"type", required_argument, NULL, 'y'},
		{"isa", required_argument, NULL, 'i'},
		{"iters", required_argument, NULL, 'k'},
		{"numa-node", required_argument, NULL, 'u'},
		{"json", no_argument, NULL, 'j'},
		{"nvme", required_argument, NULL, 'd'},
		{"sub-group", required_argument, NULL, 's'},
		{"io-engine", required_argument, NULL, 'e'},
		{"no-pipeline-read", no_argument, NULL, 'R'},
		{"no-pipeline-write", no_argument, NULL, 'W'},
		{"help", no_argument, NULL, 'h'},
		{0, 0, 0, 0},
	};
	static const char *const isas[] = {"auto", "scalar", "avx2", "avx512"};
	const char *nvme_only = NULL; /* the last flag given that works only with --nvme */
	bool seen[CMD_FLAG_CODES] = {false};
	char *end;
	long v;
	int c;

	zinf_adam_opts_init(&b->opts);
	b->elems = 64ull << 20;
	b->threads = 2;
	b->iters = 10;
	b->grad_name = "bf16";
	b->param_name = "bf16";
	b->grad_dtype = ZINF_DTYPE_BF16;
	b->param_dtype = ZINF_DTYPE_BF16;
	b->sub_group = 4u << 20;
	b->pipeline_read = true;
	b->pipeline_write = true;
	optind = 1;
	opterr = 0; /* one line of our own below */
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cmd_flag_once(seen, longopts, c, (const int[]){'?', 0}, "zinf bench adam"))
			return ZINF_EXIT_USAGE;
		switch (c) {
		case 'n':
			if (zinf_parse_bytes(optarg, &b->elems) || b->elems == 0) {
				fprintf(stderr,
					"zinf bench adam: --elems %s: not a positive count below 2^64 "
					"(expected a whole number: 67108864, 5e7 or 64MiB)\n",
					optarg);
				return ZINF_EXIT_USAGE;
			}
			break;
		case 't':
		case 'k':
		case 'u':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || *end || v < (c == 'u' ? 0 : 1) || v > 1024) {
				fprintf(stderr,
					"zinf bench adam: --%s %s: not an integer in [%d, 1024]\n",
					c == 't'   ? "threads"
					: c == 'k' ? "iters"
						   : "numa-node",
					optarg, c == 'u' ? 0 : 1);
				return ZINF_EXIT_USAGE;
			}
			if (c == 't')
				b->threads = (unsigned)v;
			else if (c == 'k')
				b->iters = (unsigned)v;
			else if (v >= zinf_adam_numa_nodes() && zinf_adam_numa_nodes() > 0) {
				fprintf(stderr,
					"zinf bench adam: --numa-node %s: this process may use NUMA nodes 0 to %d\n",
					optarg, zinf_adam_numa_nodes() - 1);
				return ZINF_EXIT_USAGE;
			} else {
				b->opts.numa_node = (int)v;
			}
			break;
		case 'g':
		case 'p':
			if (parse_dtype(optarg, c == 'g' ? &b->grad_dtype : &b->param_dtype,
					c == 'p')) {
				fprintf(stderr, "zinf bench adam: --%s %s: expected %s\n",
					c == 'g' ? "grad-dtype" : "param-dtype", optarg,
					c == 'g' ? "bf16, fp32 or fp16"
						 : "bf16, fp16, fp32 or none");
				return ZINF_EXIT_USAGE;
			}
			*(c == 'g' ? &b->grad_name : &b->param_name) = optarg;
			break;
		case 'y':
			/* (any case, as the config's optimizer.type) */
			if (strcasecmp(optarg, "AdamW") == 0)
				b->opts.type = ZINF_ADAMW;
			else if (strcasecmp(optarg, "Adam") == 0)
				b->opts.type = ZINF_ADAM;
			else {
				fprintf(stderr,
					"zinf bench adam: --type %s: expected AdamW or Adam\n",
					optarg);
				return ZINF_EXIT_USAGE;
			}
			break;
		case 'i':
			for (v = 0; v < 4 && strcmp(optarg, isas[v]) != 0; v++)
				;
			if (v == 4) {
				fprintf(stderr,
					"zinf bench adam: --isa %s: expected auto, scalar, avx2 or avx512\n",
					optarg);
				return ZINF_EXIT_USAGE;
			}
			b->opts.isa = (enum zinf_adam_isa)v;
			break;
		case 'j':
			b->json = true;
			break;
		case 'd':
			if (!optarg[0]) {
				fprintf(stderr,
					"zinf bench adam: --nvme '': expected a directory\n");
				return ZINF_EXIT_USAGE;
			}
			b->nvme_dir = optarg;
			break;
		case 's':
			nvme_only = "--sub-group";
			if (zinf_parse_bytes(optarg, &b->sub_group) || b->sub_group == 0) {
				fprintf(stderr,
					"zinf bench adam: --sub-group %s: not a positive count\n",
					optarg);
				return ZINF_EXIT_USAGE;
			}
			break;
		case 'e':
			nvme_only = "--io-engine";
			if (zinf_io_parse_engine(optarg, &b->io_engine)) {
				fprintf(stderr,
					"zinf bench adam: --io-engine %s: expected auto, io_uring, libaio or psync\n",
					optarg);
				return ZINF_EXIT_USAGE;
			}
			break;
		case 'R':
			nvme_only = "--no-pipeline-read";
			b->pipeline_read = false;
			break;
		case 'W':
			nvme_only = "--no-pipeline-write";
			b->pipeline_write = false;
			break;
		case 'h':
			fputs(bench_adam_usage, stdout);
			return -1;
		default:
			fprintf(stderr,
				"zinf bench adam: %s: unknown or incomplete option (see zinf bench adam --help)\n",
				cmd_bad_flag(argv, argc));
			return ZINF_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zinf bench adam: unexpected argument '%s'\n", argv[optind]);
		return ZINF_EXIT_USAGE;
	}
	if (!b->nvme_dir && nvme_only) { /* they would be ignored */
		fprintf(stderr, "zinf bench adam: %s: needs --nvme DIR\n", nvme_only);
		return ZINF_EXIT_USAGE;
	}
	if (b->nvme_dir) {
		struct stat st;

		if (stat(b->nvme_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "zinf bench adam: --nvme %s: %s\n", b->nvme_dir,
				stat(b->nvme_dir, &st) != 0 ? strerror(errno) : "not a directory");
			return ZINF_EXIT_USAGE;
		}
	}
	b->opts.threads = b->threads;
	return 0;
}

struct bench_result {
	double adam_best_s, adam_median_s, triad_best_s, triad_median_s;
};

/* The triad's three arrays and threads. */
struct triad {
	double *a, *b, *c; /* (n) each */
	uint64_t n;
	unsigned threads;
	struct triad_job *jobs; /* (threads) */
	pthread_t *tids;	/* (threads) */
};

static void triad_free(struct triad *t)
{
	free(t->tids);
	free(t->jobs);
	free(t->c);
	free(t->b);
	free(t->a);
}

static int triad_init(struct triad *t, uint64_t n, unsigned threads)
{
	*t = (struct triad){buffer_alloc(n * 8),
			    buffer_alloc(n * 8),
			    buffer_alloc(n * 8),
			    n,
			    threads,
			    calloc(threads, sizeof(*t->jobs)),
			    calloc(threads, sizeof(*t->tids))};
	if (!t->a || !t->b || !t->c || !t->jobs || !t->tids) {
		fprintf(stderr, "zinf bench adam: cannot allocate 3 x %llu bytes for the triad\n",
			(unsigned long long)n * 8);
		triad_free(t);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < n; i++) {
		t->a[i] = 0.0;
		t->b[i] = 1.0;
		t->c[i] = 2.0;
	}
	return 0;
}

/* The step's buffers: one shard of n parameters. */
struct step {
	struct zinf_adam_shard shard;
	struct zinf_adam_step_info info;
};

static void step_free(struct step *s)
{
	free(s->shard.param_out);
	free((void *)s->shard.grad);
	free(s->shard.exp_avg_sq);
	free(s->shard.exp_avg);
	free(s->shard.master);
}

static int step_init(struct step *s, const struct bench_args *b)
{
	uint64_t n = b->elems;
	float *p = buffer_alloc(n * 4), *m = buffer_alloc(n * 4), *v = buffer_alloc(n * 4);
	void *g = buffer_alloc(n * dtype_bytes(b->grad_dtype));
	void *out = b->param_dtype ? buffer_alloc(n * dtype_bytes(b->param_dtype)) : NULL;

	s->shard = (struct zinf_adam_shard){p, m, v, g, out, b->grad_dtype, b->param_dtype, n};
	s->info = (struct zinf_adam_step_info){.step = 1, .lr = 1e-3, .grad_scale = 1.0f};
	if (!p || !m || !v || !g || (b->param_dtype && !out)) {
		fprintf(stderr,
			"zinf bench adam: cannot allocate the optimizer state of %llu elements\n",
			(unsigned long long)n);
		step_free(s);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < n; i++) {
		float x = (float)((i * 2654435761u) & 0xffff) / 65536.0f - 0.5f;

		p[i] = x;
		m[i] = 0.0f;
		v[i] = 0.0f;
		if (b->grad_dtype == ZINF_DTYPE_F32)
			((float *)g)[i] = x * 1e-2f;
		else /* 0x3c00 is 1.0 in fp16 and 2^-7 + 1 in bf16: a normal grad in either */
			((uint16_t *)g)[i] = (uint16_t)(0x3c00u + (i & 0xff));
		if (out)
			((uint16_t *)out)[i] = 0;
	}
	return 0;
}

/* One timed step; returns seconds, or < 0 after printing the error. */
static double step_run(struct step *s, struct zinf_adam *adam)
{
	double t0 = now_s();

	if (zinf_adam_step(adam, &s->shard, &s->info)) {
		fprintf(stderr, "zinf bench adam: %s\n", zinf_adam_last_error(adam));
		return -1;
	}
	s->info.step++;
	return now_s() - t0;
}

/* Step and triad alternate, one run each per round after a warm-up round, so that
 * whatever else the machine does weighs on both alike. */
static int bench_rounds(const struct bench_args *b, struct zinf_adam *adam, struct step *s,
			struct triad *t, double *step_times, double *triad_times)
{
	for (unsigned k = 0; k <= b->iters; k++) {
		double ts = step_run(s, adam);
		double tt = triad_run(t->a, t->b, t->c, t->n, t->threads, t->jobs, t->tids);

		if (ts < 0)
			return -1;
		if (tt < 0) {
			fprintf(stderr, "zinf bench adam: cannot start triad threads\n");
			return -1;
		}
		if (k > 0) {
			step_times[k - 1] = ts;
			triad_times[k - 1] = tt;
		}
	}
	if (t->a[t->n / 2] != 7.0) { /* 1 + 3 * 2: the loop really ran */
		fprintf(stderr, "zinf bench adam: triad produced a wrong value\n");
		return -1;
	}
	return 0;
}

/* ---- --nvme: the pipelined NVMe step against the drive ---------------------------- */

/* The drive probe: one extent per sub-group in the same I/O handle (so in the same
 * files), read and written with one request of the step's size per sub-group, with as
 * many requests in flight as the step has buffers. */
struct nvme_probe {
	struct zinf_io *io;
	uint64_t n;	   /* sub-groups */
	uint32_t *extents; /* (n) */
	uint64_t *bytes;   /* (n) request bytes of each sub-group */
	unsigned depth;	   /* requests in flight */
	char *bufs[3];	   /* (depth) buffers of the step's buffer size, aligned */
	struct zinf_io_req reqs[3];
};

static void probe_free(struct nvme_probe *p)
{
	for (uint64_t i = 0; p->extents && i < p->n; i++) {
		if (p->extents[i] != UINT32_MAX)
			zinf_io_extent_free(p->io, p->extents[i]);
	}
	for (unsigned k = 0; k < 3; k++)
		free(p->bufs[k]);
	free(p->bytes);
	free(p->extents);
}

static int probe_init(struct nvme_probe *p, struct zinf_io *io, struct zinf_adam_nvme *h)
{
	struct zinf_adam_nvme_info info;
	uint64_t align = zinf_io_alignment(io) > 4096 ? zinf_io_alignment(io) : 4096;

	zinf_adam_nvme_get_info(h, &info);
	*p = (struct nvme_probe){.io = io, .n = info.n_sub_groups, .depth = info.n_buffers};
	p->extents = malloc(p->n * sizeof(*p->extents));
	p->bytes = malloc(p->n * sizeof(*p->bytes));
	if (!p->extents || !p->bytes)
		goto out_nomem;
	for (uint64_t i = 0; i < p->n; i++)
		p->extents[i] = UINT32_MAX;
	for (unsigned k = 0; k < p->depth; k++) {
		if (posix_memalign((void **)&p->bufs[k], align, info.buffer_bytes))
			goto out_nomem;
		memset(p->bufs[k], 0x5a, info.buffer_bytes);
	}
	for (uint64_t i = 0; i < p->n; i++) {
		zinf_adam_nvme_sub_group(h, i, NULL, NULL, &p->bytes[i]);
		if (zinf_io_extent_alloc(io, info.extent_bytes, &p->extents[i])) {
			fprintf(stderr, "zinf bench adam: drive probe extent %llu: %s\n",
				(unsigned long long)i, zinf_io_last_error(io));
			p->extents[i] = UINT32_MAX;
			return -1;
		}
	}
	return 0;
out_nomem:
	fprintf(stderr, "zinf bench adam: out of memory for the drive probe\n");
	return -1;
}

/* One pass over every probe extent in op; returns seconds, or < 0 after printing. */
static double probe_pass(struct nvme_probe *p, enum zinf_io_op op)
{
	struct zinf_io_req *done[3];
	uint64_t next = 0, finished = 0;
	unsigned free_mask = (1u << p->depth) - 1;
	double t0 = now_s();

	while (finished < p->n) {
		while (free_mask && next < p->n) {
			unsigned k = (unsigned)__builtin_ctz(free_mask);
			struct zinf_io_req *r = &p->reqs[k];

			*r = (struct zinf_io_req){.op = op,
						  .extent = p->extents[next],
						  .len = p->bytes[next],
						  .buf = p->bufs[k]};
			if (zinf_io_submit(p->io, &r, 1)) {
				fprintf(stderr, "zinf bench adam: drive probe: %s\n",
					zinf_io_last_error(p->io));
				zinf_io_drain(p->io);
				return -1;
			}
			free_mask &= ~(1u << k);
			next++;
		}
		int got = zinf_io_wait(p->io, done, 1, 3, -1);

		for (int i = 0; i < got; i++) {
			if (done[i]->status) {
				fprintf(stderr, "zinf bench adam: drive probe: %s\n",
					done[i]->error);
				zinf_io_drain(p->io);
				return -1;
			}
			free_mask |= 1u << (unsigned)(done[i] - p->reqs);
			finished++;
		}
	}
	return now_s() - t0;
}

struct nvme_times {
	double *step, *update, *read, *write; /* (iters) each */
};

static volatile sig_atomic_t bench_stop;

/* SIGINT, SIGTERM (--nvme): the rounds end after the one under way and the run
 * directory is removed. */
static void on_stop(int sig)
{
	__atomic_store_n(&bench_stop, sig, __ATOMIC_RELAXED);
}

static int stopped(void)
{
	return __atomic_load_n(&bench_stop, __ATOMIC_RELAXED);
}

/* Alternate step, read pass and write pass, one each per round after a warm-up round.
 * Like the step, which reads what the step before wrote, a read pass reads what the
 * previous round wrote; the warm-up round's read pass (of never-written, preallocated
 * blocks, which cost the drive nothing) is not counted. */
static int nvme_rounds(const struct bench_args *b, struct zinf_adam_nvme *h, struct step *s,
		       struct nvme_probe *p, struct nvme_times *t)
{
	struct zinf_adam_nvme_bufs bufs = {.grad = s->shard.grad,
					   .param_out = s->shard.param_out,
					   .grad_dtype = b->grad_dtype,
					   .param_dtype = b->param_dtype};

	for (unsigned k = 0; k <= b->iters && !stopped(); k++) {
		struct zinf_adam_nvme_result r;
		double tw, tr;

		if (zinf_adam_nvme_step(h, &bufs, &s->info, &r)) {
			fprintf(stderr, "zinf bench adam: NVMe step %llu: %s\n",
				(unsigned long long)s->info.step, zinf_adam_nvme_last_error(h));
			return -1;
		}
		s->info.step++;
		tr = probe_pass(p, ZINF_IO_READ);
		tw = tr < 0 ? -1 : probe_pass(p, ZINF_IO_WRITE);
		if (tw < 0)
			return -1;
		if (k > 0) {
			t->step[k - 1] = r.seconds;
			t->update[k - 1] = r.update_seconds;
			t->write[k - 1] = tw;
			t->read[k - 1] = tr;
		}
	}
	return 0;
}

static double median_of(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static void nvme_report(const struct bench_args *b, struct zinf_adam *adam, struct zinf_io *io,
			const struct zinf_adam_nvme_info *info, struct nvme_times *t)
{
	double step_best, step_s, update_s, rbw, wbw, bound;

	step_s = median_of(t->step, b->iters);
	step_best = t->step[0];
	update_s = median_of(t->update, b->iters);
	rbw = (double)info->step_read_bytes / median_of(t->read, b->iters);
	wbw = (double)info->step_write_bytes / median_of(t->write, b->iters);
	bound = (double)info->step_read_bytes / rbw + (double)info->step_write_bytes / wbw;
	if (b->json) {
		printf("{\"bench\": \"adam\", \"mode\": \"nvme\", \"type\": \"%s\", \"isa\": \"%s\", "
		       "\"elems\": %llu, \"threads\": %u, \"grad_dtype\": \"%s\", "
		       "\"param_dtype\": \"%s\", \"iters\": %u, \"io_engine\": \"%s\", "
		       "\"sub_group_size\": %llu, \"n_sub_groups\": %llu, \"pipeline_read\": %s, "
		       "\"pipeline_write\": %s, \"pinned_buffers\": %u, \"pinned_bytes\": %llu, "
		       "\"nvme_read_bytes\": %llu, \"nvme_write_bytes\": %llu, "
		       "\"nvme_step_seconds\": %.6f, \"nvme_step_seconds_best\": %.6f, "
		       "\"nvme_update_seconds\": %.6f, \"nvme_read_bytes_per_second\": %.4e, "
		       "\"nvme_write_bytes_per_second\": %.4e, \"nvme_bound_seconds\": %.6f, "
		       "\"nvme_step_to_bound\": %.4f, \"params_per_second\": %.4e}\n",
		       b->opts.type == ZINF_ADAMW ? "AdamW" : "Adam", zinf_adam_isa_name(adam),
		       (unsigned long long)b->elems, b->threads, b->grad_name, b->param_name,
		       b->iters, zinf_io_engine_name(io), (unsigned long long)info->sub_group_size,
		       (unsigned long long)info->n_sub_groups, b->pipeline_read ? "true" : "false",
		       b->pipeline_write ? "true" : "false", info->n_buffers,
		       (unsigned long long)(info->n_buffers * info->buffer_bytes),
		       (unsigned long long)info->step_read_bytes,
		       (unsigned long long)info->step_write_bytes, step_s, step_best, update_s, rbw,
		       wbw, bound, step_s / bound, (double)b->elems / step_s);
		return;
	}
	printf("adam NVMe step (%s, %s, %u threads, grads %s, param copy %s): %llu elems in %llu "
	       "sub-group%s of %llu, %s, %u pinned buffers of %.1f MiB\n",
	       b->opts.type == ZINF_ADAMW ? "AdamW" : "Adam", zinf_adam_isa_name(adam), b->threads,
	       b->grad_name, b->param_name, (unsigned long long)b->elems,
	       (unsigned long long)info->n_sub_groups, info->n_sub_groups == 1 ? "" : "s",
	       (unsigned long long)info->sub_group_size, zinf_io_engine_name(io), info->n_buffers,
	       (double)info->buffer_bytes / 1048576.0);
	printf("  step      %9.1f ms median (best %.1f ms, update %.1f ms): %.2f GB read + %.2f "
	       "GB written\n",
	       step_s * 1e3, step_best * 1e3, update_s * 1e3, (double)info->step_read_bytes * 1e-9,
	       (double)info->step_write_bytes * 1e-9);
	printf("  drive     read %.2f GB/s, write %.2f GB/s (medians, same files and requests)\n",
	       rbw * 1e-9, wbw * 1e-9);
	printf("  bound     %9.1f ms = read / read bandwidth + written / write bandwidth\n",
	       bound * 1e3);
	printf("  step / bound: %.3f (%.1f%% of what the drive allows)\n", step_s / bound,
	       100.0 * bound / step_s);
}

static int bench_adam_nvme(struct bench_args *b)
{
	struct zinf_io_opts io_opts;
	struct zinf_adam_nvme_opts no;
	struct zinf_adam_nvme_info info;
	struct zinf_io *io = NULL;
	struct zinf_adam *adam = NULL;
	struct zinf_adam_nvme *h = NULL;
	struct nvme_probe probe = {0};
	struct nvme_times t;
	struct step s;
	double *times;
	char err[512];
	int rc = ZINF_EXIT_FAIL;

	cmd_catch_stop_signals(on_stop);
	zinf_io_opts_init(&io_opts);
	io_opts.nvme_paths[0] = b->nvme_dir;
	io_opts.n_paths = 1;
	io_opts.engine = b->io_engine;
	io_opts.run_dir_name = "zinf-bench-adam";
	if (zinf_io_create(&io_opts, &io, err, sizeof(err))) {
		fprintf(stderr, "zinf bench adam: --nvme %s: %s\n", b->nvme_dir, err);
		return ZINF_EXIT_FAIL;
	}
	times = calloc(4 * (size_t)b->iters, sizeof(*times));
	t = (struct nvme_times){times, times + b->iters, times + 2 * b->iters,
				times + 3 * b->iters};
	if (!times || step_init(&s, b))
		goto out_io;
	if (zinf_adam_create(&adam, &b->opts)) {
		fprintf(stderr, "zinf bench adam: cannot create the optimizer\n");
		goto out_step;
	}
	zinf_adam_nvme_opts_init(&no);
	no.adam = adam;
	no.io = io;
	no.n_elems = b->elems;
	no.sub_group_size = b->sub_group;
	no.pipeline_read = b->pipeline_read;
	no.pipeline_write = b->pipeline_write;
	if (zinf_adam_nvme_create(&no, &h, err, sizeof(err))) {
		fprintf(stderr, "zinf bench adam: %s\n", err);
		goto out_adam;
	}
	if (zinf_adam_nvme_write_state(h, s.shard.master, s.shard.exp_avg, s.shard.exp_avg_sq)) {
		fprintf(stderr, "zinf bench adam: writing the initial state: %s\n",
			zinf_adam_nvme_last_error(h));
		goto out_nvme;
	}
	zinf_adam_nvme_get_info(h, &info);
	if (probe_init(&probe, io, h) || nvme_rounds(b, h, &s, &probe, &t) || stopped())
		goto out_probe;
	nvme_report(b, adam, io, &info, &t);
	rc = ZINF_EXIT_OK;
out_probe:
	probe_free(&probe);
out_nvme:
	zinf_adam_nvme_destroy(h);
out_adam:
	zinf_adam_destroy(adam);
out_step:
	step_free(&s);
out_io:
	free(times);
	zinf_io_destroy(io); /* removes the run directory and its files */
	if (stopped()) {     /* now end by the signal, as zinf train does */
		int sig = stopped();

		fprintf(stderr, "zinf bench adam: stopped (asked to stop); its run directory "
				"removed\n");
		fflush(NULL);
		raise(sig);
		return 128 + sig;
	}
	return rc;
}

int bench_adam(int argc, char **argv)
{
	struct bench_args b = {0};
	struct bench_result r;
	struct zinf_adam *adam = NULL;
	struct step step;
	struct triad triad;
	double *times;
	uint64_t bytes_per_param, triad_n;
	double adam_bw, triad_bw, params_per_s;
	int rc;

	rc = parse_args(argc, argv, &b);
	if (rc)
		return rc < 0 ? ZINF_EXIT_OK : rc;
	if (b.nvme_dir)
		return bench_adam_nvme(&b);
	bytes_per_param = 24 + dtype_bytes(b.grad_dtype) + dtype_bytes(b.param_dtype);
	rc = zinf_adam_create(&adam, &b.opts);
	if (rc) {
		fprintf(stderr, "zinf bench adam: cannot create the optimizer: %s\n",
			zinf_strerror(rc));
		return ZINF_EXIT_FAIL;
	}
	/* The triad's arrays are as long as the shard, in doubles (and at least 16M
	 * elements): far beyond any last-level cache. */
	triad_n = b.elems < (16u << 20) ? (16u << 20) : b.elems;
	times = calloc(2 * (size_t)b.iters, sizeof(*times));
	rc = ZINF_EXIT_FAIL;
	if (!times)
		goto out_adam;
	if (step_init(&step, &b))
		goto out_times;
	if (triad_init(&triad, triad_n, b.threads))
		goto out_step;
	if (bench_rounds(&b, adam, &step, &triad, times, times + b.iters))
		goto out_triad;
	qsort(times, b.iters, sizeof(*times), cmp_double);
	qsort(times + b.iters, b.iters, sizeof(*times), cmp_double);
	r.adam_best_s = times[0];
	r.adam_median_s = times[b.iters / 2];
	r.triad_best_s = times[b.iters];
	r.triad_median_s = times[b.iters + b.iters / 2];

	params_per_s = (double)b.elems / r.adam_best_s;
	adam_bw = params_per_s * (double)bytes_per_param;
	triad_bw = 24.0 * (double)triad_n / r.triad_best_s;
	if (b.json) {
		printf("{\"bench\": \"adam\", \"type\": \"%s\", \"isa\": \"%s\", \"elems\": %llu, "
		       "\"threads\": %u, \"grad_dtype\": \"%s\", \"param_dtype\": \"%s\", "
		       "\"iters\": %u, \"bytes_per_param\": %llu, \"step_seconds\": %.6f, "
		       "\"step_seconds_median\": %.6f, \"params_per_second\": %.4e, "
		       "\"bytes_per_second\": %.4e, \"triad_elems\": %llu, "
		       "\"triad_bytes_per_second\": %.4e, \"triad_bytes_per_second_median\": %.4e, "
		       "\"ratio_to_triad\": %.4f}\n",
		       b.opts.type == ZINF_ADAMW ? "AdamW" : "Adam", zinf_adam_isa_name(adam),
		       (unsigned long long)b.elems, b.threads, b.grad_name, b.param_name, b.iters,
		       (unsigned long long)bytes_per_param, r.adam_best_s, r.adam_median_s,
		       params_per_s, adam_bw, (unsigned long long)triad_n, triad_bw,
		       24.0 * (double)triad_n / r.triad_median_s, adam_bw / triad_bw);
	} else {
		printf("adam step (%s, %s, %u threads, grads %s, param copy %s): %llu elems\n",
		       b.opts.type == ZINF_ADAMW ? "AdamW" : "Adam", zinf_adam_isa_name(adam),
		       b.threads, b.grad_name, b.param_name, (unsigned long long)b.elems);
		printf("  step      %9.3f ms  %8.3f Gparams/s  %7.2f GB/s (%llu B/param; median "
		       "%.3f ms)\n",
		       r.adam_best_s * 1e3, params_per_s * 1e-9, adam_bw * 1e-9,
		       (unsigned long long)bytes_per_param, r.adam_median_s * 1e3);
		printf("  triad     %9.3f ms  %28.2f GB/s (24 B/elem, %llu elems)\n",
		       r.triad_best_s * 1e3, triad_bw * 1e-9, (unsigned long long)triad_n);
		printf("  step / triad bandwidth: %.1f%%\n", 100.0 * adam_bw / triad_bw);
	}
	rc = ZINF_EXIT_OK;
out_triad:
	triad_free(&triad);
out_step:
	step_free(&step);
out_times:
	free(times);
out_adam:
	zinf_adam_destroy(adam);
	return rc;
}

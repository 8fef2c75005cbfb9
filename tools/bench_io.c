/*
 * zinf bench io: NVMe read/write bandwidth and IOPS through the zinf I/O layer, the way
 * fio measures it: one file (or an extent in a run directory), --bs requests kept --qd
 * deep per lane, O_DIRECT, timed over --loops passes; min/median/max are printed.
 * --sweep runs a ds_nvme_tune-like grid over block size x queue depth x threads x
 * engine and prints the best `aio` block as JSON.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "zinf/config.h"
#include "zinf/error.h"
#include "zinf/io.h"
#include "zinf/log.h"

const char bench_io_usage[] =
	"usage: zinf bench io (--file PATH | --dir PATH[,PATH...]) [options]\n"
	"Measure NVMe bandwidth and IOPS through the zinf I/O layer (O_DIRECT).\n"
	"  --file PATH        benchmark this file (created and filled when missing or short;\n"
	"                     kept afterwards, so fio can be run on the same file); one\n"
	"                     with data is overwritten (a write mode, --sweep, or filled\n"
	"                     when short) only with --force\n"
	"  --dir PATH[,...]   use an extent in a run directory under each path (striped;\n"
	"                     removed afterwards, and when SIGINT or SIGTERM stops it)\n"
	"  --size BYTES       bytes per pass (default 2GiB; at most 16TiB a --dir path)\n"
	"  --bs BYTES         request size (default 1MiB)\n"
	"  --qd N             requests in flight per thread (default 32)\n"
	"  --rw MODE          read | write | randread | randwrite (default read)\n"
	"  --engine E         auto | io_uring | libaio | psync (default auto)\n"
	"  --threads N        lanes: rings and worker threads (default 1)\n"
	"  --loops N          timed passes (default 3)\n"
	"  --buffered         do not use O_DIRECT\n"
	"  --force            let the benchmark write over --file's data\n"
	"  --json             print one JSON object (bytes_per_second is the median)\n"
	"  --sweep            sweep bs x qd x threads x engine for read and write and print\n"
	"                     the best aio block as JSON (--size and --loops per point;\n"
	"                     medians compared)\n";

struct bench_cfg {
	const char *file;
	char *dirs;
	uint64_t size, bs;
	uint32_t qd, threads, loops;
	const char *rw;
	enum zinf_io_engine engine;
	bool direct, json, sweep, force;
};

struct bench_result {
	double bps_min, bps_med, bps_max; /* bytes per second */
	double iops_med;
	char engine[16];
	bool direct; /* every file did O_DIRECT (a tmpfs one falls back to buffered) */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* SIGINT, SIGTERM: the pass stops resubmitting, the run directories are removed, and
 * the process ends by the signal (its default action back after the first). */
static int bench_stop; /* the signal; lock-free atomics: safe in a handler, across threads */

static void on_stop(int sig)
{
	__atomic_store_n(&bench_stop, sig, __ATOMIC_RELAXED);
}

static int stopped(void)
{
	return __atomic_load_n(&bench_stop, __ATOMIC_RELAXED);
}

struct pass_ctx {
	struct zinf_io *io;
	const uint64_t *order;
	uint64_t n_blocks, bs;
	uint64_t next; /* next index into order (atomic) */
	int status;    /* first error (atomic) */
	char error[192];
};

/* Completion callback (on a lane thread): resubmit the request at the next block, so
 * the queue stays full without a round trip through the main thread. */
static void pass_done(struct zinf_io_req *r)
{
	struct pass_ctx *p = r->user;
	int expected = 0, rc;
	uint64_t i;

	if (r->status) {
		if (__atomic_compare_exchange_n(&p->status, &expected, r->status, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			snprintf(p->error, sizeof(p->error), "%s", r->error);
		return;
	}
	if (stopped() && __atomic_compare_exchange_n(&p->status, &expected, -EINTR, false,
						     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		snprintf(p->error, sizeof(p->error), "stopped (asked to stop)");
	if (__atomic_load_n(&p->status, __ATOMIC_ACQUIRE))
		return;
	i = __atomic_fetch_add(&p->next, 1, __ATOMIC_ACQ_REL);
	if (i >= p->n_blocks)
		return;
	r->offset = p->order[i] * p->bs;
	rc = zinf_io_submit(p->io, &r, 1);
	if (rc && __atomic_compare_exchange_n(&p->status, &expected, rc, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE))
		snprintf(p->error, sizeof(p->error), "%s", zinf_io_last_error(p->io));
}

/* One pass over [0, size): every block once, in order or shuffled, qd x threads deep. */
static int bench_pass(struct zinf_io *io, uint32_t ext, const struct bench_cfg *c,
		      enum zinf_io_op op, bool random, char *bufs, uint64_t *order,
		      struct zinf_io_req *reqs, double *seconds)
{
	struct pass_ctx p = {.io = io, .order = order, .n_blocks = c->size / c->bs, .bs = c->bs};
	uint64_t depth = (uint64_t)c->qd * c->threads;
	struct zinf_io_req *r;
	double t0;
	int rc;

	for (uint64_t i = 0; i < p.n_blocks; i++)
		order[i] = i;
	if (random) {
		for (uint64_t i = p.n_blocks - 1; i > 0; i--) {
			uint64_t j = (uint64_t)rand() % (i + 1), t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
	}
	if (depth > p.n_blocks)
		depth = p.n_blocks;
	p.next = depth;
	t0 = now_s();
	for (uint64_t k = 0; k < depth; k++) {
		reqs[k] = (struct zinf_io_req){.op = op,
					       .extent = ext,
					       .offset = order[k] * c->bs,
					       .len = c->bs,
					       .buf = bufs + k * c->bs,
					       .done = pass_done,
					       .user = &p};
		r = &reqs[k];
		rc = zinf_io_submit(io, &r, 1);
		if (rc) {
			fprintf(stderr, "zinf bench io: %s\n", zinf_io_last_error(io));
			zinf_io_drain(io);
			return rc;
		}
	}
	zinf_io_drain(io);
	*seconds = now_s() - t0;
	if (p.status && p.status != -EINTR) /* (a stop is said once, at the end) */
		fprintf(stderr, "zinf bench io: %s\n", p.error);
	return p.status;
}

/* Open the target, prefill for reads, run the loops. */
static int bench_run(const struct bench_cfg *c, const char *rw, struct bench_result *res)
{
	bool is_read = strstr(rw, "read") != NULL, random = strncmp(rw, "rand", 4) == 0;
	uint64_t n_blocks = c->size / c->bs, depth = (uint64_t)c->qd * c->threads;
	struct zinf_io_opts o;
	struct zinf_io *io = NULL;
	struct zinf_io_req *reqs = NULL;
	uint64_t *order = NULL;
	double secs[c->loops];
	char *bufs = NULL, err[512], *dirs = NULL, *save = NULL;
	uint32_t ext;
	bool made = false; /* --file made by this run, not yet filled */
	int rc;

	if (stopped()) /* (a sweep's next point) */
		return -EINTR;
	if (depth > n_blocks) /* no more in flight than a pass has blocks (bench_pass) */
		depth = n_blocks;
	zinf_io_opts_init(&o);
	o.block_size = c->bs;
	o.queue_depth = c->qd;
	o.intra_op_parallelism = c->threads;
	o.engine = c->engine;
	o.direct = c->direct;
	if (c->dirs) {
		dirs = strdup(c->dirs);
		for (char *t = strtok_r(dirs, ",", &save); t && o.n_paths < ZINF_IO_MAX_PATHS;
		     t = strtok_r(NULL, ",", &save))
			o.nvme_paths[o.n_paths++] = t;
		/* (a file holds its path's share, raised to the I/O layer's least file size;
		 * main refuses a share past its largest) */
		o.file_size = c->size / (uint64_t)o.n_paths + c->bs;
		if (o.file_size < ZINF_IO_MIN_FILE_SIZE)
			o.file_size = ZINF_IO_MIN_FILE_SIZE;
		o.run_dir_name = "zinf-bench-io";
	}
	rc = zinf_io_create(&o, &io, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "zinf bench io: %s\n", err);
		goto out_free;
	}
	snprintf(res->engine, sizeof(res->engine), "%s", zinf_io_engine_name(io));
	if (c->file) {
		struct stat st;
		bool fill;

		made = stat(c->file, &st) != 0;
		fill = made || (uint64_t)st.st_size < c->size;

		rc = zinf_io_extent_open_file(io, c->file, c->size, true, &ext);
		if (rc == 0 && fill && is_read)
			rc = 1; /* prefill below */
	} else {
		rc = zinf_io_extent_alloc(io, c->size, &ext);
		if (rc == 0 && is_read)
			rc = 1;
	}
	if (rc < 0) {
		fprintf(stderr, "zinf bench io: %s\n", zinf_io_last_error(io));
		goto out_destroy;
	}
	res->direct = zinf_io_direct(io);
	bool prefill = rc == 1;

	bufs = aligned_alloc(4096, depth * c->bs);
	reqs = calloc(depth, sizeof(*reqs));
	order = calloc(n_blocks, sizeof(*order));
	if (!bufs || !reqs || !order) {
		rc = -ENOMEM;
		fprintf(stderr, "zinf bench io: out of memory for %llu buffers of %llu bytes\n",
			(unsigned long long)depth, (unsigned long long)c->bs);
		goto out_destroy;
	}
	for (uint64_t i = 0; i < depth * c->bs / 8; i++)
		((uint64_t *)bufs)[i] = i * 0x9E3779B97F4A7C15ull;
	rc = zinf_io_register_buffer(io, bufs, depth * c->bs);
	if (rc)
		zinf_logf(ZINF_LOG_INFO, "zinf bench io: no fixed buffers: %s",
			  zinf_io_last_error(io));
	if (prefill) {
		double s;

		rc = bench_pass(io, ext, c, ZINF_IO_WRITE, false, bufs, order, reqs, &s);
		if (rc)
			goto out_destroy;
		made = false; /* filled: kept for the next run, and for fio */
	}
	for (uint32_t l = 0; l < c->loops; l++) {
		if (stopped()) {
			rc = -EINTR;
			goto out_destroy;
		}
		rc = bench_pass(io, ext, c, is_read ? ZINF_IO_READ : ZINF_IO_WRITE, random, bufs,
				order, reqs, &secs[l]);
		if (rc)
			goto out_destroy;
		made = false; /* a whole pass written (or read after the fill) */
		secs[l] = (double)(n_blocks * c->bs) / secs[l]; /* now bytes per second */
	}
	qsort(secs, c->loops, sizeof(double), cmp_double);
	res->bps_min = secs[0];
	res->bps_max = secs[c->loops - 1];
	res->bps_med = c->loops % 2 ? secs[c->loops / 2]
				    : (secs[c->loops / 2 - 1] + secs[c->loops / 2]) / 2;
	res->iops_med = res->bps_med / (double)c->bs;
	rc = 0;
out_destroy:
	zinf_io_destroy(io);
	/* a file this run made and did not fill would read as fast as holes do next time */
	if (rc && made)
		unlink(c->file);
out_free:
	free(bufs);
	free(reqs);
	free(order);
	free(dirs);
	return rc;
}

static void print_result(const struct bench_cfg *c, const char *rw, const struct bench_result *r)
{
	char size[32], bs[32];

	zinf_format_bytes(c->size, size, sizeof(size));
	zinf_format_bytes(c->bs, bs, sizeof(bs));
	if (c->json) {
		printf("{\"rw\": \"%s\", \"engine\": \"%s\", \"size\": %llu, \"bs\": %llu, "
		       "\"qd\": %u, \"threads\": %u, \"loops\": %u, \"direct\": %s, "
		       "\"bytes_per_second\": %.0f, \"bytes_per_second_min\": %.0f, "
		       "\"bytes_per_second_max\": %.0f, \"iops\": %.1f}\n",
		       rw, r->engine, (unsigned long long)c->size, (unsigned long long)c->bs, c->qd,
		       c->threads, c->loops, r->direct ? "true" : "false", r->bps_med, r->bps_min,
		       r->bps_max, r->iops_med);
		return;
	}
	printf("%s %s, bs %s, qd %u, threads %u, engine %s%s: %.3f GB/s median (min %.3f, max "
	       "%.3f over %u loops), %.0f IOPS\n",
	       rw, size, bs, c->qd, c->threads, r->engine, r->direct ? ", O_DIRECT" : "",
	       r->bps_med / 1e9, r->bps_min / 1e9, r->bps_max / 1e9, c->loops, r->iops_med);
}

/* ds_nvme_tune-like grid; best = highest read + write bandwidth. */
static int bench_sweep(struct bench_cfg c)
{
	static const uint64_t bss[] = {256 << 10, 1 << 20, 4 << 20};
	static const uint32_t qds[] = {8, 32, 64};
	static const uint32_t ths[] = {1, 2};
	static const enum zinf_io_engine engs[] = {ZINF_IO_ENGINE_IO_URING, ZINF_IO_ENGINE_LIBAIO};
	struct bench_result best_r = {0}, best_w = {0}, r, w;
	struct bench_cfg best = c;
	double best_sum = 0;
	int rc;

	c.json = false;
	for (size_t b = 0; b < 3; b++)
		for (size_t q = 0; q < 3; q++)
			for (size_t t = 0; t < 2; t++)
				for (size_t e = 0; e < 2; e++) {
					c.bs = bss[b];
					c.qd = qds[q];
					c.threads = ths[t];
					c.engine = engs[e];
					if (c.size < c.bs * c.qd * c.threads) {
						if (e == 0) /* (once for both engines) */
							fprintf(stderr,
								"sweep: bs %llu qd %u threads %u: skipped (more in flight than --size)\n",
								(unsigned long long)c.bs, c.qd,
								c.threads);
						continue;
					}
					rc = bench_run(&c, "write", &w);
					if (rc == 0)
						rc = bench_run(&c, "read", &r);
					if (rc)
						return rc;
					fprintf(stderr,
						"sweep: bs %llu qd %u threads %u %s: read %.3f GB/s, write %.3f GB/s\n",
						(unsigned long long)c.bs, c.qd, c.threads, r.engine,
						r.bps_med / 1e9, w.bps_med / 1e9);
					if (r.bps_med + w.bps_med > best_sum) {
						best_sum = r.bps_med + w.bps_med;
						best = c;
						best_r = r;
						best_w = w;
					}
				}
	printf("{\"aio\": {\"block_size\": %llu, \"queue_depth\": %u, \"intra_op_parallelism\": "
	       "%u, \"single_submit\": false, \"overlap_events\": true}, \"zinf\": "
	       "{\"io_engine\": \"%s\"}, \"read_bytes_per_second\": %.0f, "
	       "\"write_bytes_per_second\": %.0f}\n",
	       (unsigned long long)best.bs, best.qd, best.threads, best_r.engine, best_r.bps_med,
	       best_w.bps_med);
	return 0;
}

static int parse_u32(const char *opt, const char *text, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || *end || end == text || v == 0 || v > max || text[0] < '0' || text[0] > '9') {
		fprintf(stderr, "zinf bench io: %s %s: expected a whole number from 1 to %u\n", opt,
			text, max);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

/* The paths in --dir's list (check_dirs has checked it). */
static uint64_t dir_count(const char *list)
{
	uint64_t n = 1;

	for (; *list; list++)
		n += *list == ',';
	return n;
}

static int parse_size(const char *opt, const char *text, uint64_t *out)
{
	if (zinf_parse_bytes(text, out) != 0 || *out == 0) {
		fprintf(stderr, "zinf bench io: %s %s: expected a byte size like 2GiB or 1MiB\n",
			opt, text);
		return -EINVAL;
	}
	return 0;
}

/* --dir's list: 1 to ZINF_IO_MAX_PATHS paths, none empty, no directory twice (each gets a
 * run directory of the same name). 0, or -1 after one line on stderr. */
static int check_dirs(const char *list)
{
	static char path[ZINF_IO_MAX_PATHS][4096];
	struct stat st[ZINF_IO_MAX_PATHS];
	const char *p = list;
	int n = 0;

	for (;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == 0 || len >= sizeof(path[0]) || n == ZINF_IO_MAX_PATHS) {
			fprintf(stderr, "zinf bench io: --dir %s: %s\n", list,
				len == 0		 ? "an empty path (expected PATH[,PATH...])"
				: n == ZINF_IO_MAX_PATHS ? "more than 16 paths"
							 : "a path too long");
			return -1;
		}
		memcpy(path[n], p, len);
		path[n][len] = 0;
		if (stat(path[n], &st[n]) != 0) {
			fprintf(stderr, "zinf bench io: --dir %s: %s\n", path[n], strerror(errno));
			return -1;
		}
		if (!S_ISDIR(st[n].st_mode)) {
			fprintf(stderr, "zinf bench io: --dir %s: not a directory\n", path[n]);
			return -1;
		}
		for (int i = 0; i < n; i++) {
			if (st[i].st_dev == st[n].st_dev && st[i].st_ino == st[n].st_ino) {
				fprintf(stderr,
					"zinf bench io: --dir %s: %s and %s are the same directory "
					"(give each once)\n",
					list, path[i], path[n]);
				return -1;
			}
		}
		n++;
		if (!end)
			return 0;
		p = end + 1;
	}
}

/* --file: a regular file, or a new one in an existing directory; one holding data is
 * written over (a write mode, --sweep's writes, or filled to --size when short) only
 * with --force. 0, or -1 after one line on stderr. */
static int check_file(const struct bench_cfg *c)
{
	char parent[4096];
	struct stat st;
	bool writes;

	if (stat(c->file, &st) != 0) {
		snprintf(parent, sizeof(parent), "%s", c->file);
		if (errno != ENOENT || stat(dirname(parent), &st) || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "zinf bench io: --file %s: cannot be made (%s)\n", c->file,
				errno == ENOENT ? "no such directory" : strerror(errno));
			return -1;
		}
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "zinf bench io: --file %s: not a regular file\n", c->file);
		return -1;
	}
	writes = c->sweep || strstr(c->rw, "write") || (uint64_t)st.st_size < c->size;
	if (st.st_size > 0 && writes && !c->force) {
		fprintf(stderr,
			"zinf bench io: --file %s: holds %lld bytes that the benchmark would write over (%s; --force allows it)\n",
			c->file, (long long)st.st_size,
			c->sweep		 ? "--sweep writes"
			: strstr(c->rw, "write") ? "a write mode"
						 : "shorter than --size, so filled");
		return -1;
	}
	return 0;
}

int bench_io(int argc, char **argv)
{
	static const struct option longopts[] = {{"file", required_argument, NULL, 'f'},
						 {"dir", required_argument, NULL, 'd'},
						 {"size", required_argument, NULL, 's'},
						 {"bs", required_argument, NULL, 'b'},
						 {"qd", required_argument, NULL, 'q'},
						 {"rw", required_argument, NULL, 'r'},
						 {"engine", required_argument, NULL, 'e'},
						 {"threads", required_argument, NULL, 't'},
						 {"loops", required_argument, NULL, 'l'},
						 {"json", no_argument, NULL, 'j'},
						 {"sweep", no_argument, NULL, 'S'},
						 {"buffered", no_argument, NULL, 'B'},
						 {"force", no_argument, NULL, 'F'},
						 {"help", no_argument, NULL, 'h'},
						 {NULL, 0, NULL, 0}};
	struct bench_cfg c = {.size = 2ull << 30,
			      .bs = 1 << 20,
			      .qd = 32,
			      .threads = 1,
			      .loops = 3,
			      .rw = "read",
			      .direct = true};
	struct bench_result r;
	bool seen[CMD_FLAG_CODES] = {false};
	int opt, rc = 0;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cmd_flag_once(seen, longopts, opt, (const int[]){'?', 0}, "zinf bench io"))
			return ZINF_EXIT_USAGE;
		switch (opt) {
		case 'f':
			c.file = optarg;
			break;
		case 'd':
			c.dirs = optarg;
			break;
		case 's':
			rc = parse_size("--size", optarg, &c.size);
			break;
		case 'b':
			rc = parse_size("--bs", optarg, &c.bs);
			break;
		case 'q':
			rc = parse_u32("--qd", optarg, ZINF_IO_MAX_QUEUE_DEPTH, &c.qd);
			break;
		case 't':
			rc = parse_u32("--threads", optarg, ZINF_IO_MAX_PARALLELISM, &c.threads);
			break;
		case 'l':
			rc = parse_u32("--loops", optarg, 65536, &c.loops);
			break;
		case 'r':
			c.rw = optarg;
			if (strcmp(c.rw, "read") && strcmp(c.rw, "write") &&
			    strcmp(c.rw, "randread") && strcmp(c.rw, "randwrite")) {
				fprintf(stderr,
					"zinf bench io: --rw %s: expected read, write, randread or randwrite\n",
					c.rw);
				rc = -EINVAL;
			}
			break;
		case 'e':
			if (zinf_io_parse_engine(optarg, &c.engine)) {
				fprintf(stderr,
					"zinf bench io: --engine %s: expected auto, io_uring, libaio or psync\n",
					optarg);
				rc = -EINVAL;
			}
			break;
		case 'j':
			c.json = true;
			break;
		case 'S':
			c.sweep = true;
			break;
		case 'B':
			c.direct = false;
			break;
		case 'F':
			c.force = true;
			break;
		case 'h':
			fputs(bench_io_usage, stdout);
			return ZINF_EXIT_OK;
		default:
			fprintf(stderr,
				"zinf bench io: %s: unknown or incomplete option (see zinf bench io --help)\n",
				cmd_bad_flag(argv, argc));
			return ZINF_EXIT_USAGE;
		}
		if (rc)
			return ZINF_EXIT_USAGE;
	}
	if (optind < argc) {
		fprintf(stderr, "zinf bench io: %s: unexpected argument\n", argv[optind]);
		return ZINF_EXIT_USAGE;
	}
	if (!c.file == !c.dirs) {
		fprintf(stderr, "zinf bench io: give exactly one of --file PATH or --dir PATH\n");
		return ZINF_EXIT_USAGE;
	}
	if (c.dirs && check_dirs(c.dirs))
		return ZINF_EXIT_USAGE;
	if (c.file && check_file(&c))
		return ZINF_EXIT_USAGE;
	if (c.bs % 4096 || c.bs < 4096 || c.bs > (1ull << 30)) {
		fprintf(stderr,
			"zinf bench io: --bs %llu: expected a multiple of 4KiB up to 1GiB\n",
			(unsigned long long)c.bs);
		return ZINF_EXIT_USAGE;
	}
	if (!c.sweep && (c.size % c.bs || c.size < c.bs)) {
		fprintf(stderr, "zinf bench io: --size %llu: expected a multiple of --bs %llu\n",
			(unsigned long long)c.size, (unsigned long long)c.bs);
		return ZINF_EXIT_USAGE;
	}
	if (c.dirs && c.size / dir_count(c.dirs) > ZINF_IO_MAX_FILE_SIZE - c.bs) {
		fprintf(stderr,
			"zinf bench io: --size %llu: expected at most 16TiB for each --dir path\n",
			(unsigned long long)c.size);
		return ZINF_EXIT_USAGE;
	}
	if (c.sweep) {
		c.size = c.size / (4 << 20) * (4 << 20);
		if (c.size == 0) {
			fprintf(stderr, "zinf bench io: --sweep needs --size of at least 4MiB\n");
			return ZINF_EXIT_USAGE;
		}
	}
	cmd_catch_stop_signals(on_stop);
	rc = c.sweep ? bench_sweep(c) : bench_run(&c, c.rw, &r);
	if (stopped()) { /* the handle is destroyed: its run directories are gone */
		int sig = stopped();

		fprintf(stderr, "zinf bench io: stopped (asked to stop)%s\n",
			c.dirs ? "; its run directories removed" : "");
		fflush(NULL);
		raise(sig);
		return 128 + sig;
	}
	if (rc)
		return ZINF_EXIT_FAIL;
	if (!c.sweep)
		print_result(&c, c.rw, &r);
	return ZINF_EXIT_OK;
}

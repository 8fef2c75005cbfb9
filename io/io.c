/*
 * The I/O handle: options, creation and destruction (lanes, backend choice, run
 * directories), pinned-buffer registration, counters, and the test-only fault hook.
 * The request path (splitting into pieces, lane workers, completion) is io_request.c.
 *
 * A request lives on the shared queue until every piece has been handed to a lane; a
 * lane worker takes pieces into its free slots, queues them on its backend, submits and
 * reaps. The last piece to finish completes the request: verify or record its CRC32C,
 * then call its callback or append it to the done list for poll/wait.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io_internal.h"
#include "thread_error.h"
#include "zinf/crc32c.h"
#include "zinf/error.h"
#include "zinf/log.h"

static const char *const engine_names[] = {"auto", "io_uring", "libaio", "psync"};

uint64_t io_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The calling thread's last I/O error (thread_error.h: the model's thread, the store's
 * mover, the optimizer's thread and the gradient worker call one handle at once). */
static __thread struct zinf_thread_error last_error;

static void set_errorv(struct zinf_io *io, const char *fmt, va_list ap)
{
	zinf_thread_error_vset(&last_error, io, io ? io->err_serial : 0, fmt, ap);
}

void io_set_error(struct zinf_io *io, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_errorv(io, fmt, ap);
	va_end(ap);
	zinf_logf(ZINF_LOG_DEBUG, "zinf io: %s", last_error.msg);
}

static void take_error(struct zinf_io *io, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void take_error(struct zinf_io *io, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_errorv(io, fmt, ap);
	va_end(ap);
}

void io_take_error(struct zinf_io *io, const char *msg)
{
	take_error(io, "%s", msg);
}

const char *zinf_io_last_error(struct zinf_io *io)
{
	return zinf_thread_error_get(&last_error, io, io ? io->err_serial : 0);
}

const char *zinf_io_engine_name(const struct zinf_io *io)
{
	return io ? io->ops->name : "none";
}

bool zinf_io_direct(const struct zinf_io *io)
{
	return io && io->opts.direct && !io->warned_direct;
}

uint64_t zinf_io_alignment(const struct zinf_io *io)
{
	return io ? io->align : 0;
}

enum zinf_io_checksum zinf_io_checksum_kind(const struct zinf_io *io)
{
	return io ? io->opts.checksum : ZINF_IO_CHECKSUM_NONE;
}

int zinf_io_parse_engine(const char *text, enum zinf_io_engine *out)
{
	for (int i = 0; text && out && i < 4; i++) {
		if (strcmp(text, engine_names[i]) == 0) {
			*out = (enum zinf_io_engine)i;
			return 0;
		}
	}
	return -EINVAL;
}

void zinf_io_opts_init(struct zinf_io_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->block_size = 1ull << 20;
	opts->queue_depth = 8;
	opts->intra_op_parallelism = 1;
	opts->single_submit = false;
	opts->overlap_events = true;
	opts->engine = ZINF_IO_ENGINE_AUTO;
	opts->checksum = ZINF_IO_CHECKSUM_NONE;
	opts->run_dir_name = "zinf-run";
	opts->direct = true;
	opts->file_size = 1ull << 30;
	opts->stripe_unit = 0; /* block_size */
}

/* ---- fault hook ------------------------------------------------------------------ */

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	enum io_fault_kind kind;
	int count, err;
	int pass; /* matching pieces let through before the count starts */
	uint64_t short_bytes;
	unsigned op_mask;
} fault;
static int fault_armed; /* fast check without the lock */

void zinf_io_fault_set(enum io_fault_kind kind, int count, int err, uint64_t short_bytes,
		       unsigned op_mask)
{
	pthread_mutex_lock(&fault_lock);
	fault.kind = kind;
	fault.count = count;
	fault.err = err;
	fault.short_bytes = short_bytes;
	fault.op_mask = op_mask;
	fault.pass = 0;
	__atomic_store_n(&fault_armed, count > 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fault_lock);
}

void zinf_io_fault_pass(int n)
{
	pthread_mutex_lock(&fault_lock);
	fault.pass = n;
	pthread_mutex_unlock(&fault_lock);
}

void zinf_io_fault_clear(void)
{
	zinf_io_fault_set(IO_FAULT_NONE, 0, 0, 0, 0);
}

bool io_fault_take(enum io_fault_kind kind, int op, int *err, uint64_t *short_bytes)
{
	bool fire = false;

	if (!__atomic_load_n(&fault_armed, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&fault_lock);
	if (fault.kind == kind && fault.count > 0 &&
	    (kind == IO_FAULT_NO_DIRECT || kind == IO_FAULT_ENGINE || kind == IO_FAULT_NOSPACE ||
	     kind == IO_FAULT_LOCK_GONE || (fault.op_mask & (1u << op)))) {
		if (fault.pass > 0) {
			fault.pass--;
			pthread_mutex_unlock(&fault_lock);
			return false;
		}
		fault.count--;
		if (err)
			*err = fault.err;
		if (short_bytes)
			*short_bytes = fault.short_bytes;
		fire = true;
		if (fault.count == 0)
			__atomic_store_n(&fault_armed, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&fault_lock);
	return fire;
}

/* ---- create / destroy ------------------------------------------------------------ */

static int opts_check(const struct zinf_io_opts *o, char *msg, size_t len)
{
	uint64_t bs = o->block_size;

	if (bs < 4096 || bs > (1ull << 30) || bs % 4096) {
		snprintf(msg, len,
			 "aio.block_size %" PRIu64 ": expected a multiple of 4096 B up to 1 GiB",
			 bs);
		return -EINVAL;
	}
	if (o->queue_depth < 1 || o->queue_depth > ZINF_IO_MAX_QUEUE_DEPTH) {
		snprintf(msg, len, "aio.queue_depth %u: expected 1 to %d", o->queue_depth,
			 ZINF_IO_MAX_QUEUE_DEPTH);
		return -EINVAL;
	}
	if (o->intra_op_parallelism < 1 || o->intra_op_parallelism > ZINF_IO_MAX_PARALLELISM) {
		snprintf(msg, len, "aio.intra_op_parallelism %u: expected 1 to %d",
			 o->intra_op_parallelism, ZINF_IO_MAX_PARALLELISM);
		return -EINVAL;
	}
	if ((unsigned)o->engine > ZINF_IO_ENGINE_PSYNC) {
		snprintf(msg, len, "zinf io engine %d: expected auto, io_uring, libaio or psync",
			 (int)o->engine);
		return -EINVAL;
	}
	if ((unsigned)o->checksum > ZINF_IO_CHECKSUM_CRC32C) {
		snprintf(msg, len, "zinf checksum %d: expected none or crc32c", (int)o->checksum);
		return -EINVAL;
	}
	if (o->n_paths < 0 || o->n_paths > ZINF_IO_MAX_PATHS) {
		snprintf(msg, len, "zinf nvme_paths: %d paths (expected 0 to %d)", o->n_paths,
			 ZINF_IO_MAX_PATHS);
		return -EINVAL;
	}
	for (int i = 0; i < o->n_paths; i++) {
		if (!o->nvme_paths[i] || !o->nvme_paths[i][0]) {
			snprintf(msg, len, "zinf nvme_paths[%d]: empty path", i);
			return -EINVAL;
		}
	}
	if (o->n_paths &&
	    (!o->run_dir_name || !o->run_dir_name[0] || strchr(o->run_dir_name, '/') ||
	     strcmp(o->run_dir_name, ".") == 0 || strcmp(o->run_dir_name, "..") == 0)) {
		snprintf(msg, len,
			 "zinf run directory name '%s': expected one non-empty path component",
			 o->run_dir_name ? o->run_dir_name : "(null)");
		return -EINVAL;
	}
	if (o->stripe_unit && (o->stripe_unit % 4096 || o->stripe_unit < bs)) {
		snprintf(msg, len,
			 "zinf stripe_unit %" PRIu64
			 ": expected a multiple of 4096 B and of at least block_size %" PRIu64,
			 o->stripe_unit, bs);
		return -EINVAL;
	}
	if (o->file_size < ZINF_IO_MIN_FILE_SIZE || o->file_size > ZINF_IO_MAX_FILE_SIZE) {
		/* (ext4's largest file is 16 TiB; a larger unit made every extent fail) */
		snprintf(msg, len, "zinf file_size %" PRIu64 ": expected 1 MiB to 16 TiB",
			 o->file_size);
		return -EINVAL;
	}
	return 0;
}

static int lanes_init(struct zinf_io *io, const struct io_backend_ops *ops, char *err,
		      size_t err_len)
{
	int rc = 0, fault_err = 0;

	io->ops = ops;
	if (io_fault_take(IO_FAULT_ENGINE, 0, &fault_err, NULL)) {
		snprintf(err, err_len, "setup refused (injected): %s", strerror(fault_err));
		return -fault_err;
	}
	for (int l = 0; l < io->n_lanes; l++) {
		rc = ops->lane_init(&io->lanes[l], err, err_len);
		if (rc) {
			for (int k = 0; k < l; k++)
				ops->lane_fini(&io->lanes[k]);
			return rc;
		}
	}
	return 0;
}

static int backend_pick(struct zinf_io *io)
{
	static const struct io_backend_ops *const order[] = {&io_uring_ops, &io_libaio_ops,
							     &io_psync_ops};
	char why[1024] = "", err[256];
	int rc;

	if (io->opts.engine != ZINF_IO_ENGINE_AUTO) {
		const struct io_backend_ops *ops = order[io->opts.engine - 1];

		rc = lanes_init(io, ops, err, sizeof(err));
		if (rc)
			io_set_error(io, "io engine %s: %s", ops->name, err);
		else
			zinf_logf(ZINF_LOG_INFO, "zinf io: engine %s (requested)", ops->name);
		return rc;
	}
	for (int i = 0; i < 3; i++) {
		rc = lanes_init(io, order[i], err, sizeof(err));
		if (rc == 0) {
			zinf_logf(ZINF_LOG_INFO, "zinf io: engine %s (auto%s%s)", order[i]->name,
				  why[0] ? ": " : "", why);
			if (why[0])
				zinf_logf(ZINF_LOG_WARN, "zinf io: auto engine fell back to %s: %s",
					  order[i]->name, why);
			return 0;
		}
		char part[300];

		snprintf(part, sizeof(part), "%s%s unavailable (%.200s)", why[0] ? "; " : "",
			 order[i]->name, err);
		strncat(why, part, sizeof(why) - strlen(why) - 1);
	}
	io_set_error(io, "no io engine works: %s", why);
	return rc;
}

static int slots_init(struct zinf_io *io, struct io_lane *lane)
{
	int qd = (int)io->opts.queue_depth;

	lane->slots = calloc(qd, sizeof(*lane->slots));
	if (!lane->slots)
		return -ENOMEM;
	for (int s = qd - 1; s >= 0; s--) {
		struct io_slot *slot = &lane->slots[s];

		if (io->opts.bounce) {
			slot->bounce = aligned_alloc(4096, io->opts.block_size + 65536);
			if (!slot->bounce)
				return -ENOMEM;
		}
		slot->next = lane->free_slots;
		lane->free_slots = slot;
	}
	return 0;
}

int zinf_io_create(const struct zinf_io_opts *opts, struct zinf_io **out, char *err,
		   uint64_t err_len)
{
	pthread_condattr_t cattr;
	struct zinf_io *io;
	char msg[512] = "";
	int rc;

	if (out)
		*out = NULL;
	if (!opts || !out) {
		snprintf(msg, sizeof(msg), "zinf io: %s is NULL", !opts ? "opts" : "out");
		rc = -EINVAL;
		goto out_msg;
	}
	rc = opts_check(opts, msg, sizeof(msg));
	if (rc)
		goto out_msg;
	io = calloc(1, sizeof(*io));
	if (!io) {
		rc = -ENOMEM;
		snprintf(msg, sizeof(msg), "zinf io: out of memory");
		goto out_msg;
	}
	io->err_serial = zinf_thread_error_serial();
	io->opts = *opts;
	if (!io->opts.stripe_unit)
		io->opts.stripe_unit = io->opts.block_size;
	io->align = 4096;
	io->n_paths = opts->n_paths;
	pthread_mutex_init(&io->space_lock, NULL);
	pthread_mutex_init(&io->q_lock, NULL);
	pthread_cond_init(&io->q_cond, NULL);
	pthread_mutex_init(&io->done_lock, NULL);
	/* zinf_io_wait's timeout runs on the monotonic clock, not the settable wall clock */
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&io->done_cond, &cattr);
	pthread_condattr_destroy(&cattr);
	pthread_cond_init(&io->drain_cond, NULL);
	io->stats.n_paths = io->n_paths + 1;
	for (int i = 0; i < io->n_paths; i++) {
		io->paths[i].lock_fd = -1;
		io->paths[i].last_file = -1;
		io->paths[i].dir = strdup(opts->nvme_paths[i]);
		if (!io->paths[i].dir) {
			rc = -ENOMEM;
			goto out_destroy;
		}
		io->opts.nvme_paths[i] = io->paths[i].dir;
		if (opts->path_names[i])
			snprintf(io->paths[i].name, sizeof(io->paths[i].name), "%s",
				 opts->path_names[i]);
		else
			snprintf(io->paths[i].name, sizeof(io->paths[i].name), "nvme_paths[%d]", i);
		io->opts.path_names[i] = NULL; /* (the copy above is the one kept) */
	}
	io->n_lanes = (int)opts->intra_op_parallelism;
	io->lanes = calloc(io->n_lanes, sizeof(*io->lanes));
	if (!io->lanes) {
		rc = -ENOMEM;
		goto out_destroy;
	}
	for (int l = 0; l < io->n_lanes; l++) {
		io->lanes[l].io = io;
		io->lanes[l].idx = l;
		rc = slots_init(io, &io->lanes[l]);
		if (rc)
			goto out_destroy;
	}
	rc = io_space_init(io);
	io->opts.run_dir_name = NULL; /* the caller's string: used only while creating */
	if (rc)
		goto out_destroy;
	if (io->opts.bounce && io->align > 65536) {
		rc = -EINVAL;
		io_set_error(
			io,
			"bounce buffers support alignments up to 64 KiB, the paths need %" PRIu64,
			io->align);
		goto out_destroy;
	}
	rc = backend_pick(io);
	if (rc)
		goto out_destroy_space;
	for (int l = 0; l < io->n_lanes; l++) {
		rc = -pthread_create(&io->lanes[l].thread, NULL, io_lane_main, &io->lanes[l]);
		if (rc) {
			io_set_error(io, "zinf io: cannot start lane thread %d: %s", l,
				     strerror(-rc));
			goto out_destroy;
		}
		io->lanes[l].thread_started = true;
	}
	*out = io;
	return 0;

out_destroy_space:
	io->ops = NULL;
out_destroy:
	if (!msg[0])
		snprintf(msg, sizeof(msg), "%s",
			 zinf_io_last_error(io)[0] ? zinf_io_last_error(io) : strerror(-rc));
	zinf_io_destroy(io);
out_msg:
	if (err && err_len)
		snprintf(err, err_len, "%s", msg);
	zinf_logf(ZINF_LOG_DEBUG, "zinf io: %s", msg); /* (the caller reports err) */
	return rc;
}

void zinf_io_destroy(struct zinf_io *io)
{
	if (!io)
		return;
	zinf_io_drain(io);
	pthread_mutex_lock(&io->q_lock);
	io->stopping = true;
	pthread_cond_broadcast(&io->q_cond);
	pthread_mutex_unlock(&io->q_lock);
	for (int l = 0; l < io->n_lanes; l++) {
		if (io->lanes[l].thread_started)
			pthread_join(io->lanes[l].thread, NULL);
	}
	if (io->ops) {
		if (io->reg_len)
			zinf_io_unregister_buffer(io);
		for (int l = 0; l < io->n_lanes; l++)
			io->ops->lane_fini(&io->lanes[l]);
	}
	io_space_fini(io, true);
	for (int l = 0; io->lanes && l < io->n_lanes; l++) {
		struct io_lane *lane = &io->lanes[l];

		for (int s = 0; lane->slots && s < (int)io->opts.queue_depth; s++)
			free(lane->slots[s].bounce);
		free(lane->slots);
	}
	free(io->lanes);
	for (int i = 0; i < io->n_paths; i++)
		free(io->paths[i].dir);
	pthread_mutex_destroy(&io->space_lock);
	pthread_mutex_destroy(&io->q_lock);
	pthread_cond_destroy(&io->q_cond);
	pthread_mutex_destroy(&io->done_lock);
	pthread_cond_destroy(&io->done_cond);
	pthread_cond_destroy(&io->drain_cond);
	free(io);
}

/* ---- fixed buffers and counters -------------------------------------------------- */

/*
 * Before the region changes, wait until no request is in flight. Refusing instead was
 * wrong: a request's callback runs before the request stops counting as in flight, so a
 * caller woken by its last callback (the NVMe optimizer, zinf_io_rw) could be refused,
 * free its pool anyway and leave the old range registered; a new pool mapped at the same
 * address then moved the old pool's pinned pages (see docs/io.md, "Fixed buffers"). A
 * callback itself must not wait for its own request: refused there.
 */
static int io_quiesce(struct zinf_io *io, const char *what)
{
	pthread_t self = pthread_self();

	for (int l = 0; l < io->n_lanes; l++) {
		if (io->lanes[l].thread_started && pthread_equal(io->lanes[l].thread, self)) {
			io_set_error(io,
				     "%s: called from a completion callback (lane %d), which "
				     "would wait for its own request; call it from another thread",
				     what, l);
			return ZINF_ESTATE;
		}
	}
	return zinf_io_drain(io);
}

int zinf_io_register_buffer(struct zinf_io *io, void *base, uint64_t len)
{
	int rc = 0;

	if (!base || len == 0) {
		io_set_error(io,
			     "register buffer %p of %" PRIu64
			     " bytes: expected a buffer and a length > 0",
			     base, len);
		return -EINVAL;
	}
	if (io->reg_len) {
		io_set_error(io,
			     "register buffer %p: a buffer is already registered (%p, %" PRIu64
			     " bytes)",
			     base, io->reg_base, io->reg_len);
		return ZINF_ESTATE;
	}
	rc = io_quiesce(io, "register buffer");
	if (rc)
		return rc;
	for (int l = 0; io->ops->buffer_register && l < io->n_lanes; l++) {
		rc = io->ops->buffer_register(&io->lanes[l], base, len);
		if (rc) {
			for (int k = 0; k < l; k++)
				io->ops->buffer_unregister(&io->lanes[k]);
			io_set_error(io,
				     "register buffer %p of %" PRIu64
				     " bytes with %s: %s (plain reads and writes are used)",
				     base, len, io->ops->name, strerror(-rc));
			return rc;
		}
	}
	io->reg_base = base;
	io->reg_len = len;
	return 0;
}

int zinf_io_unregister_buffer(struct zinf_io *io)
{
	int rc = io_quiesce(io, "unregister buffer");

	if (rc)
		return rc;
	if (io->reg_len && io->ops->buffer_unregister) {
		for (int l = 0; l < io->n_lanes; l++)
			io->ops->buffer_unregister(&io->lanes[l]);
	}
	io->reg_base = NULL;
	io->reg_len = 0;
	return 0;
}

void zinf_io_get_stats(struct zinf_io *io, struct zinf_io_stats *out)
{
	const uint64_t *src;
	uint64_t *dst = (uint64_t *)out;
	size_t head = offsetof(struct zinf_io_stats, n_paths) / sizeof(uint64_t);

	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!io)
		return;
	src = (const uint64_t *)&io->stats;
	for (size_t i = 0; i < head; i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	out->n_paths = io->stats.n_paths;
	for (int p = 0; p <= io->n_paths; p++) {
		const struct zinf_io_path_stats *s = &io->stats.path[p];

		out->path[p].read_bytes = __atomic_load_n(&s->read_bytes, __ATOMIC_RELAXED);
		out->path[p].write_bytes = __atomic_load_n(&s->write_bytes, __ATOMIC_RELAXED);
		out->path[p].read_ops = __atomic_load_n(&s->read_ops, __ATOMIC_RELAXED);
		out->path[p].write_ops = __atomic_load_n(&s->write_ops, __ATOMIC_RELAXED);
	}
	out->busy_ns = 0;
	for (int l = 0; l < io->n_lanes; l++)
		out->busy_ns += __atomic_load_n(&io->lanes[l].busy_ns, __ATOMIC_RELAXED);
}

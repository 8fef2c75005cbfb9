/*
 * The pipeline of the NVMe optimizer step (include/zinf/optim.h, "Pipelined NVMe
 * optimizer step"; layout and create in optim_nvme_setup.c, the handle in optim_nvme.h).
 *
 * Staging: n_slots pinned buffers (3 with both pipelines, 2 with one, 1 with none, never
 * more than there are sub-groups); the k-th sub-group a step covers uses slot
 * k % n_slots. A slot does one I/O at a time: before a slot is read into, the write of
 * the sub-group it held is waited for. That gives read(i+1) || update(i) || write(i-1).
 *
 * Atomicity: a write never goes to the extent holding a sub-group's state but to a spare
 * extent; when the write has completed without error, the spare becomes the sub-group's
 * extent and the old one becomes a spare. A write that fails leaves the old extent in
 * place. There is one spare per slot: each slot has at most one write in flight or not
 * yet retired, and a slot's write is retired before the slot is used again.
 *
 * Fast init (opts.fast_init): a sub-group written with zero moments is written as its
 * master part alone and marked NVME_ZERO_MOMENTS; one all zero is not written at all
 * (NVME_ZERO_ALL). The mark belongs to the state, not to the extent: a write sets it
 * when it completes, with the extent swap, so a failed write leaves the old state and
 * its mark. A read of a marked sub-group reads what is on NVMe and fills in the zeros; the
 * step then writes all three parts, which clears the mark. The I/O layer's CRC32C covers
 * extents written and read whole only, so with opts.crc32c the master part of a marked
 * sub-group carries a CRC32C of its own, recorded at its write and checked at each read.
 *
 * Completion: requests carry a callback that only sets the slot's io_done flag under the
 * handle's lock, so the I/O handle may carry other traffic; everything else (the extent
 * swap, error messages) happens on the calling thread when it retires the slot.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optim.h"
#include "optim_nvme.h"
#include "zinf/crc32c.h"
#include "zinf/error.h"
#include "zinf/io.h"
#include "zinf/log.h"

/* ---- small helpers ---------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t dtype_size(enum zinf_dtype t)
{
	return t == ZINF_DTYPE_F32 ? 4 : 2;
}

/* Record the call's first error (later ones only go to the debug log). */
static int fail(struct zinf_adam_nvme *h, int rc, int64_t group, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(struct zinf_adam_nvme *h, int rc, int64_t group, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	zinf_error_one_line(msg);
	zinf_logf(ZINF_LOG_DEBUG, "zinf optim nvme: %s", msg);
	if (h->err)
		return h->err;
	h->err = rc;
	h->err_group = group;
	snprintf(h->last_error, sizeof(h->last_error), "%s", msg);
	return rc;
}

static void call_begin(struct zinf_adam_nvme *h)
{
	h->err = 0;
	h->err_group = -1;
	h->wait_s = 0;
	h->read_bytes = 0;
	h->write_bytes = 0;
	h->last_error[0] = '\0';
}

/* ---- slots: one request each ------------------------------------------------------ */

static void slot_io_done(struct zinf_io_req *req)
{
	struct nvme_slot *s = req->user;
	struct zinf_adam_nvme *h = s->h;

	pthread_mutex_lock(&h->lock);
	s->io_done = true;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

static const char *op_name(enum zinf_io_op op)
{
	return op == ZINF_IO_READ ? "read" : "write";
}

/* Bytes of sub-group g's request: its three parts, or its master part alone. */
static uint64_t request_len(const struct zinf_adam_nvme *h, uint64_t n, enum nvme_zero zero)
{
	uint64_t part = nvme_part_bytes(n, h->align);

	return zero == NVME_ZERO_MOMENTS ? part : 3 * part;
}

/* Sub-group g's state is now the one slot s wrote (to s->extent, already swapped in,
 * or nowhere for NVME_ZERO_ALL). */
static void state_commit(struct zinf_adam_nvme *h, const struct nvme_slot *s, uint64_t g)
{
	h->zeroed[g] = (uint8_t)s->zero;
	h->master_crc[g] = s->crc;
	h->updated[g] = 1;
	h->n_updated++;
	if (!h->written[g]) {
		h->written[g] = 1;
		h->n_written++;
	}
}

/* Start the slot's read of sub-group g, or its write from the slot (g = s->group) to
 * a spare extent; s->zero says which parts. */
static int slot_submit(struct zinf_adam_nvme *h, struct nvme_slot *s, enum zinf_io_op op,
		       uint64_t g)
{
	struct zinf_io_req *r = &s->req;
	uint64_t first, n;
	int rc;

	nvme_group_range(h, g, &first, &n);
	if (op == ZINF_IO_WRITE && h->n_spares == 0) /* cannot happen: one spare per slot */
		return fail(h, ZINF_ESTATE, (int64_t)g,
			    "sub-group %" PRIu64 ": no spare extent for its write", g);
	s->group = g;
	s->extent = op == ZINF_IO_READ ? h->group_extent[g] : h->spares[--h->n_spares];
	memset(r, 0, sizeof(*r));
	r->op = op;
	r->extent = s->extent;
	r->offset = 0;
	r->len = s->master_only ? nvme_part_bytes(n, h->align) : request_len(h, n, s->zero);
	r->buf = s->buf;
	r->done = slot_io_done;
	r->user = s;
	pthread_mutex_lock(&h->lock);
	s->io_done = false;
	pthread_mutex_unlock(&h->lock);
	s->state = op == ZINF_IO_READ ? NVME_SLOT_READING : NVME_SLOT_WRITING;
	rc = zinf_io_submit(h->io, &r, 1);
	if (rc == 0)
		return 0;
	if (op == ZINF_IO_WRITE)
		h->spares[h->n_spares++] = s->extent;
	s->state = NVME_SLOT_IDLE;
	return fail(h, rc, (int64_t)g,
		    "sub-group %" PRIu64 " (elements %" PRIu64 "..%" PRIu64
		    "): cannot submit the %s of extent %u (%" PRIu64 " bytes): %s",
		    g, first, first + n - 1, op_name(op), s->extent, r->len, r->error);
}

/* Read sub-group g into slot s: what of it is on NVMe; one all zero is staged at once. */
static int slot_read(struct zinf_adam_nvme *h, struct nvme_slot *s, uint64_t g)
{
	s->zero = (enum nvme_zero)h->zeroed[g];
	if (s->zero != NVME_ZERO_ALL)
		return slot_submit(h, s, ZINF_IO_READ, g);
	memset(s->buf, 0, h->extent_bytes);
	s->group = g;
	s->state = NVME_SLOT_LOADED;
	return 0;
}

/* Write sub-group g from slot s, leaving out what zero says is zero (nothing is written
 * for NVME_ZERO_ALL: the state becomes zero at once). */
static int slot_write(struct zinf_adam_nvme *h, struct nvme_slot *s, uint64_t g,
		      enum nvme_zero zero)
{
	s->zero = zero;
	if (zero != NVME_ZERO_MOMENTS)
		s->crc = 0;
	if (zero != NVME_ZERO_ALL)
		return slot_submit(h, s, ZINF_IO_WRITE, g);
	s->group = g;
	s->state = NVME_SLOT_IDLE;
	state_commit(h, s, g);
	return 0;
}

/* A master part read alone: check its CRC32C (opts.crc32c), then fill in zero moments.
 * Returns 0, or ZINF_ECHECKSUM with the reason in the request's error. */
static int slot_fill_moments(struct zinf_adam_nvme *h, struct nvme_slot *s)
{
	uint64_t first, n, part;

	nvme_group_range(h, s->group, &first, &n);
	part = nvme_part_bytes(n, h->align);
	if (h->crc32c) {
		uint32_t got = zinf_crc32c(0, s->buf, part);

		if (got != h->master_crc[s->group]) {
			snprintf(s->req.error, sizeof(s->req.error),
				 "master part (bytes 0..%" PRIu64
				 " of the extent, its m and v not written): CRC32C mismatch: "
				 "stored %08x, read %08x",
				 part - 1, h->master_crc[s->group], got);
			return ZINF_ECHECKSUM;
		}
	}
	memset(s->buf + part, 0, 2 * part);
	return 0;
}

/* Wait for the slot's I/O and retire it: a read leaves the slot LOADED; a write makes
 * its extent the sub-group's state (success) or a spare again (failure). */
static int slot_retire(struct zinf_adam_nvme *h, struct nvme_slot *s)
{
	uint64_t first, n, g = s->group;
	double t0;
	int status;

	if (s->state != NVME_SLOT_READING && s->state != NVME_SLOT_WRITING)
		return 0;
	t0 = now_s();
	pthread_mutex_lock(&h->lock);
	while (!s->io_done)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
	h->wait_s += now_s() - t0;
	status = s->req.status;
	if (status == 0 && s->req.op == ZINF_IO_READ && s->zero == NVME_ZERO_MOMENTS)
		status = slot_fill_moments(h, s);
	if (status == 0)
		*(s->req.op == ZINF_IO_READ ? &h->read_bytes : &h->write_bytes) += s->req.len;
	if (s->state == NVME_SLOT_WRITING) {
		if (status == 0) {
			h->spares[h->n_spares++] = h->group_extent[g];
			h->group_extent[g] = s->extent;
			state_commit(h, s, g);
		} else {
			h->spares[h->n_spares++] = s->extent;
		}
		s->state = NVME_SLOT_IDLE;
	} else {
		s->state = status == 0 ? NVME_SLOT_LOADED : NVME_SLOT_IDLE;
	}
	if (status == 0)
		return 0;
	nvme_group_range(h, g, &first, &n);
	return fail(h, status, (int64_t)g,
		    "sub-group %" PRIu64 " (elements %" PRIu64 "..%" PRIu64
		    "): %s of extent %u (%" PRIu64 " bytes) failed: %s",
		    g, first, first + n - 1, op_name(s->req.op), s->extent, s->req.len,
		    s->req.error[0] ? s->req.error : zinf_strerror(status));
}

/* ZINF_ESTATE when a write started with zinf_adam_nvme_write_from_slot_start is still in
 * flight from slot k (every slot with k < 0): the caller waits for it first. */
static int slots_busy(struct zinf_adam_nvme *h, int k, const char *what)
{
	for (unsigned i = 0; i < h->n_slots; i++)
		if ((k < 0 || (unsigned)k == i) && h->slots[i].state == NVME_SLOT_WRITING)
			return fail(h, ZINF_ESTATE, (int64_t)h->slots[i].group,
				    "%s: staging slot %u's write of sub-group %" PRIu64
				    " is in flight (zinf_adam_nvme_slot_wait first)",
				    what, i, h->slots[i].group);
	return 0;
}

/* Retire every slot: no I/O of this handle is in flight afterwards. Loaded slots whose
 * data nobody will use are dropped. */
void zinf_adam_nvme_drain(struct zinf_adam_nvme *h)
{
	for (unsigned i = 0; i < h->n_slots; i++) {
		slot_retire(h, &h->slots[i]);
		h->slots[i].state = NVME_SLOT_IDLE;
	}
}

/* The three parts of sub-group g in slot s. */
static void slot_parts(const struct zinf_adam_nvme *h, const struct nvme_slot *s, uint64_t n,
		       float **master, float **m, float **v)
{
	uint64_t part = nvme_part_bytes(n, h->align);

	*master = (float *)s->buf;
	*m = (float *)(s->buf + part);
	*v = (float *)(s->buf + 2 * part);
}

/* Make slot s free (its write retired) and read sub-group g into it. */
static int stage_read(struct zinf_adam_nvme *h, struct nvme_slot *s, uint64_t g)
{
	int rc = slot_retire(h, s); /* the write of the sub-group n_slots before */

	if (rc)
		return rc;
	return slot_read(h, s, g);
}

/* ---- the step ----------------------------------------------------------------------- */

/* The first sub-group >= from that the step covers (n when none is left). */
static uint64_t next_group(const uint8_t *mask, uint64_t n, uint64_t from)
{
	while (from < n && mask && !mask[from])
		from++;
	return from;
}

static int update_group(struct zinf_adam_nvme *h, struct nvme_slot *s,
			const struct zinf_adam_nvme_bufs *bufs,
			const struct zinf_adam_step_info *info)
{
	struct zinf_adam_shard shard;
	uint64_t first, n, g = s->group;
	int rc;

	nvme_group_range(h, g, &first, &n);
	slot_parts(h, s, n, &shard.master, &shard.exp_avg, &shard.exp_avg_sq);
	if (bufs->sub_buffers) {
		rc = bufs->sub_buffers(bufs->user, g, &shard.grad, &shard.param_out);
		if (rc > 0) /* the step's codes are negative */
			rc = -EIO;
		if (rc) {
			s->state = NVME_SLOT_IDLE;
			return fail(h, rc, (int64_t)g,
				    "sub-group %" PRIu64 ": the caller's buffers: %s", g,
				    zinf_strerror(rc));
		}
	} else {
		shard.grad = (const char *)bufs->grad + first * dtype_size(bufs->grad_dtype);
		shard.param_out = bufs->param_out ? (char *)bufs->param_out +
							    first * dtype_size(bufs->param_dtype)
						  : NULL;
	}
	shard.grad_dtype = bufs->grad_dtype;
	shard.param_dtype = bufs->param_dtype;
	shard.n_elems = n;
	rc = zinf_adam_step(h->adam, &shard, info);
	if (rc == 0)
		return 0;
	s->state = NVME_SLOT_IDLE;
	return fail(h, rc, (int64_t)g,
		    "sub-group %" PRIu64 " (elements %" PRIu64 "..%" PRIu64 "): update: %s", g,
		    first, first + n - 1, zinf_adam_last_error(h->adam));
}

static int check_step_input(struct zinf_adam_nvme *h, const struct zinf_adam_nvme_bufs *b,
			    const struct zinf_adam_step_info *info)
{
	char why[160];

	if (!b || !info)
		return fail(h, -EINVAL, -1, "optimizer step: bufs %p, info %p (both required)",
			    (const void *)b, (const void *)info);
	if (!b->grad && !b->sub_buffers)
		return fail(
			h, -EINVAL, -1,
			"optimizer step: bufs.grad and bufs.sub_buffers are NULL (expected one)");
	if (zinf_adam_check_step_info(h->adam, info, why, sizeof(why))) /* before any read */
		return fail(h, -EINVAL, -1, "optimizer step: %s", why);
	if (b->grad_dtype != ZINF_DTYPE_F32 && b->grad_dtype != ZINF_DTYPE_BF16 &&
	    b->grad_dtype != ZINF_DTYPE_F16)
		return fail(h, -EINVAL, -1,
			    "optimizer step: bufs.grad_dtype %d (expected F32, BF16 or F16)",
			    (int)b->grad_dtype);
	if (!b->sub_buffers &&
	    (b->param_out ? (b->param_dtype != ZINF_DTYPE_F32 &&
			     b->param_dtype != ZINF_DTYPE_BF16 && b->param_dtype != ZINF_DTYPE_F16)
			  : b->param_dtype != ZINF_DTYPE_NONE))
		return fail(h, -EINVAL, -1,
			    "optimizer step: bufs.param_dtype %d with param_out %p (expected F32, "
			    "BF16 or F16 with a buffer, NONE without)",
			    (int)b->param_dtype, b->param_out);
	if (h->n_written < h->n_groups)
		return fail(h, ZINF_ESTATE, -1,
			    "optimizer step: the state on NVMe was never written for %" PRIu64
			    " of %" PRIu64 " sub-groups (call zinf_adam_nvme_write_state or "
			    "zinf_adam_nvme_write_sub_group first, or again after it failed)",
			    h->n_groups - h->n_written, h->n_groups);
	return 0;
}

int zinf_adam_nvme_step(struct zinf_adam_nvme *h, const struct zinf_adam_nvme_bufs *bufs,
			const struct zinf_adam_step_info *info, struct zinf_adam_nvme_result *res)
{
	double t0 = now_s(), t_update = 0;
	uint64_t n, g;

	if (res)
		memset(res, 0, sizeof(*res));
	if (!h)
		return -EINVAL;
	n = h->n_groups;
	call_begin(h);
	memset(h->updated, 0, n);
	h->n_updated = 0;
	if (slots_busy(h, -1, "step") || check_step_input(h, bufs, info))
		goto out;
	/* the k-th sub-group stepped uses slot k % n_slots */
	g = next_group(bufs->sub_groups, n, 0);
	if (h->pipeline_read && g < n)
		stage_read(h, &h->slots[0], g);
	for (uint64_t k = 0; g < n && !h->err; k++) {
		struct nvme_slot *s = &h->slots[k % h->n_slots];
		uint64_t g_next = next_group(bufs->sub_groups, n, g + 1);
		double tu;

		if (!h->pipeline_read)
			stage_read(h, s, g);
		else if (g_next < n) /* waits for the write n_slots - 1 sub-groups back */
			stage_read(h, &h->slots[(k + 1) % h->n_slots], g_next);
		if (h->err || slot_retire(h, s))
			break;
		tu = now_s();
		if (update_group(h, s, bufs, info))
			break;
		t_update += now_s() - tu;
		if (slot_write(h, s, g, NVME_ZERO_NONE))
			break;
		if (bufs->on_updated) {
			int rc = bufs->on_updated(bufs->user, g);
			if (rc > 0) /* the step's codes are negative */
				rc = -EIO;
			if (rc) {
				fail(h, rc, (int64_t)g, "sub-group %" PRIu64 ": %s", g,
				     "the caller stopped the step");
				break;
			}
		}
		if (!h->pipeline_write)
			slot_retire(h, s);
		g = g_next;
	}
	zinf_adam_nvme_drain(h);
out:
	if (res) {
		res->n_sub_groups = n;
		res->n_updated = h->n_updated;
		res->updated = h->updated;
		res->failed_sub_group = h->err ? h->err_group : -1;
		res->read_bytes = h->read_bytes;
		res->write_bytes = h->write_bytes;
		res->seconds = now_s() - t0;
		res->update_seconds = t_update;
		res->wait_seconds = h->wait_s;
	}
	return h->err;
}

/* ---- state in and out: whole, or one sub-group ------------------------------------------ */

/* p + first, or NULL: where sub-group data starts in a caller's whole-state buffer. */
static float *at(const float *p, uint64_t first)
{
	return p ? (float *)(p + first) : NULL;
}

/* Whether p (NULL: zeros) holds n floats of zero bits (-0.0f is not: a state read back
 * must be the bits written). Stops at the first block with a bit set. */
static bool all_zero(const float *p, uint64_t n)
{
	for (uint64_t i = 0; p && i < n;) {
		uint64_t end = n - i < 1024 ? n : i + 1024;
		uint32_t any = 0;

		for (; i < end; i++) {
			uint32_t u;

			memcpy(&u, &p[i], sizeof(u));
			any |= u;
		}
		if (any)
			return false;
	}
	return true;
}

/* What of the state src (n elements: master, m, v) need not be written. */
static enum nvme_zero zero_of(const struct zinf_adam_nvme *h, uint64_t n, const float *const src[3])
{
	if (!h->fast_init || !all_zero(src[1], n) || !all_zero(src[2], n))
		return NVME_ZERO_NONE;
	return all_zero(src[0], n) ? NVME_ZERO_ALL : NVME_ZERO_MOMENTS;
}

/* Fill slot s with the parts of sub-group g from src (its master, m, v; NULL m / v:
 * zeros; a part already in place, the slot's own, is left), the ones zero says are to be
 * written, and record the master part's CRC32C when it is written alone; the padding of
 * each part is zeroed so the bytes on NVMe never depend on what the buffer held. */
static void slot_fill(struct zinf_adam_nvme *h, struct nvme_slot *s, uint64_t g,
		      const float *const src[3], enum nvme_zero zero)
{
	int parts = zero == NVME_ZERO_NONE ? 3 : zero == NVME_ZERO_MOMENTS ? 1 : 0;
	uint64_t first, n, part;

	nvme_group_range(h, g, &first, &n);
	part = nvme_part_bytes(n, h->align);
	for (int k = 0; k < parts; k++) {
		char *dst = s->buf + (uint64_t)k * part;

		if (!src[k])
			memset(dst, 0, n * sizeof(float));
		else if ((const char *)src[k] != dst)
			memcpy(dst, src[k], n * sizeof(float));
		memset(dst + n * sizeof(float), 0, part - n * sizeof(float));
	}
	s->crc = zero == NVME_ZERO_MOMENTS && h->crc32c ? zinf_crc32c(0, s->buf, part) : 0;
	s->group = g;
}

/* Write zeros over every spare extent once, so that no step ever writes into blocks the
 * file system still holds as preallocated-but-unwritten: converting them costs a journal
 * update per write in the middle of the pipeline (the first steps ran several times
 * slower), and it puts an extent-tree change beside the direct reads of other sub-groups
 * in the same file, a path this design would rather not depend on. Not with fast_init,
 * which leaves the m and v parts of the extents it writes master-only unwritten too (the
 * step's writes convert them: docs/optim.md, "Initialization"), so that zeroing the
 * spares would only write zeros again, up to a whole state's worth with few sub-groups.
 * Slot s (idle, its contents no longer needed) holds the zeros. */
static void spares_fill(struct zinf_adam_nvme *h, struct nvme_slot *s)
{
	char *buf = s->buf;

	memset(buf, 0, h->extent_bytes);
	for (unsigned i = 0; i < h->n_spares && !h->err; i++) {
		int rc = zinf_io_rw(h->io, ZINF_IO_WRITE, h->spares[i], 0, buf, h->extent_bytes);

		if (rc)
			fail(h, rc, -1,
			     "write state: zeroing spare extent %u (%" PRIu64 " bytes): %s",
			     h->spares[i], h->extent_bytes, zinf_io_last_error(h->io));
	}
	h->spares_zeroed = h->err == 0;
}

int zinf_adam_nvme_write_state(struct zinf_adam_nvme *h, const float *master, const float *exp_avg,
			       const float *exp_avg_sq)
{
	if (!h)
		return -EINVAL;
	call_begin(h);
	if (slots_busy(h, -1, "write state"))
		return h->err;
	if (!master)
		return fail(h, -EINVAL, -1,
			    "write state: master is NULL (required; exp_avg and exp_avg_sq may be "
			    "NULL for zeros)");
	/* the whole state counts as unwritten until every sub-group of this call is */
	memset(h->written, 0, h->n_groups);
	h->n_written = 0;
	for (uint64_t g = 0; g < h->n_groups && !h->err; g++) {
		struct nvme_slot *s = &h->slots[g % h->n_slots];
		const float *src[3];
		enum nvme_zero zero;
		uint64_t first, n;

		if (slot_retire(h, s))
			break;
		nvme_group_range(h, g, &first, &n);
		src[0] = at(master, first);
		src[1] = at(exp_avg, first);
		src[2] = at(exp_avg_sq, first);
		zero = zero_of(h, n, src);
		slot_fill(h, s, g, src, zero);
		slot_write(h, s, g, zero);
	}
	zinf_adam_nvme_drain(h);
	if (!h->err && !h->fast_init)
		spares_fill(h, &h->slots[0]);
	return h->err;
}

/* Copy the loaded sub-group of slot s out to dst (its master, m, v; NULL: skip). */
static void slot_copy_out(struct zinf_adam_nvme *h, struct nvme_slot *s, float *const dst[3])
{
	float *src[3];
	uint64_t first, n;

	if (s->state != NVME_SLOT_LOADED)
		return;
	nvme_group_range(h, s->group, &first, &n);
	slot_parts(h, s, n, &src[0], &src[1], &src[2]);
	for (int k = 0; k < 3; k++) {
		if (dst[k])
			memcpy(dst[k], src[k], n * sizeof(float));
	}
	s->state = NVME_SLOT_IDLE;
}

/* The same into whole-state buffers (the sub-group at its offset). */
static void slot_copy_out_whole(struct zinf_adam_nvme *h, struct nvme_slot *s, float *master,
				float *m, float *v)
{
	uint64_t first, n;

	if (s->state != NVME_SLOT_LOADED)
		return;
	nvme_group_range(h, s->group, &first, &n);
	slot_copy_out(h, s, (float *const[3]){at(master, first), at(m, first), at(v, first)});
}

int zinf_adam_nvme_read_state(struct zinf_adam_nvme *h, float *master, float *exp_avg,
			      float *exp_avg_sq)
{
	if (!h)
		return -EINVAL;
	call_begin(h);
	if (slots_busy(h, -1, "read state"))
		return h->err;
	if (h->n_written < h->n_groups)
		return fail(h, ZINF_ESTATE, -1,
			    "read state: the state on NVMe was never written for %" PRIu64
			    " of %" PRIu64 " sub-groups (call zinf_adam_nvme_write_state first)",
			    h->n_groups - h->n_written, h->n_groups);
	for (uint64_t g = 0; g < h->n_groups && !h->err; g++) {
		struct nvme_slot *s = &h->slots[g % h->n_slots];

		if (slot_retire(h, s))
			break;
		slot_copy_out_whole(h, s, master, exp_avg, exp_avg_sq);
		slot_read(h, s, g);
	}
	for (unsigned i = 0; i < h->n_slots; i++) {
		struct nvme_slot *s = &h->slots[i];

		if (slot_retire(h, s) == 0 && !h->err)
			slot_copy_out_whole(h, s, master, exp_avg, exp_avg_sq);
		s->state = NVME_SLOT_IDLE;
	}
	return h->err;
}

/* Sub-group i of h for a ranged call named what: 0, or -EINVAL with the reason. */
static int check_sub_group(struct zinf_adam_nvme *h, uint64_t i, const char *what)
{
	if (i >= h->n_groups)
		return fail(h, -EINVAL, -1,
			    "%s sub-group %" PRIu64 ": no such sub-group (%" PRIu64 " of %" PRIu64
			    " elements each, %" PRIu64 " in all)",
			    what, i, h->sub_group_size, h->n_elems, h->n_groups);
	return 0;
}

/* Once every sub-group is written, zero the spare extents (once; not with fast_init)
 * through slot s, whose contents are then lost. */
static int spares_fill_once(struct zinf_adam_nvme *h, struct nvme_slot *s)
{
	if (!h->err && !h->fast_init && h->n_written == h->n_groups && !h->spares_zeroed)
		spares_fill(h, s);
	return h->err;
}

/* Write sub-group i from slot s (src: its master, m, v, possibly in place in the slot), as
 * a step does: to a spare extent, which replaces the old one only once it completed. */
static int sub_group_write_start(struct zinf_adam_nvme *h, struct nvme_slot *s, uint64_t i,
				 const float *const src[3])
{
	enum nvme_zero zero;
	uint64_t first, n;

	nvme_group_range(h, i, &first, &n);
	zero = zero_of(h, n, src);
	slot_fill(h, s, i, src, zero);
	return slot_write(h, s, i, zero);
}

static int sub_group_write(struct zinf_adam_nvme *h, struct nvme_slot *s, uint64_t i,
			   const float *const src[3])
{
	if (sub_group_write_start(h, s, i, src) == 0)
		slot_retire(h, s);
	return h->err;
}

/* Read sub-group i into slot s and leave it there (the slot idle); without moments, the
 * master part alone when that loses no check (zinf_adam_nvme_read_into_slot). */
static int sub_group_read(struct zinf_adam_nvme *h, struct nvme_slot *s, uint64_t i, bool moments)
{
	if (!h->written[i])
		return fail(h, ZINF_ESTATE, (int64_t)i,
			    "read sub-group %" PRIu64 ": its state on NVMe was never written "
			    "(write it with zinf_adam_nvme_write_sub_group or _write_state first)",
			    i);
	s->master_only = !moments && !h->crc32c && h->zeroed[i] == NVME_ZERO_NONE &&
			 zinf_io_checksum_kind(h->io) == ZINF_IO_CHECKSUM_NONE;
	if (slot_read(h, s, i) == 0)
		slot_retire(h, s);
	s->master_only = false;
	s->state = NVME_SLOT_IDLE;
	return h->err;
}

int zinf_adam_nvme_write_sub_group(struct zinf_adam_nvme *h, uint64_t i, const float *master,
				   const float *exp_avg, const float *exp_avg_sq)
{
	if (!h)
		return -EINVAL;
	call_begin(h);
	if (check_sub_group(h, i, "write") || slots_busy(h, -1, "write"))
		return h->err;
	if (!master)
		return fail(h, -EINVAL, (int64_t)i,
			    "write sub-group %" PRIu64 ": master is NULL (required; exp_avg and "
			    "exp_avg_sq may be NULL for zeros)",
			    i);
	/* between calls every slot is idle: the first one stages the write */
	if (sub_group_write(h, &h->slots[0], i,
			    (const float *const[3]){master, exp_avg, exp_avg_sq}))
		return h->err;
	return spares_fill_once(h, &h->slots[0]);
}

int zinf_adam_nvme_read_sub_group(struct zinf_adam_nvme *h, uint64_t i, float *master,
				  float *exp_avg, float *exp_avg_sq)
{
	float *const dst[3] = {master, exp_avg, exp_avg_sq};
	float *part[3];
	uint64_t first, n;

	if (!h)
		return -EINVAL;
	call_begin(h);
	if (check_sub_group(h, i, "read") || slots_busy(h, -1, "read") ||
	    sub_group_read(h, &h->slots[0], i, exp_avg || exp_avg_sq))
		return h->err;
	nvme_group_range(h, i, &first, &n);
	slot_parts(h, &h->slots[0], n, &part[0], &part[1], &part[2]);
	for (int k = 0; k < 3; k++)
		if (dst[k])
			memcpy(dst[k], part[k], n * sizeof(float));
	return 0;
}

/* Slot k for a call named what on sub-group i: NULL (the error set) when either is out
 * of range. */
static struct nvme_slot *slot_arg(struct zinf_adam_nvme *h, unsigned k, uint64_t i,
				  const char *what)
{
	if (check_sub_group(h, i, what))
		return NULL;
	if (k >= h->n_slots) {
		fail(h, -EINVAL, (int64_t)i,
		     "%s sub-group %" PRIu64 ": no staging slot %u (the handle has %u)", what, i, k,
		     h->n_slots);
		return NULL;
	}
	return &h->slots[k];
}

unsigned zinf_adam_nvme_n_slots(const struct zinf_adam_nvme *h)
{
	return h ? h->n_slots : 0;
}

float *zinf_adam_nvme_slot_parts(struct zinf_adam_nvme *h, unsigned k, uint64_t i, uint64_t *stride)
{
	uint64_t first, n;

	if (!h || k >= h->n_slots || i >= h->n_groups)
		return NULL;
	nvme_group_range(h, i, &first, &n);
	*stride = nvme_part_bytes(n, h->align) / sizeof(float);
	return (float *)h->slots[k].buf;
}

int zinf_adam_nvme_write_from_slot_start(struct zinf_adam_nvme *h, unsigned k, uint64_t i,
					 bool moments)
{
	struct nvme_slot *s;
	float *part[3];
	uint64_t first, n;

	if (!h)
		return -EINVAL;
	call_begin(h);
	s = slot_arg(h, k, i, "write");
	if (!s || slots_busy(h, (int)k, "write"))
		return h->err;
	nvme_group_range(h, i, &first, &n);
	slot_parts(h, s, n, &part[0], &part[1], &part[2]);
	sub_group_write_start(h, s, i,
			      (const float *const[3]){part[0], moments ? part[1] : NULL,
						      moments ? part[2] : NULL});
	return h->err;
}

int zinf_adam_nvme_slot_wait(struct zinf_adam_nvme *h, unsigned k)
{
	if (!h)
		return -EINVAL;
	call_begin(h);
	if (k >= h->n_slots)
		return fail(h, -EINVAL, -1, "wait: no staging slot %u (the handle has %u)", k,
			    h->n_slots);
	if (h->slots[k].state == NVME_SLOT_WRITING)
		slot_retire(h, &h->slots[k]);
	return h->err;
}

int zinf_adam_nvme_write_from_slot(struct zinf_adam_nvme *h, unsigned k, uint64_t i, bool moments)
{
	int rc = zinf_adam_nvme_write_from_slot_start(h, k, i, moments);
	uint64_t bytes;
	double wait;

	if (rc)
		return rc;
	/* one call's traffic and time, as before the split */
	bytes = h->write_bytes;
	wait = h->wait_s;
	rc = zinf_adam_nvme_slot_wait(h, k);
	h->write_bytes += bytes;
	h->wait_s += wait;
	return rc;
}

int zinf_adam_nvme_zero_spares(struct zinf_adam_nvme *h, unsigned k)
{
	if (!h)
		return -EINVAL;
	call_begin(h);
	if (k >= h->n_slots)
		return fail(h, -EINVAL, -1,
			    "zero the spare extents: no staging slot %u (the handle has %u)", k,
			    h->n_slots);
	if (slots_busy(h, (int)k, "zero the spare extents"))
		return h->err;
	return spares_fill_once(h, &h->slots[k]);
}

int zinf_adam_nvme_read_into_slot(struct zinf_adam_nvme *h, unsigned k, uint64_t i, bool moments)
{
	struct nvme_slot *s;

	if (!h)
		return -EINVAL;
	call_begin(h);
	s = slot_arg(h, k, i, "read");
	if (!s || slots_busy(h, (int)k, "read"))
		return h->err;
	return sub_group_read(h, s, i, moments);
}

bool zinf_adam_nvme_sub_group_written(const struct zinf_adam_nvme *h, uint64_t i)
{
	return h && i < h->n_groups && h->written[i];
}

/*
 * The I/O engine's request path: zinf_io_submit splits requests into block_size pieces
 * and queues them on the lanes; each lane's worker thread keeps up to queue_depth pieces
 * in flight through the backend, continues short transfers, retries EINTR/EAGAIN,
 * records errors with path, offset and length, verifies checksums and completes
 * requests (callback, or the queue zinf_io_poll/zinf_io_wait read). See io.c for the
 * handle and docs/io.md for the whole layer.
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
#include "zinf/crc32c.h"
#include "zinf/error.h"
#include "zinf/log.h"

/* ---- completion ------------------------------------------------------------------ */

static const char *op_name(enum zinf_io_op op)
{
	return op == ZINF_IO_READ ? "read" : "write";
}

/* First error of a request wins; its message is kept in req->error. This runs on a lane's
 * thread, so the message is not recorded as any thread's last error here: the thread
 * that collects the request takes it (zinf_io_rw, zinf_io_poll, zinf_io_wait), and a
 * callback reads req->error. */
static void req_fail(struct zinf_io_req *req, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void req_fail(struct zinf_io_req *req, int status, const char *fmt, ...)
{
	int expected = 0;
	va_list ap;

	if (!__atomic_compare_exchange_n(&req->status, &expected, status, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return;
	va_start(ap, fmt);
	vsnprintf(req->error, sizeof(req->error), fmt, ap);
	va_end(ap);
	zinf_error_one_line(req->error);
	zinf_logf(ZINF_LOG_DEBUG, "zinf io: %s", req->error);
}

static void req_complete(struct zinf_io *io, struct zinf_io_req *req)
{
	struct io_extent *e = io_extent_get(io, req->extent);
	bool whole = e && req->offset == 0 && req->len == e->len;
	int status = __atomic_load_n(&req->status, __ATOMIC_ACQUIRE);
	zinf_io_done_fn done = req->done;

	if (e && io->opts.checksum == ZINF_IO_CHECKSUM_CRC32C) {
		if (req->op == ZINF_IO_WRITE && status == 0 && whole) {
			e->crc = zinf_crc32c(0, req->buf, req->len);
			__atomic_store_n(&e->crc_valid, true, __ATOMIC_RELEASE);
		} else if (req->op == ZINF_IO_READ && status == 0 && whole &&
			   __atomic_load_n(&e->crc_valid, __ATOMIC_ACQUIRE)) {
			uint32_t got = zinf_crc32c(0, req->buf, req->len);

			if (got != e->crc) {
				const char *path = "?";
				uint64_t foff = 0;

				zinf_io_extent_locate(io, req->extent, 0, &path, &foff);
				req_fail(req, ZINF_ECHECKSUM,
					 "extent %u (%" PRIu64 " bytes at offset %" PRIu64
					 " in %s%s): CRC32C mismatch: stored %08x, read %08x",
					 req->extent, e->len, foff, path,
					 e->n_parts > 1 ? " and striped parts" : "", e->crc, got);
				status = ZINF_ECHECKSUM;
			}
		}
	}
	if (e)
		__atomic_sub_fetch(&e->inflight, 1, __ATOMIC_ACQ_REL);
	if (req->op == ZINF_IO_READ) {
		__atomic_add_fetch(&io->stats.read_reqs, 1, __ATOMIC_RELAXED);
		if (status == 0)
			__atomic_add_fetch(&io->stats.read_bytes, req->len, __ATOMIC_RELAXED);
	} else {
		__atomic_add_fetch(&io->stats.write_reqs, 1, __ATOMIC_RELAXED);
		if (status == 0)
			__atomic_add_fetch(&io->stats.write_bytes, req->len, __ATOMIC_RELAXED);
	}
	if (status != 0)
		__atomic_add_fetch(&io->stats.errors, 1, __ATOMIC_RELAXED);

	if (done) {
		__atomic_store_n(&req->state_, REQ_DONE, __ATOMIC_RELEASE);
		done(req); /* req may be gone after this */
		pthread_mutex_lock(&io->done_lock);
	} else {
		pthread_mutex_lock(&io->done_lock);
		__atomic_store_n(&req->state_, REQ_COLLECT, __ATOMIC_RELEASE);
		req->next_ = NULL;
		if (io->done_tail)
			io->done_tail->next_ = req;
		else
			io->done_head = req;
		io->done_tail = req;
	}
	io->inflight_reqs--;
	/* wake poll/wait only for a queued request, drain only at zero: a callback
	 * pipeline (the common case) completes without waking anyone */
	if (!done)
		pthread_cond_broadcast(&io->done_cond);
	if (io->inflight_reqs == 0)
		pthread_cond_broadcast(&io->drain_cond);
	pthread_mutex_unlock(&io->done_lock);
}

static void slot_release(struct io_lane *lane, struct io_slot *slot)
{
	slot->req = NULL;
	slot->next = lane->free_slots;
	lane->free_slots = slot;
	lane->inflight--;
	if (lane->inflight == 0)
		__atomic_add_fetch(&lane->busy_ns, io_now_ns() - lane->busy_since_ns,
				   __ATOMIC_RELAXED);
}

/* The piece in slot is over (status 0 or an error already recorded on the request). */
static void piece_finish(struct io_lane *lane, struct io_slot *slot)
{
	struct zinf_io_req *req = slot->req;
	uint64_t left;

	left = __atomic_sub_fetch(&req->left_bytes_, slot->piece_len, __ATOMIC_ACQ_REL);
	slot_release(lane, slot);
	if (left == 0)
		req_complete(lane->io, req);
}

static int slot_start(struct io_lane *lane, struct io_slot *slot);

static void piece_error(struct io_lane *lane, struct io_slot *slot, int err, const char *what)
{
	struct zinf_io *io = lane->io;
	struct zinf_io_req *req = slot->req;
	struct io_file *f = &io->files[slot->file];

	/* bytes done: a bounced piece counts in its padded buffer */
	uint64_t done =
		slot->bounced ? (uint64_t)(slot->buf - slot->bounce) : slot->piece_len - slot->len;

	req_fail(req, err,
		 "extent %u: %s %" PRIu64 "/%" PRIu64 " bytes at offset %" PRIu64 " in %s: %s",
		 req->extent, op_name(req->op), done < slot->piece_len ? done : slot->piece_len,
		 slot->piece_len, slot->file_off, f->name, what);
}

/* Handle one completion result: continue, retry or finish the piece. */
static void slot_done(struct io_lane *lane, struct io_slot *slot)
{
	struct zinf_io *io = lane->io;
	struct zinf_io_req *req = slot->req;
	int res = slot->res;
	uint64_t short_bytes = 0;

	if (res > 0 && slot->first_try &&
	    io_fault_take(IO_FAULT_SHORT, req->op, NULL, &short_bytes) &&
	    (uint64_t)res > short_bytes)
		res = (int)short_bytes;
	slot->first_try = false;
	if (res == -EINTR || res == -EAGAIN) {
		__atomic_add_fetch(&io->stats.retries, 1, __ATOMIC_RELAXED);
		if (slot_start(lane, slot) == 0)
			return;
		res = -EIO;
	}
	if (res < 0) {
		piece_error(lane, slot, res, strerror(-res));
		piece_finish(lane, slot);
		return;
	}
	if (res == 0) {
		piece_error(lane, slot, -EIO,
			    req->op == ZINF_IO_READ ? "short read: unexpected end of file"
						    : "short write: no progress");
		piece_finish(lane, slot);
		return;
	}
	struct io_path_counter {
		uint64_t *bytes, *ops;
	} c;
	struct zinf_io_path_stats *ps = &io->stats.path[io->files[slot->file].path];

	c.bytes = req->op == ZINF_IO_READ ? &ps->read_bytes : &ps->write_bytes;
	c.ops = req->op == ZINF_IO_READ ? &ps->read_ops : &ps->write_ops;
	__atomic_add_fetch(c.bytes, (uint64_t)res, __ATOMIC_RELAXED);
	/* a bounced read of a file that ends inside the padding has all the bytes asked */
	if ((uint64_t)res < slot->len &&
	    !(slot->bounced && req->op == ZINF_IO_READ &&
	      (uint64_t)(slot->buf - slot->bounce) + (uint64_t)res >= slot->piece_len)) {
		/* short transfer: continue where it stopped */
		__atomic_add_fetch(&io->stats.retries, 1, __ATOMIC_RELAXED);
		slot->buf += res;
		slot->file_off += (uint64_t)res;
		slot->len -= (uint64_t)res;
		if (slot_start(lane, slot) == 0)
			return;
		piece_error(lane, slot, -EIO, "cannot resubmit the rest of a short transfer");
		piece_finish(lane, slot);
		return;
	}
	slot->len = 0;
	__atomic_add_fetch(c.ops, 1, __ATOMIC_RELAXED);
	if (slot->bounced && req->op == ZINF_IO_READ)
		memcpy(slot->user_buf, slot->bounce, slot->piece_len);
	if (slot->cut_to && ftruncate(io->files[slot->file].fd, (off_t)slot->cut_to) != 0) {
		piece_error(lane, slot, -errno, "cannot cut the block's padding back off the file");
		slot->cut_to = 0;
	}
	piece_finish(lane, slot);
}

/* Queue the slot's (remaining) I/O on the backend, or fail it by the fault hook. */
static int slot_start(struct io_lane *lane, struct io_slot *slot)
{
	int err = 0;

	if (io_fault_take(IO_FAULT_ERRNO, slot->req->op, &err, NULL)) {
		slot->res = -err;
		slot_done(lane, slot);
		return 0;
	}
	slot->buf_index = -1;
	if (lane->io->reg_len && slot->buf >= (char *)lane->io->reg_base &&
	    slot->buf + slot->len <= (char *)lane->io->reg_base + lane->io->reg_len) {
		uint64_t rel = (uint64_t)(slot->buf - (char *)lane->io->reg_base);

		if (rel / IO_FIXED_BUF_MAX == (rel + slot->len - 1) / IO_FIXED_BUF_MAX)
			slot->buf_index = (int)(rel / IO_FIXED_BUF_MAX);
	}
	int rc = lane->io->ops->queue(lane, slot);

	if (rc == 0 && lane->io->opts.single_submit)
		rc = lane->io->ops->submit(lane);
	return rc;
}

/* ---- lane worker ----------------------------------------------------------------- */

/* Give slot the next piece of the queue head. Holds q_lock. Returns false if none. */
static bool piece_take(struct zinf_io *io, struct io_slot *slot)
{
	struct zinf_io_req *req = io->q_head;
	struct io_extent *e;
	uint64_t off, len, file_off, max_len;
	uint32_t file;

	if (!req)
		return false;
	e = io_extent_get(io, req->extent);
	off = req->next_piece_off_;
	len = req->len - off;
	io_extent_map(io, e, req->offset + off, &file, &file_off, &max_len);
	if (len > io->opts.block_size)
		len = io->opts.block_size;
	if (len > max_len)
		len = max_len;
	req->next_piece_off_ += len;
	if (req->next_piece_off_ == req->len) {
		/* atomic: the lanes peek at q_head without the lock (io_lane_main) */
		__atomic_store_n(&io->q_head, req->next_, __ATOMIC_SEQ_CST);
		if (!io->q_head)
			io->q_tail = NULL;
	}
	slot->req = req;
	slot->file = file;
	slot->file_off = file_off;
	slot->piece_off = req->offset + off;
	slot->piece_len = len;
	slot->len = len;
	slot->buf = (char *)req->buf + off;
	slot->bounced = false;
	slot->cut_to = 0;
	slot->first_try = true;
	if (slot->bounce && io->files[file].direct &&
	    (((uintptr_t)slot->buf | len) & (io->align - 1))) {
		slot->user_buf = slot->buf;
		slot->bounced = true;
		slot->buf = slot->bounce;
		slot->len = (len + io->align - 1) & ~(io->align - 1);
		if (req->op == ZINF_IO_WRITE) {
			memcpy(slot->bounce, slot->user_buf, len);
			memset(slot->bounce + len, 0, slot->len - len);
		}
	}
	return true;
}

/* A bounced write's last block, on an external file, where the piece ends inside it:
 * the file's bytes past the piece are read into the padding (so an extent shorter than
 * its file leaves the rest of the file as it was), and where the file ends inside the
 * block its end is kept in cut_to (the write's zeros past it are cut off after). Run on
 * the lane, outside the queue's lock. Another request on the same block meanwhile is
 * the caller's race, as with any unaligned O_DIRECT write. 0, or -errno. */
static int bounce_fill_tail(struct zinf_io *io, struct io_slot *s)
{
	struct io_file *f = &io->files[s->file];
	uint64_t last = s->len - io->align; /* the last block's place in the bounce buffer */
	ssize_t got;

	got = pread(f->fd, s->bounce + last, io->align, (off_t)(s->file_off + last));
	if (got < 0)
		return -errno;
	if ((uint64_t)got < io->align) { /* the file ends inside the block */
		uint64_t end = s->file_off + last + (uint64_t)got;

		memset(s->bounce + last + got, 0, io->align - (uint64_t)got);
		s->cut_to = end > s->file_off + s->piece_len ? end : s->file_off + s->piece_len;
	}
	memcpy(s->bounce + last, s->user_buf + last, s->piece_len - last);
	return 0;
}

void *io_lane_main(void *arg)
{
	struct io_lane *lane = arg;
	struct zinf_io *io = lane->io;
	int qd = (int)io->opts.queue_depth;
	struct io_slot *taken[qd], *done[qd];

	for (;;) {
		int n = 0;

		pthread_mutex_lock(&io->q_lock);
		while (lane->inflight == 0 && !io->q_head && !io->stopping)
			pthread_cond_wait(&io->q_cond, &io->q_lock);
		if (lane->inflight == 0 && !io->q_head && io->stopping) {
			pthread_mutex_unlock(&io->q_lock);
			break;
		}
		if (io->opts.overlap_events || lane->inflight == 0) {
			while (lane->free_slots && io->q_head) {
				struct io_slot *s = lane->free_slots;

				lane->free_slots = s->next;
				if (!piece_take(io, s)) {
					lane->free_slots = s;
					break;
				}
				taken[n++] = s;
			}
		}
		pthread_mutex_unlock(&io->q_lock);

		for (int i = 0; i < n; i++) {
			struct io_slot *s = taken[i];

			if (lane->inflight == 0)
				lane->busy_since_ns = io_now_ns();
			lane->inflight++;
			if (__atomic_load_n(&s->req->status, __ATOMIC_ACQUIRE) != 0) {
				/* the request already failed: skip the I/O */
				piece_finish(lane, s);
				continue;
			}
			if (s->bounced && s->req->op == ZINF_IO_WRITE && s->len > s->piece_len &&
			    io->files[s->file].path == io->n_paths) {
				int rc = bounce_fill_tail(io, s);

				if (rc) {
					piece_error(lane, s, rc,
						    "cannot read the block the write ends in");
					piece_finish(lane, s);
					continue;
				}
			}
			if (slot_start(lane, s) != 0) {
				piece_error(lane, s, -EIO, "backend refused the request");
				piece_finish(lane, s);
			}
		}
		if (!io->opts.single_submit && n > 0)
			io->ops->submit(lane);
		if (lane->inflight > 0) {
			/* Dekker-style with zinf_io_submit: publish want_work, then look at
			 * the queue; the submitter appends, then looks at want_work. */
			bool wait = true;

			if (lane->free_slots) {
				__atomic_store_n(&lane->want_work, 1, __ATOMIC_SEQ_CST);
				if (__atomic_load_n(&io->q_head, __ATOMIC_SEQ_CST))
					wait = false;
			}
			int got = io->ops->reap(lane, done, qd, wait);

			__atomic_store_n(&lane->want_work, 0, __ATOMIC_RELAXED);

			if (got < 0 && !lane->reap_failed) {
				zinf_logf(
					ZINF_LOG_ERROR,
					"zinf io: lane %d (%s): waiting for completions failed: %s",
					lane->idx, io->ops->name, strerror(-got));
				lane->reap_failed = true;
			}
			for (int i = 0; i < got; i++)
				slot_done(lane, done[i]);
			if (!io->opts.single_submit)
				io->ops->submit(lane); /* resubmitted continuations */
		}
	}
	return NULL;
}

/* ---- requests -------------------------------------------------------------------- */

/* Whether req can be queued: 0, or a code with the reason in why (req->error is left
 * alone: a request still in flight or uncollected keeps its own). */
static int req_check(struct zinf_io *io, const struct zinf_io_req *req, char *why, size_t len)
{
	struct io_extent *e;
	uint64_t a = io->align;
	int state;
	bool direct = false;

	if (!req->buf || req->len == 0 || (req->op != ZINF_IO_READ && req->op != ZINF_IO_WRITE)) {
		snprintf(why, len,
			 "request on extent %u: buffer %p, length %" PRIu64
			 ", op %d (expected a buffer, a length > 0 and read or write)",
			 req->extent, req->buf, req->len, (int)req->op);
		return -EINVAL;
	}
	state = __atomic_load_n(&req->state_, __ATOMIC_ACQUIRE);
	if (state == REQ_QUEUED || state == REQ_COLLECT) {
		snprintf(why, len,
			 "request on extent %u at offset %" PRIu64
			 " is still %s (a request can be resubmitted only after it completes%s)",
			 req->extent, req->offset,
			 state == REQ_QUEUED ? "in flight" : "waiting to be collected",
			 state == REQ_QUEUED ? "" : " and poll or wait has returned it");
		return ZINF_ESTATE;
	}
	e = io_extent_get(io, req->extent);
	if (!e) {
		snprintf(why, len, "%s of %" PRIu64 " bytes: unknown extent %u", op_name(req->op),
			 req->len, req->extent);
		return -EINVAL;
	}
	if (req->offset > e->len || req->len > e->len - req->offset) {
		snprintf(why, len,
			 "%s of %" PRIu64 " bytes at offset %" PRIu64
			 " of extent %u: past its end (%" PRIu64 " bytes)",
			 op_name(req->op), req->len, req->offset, req->extent, e->len);
		return -EINVAL;
	}
	for (int i = 0; i < e->n_parts; i++)
		direct |= io->files[e->part[i].file].direct;
	if (!direct)
		return 0;
	if (req->offset % a) {
		snprintf(why, len,
			 "%s at offset %" PRIu64 " of extent %u: offset not aligned to %" PRIu64
			 " bytes (O_DIRECT)",
			 op_name(req->op), req->offset, req->extent, a);
		return -EINVAL;
	}
	if (io->opts.bounce)
		return 0; /* the last block is padded inside the (aligned) extent */
	if ((uintptr_t)req->buf % a) {
		snprintf(why, len,
			 "%s of extent %u: buffer %p not aligned to %" PRIu64
			 " bytes (O_DIRECT; allocate it aligned or set bounce)",
			 op_name(req->op), req->extent, req->buf, a);
		return -EINVAL;
	}
	if (req->len % a) {
		snprintf(why, len,
			 "%s of extent %u: length %" PRIu64 " not a multiple of %" PRIu64
			 " bytes (O_DIRECT)",
			 op_name(req->op), req->extent, req->len, a);
		return -EINVAL;
	}
	return 0;
}

int zinf_io_submit(struct zinf_io *io, struct zinf_io_req **reqs, int n)
{
	int rc;

	if (n < 0 || (n > 0 && !reqs)) {
		io_set_error(io, "submit: %d requests at %p (expected a count >= 0 and an array)",
			     n, (void *)reqs);
		return -EINVAL;
	}
	for (int i = 0; i < n; i++) {
		char why[sizeof(reqs[i]->error)] = "";

		rc = reqs[i] ? req_check(io, reqs[i], why, sizeof(why)) : -EINVAL;
		if (rc == 0) {
			/* mark at once so the same request twice in one batch is caught */
			reqs[i]->error[0] = '\0';
			reqs[i]->state_ = REQ_QUEUED;
			continue;
		}
		if (reqs[i] && rc != ZINF_ESTATE) /* (a busy one keeps its own, unraced) */
			snprintf(reqs[i]->error, sizeof(reqs[i]->error), "%s", why);
		if (reqs[i])
			io_set_error(io, "submit: request %d of %d: %s", i, n, why);
		else
			io_set_error(io, "submit: request %d of %d is NULL", i, n);
		for (int k = 0; k < i; k++) /* each passed the check: this call marked it */
			reqs[k]->state_ = REQ_IDLE;
		return rc;
	}
	for (int i = 0; i < n; i++) {
		struct zinf_io_req *r = reqs[i];
		struct io_extent *e = io_extent_get(io, r->extent);

		r->status = 0;
		r->next_ = NULL;
		r->next_piece_off_ = 0;
		r->left_bytes_ = r->len;
		__atomic_add_fetch(&e->inflight, 1, __ATOMIC_ACQ_REL);
		if (r->op == ZINF_IO_WRITE && io->opts.checksum == ZINF_IO_CHECKSUM_CRC32C)
			__atomic_store_n(&e->crc_valid, false, __ATOMIC_RELEASE);
	}
	pthread_mutex_lock(&io->done_lock);
	io->inflight_reqs += (uint64_t)n;
	pthread_mutex_unlock(&io->done_lock);
	pthread_mutex_lock(&io->q_lock);
	for (int i = 0; i < n; i++) {
		if (io->q_tail)
			io->q_tail->next_ = reqs[i];
		else
			__atomic_store_n(&io->q_head, reqs[i], __ATOMIC_SEQ_CST);
		io->q_tail = reqs[i];
	}
	pthread_cond_broadcast(&io->q_cond);
	pthread_mutex_unlock(&io->q_lock);
	for (int l = 0; l < io->n_lanes; l++) {
		struct io_lane *lane = &io->lanes[l];

		if (__atomic_load_n(&lane->want_work, __ATOMIC_SEQ_CST) &&
		    __atomic_exchange_n(&lane->want_work, 0, __ATOMIC_SEQ_CST))
			io->ops->wake(lane);
	}
	return 0;
}

/* Pop up to max done requests. Holds done_lock. */
static int done_pop(struct zinf_io *io, struct zinf_io_req **done, int max)
{
	int n = 0;

	while (n < max && io->done_head) {
		struct zinf_io_req *r = io->done_head;

		io->done_head = r->next_;
		if (!io->done_head)
			io->done_tail = NULL;
		r->next_ = NULL;
		r->state_ = REQ_IDLE;
		done[n++] = r;
	}
	return n;
}

/* The collecting thread takes the messages of the failed requests it got (the last one
 * wins), as if the failures were its own calls'. */
static void take_errors(struct zinf_io *io, struct zinf_io_req **done, int n)
{
	for (int i = 0; i < n; i++) {
		if (done[i]->status)
			io_take_error(io, done[i]->error);
	}
}

int zinf_io_poll(struct zinf_io *io, struct zinf_io_req **done, int max)
{
	int n;

	if (max < 0 || (max > 0 && !done)) { /* as zinf_io_wait */
		io_set_error(io, "poll: max %d (expected 0 or more, and an array when above 0)",
			     max);
		return -EINVAL;
	}
	if (max == 0)
		return 0;
	pthread_mutex_lock(&io->done_lock);
	n = done_pop(io, done, max);
	pthread_mutex_unlock(&io->done_lock);
	take_errors(io, done, n);
	return n;
}

int zinf_io_wait(struct zinf_io *io, struct zinf_io_req **done, int min, int max, int timeout_ms)
{
	struct timespec deadline;
	int n = 0, rc = 0;

	if (!done || max <= 0 || min > max || min < 0 || timeout_ms < -1) {
		io_set_error(
			io,
			"wait: min %d, max %d, timeout %d ms (expected 0 <= min <= max, max > 0, a timeout of -1 or more, and an array)",
			min, max, timeout_ms);
		return -EINVAL;
	}
	if (timeout_ms >= 0) {
		clock_gettime(CLOCK_MONOTONIC, &deadline); /* done_cond's clock (io.c) */
		deadline.tv_sec += timeout_ms / 1000;
		deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&io->done_lock);
	for (;;) {
		n += done_pop(io, done + n, max - n);
		if (n >= min && (n > 0 || min == 0))
			break;
		if (timeout_ms < 0)
			pthread_cond_wait(&io->done_cond, &io->done_lock);
		else
			rc = pthread_cond_timedwait(&io->done_cond, &io->done_lock, &deadline);
		if (rc == ETIMEDOUT) {
			n += done_pop(io, done + n, max - n);
			break;
		}
	}
	pthread_mutex_unlock(&io->done_lock);
	take_errors(io, done, n);
	if (n == 0 && min > 0) {
		io_set_error(io, "wait: no request completed within %d ms", timeout_ms);
		return -ETIMEDOUT;
	}
	return n;
}

int zinf_io_drain(struct zinf_io *io)
{
	pthread_mutex_lock(&io->done_lock);
	while (io->inflight_reqs > 0)
		pthread_cond_wait(&io->drain_cond, &io->done_lock);
	pthread_mutex_unlock(&io->done_lock);
	return 0;
}

struct rw_waiter {
	struct zinf_io *io;
	bool done;
};

static void rw_done(struct zinf_io_req *req)
{
	struct rw_waiter *w = req->user;

	pthread_mutex_lock(&w->io->done_lock);
	w->done = true;
	pthread_cond_broadcast(&w->io->done_cond);
	pthread_mutex_unlock(&w->io->done_lock);
}

int zinf_io_rw(struct zinf_io *io, enum zinf_io_op op, uint32_t extent, uint64_t offset, void *buf,
	       uint64_t len)
{
	struct rw_waiter w = {.io = io};
	struct zinf_io_req req = {.op = op,
				  .extent = extent,
				  .offset = offset,
				  .len = len,
				  .buf = buf,
				  .done = rw_done,
				  .user = &w};
	struct zinf_io_req *r = &req;
	int rc;

	rc = zinf_io_submit(io, &r, 1);
	if (rc)
		return rc;
	pthread_mutex_lock(&io->done_lock);
	while (!w.done)
		pthread_cond_wait(&io->done_cond, &io->done_lock);
	pthread_mutex_unlock(&io->done_lock);
	if (req.status) /* failed on a lane: the message becomes this thread's */
		io_take_error(io, req.error);
	return req.status;
}

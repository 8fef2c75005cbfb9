/*
 * io_uring backend: one ring per lane sized to queue_depth, a sparse registered-file
 * table (files are added as the space manager creates them), optional fixed buffers
 * for the registered pinned region and optional SQPOLL.
 */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "io_internal.h"
#include "zinf/log.h"

struct uring_lane {
	struct io_uring ring;
	bool files_registered;
	bool bufs_registered;
	unsigned queued; /* sqes prepared but not submitted */
	int wake_fd;	 /* eventfd polled by the ring: zinf_io_submit wakes a waiting reap */
	uint64_t wake_buf;
};

/* user_data of the wake poll; never a slot */
static char wake_marker;

static void uring_arm_wake(struct uring_lane *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (!sqe) {
		io_uring_submit(&u->ring);
		sqe = io_uring_get_sqe(&u->ring);
	}
	if (!sqe)
		return;
	io_uring_prep_poll_add(sqe, u->wake_fd, POLLIN);
	io_uring_sqe_set_data(sqe, &wake_marker);
	u->queued++;
}

static int uring_lane_init(struct io_lane *lane, char *err, uint64_t err_len)
{
	struct zinf_io *io = lane->io;
	struct uring_lane *u = calloc(1, sizeof(*u));
	unsigned flags = 0;
	int rc;

	if (!u) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	if (io->opts.sqpoll)
		flags |= IORING_SETUP_SQPOLL;
	/* one entry more than the slots: the wake poll */
	rc = io_uring_queue_init(io->opts.queue_depth + 1, &u->ring, flags);
	if (rc == -EPERM && io->opts.sqpoll) {
		zinf_logf(ZINF_LOG_WARN,
			  "zinf io: io_uring SQPOLL refused (EPERM); using a plain ring");
		rc = io_uring_queue_init(io->opts.queue_depth + 1, &u->ring, 0);
	}
	if (rc < 0) {
		snprintf(err, err_len, "io_uring_queue_init(%u): %s", io->opts.queue_depth,
			 strerror(-rc));
		free(u);
		return rc;
	}
	u->files_registered = io_uring_register_files_sparse(&u->ring, IO_MAX_FILES) == 0;
	for (uint32_t i = 0; u->files_registered && i < io->n_files; i++) {
		if (io_uring_register_files_update(&u->ring, i, &io->files[i].fd, 1) != 1)
			u->files_registered = false;
	}
	if (!u->files_registered)
		zinf_logf(ZINF_LOG_INFO,
			  "zinf io: io_uring registered files unavailable; using plain fds");
	u->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (u->wake_fd < 0) {
		rc = -errno;
		snprintf(err, err_len, "eventfd: %s", strerror(-rc));
		io_uring_queue_exit(&u->ring);
		free(u);
		return rc;
	}
	uring_arm_wake(u);
	io_uring_submit(&u->ring);
	u->queued = 0;
	lane->be = u;
	return 0;
}

static void uring_lane_fini(struct io_lane *lane)
{
	struct uring_lane *u = lane->be;

	if (!u)
		return;
	io_uring_queue_exit(&u->ring);
	close(u->wake_fd);
	free(u);
	lane->be = NULL;
}

static int uring_file_added(struct io_lane *lane, uint32_t idx, int fd)
{
	struct uring_lane *u = lane->be;
	int rc;

	if (!u->files_registered)
		return 0;
	rc = io_uring_register_files_update(&u->ring, idx, &fd, 1);
	if (rc != 1) {
		/* keep it simple: stop using registered files on this ring */
		zinf_logf(ZINF_LOG_INFO,
			  "zinf io: io_uring file update failed (%s); using plain fds",
			  strerror(rc < 0 ? -rc : EIO));
		u->files_registered = false;
		return rc < 0 ? rc : -EIO;
	}
	return 0;
}

static int uring_buffer_register(struct io_lane *lane, void *base, uint64_t len)
{
	struct uring_lane *u = lane->be;
	uint64_t n = (len + IO_FIXED_BUF_MAX - 1) / IO_FIXED_BUF_MAX;
	struct iovec *iov = calloc(n, sizeof(*iov));
	int rc;

	if (!iov)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = i * IO_FIXED_BUF_MAX;

		iov[i].iov_base = (char *)base + off;
		iov[i].iov_len = len - off < IO_FIXED_BUF_MAX ? len - off : IO_FIXED_BUF_MAX;
	}
	rc = io_uring_register_buffers(&u->ring, iov, (unsigned)n);
	free(iov);
	if (rc == 0)
		u->bufs_registered = true;
	return rc;
}

static void uring_buffer_unregister(struct io_lane *lane)
{
	struct uring_lane *u = lane->be;
	int rc;

	if (!u->bufs_registered)
		return;
	do {
		rc = io_uring_unregister_buffers(&u->ring);
	} while (rc == -EINTR);
	if (rc < 0 && rc != -ENXIO) {
		/* The ring keeps its old table. It is never used (the layer has no range
		 * registered, so no piece gets a buffer index) and the next register on
		 * this ring fails with EBUSY, so the layer falls back to plain I/O. */
		zinf_logf(ZINF_LOG_WARN, "zinf io: lane %d: io_uring unregister buffers: %s",
			  lane->idx, strerror(-rc));
		return;
	}
	u->bufs_registered = false;
}

static int uring_queue(struct io_lane *lane, struct io_slot *slot)
{
	struct uring_lane *u = lane->be;
	struct io_file *f = &lane->io->files[slot->file];
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	bool fixed = slot->buf_index >= 0 && u->bufs_registered;
	int fd = u->files_registered ? (int)slot->file : f->fd;

	if (!sqe) {
		io_uring_submit(&u->ring);
		u->queued = 0;
		sqe = io_uring_get_sqe(&u->ring);
		if (!sqe)
			return -EBUSY;
	}
	if (slot->req->op == ZINF_IO_READ) {
		if (fixed)
			io_uring_prep_read_fixed(sqe, fd, slot->buf, (unsigned)slot->len,
						 slot->file_off, slot->buf_index);
		else
			io_uring_prep_read(sqe, fd, slot->buf, (unsigned)slot->len, slot->file_off);
	} else {
		if (fixed)
			io_uring_prep_write_fixed(sqe, fd, slot->buf, (unsigned)slot->len,
						  slot->file_off, slot->buf_index);
		else
			io_uring_prep_write(sqe, fd, slot->buf, (unsigned)slot->len,
					    slot->file_off);
	}
	if (u->files_registered)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data(sqe, slot);
	u->queued++;
	return 0;
}

static int uring_submit(struct io_lane *lane)
{
	struct uring_lane *u = lane->be;
	int rc;

	if (!u->queued && !(lane->io->opts.sqpoll))
		return 0;
	do {
		rc = io_uring_submit(&u->ring);
	} while (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY);
	u->queued = 0;
	return rc < 0 ? rc : 0;
}

static int uring_reap(struct io_lane *lane, struct io_slot **done, int max, bool wait)
{
	struct uring_lane *u = lane->be;
	struct io_uring_cqe *cqe;
	int n = 0, rc;

	if (wait) {
		do {
			rc = io_uring_wait_cqe(&u->ring, &cqe);
		} while (rc == -EINTR || rc == -EAGAIN);
		if (rc < 0)
			return rc;
	}
	while (n < max && io_uring_peek_cqe(&u->ring, &cqe) == 0) {
		struct io_slot *slot = io_uring_cqe_get_data(cqe);

		if ((void *)slot == &wake_marker) {
			io_uring_cqe_seen(&u->ring, cqe);
			if (read(u->wake_fd, &u->wake_buf, sizeof(u->wake_buf)) < 0 &&
			    errno != EAGAIN)
				continue; /* leave the poll disarmed: reap still works */
			uring_arm_wake(u);
			io_uring_submit(&u->ring);
			u->queued = 0;
			if (n == 0)
				return 0; /* woken for new work */
			continue;
		}
		slot->res = cqe->res;
		done[n++] = slot;
		io_uring_cqe_seen(&u->ring, cqe);
	}
	return n;
}

static void uring_wake(struct io_lane *lane)
{
	struct uring_lane *u = lane->be;
	uint64_t one = 1;

	if (write(u->wake_fd, &one, sizeof(one)) < 0)
		zinf_logf(ZINF_LOG_DEBUG, "zinf io: wake eventfd: %s", strerror(errno));
}

const struct io_backend_ops io_uring_ops = {
	.name = "io_uring",
	.lane_init = uring_lane_init,
	.lane_fini = uring_lane_fini,
	.file_added = uring_file_added,
	.buffer_register = uring_buffer_register,
	.buffer_unregister = uring_buffer_unregister,
	.queue = uring_queue,
	.submit = uring_submit,
	.reap = uring_reap,
	.wake = uring_wake,
};

/*
 * libaio backend: one kernel AIO context per lane sized to queue_depth, one iocb per
 * slot, batched io_submit. Unlike DeepSpeed's loop, every event's result is checked.
 */
#include <errno.h>
#include <libaio.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "io_internal.h"

struct aio_lane {
	io_context_t ctx;
	struct iocb *iocbs;    /* one per slot */
	struct iocb **pending; /* queued, not yet submitted */
	int n_pending;
	struct io_event *events;
	struct io_slot **failed; /* refused by io_submit: reported by the next reap */
	int n_failed;
	int wake_fd; /* eventfd polled through the context (IOCB_CMD_POLL) */
	struct iocb wake_cb;
	bool wake_armed;
};

static void aio_arm_wake(struct aio_lane *a)
{
	struct iocb *cb = &a->wake_cb;
	uint64_t v;

	if (a->wake_fd < 0)
		return;
	while (read(a->wake_fd, &v, sizeof(v)) > 0)
		;
	io_prep_poll(cb, a->wake_fd, POLLIN);
	cb->data = &a->wake_cb;
	a->wake_armed = io_submit(a->ctx, 1, &cb) == 1;
}

static int aio_lane_init(struct io_lane *lane, char *err, uint64_t err_len)
{
	int qd = (int)lane->io->opts.queue_depth, rc;
	struct aio_lane *a = calloc(1, sizeof(*a));

	if (!a)
		goto out_nomem;
	a->iocbs = calloc(qd, sizeof(*a->iocbs));
	a->pending = calloc(qd, sizeof(*a->pending));
	a->events = calloc(qd, sizeof(*a->events));
	a->failed = calloc(qd, sizeof(*a->failed));
	if (!a->iocbs || !a->pending || !a->events || !a->failed)
		goto out_nomem;
	rc = io_setup(qd + 1, &a->ctx); /* + the wake poll */
	if (rc < 0) {
		snprintf(err, err_len, "io_setup(%d): %s", qd, strerror(-rc));
		lane->be = a;
		a->ctx = 0;
		free(a->iocbs);
		free(a->pending);
		free(a->events);
		free(a->failed);
		free(a);
		lane->be = NULL;
		return rc;
	}
	/* a kernel without IOCB_CMD_POLL (< 4.18) just never wakes early */
	a->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	aio_arm_wake(a);
	lane->be = a;
	return 0;
out_nomem:
	if (a) {
		free(a->iocbs);
		free(a->pending);
		free(a->events);
		free(a->failed);
		free(a);
	}
	snprintf(err, err_len, "out of memory");
	return -ENOMEM;
}

static void aio_lane_fini(struct io_lane *lane)
{
	struct aio_lane *a = lane->be;

	if (!a)
		return;
	io_destroy(a->ctx);
	if (a->wake_fd >= 0)
		close(a->wake_fd);
	free(a->iocbs);
	free(a->pending);
	free(a->events);
	free(a->failed);
	free(a);
	lane->be = NULL;
}

static int aio_queue(struct io_lane *lane, struct io_slot *slot)
{
	struct aio_lane *a = lane->be;
	struct iocb *cb = &a->iocbs[slot - lane->slots];
	int fd = lane->io->files[slot->file].fd;

	if (slot->req->op == ZINF_IO_READ)
		io_prep_pread(cb, fd, slot->buf, slot->len, (long long)slot->file_off);
	else
		io_prep_pwrite(cb, fd, slot->buf, slot->len, (long long)slot->file_off);
	cb->data = slot;
	a->pending[a->n_pending++] = cb;
	return 0;
}

static int aio_submit(struct io_lane *lane)
{
	struct aio_lane *a = lane->be;
	int done = 0;

	while (done < a->n_pending) {
		int rc = io_submit(a->ctx, a->n_pending - done, a->pending + done);

		if (rc == -EINTR || rc == -EAGAIN)
			continue;
		if (rc <= 0) {
			/* report the first refused iocb as failed, try the rest again */
			struct io_slot *slot = a->pending[done]->data;

			slot->res = rc < 0 ? rc : -EIO;
			a->failed[a->n_failed++] = slot;
			done++;
			continue;
		}
		done += rc;
	}
	a->n_pending = 0;
	return 0;
}

static int aio_reap(struct io_lane *lane, struct io_slot **done, int max, bool wait)
{
	struct aio_lane *a = lane->be;
	int n = 0, rc;

	while (a->n_failed && n < max)
		done[n++] = a->failed[--a->n_failed];
	if (n)
		wait = false;
	do {
		rc = io_getevents(a->ctx, wait ? 1 : 0, max - n, a->events, NULL);
	} while (rc == -EINTR);
	if (rc < 0)
		return n ? n : rc;
	for (int i = 0; i < rc; i++) {
		struct io_slot *slot = a->events[i].data;

		if ((void *)slot == &a->wake_cb) {
			aio_arm_wake(a); /* woken for new work */
			continue;
		}
		slot->res = (int)(long)a->events[i].res;
		done[n++] = slot;
	}
	return n;
}

static void aio_wake(struct io_lane *lane)
{
	struct aio_lane *a = lane->be;
	uint64_t one = 1;

	if (a->wake_armed && write(a->wake_fd, &one, sizeof(one)) < 0)
		a->wake_armed = false;
}

const struct io_backend_ops io_libaio_ops = {
	.name = "libaio",
	.lane_init = aio_lane_init,
	.lane_fini = aio_lane_fini,
	.queue = aio_queue,
	.submit = aio_submit,
	.reap = aio_reap,
	.wake = aio_wake,
};

/*
 * psync backend: a pool of min(queue_depth, 64) threads per lane doing one pread or
 * pwrite per piece. The fallback when the kernel or a seccomp filter refuses io_uring
 * and libaio; the layer above continues short transfers exactly as for the others.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io_internal.h"

struct psync_lane {
	struct zinf_io *io;
	pthread_mutex_t lock;
	pthread_cond_t work_cond, done_cond;
	struct io_slot *work_head, *work_tail; /* submitted, not started */
	struct io_slot *done_head;	       /* finished, not reaped */
	struct io_slot *pend_head, *pend_tail; /* queued by the lane, not submitted */
	bool stop;
	bool woken; /* zinf_io_submit queued work: a waiting reap returns */
	int n_threads;
	pthread_t *threads;
};

static void *psync_main(void *arg)
{
	struct psync_lane *p = arg;

	for (;;) {
		struct io_slot *slot;
		ssize_t r;

		pthread_mutex_lock(&p->lock);
		while (!p->work_head && !p->stop)
			pthread_cond_wait(&p->work_cond, &p->lock);
		if (!p->work_head) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		slot = p->work_head;
		p->work_head = slot->next;
		if (!p->work_head)
			p->work_tail = NULL;
		pthread_mutex_unlock(&p->lock);

		int fd = p->io->files[slot->file].fd;

		if (slot->req->op == ZINF_IO_READ)
			r = pread(fd, slot->buf, slot->len, (off_t)slot->file_off);
		else
			r = pwrite(fd, slot->buf, slot->len, (off_t)slot->file_off);
		slot->res = r < 0 ? -errno : (int)r;

		pthread_mutex_lock(&p->lock);
		slot->next = p->done_head;
		p->done_head = slot;
		pthread_cond_signal(&p->done_cond);
		pthread_mutex_unlock(&p->lock);
	}
}

static void psync_stop(struct psync_lane *p)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work_cond);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->work_cond);
	pthread_cond_destroy(&p->done_cond);
	free(p->threads);
	free(p);
}

static int psync_lane_init(struct io_lane *lane, char *err, uint64_t err_len)
{
	int want = lane->io->opts.queue_depth < 64 ? (int)lane->io->opts.queue_depth : 64, rc;
	struct psync_lane *p = calloc(1, sizeof(*p));

	if (!p || !(p->threads = calloc(want, sizeof(pthread_t)))) {
		free(p);
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	p->io = lane->io;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work_cond, NULL);
	pthread_cond_init(&p->done_cond, NULL);
	for (int i = 0; i < want; i++) {
		rc = pthread_create(&p->threads[i], NULL, psync_main, p);
		if (rc) {
			snprintf(err, err_len, "cannot start psync thread %d: %s", i, strerror(rc));
			psync_stop(p);
			return -rc;
		}
		p->n_threads++;
	}
	lane->be = p;
	return 0;
}

static void psync_lane_fini(struct io_lane *lane)
{
	if (lane->be)
		psync_stop(lane->be);
	lane->be = NULL;
}

static int psync_queue(struct io_lane *lane, struct io_slot *slot)
{
	struct psync_lane *p = lane->be;

	slot->next = NULL;
	if (p->pend_tail)
		p->pend_tail->next = slot;
	else
		p->pend_head = slot;
	p->pend_tail = slot;
	return 0;
}

static int psync_submit(struct io_lane *lane)
{
	struct psync_lane *p = lane->be;

	if (!p->pend_head)
		return 0;
	pthread_mutex_lock(&p->lock);
	if (p->work_tail)
		p->work_tail->next = p->pend_head;
	else
		p->work_head = p->pend_head;
	p->work_tail = p->pend_tail;
	pthread_cond_broadcast(&p->work_cond);
	pthread_mutex_unlock(&p->lock);
	p->pend_head = p->pend_tail = NULL;
	return 0;
}

static int psync_reap(struct io_lane *lane, struct io_slot **done, int max, bool wait)
{
	struct psync_lane *p = lane->be;
	int n = 0;

	pthread_mutex_lock(&p->lock);
	while (wait && !p->done_head && !p->woken)
		pthread_cond_wait(&p->done_cond, &p->lock);
	p->woken = false;
	while (n < max && p->done_head) {
		done[n++] = p->done_head;
		p->done_head = p->done_head->next;
	}
	pthread_mutex_unlock(&p->lock);
	return n;
}

static void psync_wake(struct io_lane *lane)
{
	struct psync_lane *p = lane->be;

	pthread_mutex_lock(&p->lock);
	p->woken = true;
	pthread_cond_signal(&p->done_cond);
	pthread_mutex_unlock(&p->lock);
}

const struct io_backend_ops io_psync_ops = {
	.name = "psync",
	.lane_init = psync_lane_init,
	.lane_fini = psync_lane_fini,
	.queue = psync_queue,
	.submit = psync_submit,
	.reap = psync_reap,
	.wake = psync_wake,
};

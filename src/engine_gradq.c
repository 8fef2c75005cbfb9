/*
 * Gradients added in the background (zinf.overlap_gradients). zinf_module_grads_ready
 * queues the copy of a module's gradients from the device to pinned memory (on the
 * engine's d2h stream, with an event after it) and the module; this worker waits for
 * the copy, frees the device buffer, adds the gradients to the fp32 accumulators (host
 * memory, or the sub-groups on NVMe of engine_grad.c) and frees the pinned buffer, while
 * the model goes on with the next module's backward: on a GPU the copy runs beside that
 * compute instead of holding the model's thread. Modules are added in the order they
 * were queued, so the sums are the same, bit for bit, as when the model's thread adds
 * them itself. (The copy is queued only on a GPU with a roomy budget, grads_async;
 * otherwise grads_ready copies at once and hands over the stage alone.) A device buffer
 * still being copied counts against the device budget: zinf_module_grads and
 * zinf_module_wait drain the queue when what they need does not fit.
 *
 * At most EGQ_DEPTH modules wait; one more waits for room (and pinned memory is bounded
 * anyway: the copy's buffer comes out of the pinned pool, which waits for frees). Every
 * reader of the accumulators waits for the queue first: zinf_step, zinf_engine_sync,
 * destroy. A module's next gradients need no wait: the worker adds in queue order, and
 * the update that clears a module's accumulators runs only after zinf_step.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine_internal.h"
#include "timeline.h"

bool engine_gq_on_worker(const struct zinf_engine *e)
{
	return e->gq.started && pthread_equal(pthread_self(), e->gq.thread);
}

static void *worker(void *arg)
{
	struct zinf_engine *e = arg;
	struct egradq *q = &e->gq;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct egq_job job;
		uint64_t t0;
		int rc;

		while (!q->n && !q->quit)
			pthread_cond_wait(&q->cv, &q->lock);
		if (!q->n)
			break;
		job = q->jobs[q->head];
		pthread_mutex_unlock(&q->lock);
		rc = job.grads ? zinf_event_synchronize(q->copied[q->head]) : 0;
		t0 = zinf_timeline_now_ns();
		if (job.grads) {
			zinf_timeline_add(e->timeline, ZINF_TRACK_D2H, e->modules[job.module].name,
					  job.t_copy, t0);
			zinf_store_free_scratch(e->store, job.grads);
		}
		if (rc) { /* the module's gradients never arrived: the step is dropped */
			__atomic_store_n(&e->grads_lost, true, __ATOMIC_RELAXED);
			rc = engine_fail(e, rc, "module %u gradients: copy to pinned memory: %s",
					 job.module, zinf_device_last_error(e->dev));
		} else {
			rc = engine_grads_add(e, job.module, job.stage);
		}
		zinf_pinned_free(e->pinned, job.stage);
		zinf_timeline_add(e->timeline, ZINF_TRACK_OPTIMIZER, "add gradients", t0,
				  zinf_timeline_now_ns());
		pthread_mutex_lock(&q->lock);
		if (rc && !q->error) {
			q->error = rc;
			snprintf(q->msg, sizeof(q->msg), "%s", q->scratch);
		}
		q->head = (q->head + 1) % EGQ_DEPTH;
		q->n--;
		pthread_cond_broadcast(&q->cv);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int engine_gq_start(struct zinf_engine *e)
{
	struct egradq *q = &e->gq;
	int rc;

	for (int i = 0; i < EGQ_DEPTH; i++) {
		rc = q->copied[i] ? 0 : zinf_event_create(e->dev, &q->copied[i]);
		if (rc)
			return engine_fail(e, rc, "gradients: events: %s",
					   zinf_device_last_error(e->dev));
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cv, NULL);
	rc = pthread_create(&q->thread, NULL, worker, e);
	if (rc) {
		pthread_mutex_destroy(&q->lock);
		pthread_cond_destroy(&q->cv);
		return engine_fail(e, -rc, "gradients: cannot start their thread");
	}
	q->started = true;
	return 0;
}

/* The worker's failure, reported once (lock held). */
static int take_error(struct zinf_engine *e)
{
	struct egradq *q = &e->gq;
	int rc = q->error;

	if (rc) {
		engine_fail(e, rc, "gradients (added in the background): %s", q->msg);
		q->error = 0;
	}
	return rc;
}

int engine_gq_submit(struct zinf_engine *e, uint32_t m, void *stage, void *grads)
{
	struct egradq *q = &e->gq;
	uint64_t t0 = zinf_timeline_now_ns(), t1;
	bool waited = false;
	unsigned slot;
	int rc;

	pthread_mutex_lock(&q->lock);
	while (q->n == EGQ_DEPTH) {
		waited = true;
		pthread_cond_wait(&q->cv, &q->lock);
	}
	/* the slot is this thread's until n counts it: the worker takes only queued ones */
	slot = (q->head + q->n) % EGQ_DEPTH;
	pthread_mutex_unlock(&q->lock);
	t1 = zinf_timeline_now_ns();
	rc = grads ? zinf_device_memcpy_async(e->d2h, stage, grads, e->modules[m].grad_bytes,
					      ZINF_COPY_D2H)
		   : 0;
	if (!rc && grads)
		rc = zinf_event_record(q->copied[slot], e->d2h);
	if (rc) { /* nothing queued for the worker: wait for what was, and give both back;
		   * the module's gradients are lost, so is the step */
		__atomic_store_n(&e->grads_lost, true, __ATOMIC_RELAXED);
		zinf_stream_synchronize(e->d2h);
		zinf_store_free_scratch(e->store, grads);
		zinf_pinned_free(e->pinned, stage);
		return engine_fail(e, rc, "module %u gradients: %s", m,
				   zinf_device_last_error(e->dev));
	}
	pthread_mutex_lock(&q->lock);
	q->jobs[slot] = (struct egq_job){.module = m, .stage = stage, .grads = grads, .t_copy = t1};
	q->n++;
	pthread_cond_broadcast(&q->cv);
	if (waited) { /* until the slot was free */
		q->wait_ns += t1 - t0;
		zinf_timeline_add(e->timeline, ZINF_TRACK_WAIT, "gradients queue", t0, t1);
	}
	rc = take_error(e);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int engine_gq_drain(struct zinf_engine *e)
{
	struct egradq *q = &e->gq;
	int rc;

	if (!q->started)
		return 0;
	pthread_mutex_lock(&q->lock);
	while (q->n)
		pthread_cond_wait(&q->cv, &q->lock);
	rc = take_error(e);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

void engine_gq_stop(struct zinf_engine *e)
{
	struct egradq *q = &e->gq;

	if (!q->started)
		return;
	pthread_mutex_lock(&q->lock);
	q->quit = true; /* the worker empties the queue first */
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cv);
	q->started = false;
	for (int i = 0; i < EGQ_DEPTH; i++) {
		zinf_event_destroy(q->copied[i]);
		q->copied[i] = NULL;
	}
}

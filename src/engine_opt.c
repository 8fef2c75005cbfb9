/*
 * The optimizer step in the background (zinf.overlap_optimizer). zinf_step needs every
 * gradient for the norm, clipping and the fp16 overflow check, so it computes those
 * itself; the element-wise updates and the writes of the new parameters to their home
 * tier then run here, module by module in forward order, while the model goes on with
 * the next step's forward. A fetch of a module whose update has not been written yet
 * waits for exactly that module (the prefetcher skips such modules), so the results
 * are bit-identical to a synchronous step.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "timeline.h"

bool engine_opt_on_worker(const struct zinf_engine *e)
{
	return e->opt.started && pthread_equal(pthread_self(), e->opt.thread);
}

static void *worker(void *arg)
{
	struct zinf_engine *e = arg;
	struct eopt *o = &e->opt;

	pthread_mutex_lock(&o->lock);
	for (;;) {
		struct zinf_adam_step_info info;
		double t0;
		int rc;

		while (!o->job && !o->quit)
			pthread_cond_wait(&o->cv, &o->lock);
		if (!o->job)
			break;
		info = o->info;
		pthread_mutex_unlock(&o->lock);
		t0 = engine_now_seconds();
		rc = engine_update(e, &info);
		zinf_timeline_add(e->timeline, ZINF_TRACK_OPTIMIZER, "step (background)",
				  (uint64_t)(t0 * 1e9), (uint64_t)(engine_now_seconds() * 1e9));
		pthread_mutex_lock(&o->lock);
		e->optimizer_seconds += engine_now_seconds() - t0;
		if (rc && !o->error)
			o->error = rc;
		o->job = false;
		pthread_cond_broadcast(&o->cv);
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

int engine_opt_start(struct zinf_engine *e)
{
	struct eopt *o = &e->opt;
	int rc;

	o->pending = calloc(e->n_modules + 1, 1);
	if (!o->pending)
		return engine_fail(e, -ENOMEM, "optimizer: cannot allocate its module flags");
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cv, NULL);
	rc = pthread_create(&o->thread, NULL, worker, e);
	if (rc) {
		pthread_mutex_destroy(&o->lock);
		pthread_cond_destroy(&o->cv);
		return engine_fail(e, -rc, "optimizer: cannot start its thread");
	}
	o->started = true;
	return 0;
}

void engine_opt_submit(struct zinf_engine *e, const struct zinf_adam_step_info *info)
{
	struct eopt *o = &e->opt;

	pthread_mutex_lock(&o->lock);
	for (uint32_t m = 0; m < e->n_modules; m++)
		o->pending[m] = e->modules[m].n_params > 0;
	o->info = *info;
	o->job = true;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->lock);
}

void engine_module_updated(struct zinf_engine *e, uint32_t m)
{
	struct emodule *mod = &e->modules[m];

	e->update_touched = true;
	for (uint32_t k = 0; k < mod->n_params && !engine_on_dev(e, m); k++) {
		struct eparam *p = &e->params[mod->first_param + k];
		if (p->grad_acc) /* NULL: on NVMe, consumed per sub-group */
			memset(p->grad_acc, 0, p->elems * sizeof(float));
	}
	if (!e->opt.started)
		return;
	pthread_mutex_lock(&e->opt.lock);
	e->opt.pending[m] = 0;
	pthread_cond_broadcast(&e->opt.cv);
	pthread_mutex_unlock(&e->opt.lock);
}

/* Wait (lock held) while cond holds and the step has not failed; time it as a wait. */
static int wait_locked(struct zinf_engine *e, uint32_t m, bool whole)
{
	struct eopt *o = &e->opt;
	uint64_t t0 = zinf_timeline_now_ns(), t1;
	bool waited = false;
	int rc;

	while ((whole ? o->job : o->pending[m] != 0) && !(o->error && !o->job)) {
		waited = true;
		pthread_cond_wait(&o->cv, &o->lock);
	}
	rc = (whole || o->pending[m]) ? o->error : 0;
	if (rc)
		engine_fail(e, rc, "optimizer step %" PRIu64 ": %s", e->steps, o->msg);
	if (rc && whole) {
		/* Reported once, like a failed synchronous step. An update that changed
		 * nothing is undone (zinf_step counted it), so that the step can be
		 * repeated; one that did left the engine torn (engine_update). */
		o->error = 0;
		memset(o->pending, 0, e->n_modules);
		if (!e->update_touched) {
			e->steps--;
			e->scaler = e->scaler_before;
		}
	}
	if (waited) {
		t1 = zinf_timeline_now_ns();
		if (!whole) /* compute waited for a module; a drain is the step's own time */
			o->wait_ns += t1 - t0;
		/* named for what it waited for: the optimizer's update, not the data */
		zinf_timeline_add(e->timeline, ZINF_TRACK_WAIT, "optimizer update", t0, t1);
	}
	return rc;
}

int engine_opt_wait_module(struct zinf_engine *e, uint32_t m)
{
	int rc;

	if (!e->opt.started)
		return 0;
	pthread_mutex_lock(&e->opt.lock);
	rc = wait_locked(e, m, false);
	pthread_mutex_unlock(&e->opt.lock);
	return rc;
}

int engine_opt_drain(struct zinf_engine *e)
{
	int rc;

	if (!e->opt.started)
		return 0;
	pthread_mutex_lock(&e->opt.lock);
	rc = wait_locked(e, 0, true);
	pthread_mutex_unlock(&e->opt.lock);
	return rc;
}

bool engine_opt_module_pending(struct zinf_engine *e, uint32_t m)
{
	bool pending;

	if (!e->opt.started)
		return false;
	pthread_mutex_lock(&e->opt.lock);
	pending = e->opt.pending[m] != 0;
	pthread_mutex_unlock(&e->opt.lock);
	return pending;
}

void engine_opt_stop(struct zinf_engine *e)
{
	struct eopt *o = &e->opt;

	if (o->started) {
		pthread_mutex_lock(&o->lock);
		o->quit = true;
		pthread_cond_broadcast(&o->cv);
		pthread_mutex_unlock(&o->lock);
		pthread_join(o->thread, NULL);
		pthread_mutex_destroy(&o->lock);
		pthread_cond_destroy(&o->cv);
		o->started = false;
	}
	free(o->pending);
	o->pending = NULL;
}

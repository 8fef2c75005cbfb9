/*
 * The optimizer step (zinf_step): the global gradient norm, clipping, the fp16 overflow
 * check and the schedule, then the updates, module by module in forward order, either
 * here or on the optimizer thread (engine_opt.c); zinf_engine_sync waits for them.
 * Host-resident state is updated here; NVMe state by engine_nvme.c, device state by
 * engine_dstate.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "clip.h"
#include "engine_internal.h"
#include "prefetch.h"
#include "timeline.h"
#include "zinf/error.h"
#include "zinf/log.h"

/* ---- the optimizer step ------------------------------------------------------------- */

static void clear_grads(struct zinf_engine *e)
{
	if (e->dev_state && engine_dstate_clear(e))
		zinf_logf(ZINF_LOG_ERROR, "%s", e->last_error);
	if (e->nvme_state) {
		engine_grad_clear(e);
		return;
	}
	for (uint32_t i = 0; i < e->n_params; i++)
		if (!engine_on_dev(e, e->params[i].module))
			memset(e->params[i].grad_acc, 0, e->params[i].elems * 4);
}

/* Host-resident state: update a module's parameters, then write all of them to the
 * store at once (each NVMe chunk written whole, once). */
static int step_module(struct zinf_engine *e, struct emodule *m,
		       const struct zinf_adam_step_info *info)
{
	char *copy = e->staging;
	int rc;

	for (uint32_t k = 0; k < m->n_params; k++) {
		struct eparam *p = &e->params[m->first_param + k];
		struct zinf_adam *adam = p->decay ? e->adam_decay : e->adam_no_decay;
		struct zinf_adam_shard sh = engine_param_shard(p, copy);
		e->update_touched = true; /* the master and moments change in place */
		rc = zinf_adam_step(adam, &sh, info);
		if (rc)
			return engine_fail(e, rc, "param %u: %s", m->first_param + k,
					   zinf_adam_last_error(adam));
		e->srcs[k] = p->dtype == ZINF_DTYPE_F32 ? (const void *)p->master : copy;
		if (p->dtype != ZINF_DTYPE_F32)
			copy += p->elems * 2;
	}
	rc = zinf_store_module_write(e->store, m->store_id, e->srcs);
	return rc ? engine_fail(e, rc, "%s", zinf_store_last_error(e->store)) : 0;
}

/* The update failed after changing state: nothing but whole loads mends that. */
static void mark_torn(struct zinf_engine *e, uint64_t step)
{
	snprintf(e->torn_msg, sizeof(e->torn_msg), "step %" PRIu64 "'s update failed part way (%s)",
		 step, engine_msg(e));
	e->n_torn = 0;
	for (uint32_t m = 0; m < e->n_modules; m++) {
		e->torn_mods[m] = e->modules[m].n_params > 0;
		e->n_torn += e->torn_mods[m];
	}
	e->torn = true;
}

static int update_modules(struct zinf_engine *e, const struct zinf_adam_step_info *info)
{
	void *out = NULL;
	int rc = 0;

	if (e->nvme_state)
		return engine_nvme_step(e, info);
	if (e->dev_state)
		rc = engine_dstate_out_alloc(e, &out);
	/* module by module in forward order: the modules with state in host memory on the
	 * CPU, the others on the device (engine_dstate.c) */
	for (uint32_t m = 0; m < e->n_modules && !rc; m++) {
		if (!e->modules[m].n_params) /* nothing to update or write home */
			continue;
		rc = engine_update_stop_asked(e);
		if (rc)
			break;
		if (engine_on_dev(e, m)) {
			rc = engine_dstate_step_module(e, &e->modules[m], out, info);
			continue;
		}
		rc = step_module(e, &e->modules[m], info);
		if (!rc)
			engine_module_updated(e, m);
	}
	if (out) {
		int frc = zinf_store_free_scratch(e->store, out);
		if (frc && !rc)
			rc = engine_fail(e, frc, "optimizer step on the device: %s",
					 zinf_store_last_error(e->store));
	}
	return rc;
}

int engine_update_stop_asked(struct zinf_engine *e)
{
	/* read on the updating thread; a signal handler may set it on any thread */
	if (!e->stop || !__atomic_load_n(e->stop, __ATOMIC_RELAXED))
		return 0;
	__atomic_store_n(&e->stopped, true, __ATOMIC_RELEASE);
	return engine_fail(e, -ECANCELED,
			   "update stopped part way: asked to stop (zinf_engine_set_stop)");
}

void zinf_engine_set_stop(struct zinf_engine *e, const volatile int *stop)
{
	e->stop = stop;
}

bool zinf_engine_stopped(const struct zinf_engine *e)
{
	return __atomic_load_n(&e->stopped, __ATOMIC_ACQUIRE);
}

int engine_update(struct zinf_engine *e, const struct zinf_adam_step_info *info)
{
	int rc;

	e->update_touched = false;
	rc = update_modules(e, info);
	if (rc && e->update_touched)
		mark_torn(e, info->step);
	return rc;
}

int engine_check_torn(struct zinf_engine *e, const char *what)
{
	if (!e->torn)
		return 0;
	return engine_fail(e, ZINF_ESTATE,
			   "%s refused: %s, which left the parameters and optimizer state a mix "
			   "of two steps; load every module whole (zinf_module_load or "
			   "zinf_module_load_state; %u not yet) and set the progress, or resume "
			   "from a checkpoint in a new engine",
			   what, e->torn_msg, e->n_torn);
}

void engine_module_reloaded(struct zinf_engine *e, uint32_t m)
{
	if (e->torn && e->torn_mods[m]) {
		e->torn_mods[m] = 0;
		e->n_torn--;
	}
}

int zinf_engine_sync(struct zinf_engine *e)
{
	int rc = engine_gq_drain(e);
	int rc2, rc3;

	engine_grad_writes_wait(e);
	rc2 = engine_opt_drain(e);
	rc3 = engine_nvme_loads_wait(e);

	return rc ? rc : rc2 ? rc2 : rc3;
}

/* The gradients' sum of squares, parameter by parameter in order wherever each
 * accumulator is (host memory or the device), added in that order: runs of accumulators
 * on the device are summed ENGINE_NORM_BATCH at a time, one wait each. */
static int grads_sumsq(struct zinf_engine *e, double *sumsq)
{
	const struct eparam *run[ENGINE_NORM_BATCH];
	double s[ENGINE_NORM_BATCH];
	uint32_t i = 0, n;
	int rc;

	while (i < e->n_params) {
		if (!engine_on_dev(e, e->params[i].module)) {
			*sumsq += engine_sumsq_f32(e, e->params[i].grad_acc, e->params[i].elems);
			i++;
			continue;
		}
		for (n = 0; n < ENGINE_NORM_BATCH && i < e->n_params &&
			    engine_on_dev(e, e->params[i].module);
		     n++, i++)
			run[n] = &e->params[i];
		rc = engine_dstate_sumsq(e, run, n, s);
		if (rc)
			return rc;
		for (uint32_t k = 0; k < n; k++)
			*sumsq += s[k];
	}
	return 0;
}

int zinf_step(struct zinf_engine *e, struct zinf_step_result *result)
{
	double t0 = engine_now_seconds(), sumsq = 0, loss_scale = zinf_loss_scale(e);
	struct zinf_step_result unused, *out = result ? result : &unused;
	struct zinf_grad_clip clip;
	struct zinf_adam_step_info info;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!e->finalized)
		return engine_fail(e, ZINF_ESTATE, "step before finalize");
	/* counts beyond ENGINE_MAX_COUNT could not be set back (zinf_engine_progress_set; a
	 * checkpoint keeps them as JSON numbers) */
	if (e->steps >= ENGINE_MAX_COUNT || e->skipped >= ENGINE_MAX_COUNT ||
	    e->scaler.iteration >= ENGINE_MAX_COUNT)
		return engine_fail(e, ZINF_ESTATE,
				   "step refused: steps %llu, skipped %llu, scaler_iteration %llu: "
				   "a count is at its limit of 2^53",
				   (unsigned long long)e->steps, (unsigned long long)e->skipped,
				   (unsigned long long)e->scaler.iteration);
	/* Before anything changes: the update would rewrite parameters the model may still
	 * read, and gradients still out would be lost. */
	rc = engine_check_not_held(e, "step", 0, e->n_modules, true, ZINF_ESTATE);
	if (rc)
		return rc;
	rc = engine_opt_drain(e); /* the previous step's updates, if still running */
	if (!rc) /* loads' writes still going on: a failed one refuses the step, which the
		  * caller repeats (its flush then writes that sub-group again) */
		rc = engine_nvme_loads_wait(e);
	if (!rc)
		rc = engine_check_torn(e, "step");
	if (rc)
		return rc;
	/* the gradients still being added; a failure there that lost gradients drops the
	 * step below, any other is the step's error */
	rc = engine_gq_drain(e);
	if (rc && !e->grads_lost)
		return rc;
	if (e->grads_lost) {
		char why[512];
		snprintf(why, sizeof(why), "%s",
			 rc ? e->last_error
			    : "reported earlier by zinf_module_grads_ready or zinf_engine_sync");
		clear_grads(e);
		e->grads_lost = false;
		return engine_fail(
			e, -EIO,
			"step dropped: a gradient of this step could not be accumulated (%s); the gradients were cleared and the next step starts afresh",
			why);
	}
	if (e->nvme_state) {
		/* closes the sub-groups still open: a failed write refuses the step, which
		 * can be called again */
		rc = engine_grad_sumsq(e, &sumsq);
		if (rc)
			return rc;
	} else {
		rc = grads_sumsq(e, &sumsq);
		if (rc)
			return rc;
	}
	/* The step ends the prefetcher's window; nothing may stay fetched ahead while the
	 * parameters are rewritten. */
	if (e->prefetch)
		zinf_prefetch_end_step(e->prefetch);
	/* The accumulators hold the sum over gas micro-batches: average them. */
	zinf_grad_clip_compute(sumsq / (double)(e->gas * e->gas), loss_scale, e->max_norm, &clip);
	out->grad_norm = clip.norm;
	out->loss_scale = loss_scale;
	e->scaler_before = e->scaler;
	if (e->fp16) {
		rc = zinf_loss_scaler_update(&e->scaler, clip.overflow);
		if (rc)
			return engine_fail(e, rc, "fp16: %s", e->scaler.last_error);
	}
	if (clip.overflow) {
		e->skipped++;
		out->skipped = true;
		out->step = e->steps;
		/* the rate held for the next step, as DeepSpeed's get_lr() shows it */
		out->lr = zinf_lr_of_step(&e->sched, e->steps + 1);
		clear_grads(e);
		if (e->prefetch)
			zinf_prefetch_start_step(e->prefetch);
		zinf_logf(ZINF_LOG_INFO, "step skipped: gradient overflow at loss scale %g",
			  loss_scale);
		out->seconds = engine_now_seconds() - t0;
		return 0;
	}
	info.step = e->steps + 1;
	info.lr = zinf_lr_of_step(&e->sched, e->steps + 1);
	info.grad_scale = clip.grad_scale / (float)e->gas;
	if (e->opt.on) {
		/* The updates run in the background; fetches wait per module. */
		engine_opt_submit(e, &info);
	} else {
		rc = engine_update(e, &info);
		if (rc && !e->update_touched) /* nothing changed: the step can be repeated */
			e->scaler = e->scaler_before;
		if (rc)
			return rc;
	}
	e->steps++;
	if (e->prefetch)
		zinf_prefetch_start_step(e->prefetch);
	out->step = e->steps;
	out->lr = info.lr;
	out->seconds = engine_now_seconds() - t0;
	if (!e->opt.on)
		e->optimizer_seconds += out->seconds;
	zinf_timeline_add(e->timeline, ZINF_TRACK_OPTIMIZER, "step", (uint64_t)(t0 * 1e9),
			  (uint64_t)(engine_now_seconds() * 1e9));
	return 0;
}

/* ---- progress (resume) ---------------------------------------------------------------- */

int zinf_engine_progress_get(struct zinf_engine *e, struct zinf_engine_progress *out)
{
	int rc;

	if (!out)
		return engine_fail(e, -EINVAL, "progress read: out is NULL");
	memset(out, 0, sizeof(*out));
	rc = engine_opt_drain(e);
	if (!rc) /* a mix of two steps has no step count to checkpoint with */
		rc = engine_check_torn(e, "progress read");
	if (rc)
		return rc;
	out->steps = e->steps;
	out->skipped = e->skipped;
	out->loss_scale = e->scaler.scale;
	out->scaler_iteration = e->scaler.iteration;
	out->scaler_last_overflow_iter = e->scaler.last_overflow_iter;
	out->scaler_hysteresis_left = e->scaler.hysteresis_left;
	return 0;
}

int zinf_engine_progress_set(struct zinf_engine *e, const struct zinf_engine_progress *in)
{
	int rc;

	if (!in)
		return engine_fail(e, -EINVAL, "progress set: in is NULL");
	if (!e->finalized)
		return engine_fail(e, ZINF_ESTATE, "progress set before finalize");
	rc = engine_check_not_held(e, "progress set", 0, e->n_modules, true, ZINF_ESTATE);
	if (rc)
		return rc;
	if (in->steps > ENGINE_MAX_COUNT || in->skipped > ENGINE_MAX_COUNT ||
	    in->scaler_iteration > ENGINE_MAX_COUNT)
		return engine_fail(
			e, -EINVAL,
			"progress: steps %llu, skipped %llu, scaler_iteration %llu (expected each at most 2^53)",
			(unsigned long long)in->steps, (unsigned long long)in->skipped,
			(unsigned long long)in->scaler_iteration);
	if (!(in->loss_scale > 0) || !(in->loss_scale <= ZINF_MAX_LOSS_SCALE))
		return engine_fail(e, -EINVAL,
				   "progress: loss_scale %g (expected > 0, at most 1e42)",
				   in->loss_scale);
	if (e->fp16 && e->scaler.dynamic && in->loss_scale < e->scaler.opts.min_loss_scale)
		return engine_fail(e, -EINVAL,
				   "progress: loss_scale %g (below fp16.min_loss_scale %g)",
				   in->loss_scale, e->scaler.opts.min_loss_scale);
	if (in->scaler_last_overflow_iter < -1 ||
	    (in->scaler_last_overflow_iter >= 0 &&
	     (uint64_t)in->scaler_last_overflow_iter >= in->scaler_iteration))
		return engine_fail(e, -EINVAL,
				   "progress: scaler_last_overflow_iter %lld (expected -1 or below "
				   "scaler_iteration %llu)",
				   (long long)in->scaler_last_overflow_iter,
				   (unsigned long long)in->scaler_iteration);
	if (in->scaler_hysteresis_left == 0 || /* (an overflow would wrap it) */
	    in->scaler_hysteresis_left > e->scaler.opts.hysteresis)
		return engine_fail(
			e, -EINVAL,
			"progress: scaler_hysteresis_left %u (expected 1 to fp16.hysteresis %u)",
			in->scaler_hysteresis_left, e->scaler.opts.hysteresis);
	rc = engine_opt_drain(e);
	if (rc)
		return rc;
	e->steps = in->steps;
	e->skipped = in->skipped;
	e->scaler.scale = in->loss_scale;
	e->scaler.iteration = in->scaler_iteration;
	e->scaler.last_overflow_iter = in->scaler_last_overflow_iter;
	e->scaler.hysteresis_left = in->scaler_hysteresis_left;
	e->scaler.overflows = in->skipped;
	if (e->torn && !e->n_torn) {
		/* every module loaded whole since the failure: the gradients left from the
		 * torn step, and any added since, belong to no state the engine now holds;
		 * the queue's adds land first so that none arrives after the clear */
		(void)engine_gq_drain(e);
		clear_grads(e);
		e->grads_lost = false;
		e->torn = false;
	}
	return 0;
}

/*
 * The engine (include/zinf/engine.h): the config's tiers brought up and tied together.
 * Parameters live in the shard store. The fp32 master weights, Adam moments and gradient
 * accumulators live on the device with the update running there (offload_optimizer none:
 * engine_dstate.c), or in host memory (cpu: one allocation carved per parameter) or on
 * NVMe (nvme: engine_nvme.c) with the optimizer on the CPU; to those two, gradients come
 * from the device one module at a time through a pinned staging buffer. This file: bring-up, registration, finalize and
 * the per-micro-batch calls; loading and saving are in engine_load.c, the optimizer step
 * in engine_step.c (its background thread in engine_opt.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clip.h"
#include "engine_internal.h"
#include "host_limits.h"
#include "optim.h"
#include "pool.h"
#include "prefetch.h"
#include "tier_opts.h"
#include "timeline.h"
#include "zinf/error.h"
#include "zinf/log.h"

int engine_fail(struct zinf_engine *e, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	/* the model's thread reads last_error meanwhile: a worker writes its own */
	vsnprintf(engine_msg(e), sizeof(e->last_error), fmt, ap);
	va_end(ap);
	zinf_error_one_line(engine_msg(e)); /* a module's name may hold a newline */
	return code;
}

char *engine_msg(struct zinf_engine *e)
{
	if (engine_opt_on_worker(e))
		return e->opt.msg;
	if (engine_gq_on_worker(e))
		return e->gq.scratch;
	return e->last_error;
}

int zinf_engine_write_trace(struct zinf_engine *e)
{
	int rc;

	if (!e->timeline || e->trace_written)
		return 0;
	rc = zinf_timeline_write(e->timeline, e->cfg->v.zinf.trace);
	if (rc)
		return engine_fail(e, rc, "zinf.trace: cannot write %s: %s", e->cfg->v.zinf.trace,
				   zinf_strerror(rc));
	e->trace_written = true;
	return 0;
}

const char *zinf_last_error(const struct zinf_engine *e)
{
	return e ? e->last_error : "";
}

/* ---- bring-up ----------------------------------------------------------------------- */

static int create_optimizer(struct zinf_engine *e, char *err, size_t errlen)
{
	const struct zinf_config_values *v = &e->cfg->v;
	struct zinf_adam_opts o;
	unsigned cpus = zinf_cpu_count();
	int rc;

	zinf_adam_opts_init(&o);
	/* Config: Adam|AdamW; Adam decouples its decay only with adam_w_mode. */
	o.type = v->optimizer.type == ZINF_OPT_ADAMW || v->optimizer.adam_w_mode ? ZINF_ADAMW
										 : ZINF_ADAM;
	o.beta1 = v->optimizer.betas[0];
	o.beta2 = v->optimizer.betas[1];
	o.eps = v->optimizer.eps;
	o.bias_correction = v->optimizer.bias_correction;
	o.threads = cpus;
	o.weight_decay = v->optimizer.weight_decay;
	rc = zinf_adam_create(&e->adam_decay, &o);
	if (!rc) {
		o.weight_decay = 0;
		rc = zinf_adam_create_sharing(&e->adam_no_decay, &o, e->adam_decay);
	}
	if (rc)
		snprintf(err, errlen, "optimizer: cannot start (%s)", zinf_strerror(rc));
	return rc;
}

static int create_schedules(struct zinf_engine *e, char *err, size_t errlen)
{
	const struct zinf_config_values *v = &e->cfg->v;
	struct zinf_loss_scale_opts lso;
	int rc;

	zinf_lr_schedule_opts_init(&e->sched);
	e->sched.type = (enum zinf_lr_schedule_type)v->scheduler.type;
	e->sched.lr = v->optimizer.lr;
	e->sched.warmup_min_lr = v->scheduler.warmup_min_lr;
	e->sched.warmup_max_lr = v->scheduler.warmup_max_lr;
	e->sched.warmup_num_steps = (int64_t)v->scheduler.warmup_num_steps;
	e->sched.warmup_type = (enum zinf_warmup_type)v->scheduler.warmup_type;
	e->sched.total_num_steps = (int64_t)v->scheduler.total_num_steps;
	e->sched.warmup_min_ratio = v->scheduler.warmup_min_ratio;
	e->sched.cos_min_ratio = v->scheduler.cos_min_ratio;
	e->sched.last_batch_iteration = v->scheduler.last_batch_iteration;
	rc = zinf_lr_schedule_check(&e->sched, err, errlen);
	if (rc)
		return rc;
	e->fp16 = v->fp16.enabled;
	zinf_loss_scale_opts_init(&lso);
	lso.loss_scale = v->fp16.loss_scale;
	lso.initial_scale_power = v->fp16.initial_scale_power;
	lso.loss_scale_window = (uint32_t)v->fp16.loss_scale_window;
	lso.hysteresis = (uint32_t)v->fp16.hysteresis;
	lso.consecutive_hysteresis = v->fp16.consecutive_hysteresis;
	lso.min_loss_scale = v->fp16.min_loss_scale;
	rc = zinf_loss_scaler_init(&e->scaler, &lso);
	if (rc)
		snprintf(err, errlen, "fp16: %s", e->scaler.last_error);
	return rc;
}

/* Create the pinned pool of size bytes (0: the pinned module's default) and register it
 * with the I/O engine: it is where every NVMe transfer lands (io_uring fixed buffers). */
static int pinned_open(struct zinf_engine *e, uint64_t size, char *err, size_t errlen)
{
	struct zinf_pinned_opts popts;
	int rc;

	zinf_config_pinned_opts(e->cfg, &popts);
	popts.device = e->dev;
	popts.size = size;
	rc = zinf_pinned_create(&popts, &e->pinned, err, errlen);
	if (rc || !e->io)
		return rc;
	if (zinf_io_register_buffer(e->io, zinf_pinned_base(e->pinned),
				    zinf_pinned_size(e->pinned)))
		zinf_logf(ZINF_LOG_INFO, "pinned pool not registered with the I/O engine: %s",
			  zinf_io_last_error(e->io));
	return 0;
}

/* zinf.pinned_memory_limit "auto" (resolved or not): the pool is made at finalize, of
 * what the run can use, up to the limit. */
static bool pinned_is_auto(const struct zinf_config *cfg)
{
	int i = zinf_key_find("zinf.pinned_memory_limit");

	return cfg->is_auto[i] || cfg->source[i] == ZINF_SRC_RESOLVED;
}

static int create_tiers(struct zinf_engine *e, char *err, size_t errlen)
{
	struct zinf_device_opts dopts;
	struct zinf_pinned_opts popts;
	struct zinf_io_opts iopts;
	struct zinf_store_opts sopts;
	int rc;

	zinf_config_device_opts(e->cfg, &dopts);
	rc = zinf_device_create(&dopts, &e->dev, err, errlen);
	if (rc)
		return rc;
	rc = zinf_config_io_opts(e->cfg, &iopts);
	if (rc) {
		snprintf(err, errlen, "zinf.nvme_paths: more than %d paths", ZINF_IO_MAX_PATHS);
		return rc;
	}
	if (iopts.n_paths) {
		rc = zinf_io_create(&iopts, &e->io, err, errlen);
		if (rc)
			return rc;
	}
	zinf_config_pinned_opts(e->cfg, &popts);
	e->pinned_cap = popts.size ? popts.size : zinf_host_memory_bytes() / 4;
	if (!pinned_is_auto(e->cfg)) {
		rc = pinned_open(e, popts.size, err, errlen);
		if (rc)
			return rc;
	}
	zinf_config_store_opts(e->cfg, &sopts);
	sopts.device = e->dev;
	sopts.pinned = e->pinned;
	sopts.io = e->io;
	if (e->cfg->v.zinf.trace) {
		char why[256];
		rc = zinf_timeline_check_path(e->cfg->v.zinf.trace, why, sizeof(why));
		if (rc) {
			snprintf(err, errlen, "zinf.trace: cannot write %s: %s",
				 e->cfg->v.zinf.trace, why);
			return rc;
		}
		rc = zinf_timeline_create(&e->timeline);
		if (rc) {
			snprintf(err, errlen, "zinf.trace: cannot allocate the timeline");
			return rc;
		}
	}
	sopts.timeline = e->timeline;
	rc = zinf_store_create(&sopts, &e->store, err, errlen);
	if (rc)
		return rc;
	rc = zinf_stream_create(e->dev, &e->d2h);
	if (!rc)
		rc = zinf_stream_create(e->dev, &e->zero);
	if (rc)
		snprintf(err, errlen, "device: cannot create a stream: %s",
			 zinf_device_last_error(e->dev));
	return rc;
}

int zinf_engine_create(const struct zinf_config *cfg, struct zinf_engine **out, char *err,
		       size_t errlen)
{
	const struct zinf_config_values *v;
	struct zinf_engine *e;
	int rc;

	if (!err) /* as zinf_io_create: no message wanted (snprintf writes nothing) */
		errlen = 0;
	if (out)
		*out = NULL;
	if (!cfg || !out) {
		snprintf(err, errlen, "engine: %s is NULL", !cfg ? "cfg" : "out");
		return -EINVAL;
	}
	v = &cfg->v;
	for (int i = 0; i < zinf_n_keys; i++) {
		if (cfg->is_auto[i] && !(zinf_keys[i].flags & ZKF_AUTO_AT_OPEN)) {
			snprintf(
				err, errlen,
				"%s: \"auto\" not resolved (resolve the config with zinf_config_resolve first)",
				zinf_keys[i].path);
			return ZINF_ECONFIG;
		}
	}
	if (cfg->world_size > 1) {
		snprintf(
			err, errlen,
			"world size %d: more than one rank needs the comm layer, not built yet (expected 1)",
			cfg->world_size);
		return -ENOTSUP;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(err, errlen, "engine: out of host memory");
		return -ENOMEM;
	}
	e->cfg = cfg;
	pthread_mutex_init(&e->stats_lock, NULL);
	e->nvme_state = v->zero.offload_optimizer.device == ZINF_OFFLOAD_NVME;
	e->dev_mode = v->zero.offload_optimizer.device == ZINF_OFFLOAD_NONE ||
		      (v->zero.offload_optimizer.device == ZINF_OFFLOAD_CPU &&
		       v->zero.offload_optimizer.ratio < 1);
	e->gas = v->gradient_accumulation_steps ? v->gradient_accumulation_steps : 1;
	e->max_norm = v->gradient_clipping;
	/* With the state on the device, gradients never leave it and the update is a few
	 * kernels: neither needs a thread of its own. */
	e->opt.on = v->zinf.overlap_optimizer && !e->dev_mode;
	e->gq.on = v->zinf.overlap_gradients && !e->dev_mode;
	rc = create_tiers(e, err, errlen);
	if (!rc)
		rc = create_optimizer(e, err, errlen);
	if (!rc)
		rc = create_schedules(e, err, errlen);
	if (rc) {
		zinf_engine_destroy(e);
		return rc;
	}
	*out = e;
	return 0;
}

void zinf_engine_destroy(struct zinf_engine *e)
{
	if (!e)
		return;
	engine_gq_stop(e);  /* gradients queued are added first */
	engine_opt_stop(e); /* a step in the background finishes first */
	for (uint32_t m = 0; m < e->n_modules; m++) {
		if (e->modules[m].grads)
			zinf_store_free_scratch(e->store, e->modules[m].grads);
		free(e->modules[m].name);
	}
	zinf_prefetch_destroy(e->prefetch);
	engine_nvme_destroy(e);
	engine_dstate_free(e);
	zinf_adam_destroy(e->adam_no_decay); /* on adam_decay's threads */
	zinf_adam_destroy(e->adam_decay);
	zinf_store_destroy(e->store); /* (the model's blocks with it) */
	free(e->model_blocks);
	zinf_stream_destroy(e->d2h);
	zinf_stream_destroy(e->zero);
	if (e->io && e->pinned)
		zinf_io_unregister_buffer(e->io);
	zinf_io_destroy(e->io);
	zinf_pinned_destroy(e->pinned);
	zinf_device_destroy(e->dev);
	if (e->timeline) {
		if (zinf_engine_write_trace(e)) /* (unless written already) */
			zinf_logf(ZINF_LOG_ERROR, "%s", e->last_error);
		zinf_timeline_destroy(e->timeline);
	}
	free(e->state);
	free(e->staging);
	free(e->srcs);
	free(e->torn_mods);
	free(e->params);
	free(e->modules);
	pthread_mutex_destroy(&e->stats_lock);
	free(e);
}

/* ---- registration ------------------------------------------------------------------- */

static uint64_t module_elems(const void *ctx, uint32_t m)
{
	return ((const struct zinf_engine *)ctx)->modules[m].elems;
}

/* Which modules keep their optimizer state on the device, kept up to date as modules
 * and parameters are registered (finalize's checks and sizes read it). */
static void split_state(struct zinf_engine *e)
{
	e->dev_first = engine_state_split(&e->cfg->v, e->n_modules, module_elems, e);
	e->dev_state = e->dev_first < e->n_modules;
}

int zinf_module_add(struct zinf_engine *e, const char *name, uint32_t *module)
{
	struct emodule *m;
	int rc;

	if (!e)
		return -EINVAL;
	if (!name || !module)
		return engine_fail(e, -EINVAL, "module add: %s is NULL (required)",
				   !name ? "name" : "module");
	if (e->finalized)
		return engine_fail(e, ZINF_ESTATE, "module %s: added after finalize", name);
	if (e->n_modules == e->cap_modules) {
		uint32_t cap = e->cap_modules ? 2 * e->cap_modules : 16;
		struct emodule *v = realloc(e->modules, cap * sizeof(*v));
		if (!v)
			return engine_fail(e, -ENOMEM, "module %s: out of host memory", name);
		e->modules = v;
		e->cap_modules = cap;
	}
	m = &e->modules[e->n_modules];
	memset(m, 0, sizeof(*m));
	m->name = strdup(name); /* before the store holds it: a failure leaves nothing */
	if (!m->name)
		return engine_fail(e, -ENOMEM, "module %s: out of host memory", name);
	rc = zinf_store_module_add(e->store, name, &m->store_id);
	if (rc) {
		free(m->name);
		m->name = NULL;
	}
	if (rc)
		return engine_fail(e, rc, "%s", zinf_store_last_error(e->store));
	if (m->store_id != e->n_modules) /* the prefetcher names modules by store id */
		return engine_fail(e, ZINF_ESTATE, "module %s: store id %u, expected %u", name,
				   m->store_id, e->n_modules);
	m->first_param = e->n_params;
	*module = e->n_modules++;
	split_state(e);
	return 0;
}

int zinf_param_add(struct zinf_engine *e, uint32_t module, const char *name, enum zinf_dtype dtype,
		   int ndim, const uint64_t *shape, unsigned flags, uint32_t *param)
{
	struct eparam *p;
	struct emodule *m;
	int rc;

	if (!e)
		return -EINVAL;
	if (!name || !shape || !param)
		return engine_fail(e, -EINVAL, "param add: %s is NULL (required)",
				   !name    ? "name"
				   : !shape ? "shape"
					    : "param");
	if (e->finalized)
		return engine_fail(e, ZINF_ESTATE, "param %s: added after finalize", name);
	if (module >= e->n_modules || module != e->n_modules - 1)
		return engine_fail(e, -EINVAL, "param %s: module %u is not the last module added",
				   name, module);
	if (e->n_params == e->cap_params) {
		uint32_t cap = e->cap_params ? 2 * e->cap_params : 64;
		struct eparam *v = realloc(e->params, cap * sizeof(*v));
		if (!v)
			return engine_fail(e, -ENOMEM, "param %s: out of host memory", name);
		e->params = v;
		e->cap_params = cap;
	}
	m = &e->modules[module];
	p = &e->params[e->n_params];
	memset(p, 0, sizeof(*p));
	rc = zinf_store_param_add(e->store, m->store_id, name, dtype, ndim, shape, &p->store_id);
	if (rc)
		return engine_fail(e, rc, "%s", zinf_store_last_error(e->store));
	p->module = module;
	p->dtype = dtype;
	p->elems = 1;
	for (int d = 0; d < ndim; d++)
		p->elems *= shape[d];
	p->decay = ndim >= 2 && !(flags & ZINF_PARAM_NO_DECAY);
	m->elems += p->elems;
	p->grad_off = m->grad_bytes;
	m->grad_bytes += (p->elems * 4 + GRAD_ALIGN - 1) / GRAD_ALIGN * GRAD_ALIGN;
	m->n_params++;
	*param = e->n_params++;
	split_state(e);
	return 0;
}

/* Modules whose parameters add up to no more than stage3_param_persistence_threshold
 * elements stay on the device once fetched, as DeepSpeed keeps small parameters; at most a
 * quarter of the device budget goes to them, so they can never starve a fetch. */
static void mark_persistent(struct zinf_engine *e, const uint64_t *elems)
{
	uint64_t threshold = e->cfg->v.zero.stage3_param_persistence_threshold, used = 0;
	struct zinf_device_stats ds;

	zinf_device_get_stats(e->dev, &ds);
	for (uint32_t m = 0; m < e->n_modules; m++) {
		uint64_t bytes = zinf_store_module_bytes(e->store, m);
		if (!elems[m] || elems[m] > threshold || used + bytes > ds.limit / 4)
			continue;
		zinf_store_set_persistent(e->store, m, true);
		used += bytes;
	}
}

/* Fetching ahead waits until the optimizer has written a module's new values. */
static bool prefetch_can_fetch(void *user, uint32_t store_module)
{
	return !engine_opt_module_pending(user, store_module);
}

static int create_prefetch(struct zinf_engine *e)
{
	const struct zinf_config_values *v = &e->cfg->v;
	struct zinf_prefetch_opts o = {
		.bucket_elems = v->zero.stage3_prefetch_bucket_size,
		.max_live_elems = v->zero.stage3_max_live_parameters,
		.max_reuse_elems = v->zero.stage3_max_reuse_distance,
		.can_fetch = prefetch_can_fetch,
		.user = e,
	};
	uint64_t *elems = calloc(e->n_modules + 1, sizeof(*elems));
	int rc;

	if (!elems)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->n_params; i++)
		elems[e->modules[e->params[i].module].store_id] += e->params[i].elems;
	mark_persistent(e, elems);
	rc = zinf_prefetch_create(e->store, e->n_modules, elems, &o, &e->prefetch);
	free(elems);
	return rc ? engine_fail(e, rc, "prefetch: cannot allocate its trace") : 0;
}

/* offload_param.max_in_cpu: how much of the NVMe homes it kept in host memory. */
static void log_host_split(struct zinf_engine *e)
{
	uint64_t host = zinf_store_host_split_bytes(e->store);
	char a[32], b[32];

	if (e->cfg->v.zero.offload_param.device != ZINF_OFFLOAD_NVME ||
	    !e->cfg->v.zero.offload_param.max_in_cpu)
		return;
	zinf_logf(ZINF_LOG_INFO,
		  "zero_optimization.offload_param.max_in_cpu: %s of parameter homes in host "
		  "memory, %s on nvme",
		  zinf_format_bytes(host, a, sizeof(a)),
		  zinf_format_bytes(zinf_store_chunk_bytes(e->store), b, sizeof(b)));
}

uint64_t engine_dtype_bytes(enum zinf_dtype t)
{
	return t == ZINF_DTYPE_F32 ? 4 : 2;
}

int zinf_engine_finalize(struct zinf_engine *e)
{
	uint64_t total = 0, off = 0;
	uint32_t max_params = 0;
	int rc;

	if (e->finalized)
		return engine_fail(e, ZINF_ESTATE, "finalize called twice");
	if (e->laid_out)
		return engine_fail(e, ZINF_ESTATE,
				   "finalize: an earlier call failed after laying out the "
				   "parameters (its error said why); destroy the engine and create "
				   "a new one");
	rc = engine_check_host_memory(e);
	if (!rc)
		rc = engine_check_nvme_space(e);
	/* the state on the device first, from the top of the heap: the store's check of
	 * parameters homed there then counts it. Given back on a failure before the layout
	 * (modules may still be added, and another finalize then takes it again, cleared). */
	if (!rc && e->dev_state)
		rc = engine_dstate_alloc(e);
	if (rc) {
		engine_dstate_free(e);
		return rc;
	}
	if (!e->pinned) {
		char err[512];
		uint64_t need = engine_pinned_need(e);

		rc = pinned_open(e, need < e->pinned_cap ? need : e->pinned_cap, err, sizeof(err));
		if (rc) {
			engine_dstate_free(e);
			return engine_fail(e, rc, "%s", err);
		}
		zinf_store_set_pinned(e->store, e->pinned);
	}
	e->laid_out = true;
	rc = zinf_store_finalize(e->store);
	if (rc)
		return engine_fail(e, rc, "%s", zinf_store_last_error(e->store));
	log_host_split(e);
	/* staging holds a module's copies in their dtypes (the step's new ones,
	 * zinf_module_load's conversions); zinf_param_save passes a parameter through it in
	 * pieces */
	e->staging_bytes = 0;
	for (uint32_t m = 0; m < e->n_modules; m++) {
		uint64_t b = 0;
		for (uint32_t k = 0; k < e->modules[m].n_params; k++)
			b += e->params[e->modules[m].first_param + k].elems *
			     engine_dtype_bytes(e->params[e->modules[m].first_param + k].dtype);
		if (b > e->staging_bytes)
			e->staging_bytes = b;
		if (e->modules[m].n_params > max_params)
			max_params = e->modules[m].n_params;
	}
	e->staging_bytes = (e->staging_bytes + 3) / 4 * 4; /* whole floats, at least one */
	if (!e->staging_bytes)
		e->staging_bytes = 4;
	e->staging = malloc(e->staging_bytes);
	e->srcs = calloc(max_params ? max_params : 1, sizeof(*e->srcs));
	e->torn_mods = calloc(e->n_modules + 1, 1);
	if (!e->staging || !e->srcs || !e->torn_mods)
		return engine_fail(e, -ENOMEM,
				   "parameter staging: cannot allocate %" PRIu64 " bytes",
				   e->staging_bytes);
	rc = engine_check_pinned(e);
	if (!rc)
		rc = create_prefetch(e);
	if (rc)
		return rc;
	if (e->opt.on) {
		rc = engine_opt_start(e);
		if (rc)
			return rc;
	}
	if (e->gq.on) {
		rc = engine_gq_start(e);
		if (rc)
			return rc;
	}
	e->grads_async = engine_grads_async_fits(e);
	if (e->nvme_state) {
		rc = engine_nvme_finalize(e);
		if (rc)
			return rc;
		e->finalized = true;
		return 0;
	}
	/* master, m, v and the gradient accumulator in host memory: 16 bytes per parameter of
	 * the modules whose state is not on the device (allocated above), zeroed */
	total = 0;
	for (uint32_t i = 0; i < e->n_params; i++)
		if (!engine_on_dev(e, e->params[i].module))
			total += e->params[i].elems;
	e->state_bytes = total * 16;
	e->state = calloc(total ? total * 4 : 1, sizeof(float));
	if (!e->state)
		return engine_fail(e, -ENOMEM,
				   "optimizer state: cannot allocate %" PRIu64
				   " bytes of host memory",
				   e->state_bytes);
	for (uint32_t i = 0; i < e->n_params; i++) {
		struct eparam *p = &e->params[i];
		if (engine_on_dev(e, p->module))
			continue;
		p->master = e->state + off;
		p->exp_avg = e->state + total + off;
		p->exp_avg_sq = e->state + 2 * total + off;
		p->grad_acc = e->state + 3 * total + off;
		p->group = -1;
		off += p->elems;
	}
	e->finalized = true;
	return 0;
}

/* ---- per micro-batch ---------------------------------------------------------------- */

int engine_check_module(struct zinf_engine *e, uint32_t module)
{
	if (!e->finalized)
		return engine_fail(e, ZINF_ESTATE, "module %u: used before finalize", module);
	if (module >= e->n_modules)
		return engine_fail(e, -EINVAL, "module %u: no such module (%u registered)", module,
				   e->n_modules);
	return 0;
}

int engine_check_not_held(struct zinf_engine *e, const char *call, uint32_t first, uint32_t n,
			  bool grads, int code)
{
	for (uint32_t i = first; i < first + n && i < e->n_modules; i++) {
		const struct emodule *m = &e->modules[i];
		if (m->fetched)
			return engine_fail(e, code,
					   "%s refused: module %u (%s): fetched, not released",
					   call, i, m->name);
		if (grads && m->grads)
			return engine_fail(
				e, code,
				"%s refused: module %u (%s): gradients taken, zinf_module_grads_ready not called",
				call, i, m->name);
	}
	return 0;
}

#define STORE_CALL(e, call)                                                                        \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_)                                                                           \
			return engine_fail(e, rc_, "%s", zinf_store_last_error((e)->store));       \
	} while (0)

int zinf_module_fetch(struct zinf_engine *e, uint32_t module)
{
	int rc = engine_check_module(e, module);
	bool held = false;

	if (rc)
		return rc;
	/* The last step's update of this module must be home before it is read. */
	rc = engine_opt_wait_module(e, module);
	if (rc)
		return rc;
	if (e->prefetch) {
		rc = zinf_prefetch_fetch(e->prefetch, e->modules[module].store_id, &held);
		if (rc)
			return engine_fail(e, rc, "module %u: prefetch bookkeeping failed", module);
	}
	/* The model's module is queued before anything fetched ahead, which must not take
	 * the room it needs. */
	if (!held)
		STORE_CALL(e, zinf_store_fetch(e->store, e->modules[module].store_id));
	e->modules[module].fetched++;
	if (e->prefetch)
		zinf_prefetch_advance(e->prefetch);
	return 0;
}

int zinf_module_wait(struct zinf_engine *e, uint32_t module)
{
	int rc = engine_check_module(e, module);

	if (rc)
		return rc;
	uint64_t t0 = zinf_timeline_now_ns();
	rc = zinf_store_wait(e->store, e->modules[module].store_id);
	/* Modules fetched ahead may hold the space this fetch needs: give them up. */
	if (rc == ZINF_EBUDGET && e->prefetch && zinf_prefetch_drop(e->prefetch) > 0)
		rc = zinf_store_wait(e->store, e->modules[module].store_id);
	/* and gradient buffers still being copied to pinned memory are freed once added */
	if (rc == ZINF_EBUDGET && e->grads_async) {
		int drc = engine_gq_drain(e);

		if (drc)
			return drc;
		rc = zinf_store_wait(e->store, e->modules[module].store_id);
	}
	if (rc)
		return engine_fail(e, rc, "%s", zinf_store_last_error(e->store));
	e->modules[module].t_ready = zinf_timeline_now_ns();
	if (e->modules[module].t_ready - t0 > 20000) /* waits under 20 us are noise */
		zinf_timeline_add(e->timeline, ZINF_TRACK_WAIT, e->modules[module].name, t0,
				  e->modules[module].t_ready);
	return 0;
}

void *zinf_param_data(struct zinf_engine *e, uint32_t param)
{
	/* the model's fetch, not the prefetcher's hold of the same module */
	if (param >= e->n_params || !e->modules[e->params[param].module].fetched)
		return NULL;
	return zinf_store_param_data(e->store, e->params[param].store_id);
}

int zinf_module_release(struct zinf_engine *e, uint32_t module)
{
	int rc = engine_check_module(e, module);

	if (rc)
		return rc;
	/* Checked here, not left to the store: a module fetched ahead holds a store use
	 * count the model's release must not take. */
	if (!e->modules[module].fetched)
		return engine_fail(e, ZINF_ESTATE,
				   "module %u (%s): released more often than fetched", module,
				   e->modules[module].name);
	STORE_CALL(e, zinf_store_release(e->store, e->modules[module].store_id));
	e->modules[module].fetched--;
	if (e->modules[module].t_ready) {
		zinf_timeline_add(e->timeline, ZINF_TRACK_COMPUTE, e->modules[module].name,
				  e->modules[module].t_ready, zinf_timeline_now_ns());
		e->modules[module].t_ready = 0;
	}
	if (e->prefetch)
		zinf_prefetch_release(e->prefetch, e->modules[module].store_id);
	return 0;
}

int zinf_module_grads(struct zinf_engine *e, uint32_t module)
{
	struct emodule *m;
	int rc = engine_check_module(e, module);

	if (rc)
		return rc;
	m = &e->modules[module];
	if (m->grads)
		return engine_fail(e, ZINF_ESTATE, "module %u: gradient buffers already out",
				   module);
	/* The accumulators are cleared once the last step's update of the module is done. */
	rc = engine_opt_wait_module(e, module);
	if (rc)
		return rc;
	if (!m->grad_bytes)
		return 0;
	/* From the store, which can evict cached modules for it; modules fetched ahead
	 * give way first if that is not enough. */
	rc = zinf_store_alloc_scratch(e->store, m->grad_bytes, &m->grads);
	if (rc == ZINF_EBUDGET && e->prefetch && zinf_prefetch_drop(e->prefetch) > 0)
		rc = zinf_store_alloc_scratch(e->store, m->grad_bytes, &m->grads);
	/* Below a module fetched ahead, the buffer would sit in the middle of the room the
	 * modules share once that one is released (a head as large as that room then finds
	 * it in two pieces): the modules fetched ahead give way, and the store puts the
	 * buffer above what they leave cached. */
	if (!rc && e->prefetch && zinf_store_held_above(e->store, m->grads) &&
	    zinf_prefetch_drop(e->prefetch) > 0) {
		rc = zinf_store_free_scratch(e->store, m->grads);
		m->grads = NULL;
		if (!rc)
			rc = zinf_store_alloc_scratch(e->store, m->grad_bytes, &m->grads);
	}
	if (rc == ZINF_EBUDGET && e->grads_async) { /* buffers still being copied */
		int drc = engine_gq_drain(e);

		if (drc)
			return drc;
		rc = zinf_store_alloc_scratch(e->store, m->grad_bytes, &m->grads);
	}
	if (rc == ZINF_EBUDGET)
		return engine_fail(e, rc, "module %u gradients: %s", module,
				   zinf_store_last_error(e->store));
	if (!rc)
		rc = zinf_device_memset_async(e->zero, m->grads, 0, m->grad_bytes);
	if (!rc)
		rc = zinf_stream_synchronize(e->zero);
	if (rc)
		return engine_fail(e, rc, "module %u gradients: %s", module,
				   zinf_device_last_error(e->dev));
	return 0;
}

float *zinf_param_grad(struct zinf_engine *e, uint32_t param)
{
	struct emodule *m;

	if (param >= e->n_params)
		return NULL;
	m = &e->modules[e->params[param].module];
	return m->grads ? (float *)((char *)m->grads + e->params[param].grad_off) : NULL;
}

int zinf_module_grads_ready(struct zinf_engine *e, uint32_t module)
{
	struct emodule *m;
	void *stage = NULL;
	uint64_t t0;
	int frc, rc = engine_check_module(e, module);

	if (rc)
		return rc;
	m = &e->modules[module];
	if (!m->grads)
		return m->grad_bytes ? engine_fail(e, ZINF_ESTATE,
						   "module %u: no gradient buffers out", module)
				     : 0;
	if (engine_on_dev(e, module)) { /* added on the device */
		t0 = zinf_timeline_now_ns();
		rc = engine_dstate_grads_add(e, m);
		if (rc) /* added in part, maybe: the step will be dropped, as on NVMe */
			e->grads_lost = true;
		zinf_timeline_add(e->timeline, ZINF_TRACK_OPTIMIZER, m->name, t0,
				  zinf_timeline_now_ns());
		frc = zinf_store_free_scratch(e->store, m->grads);
		m->grads = NULL;
		if (frc && !rc)
			rc = engine_fail(e, frc, "module %u gradients: %s", module,
					 zinf_store_last_error(e->store));
		return rc;
	}
	rc = zinf_pinned_alloc(e->pinned, m->grad_bytes, UINT64_MAX, &stage);
	if (rc)
		return engine_fail(e, rc, "module %u gradients: pinned staging: %s", module,
				   zinf_pinned_last_error(e->pinned));
	if (e->grads_async) { /* copied and added in the background */
		void *grads = m->grads;

		m->grads = NULL;
		return engine_gq_submit(e, module, stage, grads);
	}
	t0 = zinf_timeline_now_ns();
	rc = zinf_device_memcpy_async(e->d2h, stage, m->grads, m->grad_bytes, ZINF_COPY_D2H);
	if (!rc)
		rc = zinf_stream_synchronize(e->d2h);
	zinf_timeline_add(e->timeline, ZINF_TRACK_D2H, m->name, t0, zinf_timeline_now_ns());
	if (rc) {
		zinf_pinned_free(e->pinned, stage);
		return engine_fail(e, rc, "module %u gradients: %s", module,
				   zinf_device_last_error(e->dev));
	}
	zinf_store_free_scratch(e->store, m->grads);
	m->grads = NULL;
	if (e->gq.started) /* added in the background; the stage goes with them */
		return engine_gq_submit(e, module, stage, NULL);
	rc = engine_grads_add(e, module, stage);
	zinf_pinned_free(e->pinned, stage);
	return rc;
}

void engine_add_f32(struct zinf_engine *e, float *dst, const float *src, uint64_t n)
{
	zinf_pool_add_f32(zinf_adam_pool(e->adam_decay), dst, src, n);
}

double engine_sumsq_f32(struct zinf_engine *e, const float *src, uint64_t n)
{
	return zinf_grad_sumsq_pool(zinf_adam_pool(e->adam_decay), src, ZINF_DTYPE_F32, n);
}

int engine_grads_add(struct zinf_engine *e, uint32_t module, const void *stage)
{
	const struct emodule *m = &e->modules[module];
	int rc;

	for (uint32_t i = 0; i < m->n_params; i++) {
		struct eparam *p = &e->params[m->first_param + i];
		const float *g = (const float *)((const char *)stage + p->grad_off);
		if (!p->grad_acc) { /* zinf.offload_gradients nvme */
			rc = engine_grad_add(e, p, g);
			if (rc) { /* added in part: the step will be dropped */
				e->grads_lost = true;
				return rc;
			}
			continue;
		}
		engine_add_f32(e, p->grad_acc, g, p->elems);
	}
	return 0;
}

double zinf_loss_scale(const struct zinf_engine *e)
{
	return e->fp16 ? zinf_loss_scaler_scale(&e->scaler) : 1.0;
}

/*
 * The optimizer state on the device (offload_optimizer.device: none, as in DeepSpeed):
 * the fp32 master weights, both Adam moments and the gradient accumulators live in device
 * memory, 16 bytes a parameter, and the step runs there (kernels/adamw.cu on a GPU, the
 * CPU loop on the host backend, whose device memory is host memory). A micro-batch's
 * gradients are added to the accumulators on the device, so no gradient leaves it; only
 * the step's new 16-bit (or fp32) parameter copies go to their home tier: device to
 * device for parameters homed there, through the host staging buffer for the others.
 *
 * Layout: one allocation from the top of the device heap, taken before anything else is
 * laid out. Each module has four blocks of its gradient buffer's size and layout (each
 * parameter at its grad_off): accumulators, masters, exp_avg, exp_avg_sq; then the
 * partial sums of the norm. zinf_module_grads_ready adds a module's whole buffer to its
 * accumulator block in one call (the padding adds zeros).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "engine_internal.h"
#include "optim.h"
#include "zinf/config.h" /* zinf_format_bytes */
#include "zinf/error.h"

/* Its blocks, each grad_bytes: the accumulators, then master, exp_avg and exp_avg_sq. */
static char *block(const struct zinf_engine *e, const struct emodule *m, int which)
{
	return (char *)e->dstate + m->dstate_off + (uint64_t)which * m->grad_bytes;
}

uint64_t engine_dstate_bytes(const struct zinf_engine *e)
{
	uint64_t b = 0;
	uint32_t n = 0;

	for (uint32_t m = e->dev_first; m < e->n_modules; m++) {
		b += 4 * e->modules[m].grad_bytes;
		n += e->modules[m].n_params;
	}
	return b + engine_dparts_bytes(n);
}

static int dev_fail(struct zinf_engine *e, int rc, const char *what)
{
	return engine_fail(e, rc, "optimizer state on the device: %s: %s", what,
			   zinf_device_last_error(e->dev));
}

int engine_dstate_alloc(struct zinf_engine *e)
{
	struct zinf_device_stats ds;
	uint64_t off = 0;
	char a[32], b[32], c[32];
	int rc;

	e->dstate_bytes = engine_dstate_bytes(e);
	rc = zinf_device_alloc_high(e->dev, e->dstate_bytes, &e->dstate);
	if (rc == ZINF_EBUDGET && e->dev_first > 0) { /* split by offload_optimizer.ratio */
		zinf_device_get_stats(e->dev, &ds);
		return engine_fail(
			e, rc,
			"device budget: the optimizer state kept on the device by "
			"offload_optimizer.ratio %g (fp32 master, Adam moments and gradient "
			"accumulators, 16 bytes a parameter) needs %s, %s free of %s (raise "
			"zero_optimization.offload_optimizer.ratio, or zinf.device_memory_limit)",
			e->cfg->v.zero.offload_optimizer.ratio,
			zinf_format_bytes(e->dstate_bytes, a, sizeof(a)),
			zinf_format_bytes(ds.limit - ds.used, b, sizeof(b)),
			zinf_format_bytes(ds.limit, c, sizeof(c)));
	}
	if (rc == ZINF_EBUDGET) {
		zinf_device_get_stats(e->dev, &ds);
		return engine_fail(
			e, rc,
			"device budget: the optimizer state on the device (offload_optimizer.device "
			"none: fp32 master, Adam moments and gradient accumulators, 16 bytes a "
			"parameter) needs %s, %s free of %s (offload it: "
			"zero_optimization.offload_optimizer.device cpu or nvme; or raise "
			"zinf.device_memory_limit)",
			zinf_format_bytes(e->dstate_bytes, a, sizeof(a)),
			zinf_format_bytes(ds.limit - ds.used, b, sizeof(b)),
			zinf_format_bytes(ds.limit, c, sizeof(c)));
	}
	if (rc)
		return dev_fail(e, rc, "allocation");
	for (uint32_t m = e->dev_first; m < e->n_modules; m++) {
		struct emodule *mod = &e->modules[m];
		mod->dstate_off = off;
		off += 4 * mod->grad_bytes;
		for (uint32_t k = 0; k < mod->n_params; k++) {
			struct eparam *p = &e->params[mod->first_param + k];
			p->grad_acc = (float *)(block(e, mod, 0) + p->grad_off);
			p->master = (float *)(block(e, mod, 1) + p->grad_off);
			p->exp_avg = (float *)(block(e, mod, 2) + p->grad_off);
			p->exp_avg_sq = (float *)(block(e, mod, 3) + p->grad_off);
			p->group = -1;
		}
	}
	e->dparts = (char *)e->dstate + off;
	/* zeros, as the host state's calloc: masters never loaded read as zeros there too */
	rc = zinf_device_memset_async(e->d2h, e->dstate, 0, e->dstate_bytes);
	if (!rc)
		rc = zinf_stream_synchronize(e->d2h);
	return rc ? dev_fail(e, rc, "clearing it") : 0;
}

void engine_dstate_free(struct zinf_engine *e)
{
	if (e->dstate) {
		zinf_stream_synchronize(e->d2h); /* a clearing that failed may still run */
		zinf_device_free(e->dev, e->dstate);
	}
	e->dstate = NULL;
	e->dparts = NULL;
}

int engine_dstate_grads_add(struct zinf_engine *e, struct emodule *m)
{
	int rc = zinf_device_add_f32(e->d2h, (float *)block(e, m, 0), m->grads, m->grad_bytes / 4);

	if (!rc)
		rc = zinf_stream_synchronize(e->d2h);
	return rc ? dev_fail(e, rc, "adding gradients") : 0;
}

int engine_dstate_sumsq(struct zinf_engine *e, const struct eparam *const *ps, uint32_t count,
			double *out)
{
	const float *src[ENGINE_NORM_BATCH];
	uint64_t n[ENGINE_NORM_BATCH];
	int rc;

	if (count > ENGINE_NORM_BATCH) /* e->dparts holds that many sums' parts */
		return engine_fail(e, -EINVAL, "the gradient norm: %u sums at once, at most %u",
				   count, ENGINE_NORM_BATCH);
	for (uint32_t i = 0; i < count; i++) {
		src[i] = ps[i]->grad_acc;
		n[i] = ps[i]->elems;
	}
	rc = zinf_device_sumsq_f32_many(e->d2h, count, src, n, e->dparts, out);
	return rc ? dev_fail(e, rc, "the gradient norm") : 0;
}

int engine_dstate_clear(struct zinf_engine *e)
{
	int rc = 0;

	for (uint32_t m = e->dev_first; m < e->n_modules && !rc; m++)
		rc = zinf_device_memset_async(e->d2h, block(e, &e->modules[m], 0), 0,
					      e->modules[m].grad_bytes);
	if (!rc)
		rc = zinf_stream_synchronize(e->d2h);
	return rc ? dev_fail(e, rc, "clearing the gradients") : 0;
}

int engine_dstate_step_module(struct zinf_engine *e, struct emodule *m, void *out,
			      const struct zinf_adam_step_info *info)
{
	/* parameters homed on the device take the new copies device to device; others
	 * through host staging */
	bool home_dev = e->cfg->v.zero.offload_param.device == ZINF_OFFLOAD_NONE;
	char *copy = e->staging, *dout = out;
	int rc = 0;

	for (uint32_t k = 0; k < m->n_params && !rc; k++) {
		struct eparam *p = &e->params[m->first_param + k];
		struct zinf_adam *adam = p->decay ? e->adam_decay : e->adam_no_decay;
		bool f32 = p->dtype == ZINF_DTYPE_F32;
		uint64_t bytes = p->elems * engine_dtype_bytes(p->dtype);
		struct zinf_adam_shard sh = engine_param_shard(p, dout);
		void *src = f32 ? (void *)p->master : dout;
		struct zinf_adam_args a;

		zinf_adam_args_of(adam, &sh, info, &a);
		e->update_touched = true; /* the master and moments change in place */
		rc = zinf_device_adam_update(e->d2h, &a, p->elems);
		if (home_dev) {
			e->srcs[k] = src;
		} else {
			if (!rc)
				rc = zinf_device_memcpy_async(e->d2h, copy, src, bytes,
							      ZINF_COPY_D2H);
			e->srcs[k] = copy;
			copy += bytes;
		}
		if (!f32)
			dout += bytes;
	}
	if (!rc)
		rc = zinf_device_memset_async(e->d2h, block(e, m, 0), 0, m->grad_bytes);
	if (!rc)
		rc = zinf_stream_synchronize(e->d2h);
	if (rc) {
		dev_fail(e, rc, m->name);
		/* what was queued before the failure still reads out and writes staging */
		zinf_stream_synchronize(e->d2h);
		return rc;
	}
	rc = home_dev ? zinf_store_module_write_device(e->store, m->store_id, e->srcs)
		      : zinf_store_module_write(e->store, m->store_id, e->srcs);
	return rc ? engine_fail(e, rc, "%s", zinf_store_last_error(e->store)) : 0;
}

int engine_dstate_out_alloc(struct zinf_engine *e, void **out)
{
	uint64_t out_bytes = 0;
	int rc;

	*out = NULL;
	/* device memory for the largest module's 16-bit copies (at most half its gradient
	 * buffer, which the check before step 1 found room for) */
	for (uint32_t m = e->dev_first; m < e->n_modules; m++) {
		uint64_t b = 0;
		for (uint32_t k = 0; k < e->modules[m].n_params; k++) {
			const struct eparam *p = &e->params[e->modules[m].first_param + k];
			if (p->dtype != ZINF_DTYPE_F32)
				b += p->elems * 2;
		}
		if (b > out_bytes)
			out_bytes = b;
	}
	if (!out_bytes)
		return 0;
	rc = zinf_store_alloc_scratch(e->store, out_bytes, out);
	return rc ? engine_fail(e, rc, "optimizer step on the device: %s",
				zinf_store_last_error(e->store))
		  : 0;
}

/* Host <-> device copies of fp32 state, waited for. */
static int copy_sync(struct zinf_engine *e, void *dst, const void *src, uint64_t bytes,
		     enum zinf_copy_dir dir)
{
	int rc = zinf_device_memcpy_async(e->d2h, dst, src, bytes, dir);

	if (!rc)
		rc = zinf_stream_synchronize(e->d2h);
	return rc ? dev_fail(e, rc, dir == ZINF_COPY_H2D ? "loading" : "saving") : 0;
}

int engine_dstate_load(struct zinf_engine *e, struct eparam *p, uint64_t first, uint64_t n,
		       const void *src, enum zinf_dtype src_dtype, const float *m, const float *v)
{
	uint64_t piece = e->staging_bytes / 4, sb = engine_dtype_bytes(src_dtype);
	int rc = 0;

	/* the master through staging in pieces (converted to fp32 there) */
	for (uint64_t at = 0; at < n && !rc; at += piece) {
		uint64_t k = n - at < piece ? n - at : piece;
		engine_convert(e->staging, ZINF_DTYPE_F32, (const char *)src + at * sb, src_dtype,
			       k);
		rc = copy_sync(e, p->master + first + at, e->staging, k * 4, ZINF_COPY_H2D);
	}
	if (rc)
		return rc;
	if (m) {
		rc = copy_sync(e, p->exp_avg + first, m, n * 4, ZINF_COPY_H2D);
		if (!rc)
			rc = copy_sync(e, p->exp_avg_sq + first, v, n * 4, ZINF_COPY_H2D);
		return rc;
	}
	rc = zinf_device_memset_async(e->d2h, p->exp_avg + first, 0, n * 4);
	if (!rc)
		rc = zinf_device_memset_async(e->d2h, p->exp_avg_sq + first, 0, n * 4);
	if (!rc)
		rc = zinf_stream_synchronize(e->d2h);
	return rc ? dev_fail(e, rc, "loading") : 0;
}

int engine_dstate_save(struct zinf_engine *e, const struct eparam *p, uint64_t first, uint64_t n,
		       float *master, float *m, float *v)
{
	int rc = copy_sync(e, master, p->master + first, n * 4, ZINF_COPY_D2H);

	if (!rc && m)
		rc = copy_sync(e, m, p->exp_avg + first, n * 4, ZINF_COPY_D2H);
	if (!rc && v)
		rc = copy_sync(e, v, p->exp_avg_sq + first, n * 4, ZINF_COPY_D2H);
	return rc;
}

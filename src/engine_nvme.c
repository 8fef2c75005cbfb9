/*
 * Optimizer state on NVMe (offload_optimizer.device: nvme). Parameters are grouped by
 * (weight decay, dtype); each group's fp32 master, m and v are one flat shard stepped by
 * the pipelined NVMe step (src/optim_nvme.c), which reads sub-group i+1 and writes i-1
 * while it updates i. Host memory keeps what a step must hand over: the gradient
 * accumulators (4 bytes per parameter) and the new parameter copies (2 bytes), which go
 * to the shard store after the step. Loaded values wait in a host buffer until the next
 * step writes the whole state once; saving reads the state back once per step.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "optim_nvme.h"
#include "zinf/error.h"

static int group_for(struct zinf_engine *e, bool decay, enum zinf_dtype dtype)
{
	for (int g = 0; g < e->n_groups; g++)
		if (e->groups[g].decay == decay && e->groups[g].dtype == dtype)
			return g;
	memset(&e->groups[e->n_groups], 0, sizeof(e->groups[0]));
	e->groups[e->n_groups].decay = decay;
	e->groups[e->n_groups].dtype = dtype;
	return e->n_groups++;
}

static int create_group(struct zinf_engine *e, struct egroup *g)
{
	const struct zinf_config_values *v = &e->cfg->v;
	struct zinf_adam_nvme_opts o;
	struct zinf_adam_nvme_info info;
	char err[512];
	int rc;

	g->grad = calloc(g->elems, sizeof(float));
	g->param_out = malloc(g->elems * 2);
	g->master = calloc(g->elems, sizeof(float)); /* zeros until loaded */
	if (!g->grad || !g->param_out || !g->master)
		return engine_fail(e, -ENOMEM,
				   "optimizer on nvme: cannot allocate %" PRIu64
				   " bytes of host buffers",
				   g->elems * 10);
	g->master_dirty = true;
	zinf_adam_nvme_opts_init(&o);
	o.adam = g->decay ? e->adam_decay : e->adam_no_decay;
	o.io = e->io;
	o.n_elems = g->elems;
	o.sub_group_size = v->zero.sub_group_size;
	o.pipeline_read = v->zero.offload_optimizer.pipeline_read;
	o.pipeline_write = v->zero.offload_optimizer.pipeline_write;
	rc = zinf_adam_nvme_create_in_pool(&o, e->pinned, &g->nvme, err, sizeof(err));
	if (rc)
		return engine_fail(e, rc, "optimizer on nvme: %s", err);
	zinf_adam_nvme_get_info(g->nvme, &info);
	e->nvme_state_bytes += info.extent_bytes * info.n_extents;
	g->sg_size = info.sub_group_size;
	g->n_sg = info.n_sub_groups;
	g->sg_done = calloc(g->n_sg + 1, 1);
	if (!g->sg_done)
		return engine_fail(e, -ENOMEM, "optimizer on nvme: sub-group flags");
	return 0;
}

int engine_nvme_finalize(struct zinf_engine *e)
{
	struct zinf_pinned_stats ps;
	uint64_t total = 0, need = e->cfg->v.zinf.chunk_size;
	char a[32], b[32];
	int rc;

	if (!e->io)
		return engine_fail(
			e, ZINF_ECONFIG,
			"zero_optimization.offload_optimizer.nvme_path: no NVMe path to put the optimizer state on");
	for (uint32_t i = 0; i < e->n_params; i++) {
		struct eparam *p = &e->params[i];
		struct egroup *g;
		if (p->dtype == ZINF_DTYPE_F32)
			return engine_fail(
				e, ZINF_ECONFIG,
				"param %u: fp32 parameters with zero_optimization.offload_optimizer.device nvme (expected bf16 or fp16 parameters, or offload_optimizer.device cpu)",
				i);
		p->group = group_for(e, p->decay, p->dtype);
		g = &e->groups[p->group];
		p->group_off = g->elems;
		g->elems += p->elems;
		total += p->elems;
	}
	for (int g = 0; g < e->n_groups; g++) {
		rc = create_group(e, &e->groups[g]);
		if (rc)
			return rc;
	}
	for (uint32_t i = 0; i < e->n_params; i++) {
		struct eparam *p = &e->params[i];
		p->grad_acc = e->groups[p->group].grad + p->group_off;
	}
	e->state_bytes = total * 6; /* gradient accumulators and parameter copies */
	/* The pipeline keeps its staging buffers; what is left must still stage a chunk
	 * of parameters and a module's gradients, or a fetch would wait forever. */
	for (uint32_t m = 0; m < e->n_modules; m++)
		if (e->modules[m].grad_bytes > need)
			need = e->modules[m].grad_bytes;
	zinf_pinned_get_stats(e->pinned, &ps);
	if (ps.limit - ps.used < need)
		return engine_fail(
			e, ZINF_EBUDGET,
			"pinned budget: the optimizer pipeline holds %s of %s, leaving less than the %s a parameter chunk or a module's gradients need (raise zinf.pinned_memory_limit or lower zero_optimization.sub_group_size)",
			zinf_format_bytes(ps.used, a, sizeof(a)),
			zinf_format_bytes(ps.limit, b, sizeof(b)),
			zinf_format_bytes(need, (char[32]){0}, 32));
	return 0;
}

/* Write loaded values (and kept moments) as the group's whole state. */
static int flush(struct zinf_engine *e, struct egroup *g)
{
	int rc;

	if (!g->master_dirty)
		return 0;
	rc = zinf_adam_nvme_write_state(g->nvme, g->master, g->exp_avg, g->exp_avg_sq);
	if (rc)
		return engine_fail(e, rc, "optimizer on nvme: %s",
				   zinf_adam_nvme_last_error(g->nvme));
	g->master_dirty = false;
	g->written = true;
	free(g->exp_avg);
	free(g->exp_avg_sq);
	g->exp_avg = g->exp_avg_sq = NULL;
	return 0;
}

int engine_nvme_load(struct zinf_engine *e, struct eparam *p, const float *master)
{
	struct egroup *g = &e->groups[p->group];
	int rc;

	if (!g->master_dirty && g->written) {
		/* Reloading after the state was written: keep every other value and the
		 * moments, which the whole-state write below would otherwise reset. */
		if (!g->master)
			g->master = malloc(g->elems * sizeof(float));
		g->exp_avg = malloc(g->elems * sizeof(float));
		g->exp_avg_sq = malloc(g->elems * sizeof(float));
		if (!g->master || !g->exp_avg || !g->exp_avg_sq)
			return engine_fail(e, -ENOMEM, "optimizer on nvme: reload buffers");
		rc = zinf_adam_nvme_read_state(g->nvme, g->master, g->exp_avg, g->exp_avg_sq);
		if (rc)
			return engine_fail(e, rc, "optimizer on nvme: %s",
					   zinf_adam_nvme_last_error(g->nvme));
		/* a reload resets this parameter's moments, as a fresh load does */
	}
	memcpy(g->master + p->group_off, master, p->elems * sizeof(float));
	if (g->exp_avg) {
		memset(g->exp_avg + p->group_off, 0, p->elems * sizeof(float));
		memset(g->exp_avg_sq + p->group_off, 0, p->elems * sizeof(float));
	}
	g->master_dirty = true;
	return 0;
}

int engine_nvme_save(struct zinf_engine *e, struct eparam *p, float *master)
{
	struct egroup *g = &e->groups[p->group];
	int rc;

	if (!g->master) { /* read back once; kept until the next step changes it */
		g->master = malloc(g->elems * sizeof(float));
		if (!g->master)
			return engine_fail(e, -ENOMEM, "optimizer on nvme: save buffer");
		rc = zinf_adam_nvme_read_state(g->nvme, g->master, NULL, NULL);
		if (rc) {
			free(g->master);
			g->master = NULL;
			return engine_fail(e, rc, "optimizer on nvme: %s",
					   zinf_adam_nvme_last_error(g->nvme));
		}
	}
	memcpy(master, g->master + p->group_off, p->elems * sizeof(float));
	return 0;
}

/* Count one pipelined call's traffic (the stats reader may run meanwhile). */
static void count_io(struct zinf_engine *e, const struct zinf_adam_nvme_result *res)
{
	if (e->opt.started)
		pthread_mutex_lock(&e->opt.lock);
	e->nvme_opt_read.bytes += res->read_bytes;
	e->nvme_opt_read.seconds += res->seconds;
	e->nvme_opt_read.count += res->n_updated;
	e->nvme_opt_write.bytes += res->write_bytes;
	e->nvme_opt_write.seconds += res->seconds;
	e->nvme_opt_write.count += res->n_updated;
	if (e->opt.started)
		pthread_mutex_unlock(&e->opt.lock);
}

/* A step in progress: modules are written home in forward order as soon as every
 * sub-group holding their parameters has been updated. */
struct step_progress {
	struct zinf_engine *e;
	int group;     /* the group being stepped */
	uint32_t next; /* the first module not written yet */
};

static bool module_stepped(const struct zinf_engine *e, const struct emodule *mod)
{
	for (uint32_t k = 0; k < mod->n_params; k++) {
		const struct eparam *p = &e->params[mod->first_param + k];
		const struct egroup *g = &e->groups[p->group];
		uint64_t first = p->group_off / g->sg_size;
		uint64_t last = (p->group_off + p->elems - 1) / g->sg_size;

		for (uint64_t i = first; p->elems && i <= last; i++)
			if (!g->sg_done[i])
				return false;
	}
	return true;
}

/* Write home every module, from pr->next on, whose sub-groups are all updated. */
static int write_stepped_modules(struct step_progress *pr)
{
	struct zinf_engine *e = pr->e;
	int rc;

	while (pr->next < e->n_modules && module_stepped(e, &e->modules[pr->next])) {
		const struct emodule *mod = &e->modules[pr->next];
		for (uint32_t k = 0; k < mod->n_params; k++) {
			const struct eparam *p = &e->params[mod->first_param + k];
			e->srcs[k] = (const char *)e->groups[p->group].param_out + p->group_off * 2;
		}
		rc = zinf_store_module_write(e->store, mod->store_id, e->srcs);
		if (rc)
			return engine_fail(e, rc, "%s", zinf_store_last_error(e->store));
		engine_module_updated(e, pr->next++);
	}
	return 0;
}

static int on_sub_group_updated(void *user, uint64_t i)
{
	struct step_progress *pr = user;

	pr->e->groups[pr->group].sg_done[i] = 1;
	return write_stepped_modules(pr);
}

/* The step: each group's pipelined NVMe step (the smallest groups, norms and biases,
 * first), and as each sub-group is updated, the modules whose parameters are then all
 * final go to the shard store in forward order and are reported updated. With
 * zinf.overlap_optimizer the next forward fetches the first modules while later
 * sub-groups are still being stepped. */
int engine_nvme_step(struct zinf_engine *e, const struct zinf_adam_step_info *info)
{
	struct step_progress pr = {.e = e};
	int order[ENGINE_MAX_GROUPS];
	int rc;

	for (int i = 0; i < e->n_groups; i++) {
		struct egroup *g = &e->groups[i];
		rc = flush(e, g);
		if (rc)
			return rc;
		free(g->master); /* a save copy is stale after this step */
		g->master = NULL;
		memset(g->sg_done, 0, g->n_sg);
		order[i] = i;
	}
	for (int i = 1; i < e->n_groups; i++) /* insertion sort by size */
		for (int j = i; j > 0 && e->groups[order[j]].elems < e->groups[order[j - 1]].elems;
		     j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (int i = 0; i < e->n_groups; i++) {
		struct egroup *g = &e->groups[order[i]];
		struct zinf_adam_nvme_bufs bufs = {
			.grad = g->grad,
			.grad_dtype = ZINF_DTYPE_F32,
			.param_out = g->param_out,
			.param_dtype = g->dtype,
			.on_updated = on_sub_group_updated,
			.user = &pr,
		};
		struct zinf_adam_nvme_result res;

		pr.group = order[i];
		rc = zinf_adam_nvme_step(g->nvme, &bufs, info, &res);
		count_io(e, &res);
		if (rc)
			return engine_fail(e, rc,
					   "optimizer on nvme: %s (%" PRIu64 " of %" PRIu64
					   " sub-groups updated)",
					   zinf_adam_nvme_last_error(g->nvme), res.n_updated,
					   res.n_sub_groups);
	}
	/* modules without parameters, and any the last sub-group completed */
	return write_stepped_modules(&pr);
}

void engine_nvme_destroy(struct zinf_engine *e)
{
	for (int i = 0; i < e->n_groups; i++) {
		struct egroup *g = &e->groups[i];
		zinf_adam_nvme_destroy(g->nvme);
		free(g->grad);
		free(g->param_out);
		free(g->master);
		free(g->exp_avg);
		free(g->exp_avg_sq);
		free(g->sg_done);
	}
	e->n_groups = 0;
}

/*
 * Optimizer state on NVMe (offload_optimizer.device: nvme). Parameters are grouped by
 * (weight decay, dtype); each group's fp32 master, m and v are one flat shard stepped by
 * the pipelined NVMe step (src/optim_nvme.c), which reads sub-group i+1 and writes i-1
 * while it updates i. The gradient accumulators are in host memory or on NVMe
 * (engine_grad.c); the step takes them one sub-group at a time. A sub-group's new copy
 * (in the group's dtype) is spread over the parameters it holds, each assembled in a buffer of its own
 * until its module is written home (in forward order, as soon as all of the module's
 * sub-groups are updated), so host memory holds the copies of a few modules, not of the
 * group. Loading and saving the state: engine_nvme_load.c.
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

/* The options of a group of elems elements in sub-groups of sub (the update left NULL). */
static void group_opts(const struct zinf_engine *e, uint64_t elems, uint64_t sub,
		       struct zinf_adam_nvme_opts *o)
{
	const struct zinf_config_values *v = &e->cfg->v;

	zinf_adam_nvme_opts_init(o);
	o->io = e->io;
	o->n_elems = elems;
	o->sub_group_size = sub;
	o->pipeline_read = v->zero.offload_optimizer.pipeline_read;
	o->pipeline_write = v->zero.offload_optimizer.pipeline_write;
	o->fast_init = v->zero.offload_optimizer.fast_init;
	o->crc32c = v->zinf.checksum == ZINF_CHECKSUM_CRC32C;
}

void engine_group_elems(const struct zinf_engine *e, uint64_t elems[ENGINE_MAX_GROUPS])
{
	memset(elems, 0, ENGINE_MAX_GROUPS * sizeof(*elems));
	for (uint32_t i = 0; i < e->n_params; i++)
		elems[3 * e->params[i].decay + (e->params[i].dtype - ZINF_DTYPE_F32)] +=
			e->params[i].elems;
}

enum group_figure { GROUP_DRIVE, GROUP_STAGING, GROUP_EXTENT };

/* Over the groups engine_nvme_finalize will make, in sub-groups of sub elements: the sum
 * of the drive bytes of their state or of the pinned bytes of their staging buffers, or
 * the largest of their extents. */
static uint64_t groups_figure(const struct zinf_engine *e, uint64_t sub, enum group_figure f)
{
	uint64_t elems[ENGINE_MAX_GROUPS], total = 0;

	engine_group_elems(e, elems);
	for (int k = 0; k < ENGINE_MAX_GROUPS; k++) {
		struct zinf_adam_nvme_opts o;
		uint64_t extent;
		if (!elems[k])
			continue;
		group_opts(e, elems[k], sub, &o);
		if (f == GROUP_DRIVE)
			total += zinf_adam_nvme_drive_bytes(&o);
		else if (f == GROUP_STAGING) {
			uint64_t b = zinf_adam_nvme_pinned_bytes(&o, zinf_io_alignment(e->io));

			if (!b) /* opts the optimizer refuses (over 2^32 sub-groups): no fit */
				return UINT64_MAX;
			total += b;
		} else if ((extent = zinf_adam_nvme_extent_bytes(&o)) > total)
			total = extent;
	}
	return total;
}

uint64_t engine_nvme_state_drive_bytes(const struct zinf_engine *e)
{
	return groups_figure(e, e->cfg->v.zero.sub_group_size, GROUP_DRIVE);
}

uint64_t engine_nvme_largest_extent(const struct zinf_engine *e)
{
	/* a full sub-group's master, m and v (its gradient extent is a third of that) */
	return groups_figure(e, e->cfg->v.zero.sub_group_size, GROUP_EXTENT);
}

static int create_group(struct zinf_engine *e, struct egroup *g)
{
	struct zinf_adam_nvme_opts o;
	struct zinf_adam_nvme_info info;
	char err[512];
	int rc;

	group_opts(e, g->elems, e->cfg->v.zero.sub_group_size, &o);
	o.adam = g->decay ? e->adam_decay : e->adam_no_decay;
	rc = zinf_adam_nvme_create_in_pool(&o, e->pinned, &g->nvme, err, sizeof(err));
	if (rc)
		return engine_fail(e, rc, "optimizer on nvme: %s", err);
	zinf_adam_nvme_get_info(g->nvme, &info);
	e->nvme_state_bytes += info.extent_bytes * info.n_extents;
	g->n_sub = info.n_sub_groups;
	g->sub_elems = info.sub_group_size < g->elems ? info.sub_group_size : g->elems;
	g->sub_piece = calloc(g->n_sub + 1, sizeof(*g->sub_piece));
	g->pending = calloc(g->n_sub, sizeof(*g->pending));
	g->sg_done = calloc(g->n_sub + 1, 1);
	g->save_slot = -1;
	if (!g->sub_piece || !g->pending || !g->sg_done)
		return engine_fail(e, -ENOMEM,
				   "optimizer on nvme: cannot allocate the tables of %" PRIu64
				   " sub-groups",
				   g->n_sub);
	return 0;
}

/* Cut every parameter into pieces at its group's sub-group boundaries. Parameters were
 * given group offsets in registration order, so each group's pieces come out sorted. */
static int make_pieces(struct zinf_engine *e)
{
	for (uint32_t i = 0; i < e->n_params; i++) {
		struct eparam *p = &e->params[i];
		struct egroup *g = &e->groups[p->group];
		uint64_t sg = g->sub_elems;
		p->n_pieces =
			p->elems ? (p->group_off + p->elems - 1) / sg - p->group_off / sg + 1 : 0;
		g->n_pieces += p->n_pieces;
	}
	for (int k = 0; k < e->n_groups; k++) {
		struct egroup *g = &e->groups[k];
		g->pieces = calloc(g->n_pieces ? g->n_pieces : 1, sizeof(*g->pieces));
		if (!g->pieces)
			return engine_fail(e, -ENOMEM,
					   "optimizer on nvme: cannot allocate %" PRIu64
					   " parameter pieces",
					   g->n_pieces);
		g->n_pieces = 0;
	}
	for (uint32_t i = 0; i < e->n_params; i++) {
		struct eparam *p = &e->params[i];
		struct egroup *g = &e->groups[p->group];
		uint64_t off = 0;
		p->first_piece = g->n_pieces;
		while (off < p->elems) {
			struct epiece *pc = &g->pieces[g->n_pieces++];
			uint64_t at = p->group_off + off;
			pc->param = i;
			pc->sub = at / g->sub_elems;
			pc->sub_off = at % g->sub_elems;
			pc->param_off = off;
			pc->elems = g->sub_elems - pc->sub_off < p->elems - off
					    ? g->sub_elems - pc->sub_off
					    : p->elems - off;
			off += pc->elems;
		}
	}
	/* sub_piece[s]: the first piece in sub-group s or later */
	for (int k = 0; k < e->n_groups; k++) {
		struct egroup *g = &e->groups[k];
		uint64_t j = 0;
		for (uint64_t sub = 0; sub <= g->n_sub; sub++) {
			while (j < g->n_pieces && g->pieces[j].sub < sub)
				j++;
			g->sub_piece[sub] = j;
		}
	}
	return 0;
}

/* The staging buffers of every group's NVMe step with sub-groups of sub elements. */
static uint64_t staging_bytes(const struct zinf_engine *e, uint64_t sub)
{
	return groups_figure(e, sub, GROUP_STAGING);
}

uint64_t engine_nvme_staging_bytes(const struct zinf_engine *e)
{
	return e->io ? staging_bytes(e, e->cfg->v.zero.sub_group_size) : 0;
}

/* Before any group takes its staging buffers: do they all fit the pinned budget with
 * `need` left over (a parameter chunk, a module's gradients)? If not, one line with
 * both ways out: the limit they need (rounded up to a whole MiB or KiB, printed as
 * such), and the largest sub_group_size found to fit the limit given, when any does (1
 * element fits): a binary search keeping "fits" at its lower end. */
static int staging_fits(struct zinf_engine *e, uint64_t need)
{
	uint64_t sub = e->cfg->v.zero.sub_group_size, take = staging_bytes(e, sub);
	uint64_t lo = 0, hi = sub, room, want;
	struct zinf_pinned_stats ps;
	char a[32], b[32], c[32], d[32], w[32], advice[160] = "";

	zinf_pinned_get_stats(e->pinned, &ps);
	room = ps.limit - ps.used;
	if (take == UINT64_MAX) /* sub-groups the optimizer refuses: its create says why */
		return 0;
	if (take <= room && room - take >= need)
		return 0;
	if (room > need && staging_bytes(e, 1) <= room - need)
		lo = 1;
	while (lo && hi - lo > 1) { /* staging_bytes(lo) fits, sub does not */
		uint64_t mid = lo + (hi - lo) / 2;
		*(staging_bytes(e, mid) <= room - need ? &lo : &hi) = mid;
	}
	if (lo)
		snprintf(advice, sizeof(advice),
			 ", or lower zero_optimization.sub_group_size to at most %" PRIu64, lo);
	want = ps.used + take + need;
	if (want >= (UINT64_C(1) << 20))
		snprintf(w, sizeof(w), "%" PRIu64 " MiB", (want + (UINT64_C(1) << 20) - 1) >> 20);
	else
		snprintf(w, sizeof(w), "%" PRIu64 " KiB", (want + 1023) >> 10);
	return engine_fail(
		e, ZINF_EBUDGET,
		"pinned budget: the NVMe optimizer's staging buffers (%d group%s, sub_group_size %" PRIu64
		") take %s and a parameter chunk or a module's gradients %s besides, more than the %s of zinf.pinned_memory_limit free (%s in use): raise it to at least %s%s",
		e->n_groups, e->n_groups == 1 ? "" : "s", sub,
		zinf_format_bytes(take, a, sizeof(a)), zinf_format_bytes(need, b, sizeof(b)),
		zinf_format_bytes(room, c, sizeof(c)), zinf_format_bytes(ps.used, d, sizeof(d)), w,
		advice);
}

int engine_nvme_finalize(struct zinf_engine *e)
{
	struct zinf_pinned_stats ps;
	uint64_t need = zinf_store_largest_chunk(e->store);
	char a[32], b[32];
	int rc;

	if (!e->io)
		return engine_fail(
			e, ZINF_ECONFIG,
			"zero_optimization.offload_optimizer.nvme_path: no NVMe path to put the optimizer state on");
	for (uint32_t i = 0; i < e->n_params; i++) {
		struct eparam *p = &e->params[i];
		struct egroup *g;
		p->group = group_for(e, p->decay, p->dtype);
		g = &e->groups[p->group];
		p->group_off = g->elems;
		g->elems += p->elems;
	}
	for (uint32_t m = 0; m < e->n_modules; m++)
		if (e->modules[m].grad_bytes > need)
			need = e->modules[m].grad_bytes;
	rc = staging_fits(e, need);
	if (rc)
		return rc;
	for (int g = 0; g < e->n_groups; g++) {
		rc = create_group(e, &e->groups[g]);
		if (rc)
			return rc;
	}
	rc = make_pieces(e);
	if (rc)
		return rc;
	rc = engine_grad_setup(e); /* the gradient accumulators: host memory or NVMe */
	if (rc)
		return rc;
	/* The pipeline keeps its staging buffers; what is left must still stage a chunk
	 * of parameters and a module's gradients, in one piece, or a fetch would wait
	 * forever (checked before, with the arithmetic of the buffers; this is what the
	 * pool says) */
	zinf_pinned_get_stats(e->pinned, &ps);
	if (ps.largest_free < need)
		return engine_fail(
			e, ZINF_EBUDGET,
			"pinned budget: the optimizer pipeline holds %s of %s, leaving less than the %s a parameter chunk or a module's gradients need (raise zinf.pinned_memory_limit or lower zero_optimization.sub_group_size)",
			zinf_format_bytes(ps.used, a, sizeof(a)),
			zinf_format_bytes(ps.limit, b, sizeof(b)),
			zinf_format_bytes(need, (char[32]){0}, 32));
	return 0;
}

/* Count one pipelined call's traffic (the stats reader may run meanwhile). */
static void count_io(struct zinf_engine *e, const struct zinf_adam_nvme_result *res)
{
	pthread_mutex_lock(&e->stats_lock);
	e->nvme_opt_read.bytes += res->read_bytes;
	e->nvme_opt_read.seconds += res->seconds;
	e->nvme_opt_read.count += res->n_updated;
	e->nvme_opt_write.bytes += res->write_bytes;
	e->nvme_opt_write.seconds += res->seconds;
	e->nvme_opt_write.count += res->n_updated;
	pthread_mutex_unlock(&e->stats_lock);
}

/* A step in progress: modules are written home in forward order as soon as every
 * sub-group holding their parameters has been updated. */
struct step_progress {
	struct zinf_engine *e;
	int group;	  /* the group being stepped */
	uint32_t next;	  /* the first module not written yet */
	bool own_message; /* a callback failed and set e's message */
};

/* The new copies being assembled (p->out), now and at most; the stats read them from
 * another thread. */
static void out_bytes(struct zinf_engine *e, int64_t delta)
{
	uint64_t now = __atomic_add_fetch(&e->out_bytes, (uint64_t)delta, __ATOMIC_RELAXED);

	if (now > __atomic_load_n(&e->out_peak, __ATOMIC_RELAXED))
		__atomic_store_n(&e->out_peak, now, __ATOMIC_RELAXED);
}

static void out_free(struct zinf_engine *e, struct eparam *p)
{
	if (!p->out)
		return;
	free(p->out);
	p->out = NULL;
	out_bytes(e, -(int64_t)(p->elems * engine_dtype_bytes(p->dtype)));
}

/* Sub-group s of group gi is updated: its new copy (e->sub_out) goes to the parameters it
 * holds, each assembled in a buffer of its own until its module is written. */
static int scatter_sub_out(struct zinf_engine *e, int gi, uint64_t s)
{
	struct egroup *g = &e->groups[gi];

	for (uint64_t k = g->sub_piece[s]; k < g->sub_piece[s + 1]; k++) {
		const struct epiece *pc = &g->pieces[k];
		struct eparam *p = &e->params[pc->param];
		uint64_t es = engine_dtype_bytes(p->dtype);
		if (!p->out) {
			p->out = malloc(p->elems * es);
			if (!p->out)
				return engine_fail(e, -ENOMEM,
						   "optimizer on nvme: cannot allocate the %" PRIu64
						   "-byte new copy of param %u",
						   p->elems * es, pc->param);
			out_bytes(e, (int64_t)(p->elems * es));
		}
		memcpy((char *)p->out + pc->param_off * es,
		       (const char *)e->sub_out + pc->sub_off * es, pc->elems * es);
	}
	return 0;
}

static bool module_stepped(const struct zinf_engine *e, const struct emodule *mod)
{
	for (uint32_t k = 0; k < mod->n_params; k++) {
		const struct eparam *p = &e->params[mod->first_param + k];
		const struct egroup *g = &e->groups[p->group];
		uint64_t first = p->group_off / g->sub_elems;
		uint64_t last = (p->group_off + p->elems - 1) / g->sub_elems;

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
			e->srcs[k] = p->out ? p->out : e->sub_out; /* no elements: not read */
		}
		e->update_touched = true; /* a write that fails part way leaves chunks changed */
		rc = zinf_store_module_write(e->store, mod->store_id, e->srcs);
		if (rc) {
			pr->own_message = true;
			return engine_fail(e, rc, "%s", zinf_store_last_error(e->store));
		}
		for (uint32_t k = 0; k < mod->n_params; k++)
			out_free(e, &e->params[mod->first_param + k]);
		engine_module_updated(e, pr->next++);
	}
	return 0;
}

static int on_sub_group_updated(void *user, uint64_t i)
{
	struct step_progress *pr = user;
	int rc;

	/* a gradient on NVMe is consumed below (state only changes when its write
	 * completes: res.n_updated) */
	if (pr->e->grads_nvme)
		pr->e->update_touched = true;
	rc = scatter_sub_out(pr->e, pr->group, i);
	if (rc) {
		pr->own_message = true;
		return rc;
	}
	engine_grad_consumed(pr->e, pr->group, i);
	pr->e->groups[pr->group].sg_done[i] = 1;
	return write_stepped_modules(pr);
}

/* Before sub-group i is updated: its gradient, and where its new copy goes. */
static int sub_buffers(void *user, uint64_t i, const void **grad, void **param_out)
{
	struct step_progress *pr = user;
	const float *g = NULL;
	int rc = engine_update_stop_asked(pr->e);

	if (!rc)
		rc = engine_grad_for_step(pr->e, pr->group, i, &g);
	if (rc)
		pr->own_message = true;
	*grad = g;
	*param_out = pr->e->sub_out;
	return rc;
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
		rc = engine_nvme_flush(e, g);
		if (rc)
			return rc;
		engine_nvme_save_drop(g); /* stale after this step */
		memset(g->sg_done, 0, g->n_sub);
		order[i] = i;
	}
	for (uint32_t i = 0; i < e->n_params; i++) /* left by a failed step */
		out_free(e, &e->params[i]);
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
			.grad_dtype = ZINF_DTYPE_F32,
			.param_dtype = g->dtype,
			.on_updated = on_sub_group_updated,
			.sub_buffers = sub_buffers,
			.user = &pr,
		};
		struct zinf_adam_nvme_result res;

		pr.group = order[i];
		rc = zinf_adam_nvme_step(g->nvme, &bufs, info, &res);
		if (res.n_updated) /* sub-groups' new state in place */
			e->update_touched = true;
		engine_grad_step_end(e);
		count_io(e, &res);
		if (rc && pr.own_message)
			return rc;
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
	for (uint32_t i = 0; i < e->n_params; i++)
		out_free(e, &e->params[i]);
	engine_grad_destroy(e);
	for (int i = 0; i < e->n_groups; i++) {
		struct egroup *g = &e->groups[i];
		zinf_adam_nvme_destroy(g->nvme);
		engine_nvme_loads_free(e, g);
		free(g->pending);
		free(g->pieces);
		free(g->sub_piece);
		free(g->sg_done);
	}
	e->n_groups = 0;
}

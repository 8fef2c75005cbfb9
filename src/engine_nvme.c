/*
 * Optimizer state on NVMe (offload_optimizer.device: nvme). Parameters are grouped by
 * (weight decay, dtype); each group's fp32 master, m and v are one flat shard stepped by
 * the pipelined NVMe step (src/optim_nvme.c), which reads sub-group i+1 and writes i-1
 * while it updates i. The gradient accumulators are in host memory or on NVMe
 * (engine_grad.c); the step takes them one sub-group at a time. A sub-group's new 16-bit
 * copy is spread over the parameters it holds, each assembled in a buffer of its own
 * until its module is written home (in forward order, as soon as all of the module's
 * sub-groups are updated), so host memory holds the copies of a few modules, not of the
 * group.
 *
 * Loading streams: a parameter is cut into pieces, one per sub-group it spans; what is
 * loaded of a piece (all of it, or any range of its elements) goes into its sub-group's
 * assembly buffer, whose bitmap counts the distinct elements loaded, and the buffer is
 * written to NVMe (master and zero moments) as soon as every element of the sub-group
 * has been loaded. Loading in registration order thus holds one sub-group per group
 * (plus a bit per element of it); any order holds only the sub-groups partly loaded. The
 * flush before a step (or a save) writes what is left: partly loaded sub-groups, merged
 * with their state on NVMe when they have one (a reload keeps the other elements' values
 * and moments), and zeros for sub-groups never loaded. Saving reads one sub-group at a
 * time.
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

	zinf_adam_nvme_opts_init(&o);
	o.adam = g->decay ? e->adam_decay : e->adam_no_decay;
	o.io = e->io;
	o.n_elems = g->elems;
	o.sub_group_size = v->zero.sub_group_size;
	o.pipeline_read = v->zero.offload_optimizer.pipeline_read;
	o.pipeline_write = v->zero.offload_optimizer.pipeline_write;
	o.fast_init = v->zero.offload_optimizer.fast_init;
	o.crc32c = v->zinf.checksum == ZINF_CHECKSUM_CRC32C;
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

int engine_nvme_finalize(struct zinf_engine *e)
{
	struct zinf_pinned_stats ps;
	uint64_t need = e->cfg->v.zinf.chunk_size;
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
	}
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

/* ---- loading: sub-group assembly buffers -------------------------------------------------- */

static int nvme_fail(struct zinf_engine *e, struct egroup *g, int rc)
{
	return engine_fail(e, rc, "optimizer on nvme: %s", zinf_adam_nvme_last_error(g->nvme));
}

static void save_drop(struct egroup *g)
{
	free(g->save);
	g->save = NULL;
	g->save_moments = false;
}

static void load_bytes_add(struct zinf_engine *e, uint64_t bytes)
{
	e->load_bytes += bytes;
	if (e->load_bytes > e->load_peak_bytes)
		e->load_peak_bytes = e->load_bytes;
}

static void pending_free(struct zinf_engine *e, struct egroup *g, uint64_t s)
{
	struct esub *b = g->pending[s];

	if (!b)
		return;
	e->load_bytes -= b->bytes;
	free(b->loaded);
	free(b);
	g->pending[s] = NULL;
}

static int assemble_fail(struct zinf_engine *e, uint64_t s, uint64_t bytes)
{
	return engine_fail(e, -ENOMEM,
			   "optimizer on nvme: sub-group %" PRIu64 ": cannot allocate %" PRIu64
			   " bytes to assemble it",
			   s, bytes);
}

/* Mark elements [lo, hi) loaded; returns how many were not yet. */
static uint64_t loaded_mark(uint64_t *bits, uint64_t lo, uint64_t hi)
{
	uint64_t added = 0;

	while (lo < hi) {
		unsigned shift = lo % 64;
		uint64_t k = hi - lo < 64 - shift ? hi - lo : 64 - shift;
		uint64_t mask = (k == 64 ? ~0ull : (1ull << k) - 1) << shift;
		added += (uint64_t)__builtin_popcountll(mask & ~bits[lo / 64]);
		bits[lo / 64] |= mask;
		lo += k;
	}
	return added;
}

/* The first element at or after i whose bit is `set`; n when there is none. */
static uint64_t loaded_find(const uint64_t *bits, uint64_t n, uint64_t i, bool set)
{
	while (i < n) {
		uint64_t w = (set ? bits[i / 64] : ~bits[i / 64]) >> (i % 64);
		if (w) {
			i += (uint64_t)__builtin_ctzll(w);
			return i < n ? i : n;
		}
		i = (i / 64 + 1) * 64;
	}
	return n;
}

/* Sub-group s's assembly buffer, made (zeros: the value of elements never loaded) when
 * it has none; with moments it holds the moments too (grown when it did not). */
static int pending_get(struct zinf_engine *e, struct egroup *g, uint64_t s, bool moments,
		       struct esub **out)
{
	struct esub *b = g->pending[s];
	uint64_t n = engine_sub_len(g, s), words = (n + 63) / 64;
	uint64_t bytes = sizeof(*b) + (moments ? 3 : 1) * n * sizeof(float);

	if (!b) {
		b = calloc(1, bytes);
		if (b)
			b->loaded = calloc(words, sizeof(uint64_t));
		if (!b || !b->loaded) {
			free(b);
			return assemble_fail(e, s, bytes + words * sizeof(uint64_t));
		}
		b->bytes = bytes + words * sizeof(uint64_t);
		b->moments = moments;
		g->pending[s] = b;
		load_bytes_add(e, b->bytes);
	} else if (moments && !b->moments) {
		uint64_t was = sizeof(*b) + n * sizeof(float);
		struct esub *nb = realloc(b, bytes);
		if (!nb)
			return assemble_fail(e, s, bytes);
		b = nb;
		memset(b->master + n, 0, 2 * n * sizeof(float));
		load_bytes_add(e, bytes - was);
		b->bytes += bytes - was;
		b->moments = true;
		g->pending[s] = b;
	}
	*out = b;
	return 0;
}

/* Sub-group s partly loaded over a state already on NVMe: read that state, put in the
 * loaded elements' values with their loaded moments (zeros unless a resume brought them:
 * a reload resets them, as a load does), keep every other element's value and moments,
 * and write it back. */
static int merge_write(struct zinf_engine *e, struct egroup *g, uint64_t s, const struct esub *b)
{
	uint64_t n = engine_sub_len(g, s), bytes = 3 * n * sizeof(float);
	float *master = malloc(bytes), *m, *v;
	int rc;

	if (!master)
		return engine_fail(e, -ENOMEM,
				   "optimizer on nvme: sub-group %" PRIu64
				   ": cannot allocate %" PRIu64 " bytes to merge a reload",
				   s, bytes);
	load_bytes_add(e, bytes);
	m = master + n;
	v = master + 2 * n;
	rc = zinf_adam_nvme_read_sub_group(g->nvme, s, master, m, v);
	for (uint64_t lo = loaded_find(b->loaded, n, 0, true); !rc && lo < n;) {
		uint64_t hi = loaded_find(b->loaded, n, lo, false), len = (hi - lo) * sizeof(float);
		memcpy(master + lo, b->master + lo, len);
		if (b->moments) {
			memcpy(m + lo, b->master + n + lo, len);
			memcpy(v + lo, b->master + 2 * n + lo, len);
		} else {
			memset(m + lo, 0, len);
			memset(v + lo, 0, len);
		}
		lo = loaded_find(b->loaded, n, hi, true);
	}
	if (!rc)
		rc = zinf_adam_nvme_write_sub_group(g->nvme, s, master, m, v);
	free(master);
	e->load_bytes -= bytes;
	return rc ? nvme_fail(e, g, rc) : 0;
}

/* Write sub-group s's assembly buffer and free it. All of it loaded, or no state on NVMe
 * yet: its values (zeros where nothing was loaded) with zero moments; else merged with
 * the state on NVMe. On error the buffer stays, for the next flush to retry. */
static int pending_write(struct zinf_engine *e, struct egroup *g, uint64_t s)
{
	const struct esub *b = g->pending[s];
	uint64_t n = engine_sub_len(g, s);
	int rc;

	if (b->loaded_elems == n || !zinf_adam_nvme_sub_group_written(g->nvme, s)) {
		rc = zinf_adam_nvme_write_sub_group(g->nvme, s, b->master,
						    b->moments ? b->master + n : NULL,
						    b->moments ? b->master + 2 * n : NULL);
		if (rc)
			return nvme_fail(e, g, rc);
	} else {
		rc = merge_write(e, g, s, b);
		if (rc)
			return rc;
	}
	pending_free(e, g, s);
	return 0;
}

/* Everything loaded reaches NVMe: sub-groups still assembling are written, and those
 * never written get zeros (master, m and v), the state of parameters never loaded. With
 * offload_optimizer.fast_init the NVMe optimizer writes only the master part of a state
 * with zero moments, and nothing of one all zero (docs/optim.md, "Initialization"). */
static int flush(struct zinf_engine *e, struct egroup *g)
{
	uint64_t zbytes = g->sub_elems * sizeof(float);
	float *zeros = NULL;
	int rc = 0;

	if (g->flushed)
		return 0;
	for (uint64_t s = 0; s < g->n_sub && !rc; s++) {
		if (g->pending[s]) {
			rc = pending_write(e, g, s);
			continue;
		}
		if (zinf_adam_nvme_sub_group_written(g->nvme, s))
			continue;
		if (!zeros) {
			zeros = calloc(g->sub_elems, sizeof(float));
			if (!zeros) {
				rc = engine_fail(e, -ENOMEM,
						 "optimizer on nvme: cannot allocate %" PRIu64
						 " bytes of zeros for the sub-groups never loaded",
						 zbytes);
				break;
			}
			load_bytes_add(e, zbytes);
		}
		rc = zinf_adam_nvme_write_sub_group(g->nvme, s, zeros, NULL, NULL);
		if (rc)
			rc = nvme_fail(e, g, rc);
	}
	if (zeros) {
		free(zeros);
		e->load_bytes -= zbytes;
	}
	g->flushed = rc == 0;
	return rc;
}

int engine_nvme_load(struct zinf_engine *e, struct eparam *p, uint64_t first, uint64_t n,
		     const void *src, enum zinf_dtype src_dtype, const float *m, const float *v)
{
	struct egroup *g = &e->groups[p->group];
	uint64_t esize = src_dtype == ZINF_DTYPE_F32 ? 4 : 2;
	int rc;

	save_drop(g);
	g->flushed = false;
	for (uint64_t k = 0; k < p->n_pieces; k++) {
		const struct epiece *pc = &g->pieces[p->first_piece + k];
		/* the part of the piece inside [first, first + n), and where it is in the
		 * sub-group and in the sources */
		uint64_t lo = pc->param_off > first ? pc->param_off : first;
		uint64_t hi = pc->param_off + pc->elems < first + n ? pc->param_off + pc->elems
								    : first + n;
		uint64_t at, from, len, sub_n = engine_sub_len(g, pc->sub);
		struct esub *b = NULL;
		if (lo >= hi)
			continue;
		at = pc->sub_off + (lo - pc->param_off);
		from = lo - first;
		len = hi - lo;
		rc = pending_get(e, g, pc->sub, m != NULL, &b);
		if (rc)
			return rc;
		engine_convert(b->master + at, ZINF_DTYPE_F32, (const char *)src + from * esize,
			       src_dtype, len);
		if (b->moments) { /* a plain load over a resume's buffer resets its moments */
			float *bm = b->master + sub_n + at, *bv = bm + sub_n;
			if (m) {
				memcpy(bm, m + from, len * sizeof(float));
				memcpy(bv, v + from, len * sizeof(float));
			} else {
				memset(bm, 0, len * sizeof(float));
				memset(bv, 0, len * sizeof(float));
			}
		}
		b->loaded_elems += loaded_mark(b->loaded, at, at + len);
		if (b->loaded_elems == sub_n) {
			rc = pending_write(e, g, pc->sub);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- saving: one sub-group at a time ------------------------------------------------------ */

/* Read sub-group s into the save buffer (with the moments when asked), unless it holds
 * it already: kept until a load or a step changes it, so saving in order reads each
 * sub-group once. */
static int save_read(struct zinf_engine *e, struct egroup *g, uint64_t s, bool moments)
{
	uint64_t n = g->sub_elems, bytes = (moments ? 3 : 1) * n * sizeof(float);
	int rc;

	if (g->save && g->save_sub == s && (g->save_moments || !moments))
		return 0;
	if (g->save && moments && !g->save_moments)
		save_drop(g);
	if (!g->save) {
		g->save = malloc(bytes);
		if (!g->save)
			return engine_fail(e, -ENOMEM,
					   "optimizer on nvme: cannot allocate %" PRIu64
					   " bytes to read a sub-group for saving",
					   bytes);
		g->save_moments = moments;
	}
	g->save_sub = s;
	rc = zinf_adam_nvme_read_sub_group(g->nvme, s, g->save,
					   g->save_moments ? g->save + n : NULL,
					   g->save_moments ? g->save + 2 * n : NULL);
	if (rc) {
		save_drop(g);
		return nvme_fail(e, g, rc);
	}
	return 0;
}

int engine_nvme_save(struct zinf_engine *e, struct eparam *p, uint64_t first, uint64_t n,
		     float *master, float *m, float *v)
{
	struct egroup *g = &e->groups[p->group];
	uint64_t stride = g->sub_elems;
	int rc = flush(e, g);

	if (rc)
		return rc;
	for (uint64_t k = 0; k < p->n_pieces; k++) {
		const struct epiece *pc = &g->pieces[p->first_piece + k];
		/* the part of the piece inside [first, first + n) */
		uint64_t lo = pc->param_off > first ? pc->param_off : first;
		uint64_t hi = pc->param_off + pc->elems < first + n ? pc->param_off + pc->elems
								    : first + n;
		const float *src;
		uint64_t bytes;
		if (lo >= hi)
			continue;
		rc = save_read(e, g, pc->sub, m != NULL);
		if (rc)
			return rc;
		src = g->save + pc->sub_off + (lo - pc->param_off);
		bytes = (hi - lo) * sizeof(float);
		if (master)
			memcpy(master + (lo - first), src, bytes);
		if (m) {
			memcpy(m + (lo - first), src + stride, bytes);
			memcpy(v + (lo - first), src + 2 * stride, bytes);
		}
	}
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
	out_bytes(e, -(int64_t)(p->elems * 2));
}

/* Sub-group s of group gi is updated: its new copy (e->sub_out) goes to the parameters it
 * holds, each assembled in a buffer of its own until its module is written. */
static int scatter_sub_out(struct zinf_engine *e, int gi, uint64_t s)
{
	struct egroup *g = &e->groups[gi];

	for (uint64_t k = g->sub_piece[s]; k < g->sub_piece[s + 1]; k++) {
		const struct epiece *pc = &g->pieces[k];
		struct eparam *p = &e->params[pc->param];
		if (!p->out) {
			p->out = malloc(p->elems * 2);
			if (!p->out)
				return engine_fail(e, -ENOMEM,
						   "optimizer on nvme: cannot allocate the %" PRIu64
						   "-byte new copy of param %u",
						   p->elems * 2, pc->param);
			out_bytes(e, (int64_t)(p->elems * 2));
		}
		memcpy((char *)p->out + pc->param_off * 2,
		       (const char *)e->sub_out + pc->sub_off * 2, pc->elems * 2);
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
	int rc = scatter_sub_out(pr->e, pr->group, i);

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
	int rc = engine_grad_for_step(pr->e, pr->group, i, &g);

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
		rc = flush(e, g);
		if (rc)
			return rc;
		save_drop(g); /* stale after this step */
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
		for (uint64_t k = 0; g->pending && k < g->n_sub; k++)
			pending_free(e, g, k);
		free(g->pending);
		free(g->pieces);
		free(g->sub_piece);
		save_drop(g);
		free(g->sg_done);
	}
	e->n_groups = 0;
}

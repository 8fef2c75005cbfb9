/*
 * Loading and saving the optimizer state on NVMe (offload_optimizer.device: nvme; the
 * groups, pieces and the step are engine_nvme.c's).
 *
 * Loading streams: a parameter is cut into pieces, one per sub-group it spans; what is
 * loaded of a piece (all of it, or any range of its elements) goes into its sub-group's
 * assembly buffer, whose bitmap counts the distinct elements loaded, and the buffer is
 * written to NVMe (master and zero moments) as soon as every element of the sub-group
 * has been loaded: started from its staging slot, the write goes on while the next
 * sub-groups load (and read their checkpoint), and a later call that needs the slot
 * waits for it, so the state's writes overlap the load (with one slot per group, they
 * wait for each other). A failed write is thus an error of that later call (the next load
 * into the group, zinf_engine_sync, zinf_step or a save's flush), naming the sub-group;
 * its buffer stays, to be written again. Loading in registration order thus holds a
 * sub-group per staging slot of each group, being filled or written (plus a bit per
 * element of each); any order holds only the sub-groups partly loaded besides. The
 * flush before a step (or a save) writes what is left: partly loaded sub-groups, merged
 * with their state on NVMe when they have one (a reload keeps the other elements' values
 * and moments), and zeros for sub-groups never loaded. Saving reads one sub-group at a
 * time.
 *
 * Between steps the NVMe optimizer's pinned staging slots are idle (or write a loaded
 * sub-group, until the flush), and they are the
 * buffers: an assembly takes a free slot (and is written from it in place), a save reads
 * into one, and only assemblies beyond the slots (loads out of order) take host memory
 * of their own. Loading and saving in order thus need no host memory of a sub-group's
 * size at all: the state's only host buffers are the ones the step has anyway.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "optim_nvme.h"
#include "zinf/error.h"

/* Count the traffic of g's last ranged call (loads, flushes and saves; the stats reader
 * may run meanwhile), with the step's, in the nvme_to_pinned / pinned_to_nvme links. */
static int counted(struct zinf_engine *e, struct egroup *g, int rc)
{
	struct zinf_adam_nvme *h = g->nvme;

	pthread_mutex_lock(&e->stats_lock); /* (each call goes one way: its time too) */
	if (h->read_bytes) {
		e->nvme_opt_read.bytes += h->read_bytes;
		e->nvme_opt_read.seconds += h->wait_s;
		e->nvme_opt_read.count++;
	}
	if (h->write_bytes) {
		e->nvme_opt_write.bytes += h->write_bytes;
		e->nvme_opt_write.seconds += h->wait_s;
		e->nvme_opt_write.count++;
	}
	pthread_mutex_unlock(&e->stats_lock);
	return rc;
}

static int nvme_fail(struct zinf_engine *e, struct egroup *g, int rc)
{
	return engine_fail(e, rc, "optimizer on nvme: %s", zinf_adam_nvme_last_error(g->nvme));
}

/* ---- the staging slots: sub-group buffers for loading and saving ---------------------- */

void engine_nvme_save_drop(struct egroup *g)
{
	g->save_slot = -1;
}

static void load_bytes_add(struct zinf_engine *e, uint64_t bytes)
{
	e->load_bytes += bytes;
	if (e->load_bytes > e->load_peak_bytes)
		e->load_peak_bytes = e->load_bytes;
}

static uint64_t esub_values_bytes(const struct egroup *g, const struct esub *b)
{
	return (b->moments ? 3 : 1) * engine_sub_len(g, b->sub) * sizeof(float);
}

/* A staging slot of g that no assembly and no save holds, or -1. */
static int slot_free(const struct egroup *g)
{
	unsigned n = zinf_adam_nvme_n_slots(g->nvme);

	for (unsigned k = 0; k < n; k++)
		if (!g->slot_sub[k] && g->save_slot != (int)k)
			return (int)k;
	return -1;
}

/* Put b's values (none yet) in slot k, as zeros. */
static void esub_in_slot(struct egroup *g, struct esub *b, int k)
{
	uint64_t n = engine_sub_len(g, b->sub), stride;

	b->master = zinf_adam_nvme_slot_parts(g->nvme, (unsigned)k, b->sub, &stride);
	b->m = b->master + stride;
	b->v = b->master + 2 * stride;
	memset(b->master, 0, n * sizeof(float));
	if (b->moments) {
		memset(b->m, 0, n * sizeof(float));
		memset(b->v, 0, n * sizeof(float));
	}
	b->slot = k;
	g->slot_sub[k] = b;
}

static int assemble_fail(struct zinf_engine *e, uint64_t s, uint64_t bytes)
{
	return engine_fail(e, -ENOMEM,
			   "optimizer on nvme: sub-group %" PRIu64 ": cannot allocate %" PRIu64
			   " bytes to assemble it",
			   s, bytes);
}

/* Give b values of its own, with room for the moments if moments: a copy of what it
 * holds (leaving its slot, or a smaller allocation), zeros where it held nothing. */
static int esub_own(struct zinf_engine *e, struct egroup *g, struct esub *b, bool moments)
{
	uint64_t n = engine_sub_len(g, b->sub), bytes = (moments ? 3 : 1) * n * sizeof(float);
	float *vals = calloc(1, bytes);

	if (!vals)
		return assemble_fail(e, b->sub, bytes);
	if (b->master) {
		memcpy(vals, b->master, n * sizeof(float));
		if (b->moments) {
			memcpy(vals + n, b->m, n * sizeof(float));
			memcpy(vals + 2 * n, b->v, n * sizeof(float));
		}
	}
	load_bytes_add(e, bytes);
	if (b->slot >= 0) {
		g->slot_sub[b->slot] = NULL;
		b->slot = -1;
	} else if (b->master) {
		e->load_bytes -= esub_values_bytes(g, b);
		free(b->master);
	}
	b->master = vals;
	b->m = vals + n;
	b->v = vals + 2 * n;
	b->moments = moments;
	return 0;
}

static void pending_free(struct zinf_engine *e, struct egroup *g, uint64_t s)
{
	struct esub *b = g->pending[s];

	if (!b)
		return;
	e->load_bytes -= b->bytes;
	if (b->slot >= 0) {
		g->slot_sub[b->slot] = NULL;
	} else if (b->master) {
		e->load_bytes -= esub_values_bytes(g, b);
		free(b->master);
	}
	free(b->loaded);
	free(b);
	g->pending[s] = NULL;
}

/* Once the whole state is written, the spare extents are zeroed once (not with
 * fast_init), through free slot k; a failure is the caller's error, and the next write
 * (or flush) tries again. */
static int zero_spares(struct zinf_engine *e, struct egroup *g, int k)
{
	int rc = counted(e, g, zinf_adam_nvme_zero_spares(g->nvme, (unsigned)k));

	return rc ? nvme_fail(e, g, rc) : 0;
}

/* Wait for b's write (started from its slot) and free b: the slot is then free. A failed
 * write keeps b whole in its slot, for the flush to write again. */
static int write_wait(struct zinf_engine *e, struct egroup *g, struct esub *b)
{
	int k = b->slot, rc;

	b->writing = 0;
	rc = counted(e, g, zinf_adam_nvme_slot_wait(g->nvme, (unsigned)k));
	if (rc)
		return nvme_fail(e, g, rc);
	pending_free(e, g, b->sub);
	return zero_spares(e, g, k);
}

/* The slot of g's oldest assembly write in flight, once done (*k; -1 when none is). */
static int slot_reclaim(struct zinf_engine *e, struct egroup *g, int *k)
{
	struct esub *oldest = NULL;

	for (unsigned i = 0; i < zinf_adam_nvme_n_slots(g->nvme); i++) {
		struct esub *b = g->slot_sub[i];
		if (b && b->writing && (!oldest || b->writing < oldest->writing))
			oldest = b;
	}
	*k = oldest ? oldest->slot : -1;
	return oldest ? write_wait(e, g, oldest) : 0;
}

/* A staging slot of g for I/O of the engine's own: a free one, else one whose write is
 * in flight once it is done, else the save's, else one an assembly holds (preferably not
 * keep's), whose values move to an allocation. */
static int slot_need(struct zinf_engine *e, struct egroup *g, const struct esub *keep)
{
	unsigned n = zinf_adam_nvme_n_slots(g->nvme);
	int k = slot_free(g), rc;

	if (k >= 0)
		return k;
	rc = slot_reclaim(e, g, &k);
	if (rc || k >= 0)
		return rc ? rc : k;
	if (g->save_slot >= 0) {
		k = g->save_slot;
		engine_nvme_save_drop(g);
		return k;
	}
	for (unsigned i = 0; i < n && k < 0; i++)
		if (g->slot_sub[i] != keep)
			k = (int)i;
	if (k < 0)
		k = keep->slot;
	rc = esub_own(e, g, g->slot_sub[k], g->slot_sub[k]->moments);
	return rc ? rc : k;
}

/* ---- loading: sub-groups assembled, then written ------------------------------------- */

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

/* Sub-group s's assembly buffer, made (zeros: the value of elements never loaded) in a
 * free staging slot, or else in an allocation, when it has none; with moments it holds
 * the moments too (zeros until loaded). */
static int pending_get(struct zinf_engine *e, struct egroup *g, uint64_t s, bool moments,
		       struct esub **out)
{
	struct esub *b = g->pending[s];
	uint64_t n = engine_sub_len(g, s), words = (n + 63) / 64;
	int rc = 0;

	if (b && b->writing) { /* loaded again while its write is in flight */
		rc = write_wait(e, g, b);
		if (rc)
			return rc;
		b = NULL;
	}
	if (!b) {
		int k = slot_free(g);
		if (k < 0 && (rc = slot_reclaim(e, g, &k)) != 0)
			return rc;
		b = calloc(1, sizeof(*b));
		if (b)
			b->loaded = calloc(words, sizeof(uint64_t));
		if (!b || !b->loaded) {
			free(b);
			return assemble_fail(e, s, sizeof(*b) + words * sizeof(uint64_t));
		}
		b->bytes = sizeof(*b) + words * sizeof(uint64_t);
		b->sub = s;
		b->slot = -1;
		b->moments = moments;
		g->pending[s] = b;
		load_bytes_add(e, b->bytes);
		if (k >= 0)
			esub_in_slot(g, b, k);
		else if ((rc = esub_own(e, g, b, moments)) != 0)
			pending_free(e, g, s);
	} else if (moments && !b->moments) {
		if (b->slot >= 0) { /* a slot has room for them */
			memset(b->m, 0, n * sizeof(float));
			memset(b->v, 0, n * sizeof(float));
			b->moments = true;
		} else {
			rc = esub_own(e, g, b, true);
		}
	}
	*out = b;
	return rc;
}

/* Write sub-group s's assembly buffer and free it: in place from its slot when it holds
 * the whole state (every element loaded, or no state on NVMe yet: its values, zeros
 * where nothing was loaded, with zero moments unless loaded), a write started and left
 * in flight while the load goes on (freed by the call that next waits for it, write_wait:
 * one that needs the slot, a load of the same sub-group, a sync, a step or a flush); else through a
 * slot: a copy of its values, or, partly loaded over a state on NVMe, that state read
 * back with the loaded elements' values and loaded moments put in (zeros unless a resume
 * brought them: a reload resets them, as a load does) and every other element's kept.
 * On error the buffer stays, for the next flush to retry. */
static int pending_write(struct zinf_engine *e, struct egroup *g, uint64_t s)
{
	struct esub *b = g->pending[s];
	uint64_t n = engine_sub_len(g, s), stride;
	bool merge = b->loaded_elems < n && zinf_adam_nvme_sub_group_written(g->nvme, s);
	int k = b->slot;
	float *t;
	int rc;

	if (b->writing) /* (a flush) */
		return write_wait(e, g, b);
	if (k >= 0 && !merge) { /* in place: the write goes on while the next ones load */
		rc = counted(
			e, g,
			zinf_adam_nvme_write_from_slot_start(g->nvme, (unsigned)k, s, b->moments));
		if (rc)
			return nvme_fail(e, g, rc);
		b->writing = ++g->writes;
		return 0;
	}
	k = slot_need(e, g, b);
	if (k < 0)
		return k;
	t = zinf_adam_nvme_slot_parts(g->nvme, (unsigned)k, s, &stride);
	rc = merge ? counted(e, g, zinf_adam_nvme_read_into_slot(g->nvme, (unsigned)k, s, true))
		   : 0;
	if (rc)
		return nvme_fail(e, g, rc);
	for (uint64_t lo = merge ? loaded_find(b->loaded, n, 0, true) : 0; lo < n;) {
		uint64_t hi = merge ? loaded_find(b->loaded, n, lo, false) : n;
		uint64_t len = (hi - lo) * sizeof(float);
		memcpy(t + lo, b->master + lo, len);
		if (b->moments) {
			memcpy(t + stride + lo, b->m + lo, len);
			memcpy(t + 2 * stride + lo, b->v + lo, len);
		} else if (merge) {
			memset(t + stride + lo, 0, len);
			memset(t + 2 * stride + lo, 0, len);
		}
		lo = merge ? loaded_find(b->loaded, n, hi, true) : n;
	}
	rc = counted(e, g,
		     zinf_adam_nvme_write_from_slot(g->nvme, (unsigned)k, s, merge || b->moments));
	if (rc)
		return nvme_fail(e, g, rc);
	pending_free(e, g, s);
	return zero_spares(e, g, k);
}

/* Everything loaded reaches NVMe: sub-groups still assembling are written, and those
 * never written get zeros (master, m and v), the state of parameters never loaded. With
 * offload_optimizer.fast_init the NVMe optimizer writes only the master part of a state
 * with zero moments, and nothing of one all zero (docs/optim.md, "Initialization"). */
int engine_nvme_flush(struct zinf_engine *e, struct egroup *g)
{
	int rc = 0, k = 0;

	if (g->flushed)
		return 0;
	for (uint64_t s = 0; s < g->n_sub && !rc; s++)
		if (g->pending[s])
			rc = pending_write(e, g, s);
	for (uint64_t s = 0; s < g->n_sub && !rc; s++) /* (the slots are then free) */
		if (g->pending[s])
			rc = pending_write(e, g, s); /* waits for the writes started */
	for (uint64_t s = 0; s < g->n_sub && !rc; s++) {
		uint64_t stride;
		if (zinf_adam_nvme_sub_group_written(g->nvme, s))
			continue;
		k = slot_need(e, g, NULL);
		if (k < 0)
			return k;
		memset(zinf_adam_nvme_slot_parts(g->nvme, (unsigned)k, s, &stride), 0,
		       engine_sub_len(g, s) * sizeof(float));
		rc = counted(e, g, zinf_adam_nvme_write_from_slot(g->nvme, (unsigned)k, s, false));
		if (rc)
			rc = nvme_fail(e, g, rc);
	}
	if (!rc) {
		k = slot_need(e, g, NULL);
		rc = k < 0 ? k : zero_spares(e, g, k);
	}
	g->flushed = rc == 0;
	return rc;
}

int engine_nvme_loads_wait(struct zinf_engine *e)
{
	int rc = 0;

	for (int i = 0; i < e->n_groups && e->nvme_state; i++) {
		struct egroup *g = &e->groups[i];
		int k = 0;
		while (!rc && k >= 0)
			rc = slot_reclaim(e, g, &k);
	}
	return rc;
}

/* The part [*lo, *hi) of piece pc (parameter elements) inside [first, first + n); false
 * when it has none. */
static bool piece_part(const struct epiece *pc, uint64_t first, uint64_t n, uint64_t *lo,
		       uint64_t *hi)
{
	*lo = pc->param_off > first ? pc->param_off : first;
	*hi = pc->param_off + pc->elems < first + n ? pc->param_off + pc->elems : first + n;
	return *lo < *hi;
}

int engine_nvme_load(struct zinf_engine *e, struct eparam *p, uint64_t first, uint64_t n,
		     const void *src, enum zinf_dtype src_dtype, const float *m, const float *v)
{
	struct egroup *g = &e->groups[p->group];
	uint64_t esize = src_dtype == ZINF_DTYPE_F32 ? 4 : 2;
	int rc;

	engine_nvme_save_drop(g);
	g->flushed = false;
	for (uint64_t k = 0; k < p->n_pieces; k++) {
		const struct epiece *pc = &g->pieces[p->first_piece + k];
		uint64_t lo, hi, at, from, len, sub_n = engine_sub_len(g, pc->sub);
		struct esub *b = NULL;
		if (!piece_part(pc, first, n, &lo, &hi))
			continue;
		/* where the part is in the sub-group and in the sources */
		at = pc->sub_off + (lo - pc->param_off);
		from = lo - first;
		len = hi - lo;
		rc = pending_get(e, g, pc->sub, m != NULL, &b);
		if (rc)
			return rc;
		engine_convert(b->master + at, ZINF_DTYPE_F32, (const char *)src + from * esize,
			       src_dtype, len);
		if (b->moments) { /* a plain load over a resume's buffer resets its moments */
			if (m) {
				memcpy(b->m + at, m + from, len * sizeof(float));
				memcpy(b->v + at, v + from, len * sizeof(float));
			} else {
				memset(b->m + at, 0, len * sizeof(float));
				memset(b->v + at, 0, len * sizeof(float));
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

/* Read sub-group s into a staging slot for saving (its master alone without moments,
 * when the NVMe optimizer can), unless one holds it already: kept until a load or a
 * step changes the state, so saving in order reads each sub-group once. Returns its
 * master, with its moments at *stride and 2 * *stride. */
static int save_read(struct zinf_engine *e, struct egroup *g, uint64_t s, bool moments,
		     const float **out, uint64_t *stride)
{
	int k = g->save_slot, rc;

	if (k < 0 || g->save_sub != s || (moments && !g->save_moments)) {
		if (k < 0)
			k = slot_need(e, g, NULL);
		if (k < 0)
			return k;
		engine_nvme_save_drop(g);
		rc = counted(e, g, zinf_adam_nvme_read_into_slot(g->nvme, (unsigned)k, s, moments));
		if (rc)
			return nvme_fail(e, g, rc);
		g->save_slot = k;
		g->save_sub = s;
		g->save_moments = moments;
	}
	*out = zinf_adam_nvme_slot_parts(g->nvme, (unsigned)k, s, stride);
	return 0;
}

int engine_nvme_save(struct zinf_engine *e, struct eparam *p, uint64_t first, uint64_t n,
		     float *master, float *m, float *v)
{
	struct egroup *g = &e->groups[p->group];
	int rc = engine_nvme_flush(e, g);

	if (rc)
		return rc;
	for (uint64_t k = 0; k < p->n_pieces; k++) {
		const struct epiece *pc = &g->pieces[p->first_piece + k];
		const float *src = NULL;
		uint64_t lo, hi, bytes, stride = 0;
		if (!piece_part(pc, first, n, &lo, &hi))
			continue;
		rc = save_read(e, g, pc->sub, m != NULL, &src, &stride);
		if (rc)
			return rc;
		src += pc->sub_off + (lo - pc->param_off);
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

void engine_nvme_loads_free(struct zinf_engine *e, struct egroup *g)
{
	for (uint64_t k = 0; g->pending && k < g->n_sub; k++)
		pending_free(e, g, k);
	engine_nvme_save_drop(g);
}

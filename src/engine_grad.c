/*
 * Gradient accumulators of the parameters whose optimizer state is on NVMe
 * (zinf.offload_gradients).
 *
 * cpu: one fp32 buffer per group in host memory, 4 bytes per parameter; the model's
 * gradients are added to it (zinf_module_grads_ready) and the step reads it.
 *
 * nvme: each sub-group's sum lives in an NVMe extent of its own and host memory holds
 * only the sub-groups being accumulated. The first gradient that touches a sub-group
 * opens it (read back from NVMe when an earlier micro-batch of the step left a sum
 * there, zeros otherwise); once every element has been added since it was opened, its
 * sum of squares is noted (for the global norm) and it is written and closed. Parameters
 * sit in their groups in registration order and backward visits the modules in reverse,
 * so a group has one or two sub-groups open at a time. The step reads the gradient of
 * sub-group i + 1 while it updates i (two buffers of the largest sub-group), and a
 * sub-group it has updated starts the next step at zero without any I/O.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clip.h"
#include "engine_internal.h"
#include "zinf/error.h"
#include "zinf/log.h"

static uint64_t align_of(const struct zinf_engine *e)
{
	uint64_t a = zinf_io_alignment(e->io);

	return a > 4096 ? a : 4096;
}

static uint64_t bytes_of(const struct zinf_engine *e, uint64_t elems)
{
	uint64_t a = align_of(e);

	return (elems * sizeof(float) + a - 1) / a * a;
}

/* offload_gradients auto: NVMe when the accumulators would take more than a quarter of
 * host RAM, and the sub-groups NVMe mode holds at once (three open, two being written,
 * two read ahead) take less than that. */
static bool want_nvme(const struct zinf_engine *e, uint64_t elems, uint64_t largest_sub)
{
	uint64_t ram = zinf_host_memory_bytes();
	uint64_t host = elems * sizeof(float), nvme = 7 * largest_sub * sizeof(float);

	if (e->cfg->v.zinf.offload_gradients != ZINF_GRADS_AUTO)
		return e->cfg->v.zinf.offload_gradients == ZINF_GRADS_NVME;
	return ram && host > ram / 4 && nvme < host;
}

/* Whether engine_grad_setup will put the accumulators on NVMe, from the groups
 * engine_nvme_finalize will make (their elements in group[]). */
static bool will_be_nvme(const struct zinf_engine *e, uint64_t group[ENGINE_MAX_GROUPS])
{
	uint64_t total = 0, largest = 0, sub = e->cfg->v.zero.sub_group_size;

	engine_group_elems(e, group);
	for (int k = 0; k < ENGINE_MAX_GROUPS; k++) {
		uint64_t first = sub < group[k] ? sub : group[k]; /* the group's largest */
		total += group[k];
		if (first > largest)
			largest = first;
	}
	return want_nvme(e, total, largest);
}

uint64_t engine_grad_host_bytes(const struct zinf_engine *e)
{
	uint64_t group[ENGINE_MAX_GROUPS], total = 0;

	if (will_be_nvme(e, group))
		return 0;
	for (int k = 0; k < ENGINE_MAX_GROUPS; k++)
		total += group[k];
	return total * sizeof(float);
}

uint64_t engine_grad_drive_bytes(const struct zinf_engine *e)
{
	uint64_t group[ENGINE_MAX_GROUPS], total = 0, sub = e->cfg->v.zero.sub_group_size;

	if (!will_be_nvme(e, group))
		return 0;
	/* as setup_group: one extent per sub-group, the last one shorter */
	for (int k = 0; k < ENGINE_MAX_GROUPS; k++) {
		uint64_t full = sub < group[k] ? sub : group[k];
		if (!group[k])
			continue;
		total += (group[k] / full) * zinf_io_extent_footprint(e->io, bytes_of(e, full));
		if (group[k] % full)
			total += zinf_io_extent_footprint(e->io, bytes_of(e, group[k] % full));
	}
	return total;
}

/* The optimizer's NVMe traffic, read by zinf_engine_get_stats on the model's thread. */
static void count_io(struct zinf_engine *e, bool read, uint64_t bytes, double seconds)
{
	struct zinf_link_stats *l = read ? &e->nvme_opt_read : &e->nvme_opt_write;

	pthread_mutex_lock(&e->stats_lock);
	l->bytes += bytes;
	l->seconds += seconds;
	l->count++;
	pthread_mutex_unlock(&e->stats_lock);
}

/* What the I/O layer said of a failed request (path, offset), else the code's name. */
static const char *io_why(const struct zinf_io_req *req, int rc)
{
	return req->error[0] ? req->error : zinf_strerror(rc);
}

static void host_bytes(struct zinf_engine *e, int64_t delta)
{
	/* one writer at a time (the gradient worker, or the model's thread while the queue
	 * is drained); zinf_engine_get_stats may read at any time */
	uint64_t now = __atomic_add_fetch(&e->grad_host_bytes, (uint64_t)delta, __ATOMIC_RELAXED);

	if (now > __atomic_load_n(&e->grad_host_peak, __ATOMIC_RELAXED))
		__atomic_store_n(&e->grad_host_peak, now, __ATOMIC_RELAXED);
}

/* A group as the user knows it: its parameters' dtype and weight decay. */
static const char *group_name(const struct zinf_engine *e, int gi)
{
	const struct egroup *g = &e->groups[gi];

	if (g->dtype == ZINF_DTYPE_F16)
		return g->decay ? "fp16 decay" : "fp16 no-decay";
	if (g->dtype == ZINF_DTYPE_F32)
		return g->decay ? "fp32 decay" : "fp32 no-decay";
	return g->decay ? "bf16 decay" : "bf16 no-decay";
}

static int setup_host(struct zinf_engine *e)
{
	for (int k = 0; k < e->n_groups; k++) {
		struct egroup *g = &e->groups[k];
		g->grad = calloc(g->elems, sizeof(float));
		if (!g->grad)
			return engine_fail(
				e, -ENOMEM,
				"gradients: cannot allocate %" PRIu64
				" bytes of host accumulators (set zinf.offload_gradients "
				"to nvme)",
				g->elems * 4);
		e->state_bytes += g->elems * 4;
	}
	for (uint32_t i = 0; i < e->n_params; i++) {
		struct eparam *p = &e->params[i];
		p->grad_acc = e->groups[p->group].grad + p->group_off;
	}
	return 0;
}

static int setup_group(struct zinf_engine *e, struct egroup *g, int gi)
{
	struct egroup_grads *gr = &g->gr;
	char sz[32];

	gr->state = calloc(g->n_sub, 1);
	gr->acc = calloc(g->n_sub, sizeof(*gr->acc));
	gr->serial = calloc(g->n_sub, sizeof(*gr->serial));
	gr->filled = calloc(g->n_sub, sizeof(*gr->filled));
	gr->sumsq = calloc(g->n_sub, sizeof(*gr->sumsq));
	gr->extent = calloc(g->n_sub, sizeof(*gr->extent));
	if (!gr->state || !gr->acc || !gr->serial || !gr->filled || !gr->sumsq || !gr->extent)
		return engine_fail(e, -ENOMEM,
				   "gradients on nvme: cannot allocate the tables of %" PRIu64
				   " sub-groups",
				   g->n_sub);
	for (uint64_t s = 0; s < g->n_sub; s++) {
		uint64_t bytes = bytes_of(e, engine_sub_len(g, s));
		int rc = zinf_io_extent_alloc(e->io, bytes, &gr->extent[s]);
		if (rc)
			return engine_fail(e, rc,
					   "gradients on nvme: extent of sub-group %" PRIu64
					   " of the %s group (%s): %s",
					   s, group_name(e, gi),
					   zinf_format_bytes(bytes, sz, sizeof(sz)),
					   zinf_io_last_error(e->io));
		gr->n_extents++;
		e->nvme_state_bytes += bytes;
	}
	return 0;
}

int engine_grad_setup(struct zinf_engine *e)
{
	uint64_t total = 0, largest = 0, out_bytes = 0;
	int rc;

	pthread_mutex_init(&e->grad_lock, NULL);
	pthread_cond_init(&e->grad_cv, NULL);
	e->grad_setup = true;
	for (int k = 0; k < e->n_groups; k++) {
		uint64_t bytes = e->groups[k].sub_elems * engine_dtype_bytes(e->groups[k].dtype);
		total += e->groups[k].elems;
		if (e->groups[k].sub_elems > largest)
			largest = e->groups[k].sub_elems;
		if (bytes > out_bytes)
			out_bytes = bytes;
	}
	e->sub_out = malloc(out_bytes ? out_bytes : 1);
	if (!e->sub_out)
		return engine_fail(e, -ENOMEM,
				   "optimizer on nvme: cannot allocate a sub-group's %" PRIu64
				   " bytes of new parameter copies",
				   out_bytes);
	e->state_bytes += out_bytes;
	e->grads_nvme = want_nvme(e, total, largest);
	zinf_logf(ZINF_LOG_INFO, "gradient accumulators of %" PRIu64 " parameters: %s", total,
		  e->grads_nvme ? "nvme" : "host memory");
	if (!e->grads_nvme)
		return setup_host(e);
	for (int i = 0; i < EGRAD_WRITES; i++) {
		e->grad_wr[i].e = e;
		e->grad_wr[i].gi = -1;
	}
	for (int i = 0; i < 2; i++) {
		struct egrad_read *r = &e->grad_rd[i];
		uint64_t bytes = bytes_of(e, largest);
		r->e = e;
		r->sub = -1;
		if (posix_memalign((void **)&r->buf, align_of(e), bytes))
			return engine_fail(e, -ENOMEM,
					   "gradients on nvme: cannot allocate the step's %" PRIu64
					   "-byte read buffers",
					   bytes);
		e->state_bytes += bytes;
	}
	for (int k = 0; k < e->n_groups; k++) {
		rc = setup_group(e, &e->groups[k], k);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- accumulating (the model's thread) --------------------------------------------- */

static void write_done(struct zinf_io_req *req)
{
	struct egrad_write *w = req->user;
	struct zinf_engine *e = w->e;

	pthread_mutex_lock(&e->grad_lock);
	w->done = true;
	pthread_cond_broadcast(&e->grad_cv);
	pthread_mutex_unlock(&e->grad_lock);
}

/* Wait for w's write and free the slot; returns its status. The sum stays in *buf. */
static int write_wait(struct zinf_engine *e, struct egrad_write *w, float **buf)
{
	pthread_mutex_lock(&e->grad_lock);
	while (!w->done)
		pthread_cond_wait(&e->grad_cv, &e->grad_lock);
	pthread_mutex_unlock(&e->grad_lock);
	*buf = w->buf;
	w->buf = NULL;
	w->gi = -1;
	if (w->req.status == 0)
		count_io(e, false, w->req.len, engine_now_seconds() - w->t0);
	return w->req.status;
}

/* Sub-group s of group gi holds buf as an open accumulator (taken back from a write, or
 * kept after a failed one); it counts as opened now. */
static void keep_open(struct zinf_engine *e, int gi, uint64_t s, float *buf)
{
	struct egroup_grads *gr = &e->groups[gi].gr;

	gr->acc[s] = buf;
	gr->state[s] = EGRAD_OPEN;
	gr->serial[s] = ++e->grad_serial;
	gr->filled[s] = 0;
}

/* Retire w: on success its sub-group's sum is on NVMe and the buffer is freed; a failed
 * write leaves the sum open in host memory (the step writes it again), so nothing is
 * lost, and is the error. */
static int write_retire(struct zinf_engine *e, struct egrad_write *w)
{
	int gi = w->gi;
	uint64_t s = w->s, len = w->req.len;
	uint32_t extent = w->req.extent;
	float *buf;
	int rc;

	if (gi < 0)
		return 0;
	rc = write_wait(e, w, &buf);
	if (rc == 0) {
		free(buf);
		host_bytes(e, -(int64_t)len);
		e->groups[gi].gr.state[s] = EGRAD_NVME;
		return 0;
	}
	keep_open(e, gi, s, buf);
	return engine_fail(e, rc,
			   "gradients on nvme: sub-group %" PRIu64 " of the %s group: write of "
			   "extent %u (%" PRIu64 " bytes) failed: %s",
			   s, group_name(e, gi), extent, len, io_why(&w->req, rc));
}

static void warn_kept(struct zinf_engine *e)
{
	zinf_logf(ZINF_LOG_WARN, "%s (kept in host memory; the step writes it again)",
		  engine_msg(e));
}

/* Retire every write, each failure logged as it is retired (its sum is open again, or
 * dropped with the step's gradients); returns the last failure, whose message stays. */
static int writes_drain(struct zinf_engine *e, bool dropping)
{
	int last = 0;

	for (int i = 0; i < EGRAD_WRITES; i++) {
		int rc = write_retire(e, &e->grad_wr[i]);
		if (!rc)
			continue;
		if (dropping)
			zinf_logf(ZINF_LOG_WARN, "%s (dropped with the step's gradients)",
				  engine_msg(e));
		else
			warn_kept(e);
		last = rc;
	}
	return last;
}

static int grad_open(struct zinf_engine *e, struct egroup *g, int gi, uint64_t s)
{
	struct egroup_grads *gr = &g->gr;
	uint64_t bytes = bytes_of(e, engine_sub_len(g, s));
	double t0;
	float *buf;
	int rc;

	if (gr->state[s] == EGRAD_WRITING) { /* a later micro-batch: take the sum back */
		for (int i = 0; i < EGRAD_WRITES; i++) {
			struct egrad_write *w = &e->grad_wr[i];
			if (w->gi != gi || w->s != s)
				continue;
			rc = write_wait(e, w, &buf);
			keep_open(e, gi, s, buf);
			if (rc == 0)
				return 0;
			/* the sum is open again either way; only the write is lost */
			engine_fail(e, rc,
				    "gradients on nvme: sub-group %" PRIu64
				    " of the %s group: write "
				    "of extent %u failed: %s",
				    s, group_name(e, gi), gr->extent[s], io_why(&w->req, rc));
			warn_kept(e);
			return 0;
		}
	}
	if (posix_memalign((void **)&buf, align_of(e), bytes))
		return engine_fail(e, -ENOMEM,
				   "gradients on nvme: cannot allocate %" PRIu64
				   " bytes for sub-group %" PRIu64 " of the %s group",
				   bytes, s, group_name(e, gi));
	if (gr->state[s] == EGRAD_NVME) {
		t0 = engine_now_seconds();
		rc = zinf_io_rw(e->io, ZINF_IO_READ, gr->extent[s], 0, buf, bytes);
		if (rc) {
			free(buf);
			return engine_fail(e, rc,
					   "gradients on nvme: sub-group %" PRIu64
					   " of the %s group: read of extent %u (%" PRIu64
					   " bytes) failed: %s",
					   s, group_name(e, gi), gr->extent[s], bytes,
					   zinf_io_last_error(e->io));
		}
		count_io(e, true, bytes, engine_now_seconds() - t0);
	} else {
		memset(buf, 0, bytes);
	}
	host_bytes(e, (int64_t)bytes);
	keep_open(e, gi, s, buf);
	return 0;
}

/* Note the sum of squares and start writing the sum home, without waiting for it (the
 * oldest write is retired when both slots are busy). A failed write keeps the sum open
 * (the next close, at the latest the step's, tries again), so no gradient is lost. */
static int grad_close(struct zinf_engine *e, struct egroup *g, int gi, uint64_t s)
{
	struct egroup_grads *gr = &g->gr;
	struct zinf_io_req *req;
	struct egrad_write *w = NULL;
	uint64_t n = engine_sub_len(g, s);
	int rc;

	gr->sumsq[s] = engine_sumsq_f32(e, gr->acc[s], n);
	for (int i = 0; i < EGRAD_WRITES; i++)
		if (e->grad_wr[i].gi < 0 && !w)
			w = &e->grad_wr[i];
	if (!w) {
		w = &e->grad_wr[0];
		for (int i = 1; i < EGRAD_WRITES; i++)
			if (e->grad_wr[i].serial < w->serial)
				w = &e->grad_wr[i];
		if (write_retire(e, w))
			warn_kept(e); /* that other sub-group stays open */
	}
	req = &w->req;
	memset(req, 0, sizeof(*req));
	req->op = ZINF_IO_WRITE;
	req->extent = gr->extent[s];
	req->len = bytes_of(e, n);
	req->buf = gr->acc[s];
	req->done = write_done;
	req->user = w;
	w->e = e;
	w->buf = gr->acc[s];
	w->gi = gi;
	w->s = s;
	w->serial = ++e->grad_wr_serial;
	w->t0 = engine_now_seconds();
	w->done = false;
	rc = zinf_io_submit(e->io, &req, 1);
	if (rc) {
		w->buf = NULL;
		w->gi = -1;
		return engine_fail(e, rc,
				   "gradients on nvme: sub-group %" PRIu64
				   " of the %s group: cannot submit the write of extent %u: %s",
				   s, group_name(e, gi), gr->extent[s], zinf_io_last_error(e->io));
	}
	gr->acc[s] = NULL;
	gr->state[s] = EGRAD_WRITING;
	return 0;
}

int engine_grad_add(struct zinf_engine *e, struct eparam *p, const float *src)
{
	struct egroup *g = &e->groups[p->group];
	struct egroup_grads *gr = &g->gr;
	int rc;

	for (uint64_t k = p->first_piece; k < p->first_piece + p->n_pieces; k++) {
		struct epiece *pc = &g->pieces[k];
		uint64_t s = pc->sub;
		const float *x = src + pc->param_off;
		float *dst;

		if (gr->state[s] != EGRAD_OPEN) {
			rc = grad_open(e, g, p->group, s);
			if (rc)
				return rc;
		}
		dst = gr->acc[s] + pc->sub_off;
		engine_add_f32(e, dst, x, pc->elems);
		if (pc->gstamp != gr->serial[s]) { /* each piece counted once per opening */
			pc->gstamp = gr->serial[s];
			gr->filled[s] += pc->elems;
		}
		/* A failed write leaves it open and is only a warning here: every gradient of
		 * the module is added either way, and the step writes it again (and fails
		 * with the error if that fails too). */
		if (gr->filled[s] == engine_sub_len(g, s) && grad_close(e, g, p->group, s))
			warn_kept(e);
	}
	return 0;
}

void engine_grad_writes_wait(struct zinf_engine *e)
{
	char kept[sizeof(e->last_error)];

	if (!e->grads_nvme)
		return;
	/* a failed write is only a warning (logged by the drain): the error the caller
	 * reports, if any, stays the one it names */
	memcpy(kept, e->last_error, sizeof(kept));
	if (writes_drain(e, false))
		memcpy(e->last_error, kept, sizeof(kept));
}

int engine_grad_sumsq(struct zinf_engine *e, double *sumsq)
{
	double sum = 0;
	int rc;

	if (!e->grads_nvme) {
		for (uint32_t i = 0; i < e->n_params; i++)
			sum += engine_sumsq_f32(e, e->params[i].grad_acc, e->params[i].elems);
		*sumsq = sum;
		return 0;
	}
	/* backward's writes: one that failed is open again and written below */
	writes_drain(e, false);
	/* Close what is open and wait for the writes. A close can retire an older write
	 * that failed, reopening a sub-group this pass has gone by: pass again. A failure of
	 * the last writes refuses the step (the sums stay open; it can be called again). */
	for (int pass = 0;; pass++) {
		bool any = false;
		for (int k = 0; k < e->n_groups; k++) {
			struct egroup *g = &e->groups[k];
			for (uint64_t s = 0; s < g->n_sub; s++) {
				if (g->gr.state[s] != EGRAD_OPEN)
					continue;
				any = true;
				rc = grad_close(e, g, k, s);
				if (rc)
					return rc;
			}
		}
		rc = writes_drain(e, false);
		if (rc)
			return rc;
		if (!any)
			break;
		if (pass == 8)
			return engine_fail(e, -EIO,
					   "gradients on nvme: writes kept failing while the step "
					   "wrote the open sub-groups (see the warnings)");
	}
	for (int k = 0; k < e->n_groups; k++)
		for (uint64_t s = 0; s < e->groups[k].n_sub; s++)
			if (e->groups[k].gr.state[s] == EGRAD_NVME)
				sum += e->groups[k].gr.sumsq[s];
	*sumsq = sum;
	return 0;
}

void engine_grad_clear(struct zinf_engine *e)
{
	if (!e->grads_nvme) {
		for (uint32_t i = 0; i < e->n_params; i++)
			memset(e->params[i].grad_acc, 0, e->params[i].elems * sizeof(float));
		return;
	}
	writes_drain(e, true); /* what failed is open again, and dropped below */
	for (int k = 0; k < e->n_groups; k++) {
		struct egroup *g = &e->groups[k];
		for (uint64_t s = 0; s < g->n_sub; s++) {
			if (g->gr.acc[s]) {
				host_bytes(e, -(int64_t)bytes_of(e, engine_sub_len(g, s)));
				free(g->gr.acc[s]);
				g->gr.acc[s] = NULL;
			}
			g->gr.state[s] = EGRAD_ZERO;
		}
	}
}

/* ---- the step's reads (its thread) ------------------------------------------------- */

static void read_done(struct zinf_io_req *req)
{
	struct egrad_read *r = req->user;
	struct zinf_engine *e = r->e;

	pthread_mutex_lock(&e->grad_lock);
	r->done = true;
	pthread_cond_broadcast(&e->grad_cv);
	pthread_mutex_unlock(&e->grad_lock);
}

static int read_submit(struct zinf_engine *e, struct egrad_read *r, struct egroup *g, uint64_t s)
{
	struct zinf_io_req *req = &r->req;
	int rc;

	memset(req, 0, sizeof(*req));
	req->op = ZINF_IO_READ;
	req->extent = g->gr.extent[s];
	req->len = bytes_of(e, engine_sub_len(g, s));
	req->buf = r->buf;
	req->done = read_done;
	req->user = r;
	r->sub = (int64_t)s;
	r->done = false;
	r->busy = true;
	r->t0 = engine_now_seconds();
	rc = zinf_io_submit(e->io, &req, 1);
	if (rc) {
		r->busy = false;
		r->sub = -1;
	}
	return rc;
}

/* Wait for r's read; 0 or its status (r then holds nothing). */
static int read_wait(struct zinf_engine *e, struct egrad_read *r)
{
	if (!r->busy)
		return 0;
	pthread_mutex_lock(&e->grad_lock);
	while (!r->done)
		pthread_cond_wait(&e->grad_cv, &e->grad_lock);
	pthread_mutex_unlock(&e->grad_lock);
	r->busy = false;
	if (r->req.status) {
		r->sub = -1;
		return r->req.status;
	}
	count_io(e, true, r->req.len, engine_now_seconds() - r->t0);
	return 0;
}

int engine_grad_for_step(struct zinf_engine *e, int gi, uint64_t s, const float **grad)
{
	struct egroup *g = &e->groups[gi];
	struct egrad_read *r = NULL, *next;
	int rc;

	if (!e->grads_nvme) {
		*grad = g->grad + s * g->sub_elems;
		return 0;
	}
	/* The read of s, if the last call started it; the other buffer is idle. */
	for (int i = 0; i < 2; i++)
		if (e->grad_rd[i].sub == (int64_t)s)
			r = &e->grad_rd[i];
	if (g->gr.state[s] == EGRAD_OPEN || g->gr.state[s] == EGRAD_WRITING)
		return engine_fail(e, ZINF_ESTATE,
				   "gradients on nvme: sub-group %" PRIu64
				   " of the %s group is still %s at the step (its sum is not "
				   "on NVMe)",
				   s, group_name(e, gi),
				   g->gr.state[s] == EGRAD_OPEN ? "open" : "being written");
	if (!r) {
		r = e->grad_rd[0].busy ? &e->grad_rd[1] : &e->grad_rd[0];
		if (g->gr.state[s] == EGRAD_NVME) {
			rc = read_submit(e, r, g, s);
			if (rc)
				goto fail;
		} else { /* no gradient reached it this step */
			memset(r->buf, 0, engine_sub_len(g, s) * sizeof(float));
			r->sub = (int64_t)s;
		}
	}
	rc = read_wait(e, r);
	if (rc)
		goto fail;
	next = r == &e->grad_rd[0] ? &e->grad_rd[1] : &e->grad_rd[0];
	next->sub = -1;
	if (s + 1 < g->n_sub && g->gr.state[s + 1] == EGRAD_NVME)
		read_submit(e, next, g, s + 1); /* a failure shows again when s + 1 is read */
	*grad = r->buf;
	return 0;
fail:
	return engine_fail(e, rc,
			   "gradients on nvme: sub-group %" PRIu64
			   " of the %s group: read of extent "
			   "%u failed: %s",
			   s, group_name(e, gi), g->gr.extent[s],
			   r && r->req.error[0] ? r->req.error : zinf_io_last_error(e->io));
}

void engine_grad_consumed(struct zinf_engine *e, int gi, uint64_t s)
{
	if (e->grads_nvme)
		e->groups[gi].gr.state[s] = EGRAD_ZERO;
}

void engine_grad_step_end(struct zinf_engine *e)
{
	for (int i = 0; e->grads_nvme && i < 2; i++) {
		read_wait(e, &e->grad_rd[i]);
		e->grad_rd[i].sub = -1;
	}
}

void engine_grad_destroy(struct zinf_engine *e)
{
	engine_grad_step_end(e);
	for (int i = 0; e->grads_nvme && i < EGRAD_WRITES; i++) {
		float *buf;
		if (e->grad_wr[i].gi >= 0) {
			write_wait(e, &e->grad_wr[i], &buf);
			free(buf);
		}
	}
	for (int k = 0; k < e->n_groups; k++) {
		struct egroup *g = &e->groups[k];
		struct egroup_grads *gr = &g->gr;
		for (uint64_t s = 0; gr->acc && s < g->n_sub; s++)
			free(gr->acc[s]);
		for (uint64_t s = 0; s < gr->n_extents; s++)
			zinf_io_extent_free(e->io, gr->extent[s]);
		free(gr->state);
		free(gr->acc);
		free(gr->serial);
		free(gr->filled);
		free(gr->sumsq);
		free(gr->extent);
		memset(gr, 0, sizeof(*gr));
		free(g->grad);
		g->grad = NULL;
	}
	for (int i = 0; i < 2; i++) {
		free(e->grad_rd[i].buf);
		e->grad_rd[i].buf = NULL;
	}
	free(e->sub_out);
	e->sub_out = NULL;
	if (e->grad_setup) {
		pthread_mutex_destroy(&e->grad_lock);
		pthread_cond_destroy(&e->grad_cv);
		e->grad_setup = false;
	}
}

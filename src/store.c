/*
 * Shard store (see store.h): registration and layout, home allocation, synchronous
 * reads and writes of parameter contents, and the counters. The moving itself (fetch,
 * wait, release, eviction, the mover thread) is in store_move.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "pinned.h"
#include "store_internal.h"
#include "thread_error.h"
#include "timeline.h"
#include "zinf/config.h" /* zinf_format_bytes */
#include "zinf/error.h"
#include "zinf/io.h"
#include "zinf/log.h"

/* The calling thread's last store error (io/thread_error.h: the model's thread, the
 * optimizer's and the gradient worker call one store at the same time). */
static __thread struct zinf_thread_error last_error;

int store_fail(struct zinf_store *s, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	zinf_thread_error_vset(&last_error, s, s ? s->err_serial : 0, fmt, ap);
	va_end(ap);
	zinf_logf(ZINF_LOG_DEBUG, "store: %s", last_error.msg);
	return code;
}

const char *zinf_tier_name(enum zinf_tier tier)
{
	static const char *const names[] = {"device", "host", "nvme"};
	return (unsigned)tier < 3 ? names[tier] : "?";
}

const char *zinf_link_name(enum zinf_link link)
{
	static const char *const names[] = {"nvme_to_pinned", "pinned_to_device",
					    "device_to_pinned", "pinned_to_nvme"};
	return (unsigned)link < ZINF_LINKS ? names[link] : "?";
}

static uint64_t dtype_size(enum zinf_dtype t)
{
	return t == ZINF_DTYPE_F32 ? 4 : (t == ZINF_DTYPE_BF16 || t == ZINF_DTYPE_F16) ? 2 : 0;
}

/* ---- lifecycle ---------------------------------------------------------------------- */

void zinf_store_opts_init(struct zinf_store_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->param_home = ZINF_TIER_DEVICE;
	opts->chunk_size = 32ull << 20;
	opts->world_size = 1;
	opts->mover_idle_ns = 1000000000ull;
}

int zinf_store_create(const struct zinf_store_opts *opts, struct zinf_store **out, char *err,
		      size_t errlen)
{
	pthread_condattr_t cattr;
	struct zinf_store *s;
	int rc;

	*out = NULL;
	if (!opts->device) {
		snprintf(err, errlen, "store: no device");
		return -EINVAL;
	}
	if (opts->chunk_size < IO_ALIGN || opts->chunk_size % IO_ALIGN) {
		snprintf(err, errlen,
			 "store: chunk_size %" PRIu64 " is not a positive multiple of 4096",
			 opts->chunk_size);
		return -EINVAL;
	}
	if (opts->world_size != 1) {
		snprintf(
			err, errlen,
			"store: world size %d: sharding across ranks needs the comm layer (expected 1)",
			opts->world_size);
		return -ENOTSUP;
	}
	if (opts->param_home == ZINF_TIER_NVME && (!opts->io || !opts->pinned)) {
		snprintf(err, errlen,
			 "store: parameters homed on nvme need an I/O engine and a pinned pool");
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *opts;
	if (!s->o.mover_idle_ns)
		s->o.mover_idle_ns = 1000000000ull;
	s->err_serial = zinf_thread_error_serial();
	pthread_mutex_init(&s->lock, NULL);
	/* timed waits on the monotonic clock: a step of the wall clock must not turn the
	 * mover's 100 us poll into a stall */
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&s->kick, &cattr);
	pthread_cond_init(&s->ready, &cattr);
	pthread_condattr_destroy(&cattr);
	s->active_tail = &s->active;
	rc = zinf_stream_create(opts->device, &s->h2d);
	if (!rc)
		rc = zinf_stream_create(opts->device, &s->d2h);
	if (rc) {
		snprintf(err, errlen, "store: cannot create copy streams: %s",
			 zinf_device_last_error(opts->device));
		zinf_store_destroy(s);
		return rc;
	}
	rc = pthread_create(&s->mover, NULL, store_mover_main, s);
	if (rc) {
		snprintf(err, errlen, "store: cannot start the mover thread: %s", strerror(rc));
		zinf_store_destroy(s);
		return -rc;
	}
	s->mover_started = true;
	*out = s;
	return 0;
}

static void free_homes(struct zinf_store *s)
{
	for (uint32_t c = 0; c < s->n_chunks; c++) {
		struct chunk *ch = &s->chunks[c];
		free(ch->host);
		if (ch->has_extent)
			zinf_io_extent_free(s->o.io, ch->extent);
		if (ch->staging)
			zinf_pinned_free(s->o.pinned, ch->staging);
		zinf_event_destroy(ch->ev);
	}
	for (uint32_t m = 0; m < s->n_modules; m++)
		if (s->modules[m].dev)
			zinf_device_free(s->o.device, s->modules[m].dev);
}

void zinf_store_destroy(struct zinf_store *s)
{
	if (!s)
		return;
	if (s->mover_started) {
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		pthread_cond_signal(&s->kick);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->mover, NULL);
	}
	/* In-flight reads finish before their buffers go. */
	if (s->o.io && s->o.param_home == ZINF_TIER_NVME)
		zinf_io_drain(s->o.io);
	if (s->h2d)
		zinf_stream_synchronize(s->h2d);
	free_homes(s);
	zinf_stream_destroy(s->h2d);
	zinf_stream_destroy(s->d2h);
	for (uint32_t i = 0; i < s->n_params; i++)
		free(s->params[i].name);
	for (uint32_t m = 0; m < s->n_modules; m++)
		free(s->modules[m].name);
	free(s->params);
	free(s->modules);
	free(s->chunks);
	pthread_cond_destroy(&s->kick);
	pthread_cond_destroy(&s->ready);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

const char *zinf_store_last_error(struct zinf_store *s)
{
	return zinf_thread_error_get(&last_error, s, s ? s->err_serial : 0);
}

/* ---- registration ------------------------------------------------------------------- */

int zinf_store_module_add(struct zinf_store *s, const char *name, uint32_t *module)
{
	struct module *m;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (s->finalized) {
		rc = store_fail(s, ZINF_ESTATE, "module %s: added after finalize", name);
		goto out;
	}
	if (s->n_modules == s->cap_modules) {
		uint32_t cap = s->cap_modules ? 2 * s->cap_modules : 16;
		struct module *v = realloc(s->modules, cap * sizeof(*v));
		if (!v) {
			rc = -ENOMEM;
			goto out;
		}
		s->modules = v;
		s->cap_modules = cap;
	}
	m = &s->modules[s->n_modules];
	memset(m, 0, sizeof(*m));
	m->name = strdup(name);
	if (!m->name) {
		rc = -ENOMEM;
		goto out;
	}
	m->id = s->n_modules;
	m->first_param = s->n_params;
	*module = s->n_modules++;
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int zinf_store_param_add(struct zinf_store *s, uint32_t module, const char *name,
			 enum zinf_dtype dtype, int ndim, const uint64_t *shape, uint32_t *param)
{
	struct param *p;
	uint64_t elems = 1;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (s->finalized) {
		rc = store_fail(s, ZINF_ESTATE, "param %s: added after finalize", name);
		goto out;
	}
	if (module >= s->n_modules || module != s->n_modules - 1) {
		rc = store_fail(
			s, -EINVAL,
			"param %s: module %u is not the last module added (params are added module by module)",
			name, module);
		goto out;
	}
	if (!dtype_size(dtype) || ndim < 1 || ndim > 4) {
		rc = store_fail(
			s, -EINVAL,
			"param %s: dtype %d with %d dims (expected f32, bf16 or f16 with 1 to 4 dims)",
			name, (int)dtype, ndim);
		goto out;
	}
	for (int d = 0; d < ndim; d++) {
		if (shape[d] == 0 || elems > UINT64_MAX / 4 / shape[d]) {
			rc = store_fail(s, -EINVAL,
					"param %s: dimension %d is %" PRIu64
					" (expected 1 or more, product < 2^62)",
					name, d, shape[d]);
			goto out;
		}
		elems *= shape[d];
	}
	if (s->n_params == s->cap_params) {
		uint32_t cap = s->cap_params ? 2 * s->cap_params : 64;
		struct param *v = realloc(s->params, cap * sizeof(*v));
		if (!v) {
			rc = -ENOMEM;
			goto out;
		}
		s->params = v;
		s->cap_params = cap;
	}
	p = &s->params[s->n_params];
	memset(p, 0, sizeof(*p));
	p->name = strdup(name);
	if (!p->name) {
		rc = -ENOMEM;
		goto out;
	}
	p->module = module;
	p->dtype = dtype;
	p->ndim = ndim;
	memcpy(p->shape, shape, (size_t)ndim * sizeof(*shape));
	p->bytes = elems * dtype_size(dtype);
	s->modules[module].n_params++;
	s->param_bytes += p->bytes;
	*param = s->n_params++;
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Pack each module's params and cut the result into chunks. */
static int layout(struct zinf_store *s)
{
	uint32_t n_chunks = 0;

	for (uint32_t m = 0; m < s->n_modules; m++) {
		struct module *mod = &s->modules[m];
		uint64_t off = 0;
		for (uint32_t i = 0; i < mod->n_params; i++) {
			struct param *p = &s->params[mod->first_param + i];
			p->off = off;
			off = store_round_up(off + p->bytes, PARAM_ALIGN);
		}
		mod->bytes = off;
		mod->dev_bytes = store_round_up(off ? off : 1, IO_ALIGN);
		mod->n_chunks =
			(uint32_t)((mod->dev_bytes + s->o.chunk_size - 1) / s->o.chunk_size);
		mod->first_chunk = n_chunks;
		n_chunks += mod->n_chunks;
	}
	s->chunks = calloc(n_chunks ? n_chunks : 1, sizeof(*s->chunks));
	if (!s->chunks)
		return -ENOMEM;
	s->n_chunks = n_chunks;
	for (uint32_t m = 0; m < s->n_modules; m++) {
		struct module *mod = &s->modules[m];
		for (uint32_t c = 0; c < mod->n_chunks; c++) {
			struct chunk *ch = &s->chunks[mod->first_chunk + c];
			ch->mod = mod;
			ch->off = (uint64_t)c * s->o.chunk_size;
			ch->len = mod->dev_bytes - ch->off < s->o.chunk_size
					  ? mod->dev_bytes - ch->off
					  : s->o.chunk_size;
			ch->io_len = store_round_up(ch->len, IO_ALIGN);
		}
	}
	return 0;
}

/* Budgets a fetch can never get around: refuse before any training step. */
static int check_budgets(struct zinf_store *s)
{
	struct zinf_device_stats ds;
	uint64_t total = 0, largest = 0;
	const struct module *big = NULL;
	char a[32], b[32];

	zinf_device_get_stats(s->o.device, &ds);
	for (uint32_t m = 0; m < s->n_modules; m++) {
		total += s->modules[m].dev_bytes;
		if (s->modules[m].dev_bytes > largest) {
			largest = s->modules[m].dev_bytes;
			big = &s->modules[m];
		}
	}
	if (big && largest > ds.limit)
		return store_fail(
			s, ZINF_EBUDGET,
			"device budget: module %s needs %s, more than the whole budget of %s (raise zinf.device_memory_limit or split the module)",
			big->name, zinf_format_bytes(largest, a, sizeof(a)),
			zinf_format_bytes(ds.limit, b, sizeof(b)));
	if (s->o.param_home == ZINF_TIER_DEVICE && total > ds.limit - ds.used)
		return store_fail(
			s, ZINF_EBUDGET,
			"device budget: parameters homed on the device need %s, %s free (offload them: zero_optimization.offload_param.device)",
			zinf_format_bytes(total, a, sizeof(a)),
			zinf_format_bytes(ds.limit - ds.used, b, sizeof(b)));
	if (s->o.param_home == ZINF_TIER_NVME) {
		uint64_t chunk = s->o.chunk_size < largest ? s->o.chunk_size : largest;
		if (chunk > zinf_pinned_size(s->o.pinned))
			return store_fail(
				s, ZINF_EBUDGET,
				"pinned budget: one chunk needs %s, more than the whole pool of %s (raise zinf.pinned_memory_limit or lower zinf.chunk_size)",
				zinf_format_bytes(chunk, a, sizeof(a)),
				zinf_format_bytes(zinf_pinned_size(s->o.pinned), b, sizeof(b)));
	}
	return 0;
}

static int alloc_homes(struct zinf_store *s)
{
	int rc;

	for (uint32_t m = 0; m < s->n_modules && s->o.param_home == ZINF_TIER_DEVICE; m++) {
		struct module *mod = &s->modules[m];
		rc = zinf_device_alloc(s->o.device, mod->dev_bytes, &mod->dev);
		if (rc)
			return store_fail(s, rc, "module %s: %s", mod->name,
					  zinf_device_last_error(s->o.device));
		zinf_device_memset_async(s->h2d, mod->dev, 0, mod->dev_bytes);
		mod->state = MOD_READY;
		mod->resident = mod->n_chunks;
	}
	for (uint32_t c = 0; c < s->n_chunks; c++) {
		struct chunk *ch = &s->chunks[c];
		rc = zinf_event_create(s->o.device, &ch->ev);
		if (rc)
			return store_fail(s, rc, "events: %s", zinf_device_last_error(s->o.device));
		switch (s->o.param_home) {
		case ZINF_TIER_DEVICE:
			ch->dev_home = (char *)ch->mod->dev + ch->off;
			ch->state = CHUNK_RESIDENT;
			break;
		case ZINF_TIER_HOST:
			if (posix_memalign(&ch->host, IO_ALIGN, ch->io_len))
				return store_fail(s, -ENOMEM,
						  "host home of module %s: cannot allocate %" PRIu64
						  " bytes",
						  ch->mod->name, ch->io_len);
			memset(ch->host, 0, ch->io_len);
			s->host_now += ch->io_len;
			break;
		case ZINF_TIER_NVME:
			rc = zinf_io_extent_alloc(s->o.io, ch->io_len, &ch->extent);
			if (rc)
				return store_fail(s, rc, "nvme home of module %s: %s",
						  ch->mod->name, zinf_io_last_error(s->o.io));
			ch->has_extent = true;
			s->nvme_now += ch->io_len;
			break;
		}
	}
	s->host_peak = s->host_now;
	s->nvme_peak = s->nvme_now;
	return zinf_stream_synchronize(s->h2d);
}

int zinf_store_finalize(struct zinf_store *s)
{
	int rc;

	pthread_mutex_lock(&s->lock);
	if (s->finalized) {
		rc = store_fail(s, ZINF_ESTATE, "finalize called twice");
		goto out;
	}
	rc = layout(s);
	if (!rc)
		rc = check_budgets(s);
	if (!rc)
		rc = alloc_homes(s);
	if (!rc)
		s->finalized = true;
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- synchronous contents ----------------------------------------------------------- */

/* Take a module out of circulation for a synchronous read or write. */
static int sync_begin_module(struct zinf_store *s, struct module *mod, const char *what)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	/* A load nobody holds any more (a prefetch given up) ends on its own: wait for it. */
	while (!mod->refs && !mod->sync_busy && mod->state == MOD_LOADING) {
		store_wait_ms(s);
	}
	if (mod->refs || mod->sync_busy || mod->state == MOD_LOADING ||
	    mod->state == MOD_WAITING_SPACE)
		rc = store_fail(s, -EBUSY, "%s: module %s is in use", what, mod->name);
	else
		mod->sync_busy = true;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Parameter `param`, finalized. */
static int param_of(struct zinf_store *s, uint32_t param, struct param **out)
{
	if (!s->finalized)
		return store_fail(s, ZINF_ESTATE, "param %u: read or written before finalize",
				  param);
	if (param >= s->n_params)
		return store_fail(s, -EINVAL, "param %u: no such parameter (%u registered)", param,
				  s->n_params);
	*out = &s->params[param];
	return 0;
}

static int sync_begin(struct zinf_store *s, uint32_t param, struct param **out)
{
	int rc = param_of(s, param, out);

	return rc ? rc : sync_begin_module(s, &s->modules[(*out)->module], (*out)->name);
}

static void sync_end_module(struct zinf_store *s, struct module *mod, bool wrote)
{
	pthread_mutex_lock(&s->lock);
	mod->sync_busy = false;
	/* The module can be evicted (or placed) again: a fetch waiting for space may fit. */
	store_kick(s);
	pthread_cond_broadcast(&s->ready);
	/* A cached device copy is stale after a write to the home tier: drop it. */
	if (wrote && s->o.param_home != ZINF_TIER_DEVICE && mod->state == MOD_READY)
		store_drop_copy(s, mod);
	pthread_mutex_unlock(&s->lock);
}

static void sync_end(struct zinf_store *s, struct param *p, bool wrote)
{
	sync_end_module(s, &s->modules[p->module], wrote);
}

static void count_link(struct zinf_store *s, enum zinf_link link, uint64_t bytes, uint64_t t0)
{
	pthread_mutex_lock(&s->lock);
	s->link[link].bytes += bytes;
	s->link[link].ns += store_now_ns() - t0;
	s->link[link].count++;
	pthread_mutex_unlock(&s->lock);
}

/* A chunk homed on NVMe into stage (io_len bytes): read, or zeros if never written. */
static int stage_read(struct zinf_store *s, struct chunk *ch, void *stage)
{
	uint64_t t0;
	int rc;

	if (!ch->written) {
		memset(stage, 0, ch->io_len);
		return 0;
	}
	t0 = store_now_ns();
	rc = zinf_io_rw(s->o.io, ZINF_IO_READ, ch->extent, 0, stage, ch->io_len);
	if (rc)
		return store_fail(s, rc, "module %s: %s", ch->mod->name,
				  zinf_io_last_error(s->o.io));
	count_link(s, ZINF_LINK_NVME_TO_PINNED, ch->io_len, t0);
	return 0;
}

/* Copy between dst/src and the home of one chunk's byte range [off, off + len); on NVMe
 * reads only (writes: chunk_write_parts). */
static int chunk_rw(struct zinf_store *s, struct chunk *ch, uint64_t off, void *buf, uint64_t len,
		    bool write)
{
	struct module *mod = ch->mod;
	void *stage = NULL;
	uint64_t t0;
	int rc;

	switch (s->o.param_home) {
	case ZINF_TIER_HOST:
		if (write)
			memcpy((char *)ch->host + off, buf, len);
		else
			memcpy(buf, (char *)ch->host + off, len);
		return 0;
	case ZINF_TIER_DEVICE: {
		void *dev = (char *)ch->dev_home + off;
		struct zinf_stream *st = write ? s->h2d : s->d2h;
		t0 = store_now_ns();
		rc = write ? zinf_device_memcpy_async(st, dev, buf, len, ZINF_COPY_H2D)
			   : zinf_device_memcpy_async(st, buf, dev, len, ZINF_COPY_D2H);
		if (!rc)
			rc = zinf_stream_synchronize(st);
		if (rc)
			return store_fail(s, rc, "module %s: %s", mod->name,
					  zinf_device_last_error(s->o.device));
		if (!write)
			count_link(s, ZINF_LINK_DEVICE_TO_PINNED, len, t0);
		return 0;
	}
	case ZINF_TIER_NVME:
		break;
	}
	if (write) /* NVMe writes go through chunk_write_parts */
		return store_fail(s, ZINF_ESTATE, "module %s: internal: chunk_rw write on NVMe",
				  mod->name);
	rc = zinf_pinned_alloc(s->o.pinned, ch->io_len, UINT64_MAX, &stage);
	if (rc)
		return store_fail(s, rc, "module %s: pinned staging of %" PRIu64 " bytes: %s",
				  mod->name, ch->io_len, zinf_pinned_last_error(s->o.pinned));
	rc = stage_read(s, ch, stage);
	if (!rc)
		memcpy(buf, (char *)stage + off, len);
	zinf_pinned_free(s->o.pinned, stage);
	return rc;
}

/* The bytes of chunk ch that belong to parameters (the rest are alignment gaps, zeros). */
static uint64_t chunk_param_bytes(const struct zinf_store *s, const struct chunk *ch)
{
	const struct module *mod = ch->mod;
	uint64_t bytes = 0;

	for (uint32_t i = 0; i < mod->n_params; i++) {
		const struct param *p = &s->params[mod->first_param + i];
		uint64_t lo = p->off > ch->off ? p->off : ch->off;
		uint64_t hi = p->off + p->bytes < ch->off + ch->len ? p->off + p->bytes
								    : ch->off + ch->len;
		bytes += hi > lo ? hi - lo : 0;
	}
	return bytes;
}

/* Where range r of a parameter of ch's module meets chunk ch: [*lo, *hi) in the module's
 * bytes (empty when *lo >= *hi). */
static void range_in_chunk(const struct zinf_store *s, const struct chunk *ch,
			   const struct zinf_store_range *r, uint64_t *lo, uint64_t *hi)
{
	uint64_t a = s->params[r->param].off + r->first, b = a + r->len;

	*lo = a > ch->off ? a : ch->off;
	*hi = b < ch->off + ch->len ? b : ch->off + ch->len;
}

/* Range r's source bytes from module byte lo on. */
static const char *range_src(const struct zinf_store *s, const struct zinf_store_range *r,
			     uint64_t lo)
{
	return (const char *)r->src + (lo - s->params[r->param].off - r->first);
}

/* Write the parts of ranges r[0..n) (not overlapping) inside chunk ch to its home. On
 * NVMe the chunk is staged once: read first unless the parts cover every parameter byte
 * of it (or it was never written), and written whole. */
static int chunk_write_parts(struct zinf_store *s, struct chunk *ch, uint32_t n,
			     const struct zinf_store_range *r)
{
	uint64_t covered = 0, lo, hi, t0;
	void *stage = NULL;
	int rc = 0;

	if (s->o.param_home != ZINF_TIER_NVME) {
		for (uint32_t i = 0; i < n && !rc; i++) {
			range_in_chunk(s, ch, &r[i], &lo, &hi);
			if (lo < hi)
				rc = chunk_rw(s, ch, lo - ch->off, (void *)range_src(s, &r[i], lo),
					      hi - lo, true);
		}
		return rc;
	}
	for (uint32_t i = 0; i < n; i++) {
		range_in_chunk(s, ch, &r[i], &lo, &hi);
		covered += hi > lo ? hi - lo : 0;
	}
	if (!covered)
		return 0;
	rc = zinf_pinned_alloc(s->o.pinned, ch->io_len, UINT64_MAX, &stage);
	if (rc)
		return store_fail(s, rc, "module %s: pinned staging of %" PRIu64 " bytes: %s",
				  ch->mod->name, ch->io_len, zinf_pinned_last_error(s->o.pinned));
	if (covered == chunk_param_bytes(s, ch)) /* all of it replaced: nothing to read */
		memset(stage, 0, ch->io_len);
	else
		rc = stage_read(s, ch, stage);
	for (uint32_t i = 0; i < n && !rc; i++) {
		range_in_chunk(s, ch, &r[i], &lo, &hi);
		if (lo < hi)
			memcpy((char *)stage + (lo - ch->off), range_src(s, &r[i], lo), hi - lo);
	}
	if (!rc) {
		t0 = store_now_ns();
		rc = zinf_io_rw(s->o.io, ZINF_IO_WRITE, ch->extent, 0, stage, ch->io_len);
		if (rc) {
			store_fail(s, rc, "module %s: %s", ch->mod->name,
				   zinf_io_last_error(s->o.io));
		} else {
			count_link(s, ZINF_LINK_PINNED_TO_NVME, ch->io_len, t0);
			zinf_timeline_add(s->o.timeline, ZINF_TRACK_NVME_WRITE, ch->mod->name, t0,
					  store_now_ns());
			ch->written = true;
		}
	}
	zinf_pinned_free(s->o.pinned, stage);
	return rc;
}

/* Copy bytes [first, first + len) of one parameter between buf and its home, chunk by
 * chunk (the module is held). */
static int param_chunks_rw(struct zinf_store *s, const struct param *p, uint64_t first,
			   uint64_t len, void *buf, bool write)
{
	const struct module *mod = &s->modules[p->module];
	uint64_t done = 0;
	int rc = 0;

	while (done < len && !rc) {
		uint64_t moff = p->off + first + done;
		struct chunk *ch = &s->chunks[mod->first_chunk + moff / s->o.chunk_size];
		uint64_t in_chunk = moff - ch->off;
		uint64_t n = ch->len - in_chunk < len - done ? ch->len - in_chunk : len - done;
		rc = chunk_rw(s, ch, in_chunk, (char *)buf + done, n, write);
		done += n;
	}
	return rc;
}

/* Module `module`, finalized, for a synchronous write. */
static int module_for_write(struct zinf_store *s, uint32_t module, struct module **out)
{
	if (!s->finalized)
		return store_fail(s, ZINF_ESTATE, "module %u: written before finalize", module);
	if (module >= s->n_modules)
		return store_fail(s, -EINVAL, "module %u: no such module (%u registered)", module,
				  s->n_modules);
	*out = &s->modules[module];
	return 0;
}

int zinf_store_write_ranges(struct zinf_store *s, uint32_t module, uint32_t n,
			    const struct zinf_store_range *r)
{
	struct module *mod;
	int rc = 0;

	rc = module_for_write(s, module, &mod);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		const struct param *p;
		if (r[i].param >= s->n_params || s->params[r[i].param].module != module)
			return store_fail(s, -EINVAL, "range %u: param %u is not in module %s", i,
					  r[i].param, mod->name);
		p = &s->params[r[i].param];
		if (!r[i].src || r[i].first > p->bytes || r[i].len > p->bytes - r[i].first)
			return store_fail(s, -EINVAL,
					  "param %u: bytes [%" PRIu64 ", %" PRIu64 " + %" PRIu64
					  ") of %p are not inside its %" PRIu64,
					  r[i].param, r[i].first, r[i].first, r[i].len, r[i].src,
					  p->bytes);
	}
	rc = sync_begin_module(s, mod, n ? s->params[r[0].param].name : mod->name);
	if (rc)
		return rc;
	for (uint32_t c = 0; c < mod->n_chunks && !rc; c++)
		rc = chunk_write_parts(s, &s->chunks[mod->first_chunk + c], n, r);
	/* A write that failed part-way may have changed some chunks at home already: the
	 * cached copy is dropped either way. */
	sync_end_module(s, mod, true);
	return rc;
}

int zinf_store_param_write_range(struct zinf_store *s, uint32_t param, uint64_t first, uint64_t len,
				 const void *src)
{
	struct zinf_store_range r = {.param = param, .first = first, .len = len, .src = src};
	struct param *p = NULL;
	int rc = param_of(s, param, &p);

	return rc ? rc : zinf_store_write_ranges(s, p->module, 1, &r);
}

int zinf_store_param_write(struct zinf_store *s, uint32_t param, const void *src)
{
	uint64_t bytes = param < s->n_params ? s->params[param].bytes : 0;

	return zinf_store_param_write_range(s, param, 0, bytes, src);
}

int zinf_store_param_read(struct zinf_store *s, uint32_t param, void *dst)
{
	struct param *p = NULL;
	int rc = sync_begin(s, param, &p);

	if (rc)
		return rc;
	rc = param_chunks_rw(s, p, 0, p->bytes, dst, false);
	sync_end(s, p, false);
	return rc;
}

/* ---- introspection ------------------------------------------------------------------ */

uint64_t zinf_store_param_bytes(struct zinf_store *s, uint32_t param)
{
	return param < s->n_params ? s->params[param].bytes : 0;
}

uint32_t zinf_store_param_module(struct zinf_store *s, uint32_t param)
{
	return param < s->n_params ? s->params[param].module : UINT32_MAX;
}

uint64_t zinf_store_param_chunk_left(struct zinf_store *s, uint32_t param, uint64_t first,
				     uint64_t *chunk)
{
	const struct param *p;
	uint64_t to_chunk_end;

	if (!s->finalized || param >= s->n_params || first >= s->params[param].bytes)
		return 0;
	p = &s->params[param];
	if (chunk)
		*chunk = (p->off + first) / s->o.chunk_size;
	to_chunk_end = s->o.chunk_size - (p->off + first) % s->o.chunk_size;
	return to_chunk_end < p->bytes - first ? to_chunk_end : p->bytes - first;
}

void zinf_store_get_stats(struct zinf_store *s, struct zinf_store_stats *out)
{
	struct zinf_device_stats ds;

	memset(out, 0, sizeof(*out));
	zinf_device_get_stats(s->o.device, &ds);
	out->device_now = ds.used;
	out->device_peak = ds.peak;
	out->device_limit = ds.limit;
	if (s->o.pinned) {
		struct zinf_pinned_stats ps;
		zinf_pinned_get_stats(s->o.pinned, &ps);
		out->pinned_now = ps.used;
		out->pinned_peak = ps.peak;
		out->pinned_limit = ps.limit;
	}
	pthread_mutex_lock(&s->lock);
	out->host_now = s->host_now;
	out->host_peak = s->host_peak;
	out->nvme_now = s->nvme_now;
	out->nvme_peak = s->nvme_peak;
	memcpy(out->link, s->link, sizeof(out->link));
	out->wait_ns = s->wait_ns;
	out->waits = s->waits;
	out->fetches = s->fetches;
	out->hits = s->hits;
	out->evictions = s->evictions;
	out->param_bytes = s->param_bytes;
	out->modules = s->n_modules;
	out->params = s->n_params;
	out->chunks = s->n_chunks;
	pthread_mutex_unlock(&s->lock);
	/* The device measures its own copies: take H2D and D2H time and bytes from it. */
	out->link[ZINF_LINK_PINNED_TO_DEVICE].bytes = ds.copy[ZINF_COPY_H2D].bytes;
	out->link[ZINF_LINK_PINNED_TO_DEVICE].ns = ds.copy[ZINF_COPY_H2D].ns;
	out->link[ZINF_LINK_PINNED_TO_DEVICE].count = ds.copy[ZINF_COPY_H2D].count;
	out->link[ZINF_LINK_DEVICE_TO_PINNED].bytes = ds.copy[ZINF_COPY_D2H].bytes;
	out->link[ZINF_LINK_DEVICE_TO_PINNED].ns = ds.copy[ZINF_COPY_D2H].ns;
	out->link[ZINF_LINK_DEVICE_TO_PINNED].count = ds.copy[ZINF_COPY_D2H].count;
}

int zinf_store_stats_json(const struct zinf_store_stats *st, FILE *f)
{
	fprintf(f,
		"{\"device\": {\"now\": %" PRIu64 ", \"peak\": %" PRIu64 ", \"limit\": %" PRIu64
		"}, "
		"\"pinned\": {\"now\": %" PRIu64 ", \"peak\": %" PRIu64 ", \"limit\": %" PRIu64
		"}, "
		"\"host\": {\"now\": %" PRIu64 ", \"peak\": %" PRIu64 "}, "
		"\"nvme\": {\"now\": %" PRIu64 ", \"peak\": %" PRIu64 "}, \"links\": {",
		st->device_now, st->device_peak, st->device_limit, st->pinned_now, st->pinned_peak,
		st->pinned_limit, st->host_now, st->host_peak, st->nvme_now, st->nvme_peak);
	for (int l = 0; l < ZINF_LINKS; l++)
		fprintf(f,
			"%s\"%s\": {\"bytes\": %" PRIu64 ", \"seconds\": %.6f, \"count\": %" PRIu64
			"}",
			l ? ", " : "", zinf_link_name((enum zinf_link)l), st->link[l].bytes,
			(double)st->link[l].ns * 1e-9, st->link[l].count);
	fprintf(f,
		"}, \"wait_seconds\": %.6f, \"waits\": %" PRIu64 ", \"fetches\": %" PRIu64
		", \"hits\": %" PRIu64 ", \"evictions\": %" PRIu64 ", \"param_bytes\": %" PRIu64
		", \"modules\": %u, \"params\": %u, \"chunks\": %u}",
		(double)st->wait_ns * 1e-9, st->waits, st->fetches, st->hits, st->evictions,
		st->param_bytes, st->modules, st->params, st->chunks);
	return ferror(f) ? -EIO : 0;
}

/* NVMe home: fill whole chunks from the parameters and write each once, with no read. */
static int module_write_nvme(struct zinf_store *s, struct module *mod, const void *const *src)
{
	void *stage = NULL;
	int rc = 0;

	for (uint32_t c = 0; c < mod->n_chunks && !rc; c++) {
		struct chunk *ch = &s->chunks[mod->first_chunk + c];
		uint64_t t0;
		rc = zinf_pinned_alloc(s->o.pinned, ch->io_len, UINT64_MAX, &stage);
		if (rc)
			return store_fail(
				s, rc, "module %s: pinned staging of %" PRIu64 " bytes: %s",
				mod->name, ch->io_len, zinf_pinned_last_error(s->o.pinned));
		memset(stage, 0, ch->io_len); /* the alignment gaps between parameters */
		for (uint32_t i = 0; i < mod->n_params; i++) {
			const struct param *p = &s->params[mod->first_param + i];
			uint64_t b = p->off > ch->off ? p->off : ch->off;
			uint64_t e = p->off + p->bytes < ch->off + ch->len ? p->off + p->bytes
									   : ch->off + ch->len;
			if (b < e)
				memcpy((char *)stage + (b - ch->off),
				       (const char *)src[i] + (b - p->off), e - b);
		}
		t0 = store_now_ns();
		rc = zinf_io_rw(s->o.io, ZINF_IO_WRITE, ch->extent, 0, stage, ch->io_len);
		if (rc)
			store_fail(s, rc, "module %s: %s", mod->name, zinf_io_last_error(s->o.io));
		else {
			count_link(s, ZINF_LINK_PINNED_TO_NVME, ch->io_len, t0);
			zinf_timeline_add(s->o.timeline, ZINF_TRACK_NVME_WRITE, mod->name, t0,
					  store_now_ns());
			ch->written = true;
		}
		zinf_pinned_free(s->o.pinned, stage);
	}
	return rc;
}

/* Write-through: a module cached on the device (fetched, released, not evicted) gets the
 * new values too, so the next fetch is a hit instead of a read of what was just
 * written. The module is sync_busy: nothing fetches or evicts it meanwhile. Returns
 * true when the copy is current. */
static bool refresh_copy(struct zinf_store *s, struct module *mod, const void *const *src)
{
	uint64_t t0 = store_now_ns();
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (mod->state != MOD_READY || !mod->dev) {
		pthread_mutex_unlock(&s->lock);
		return false;
	}
	pthread_mutex_unlock(&s->lock);
	for (uint32_t i = 0; i < mod->n_params && !rc; i++) {
		const struct param *p = &s->params[mod->first_param + i];
		rc = zinf_device_memcpy_async(s->h2d, (char *)mod->dev + p->off, src[i], p->bytes,
					      ZINF_COPY_H2D);
	}
	if (!rc)
		rc = zinf_stream_synchronize(s->h2d);
	if (rc) {
		zinf_logf(ZINF_LOG_WARN, "module %s: device copy not refreshed (%s); dropped",
			  mod->name, zinf_device_last_error(s->o.device));
		return false;
	}
	/* the device counts the bytes on its H2D link */
	zinf_timeline_add(s->o.timeline, ZINF_TRACK_H2D, mod->name, t0, store_now_ns());
	return true;
}

int zinf_store_module_write(struct zinf_store *s, uint32_t module, const void *const *src)
{
	struct module *mod;
	bool fresh = false;
	int rc;

	rc = module_for_write(s, module, &mod);
	if (rc)
		return rc;
	rc = sync_begin_module(s, mod, mod->name);
	if (rc)
		return rc;
	if (s->o.param_home == ZINF_TIER_NVME) {
		rc = module_write_nvme(s, mod, src);
	} else {
		for (uint32_t i = 0; i < mod->n_params && !rc; i++) {
			const struct param *p = &s->params[mod->first_param + i];
			rc = param_chunks_rw(s, p, 0, p->bytes, (void *)src[i], true);
		}
	}
	if (!rc && s->o.param_home != ZINF_TIER_DEVICE)
		fresh = refresh_copy(s, mod, src);
	sync_end_module(s, mod, !fresh); /* (a failed write may have changed some chunks) */
	return rc;
}

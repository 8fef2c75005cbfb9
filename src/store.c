/*
 * Shard store (see store.h): registration and layout, home allocation, and the counters.
 * Synchronous reads and writes of parameter contents are in store_sync.c; the moving
 * itself (fetch, wait, release, eviction, the mover thread) is in store_move.c.
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
	if (opts->param_home == ZINF_TIER_NVME && !opts->io) {
		snprintf(err, errlen, "store: parameters homed on nvme need an I/O engine");
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
	s->copies_tail = &s->copies;
	rc = zinf_stream_create(opts->device, &s->h2d);
	if (!rc)
		rc = zinf_stream_create(opts->device, &s->d2h);
	if (!rc)
		rc = zinf_stream_create(opts->device, &s->refresh);
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
		if (ch->host_registered)
			zinf_device_host_unregister(s->o.device, ch->host, ch->io_len);
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
	if (s->refresh)
		zinf_stream_synchronize(s->refresh);
	free_homes(s);
	zinf_stream_destroy(s->h2d);
	zinf_stream_destroy(s->d2h);
	zinf_stream_destroy(s->refresh);
	for (uint32_t i = 0; i < s->n_params; i++)
		free(s->params[i].name);
	for (uint32_t m = 0; m < s->n_modules; m++)
		free(s->modules[m].name);
	free(s->params);
	free(s->modules);
	zinf_name_index_free(&s->param_names);
	zinf_name_index_free(&s->module_names);
	free(s->chunks);
	free(s->scratch);
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

static const char *module_name_at(const void *ctx, uint32_t i)
{
	return ((const struct zinf_store *)ctx)->modules[i].name;
}

static const char *param_name_at(const void *ctx, uint32_t i)
{
	return ((const struct zinf_store *)ctx)->params[i].name;
}

int zinf_store_module_add(struct zinf_store *s, const char *name, uint32_t *module)
{
	struct module *m;
	uint32_t other;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (s->finalized) {
		rc = store_fail(s, ZINF_ESTATE, "module %s: added after finalize", name);
		goto out;
	}
	if (!name[0]) {
		rc = store_fail(s, -EINVAL, "module %u: the name is empty", s->n_modules);
		goto out;
	}
	other = zinf_name_index_find(&s->module_names, name, module_name_at, s);
	if (other != UINT32_MAX) {
		rc = store_fail(s, -EINVAL, "module %s: the name is module %u's already", name,
				other);
		goto out;
	}
	if (s->n_modules == s->cap_modules) {
		uint32_t cap = s->cap_modules ? 2 * s->cap_modules : 16;
		struct module *v = realloc(s->modules, cap * sizeof(*v));
		if (!v) {
			rc = store_fail(s, -ENOMEM, "module %s: out of host memory", name);
			goto out;
		}
		s->modules = v;
		s->cap_modules = cap;
	}
	m = &s->modules[s->n_modules];
	memset(m, 0, sizeof(*m));
	m->name = strdup(name);
	if (!m->name ||
	    zinf_name_index_add(&s->module_names, s->n_modules, module_name_at, s) != 0) {
		free(m->name);
		m->name = NULL;
		rc = store_fail(s, -ENOMEM, "module %s: out of host memory", name);
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
	uint32_t other;
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
	if (!name[0]) {
		rc = store_fail(s, -EINVAL, "param %u (module %s): the name is empty", s->n_params,
				s->modules[module].name);
		goto out;
	}
	other = zinf_name_index_find(&s->param_names, name, param_name_at, s);
	if (other != UINT32_MAX) {
		rc = store_fail(s, -EINVAL, "param %s: the name is param %u's already (module %s)",
				name, other, s->modules[s->params[other].module].name);
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
		if (shape[d] == 0 || elems > ZINF_MAX_PARAM_ELEMS / shape[d]) {
			rc = store_fail(s, -EINVAL,
					"param %s: dimension %d is %" PRIu64
					" (expected 1 or more, the product at most 2^48)",
					name, d, shape[d]);
			goto out;
		}
		elems *= shape[d];
	}
	if (elems > ZINF_MAX_MODEL_ELEMS - s->param_elems) {
		rc = store_fail(s, -EINVAL,
				"param %s: %" PRIu64 " elements after %" PRIu64
				" registered: more than 2^50 in all",
				name, elems, s->param_elems);
		goto out;
	}
	if (s->n_params == s->cap_params) {
		uint32_t cap = s->cap_params ? 2 * s->cap_params : 64;
		struct param *v = realloc(s->params, cap * sizeof(*v));
		if (!v) {
			rc = store_fail(s, -ENOMEM, "param %s: out of host memory", name);
			goto out;
		}
		s->params = v;
		s->cap_params = cap;
	}
	p = &s->params[s->n_params];
	memset(p, 0, sizeof(*p));
	p->name = strdup(name);
	if (!p->name || zinf_name_index_add(&s->param_names, s->n_params, param_name_at, s) != 0) {
		free(p->name);
		p->name = NULL;
		rc = store_fail(s, -ENOMEM, "param %s: out of host memory", name);
		goto out;
	}
	p->module = module;
	p->dtype = dtype;
	p->ndim = ndim;
	memcpy(p->shape, shape, (size_t)ndim * sizeof(*shape));
	p->bytes = elems * dtype_size(dtype);
	s->modules[module].n_params++;
	s->modules[module].elems += elems;
	s->param_bytes += p->bytes;
	s->param_elems += elems;
	*param = s->n_params++;
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

uint64_t zinf_store_pack_param(uint64_t off, uint64_t bytes)
{
	return store_round_up(off + bytes, PARAM_ALIGN);
}

uint64_t zinf_store_buffer_bytes(uint64_t packed)
{
	return store_round_up(packed ? packed : 1, IO_ALIGN);
}

/* Pack a module's params and size it (bytes, dev_bytes, n_chunks). */
static void layout_module(struct zinf_store *s, struct module *mod)
{
	uint64_t off = 0;

	for (uint32_t i = 0; i < mod->n_params; i++) {
		struct param *p = &s->params[mod->first_param + i];
		p->off = off;
		off = zinf_store_pack_param(off, p->bytes);
	}
	mod->bytes = off;
	mod->dev_bytes = zinf_store_buffer_bytes(off);
	mod->n_chunks = (uint32_t)((mod->dev_bytes + s->o.chunk_size - 1) / s->o.chunk_size);
}

/* The length of chunk c of a laid-out module. */
static uint64_t chunk_len(const struct zinf_store *s, const struct module *mod, uint32_t c)
{
	uint64_t off = (uint64_t)c * s->o.chunk_size;

	return mod->dev_bytes - off < s->o.chunk_size ? mod->dev_bytes - off : s->o.chunk_size;
}

/* Each module's home tier: the store's, but with an NVMe home, host_elems keeps in host
 * memory the modules that fit in what is left of it, first fit in registration order
 * (engine_plan.c's param_split decides the same way). Lock held. */
static void assign_homes(struct zinf_store *s)
{
	uint64_t left = s->o.param_home == ZINF_TIER_NVME ? s->o.host_elems : 0;

	for (uint32_t m = 0; m < s->n_modules; m++) {
		struct module *mod = &s->modules[m];
		mod->home = s->o.param_home;
		if (s->o.param_home == ZINF_TIER_NVME && mod->elems <= left) {
			mod->home = ZINF_TIER_HOST;
			left -= mod->elems;
		}
	}
}

/* Pack each module's params and cut the result into chunks. */
static int layout(struct zinf_store *s)
{
	uint32_t n_chunks = 0;

	assign_homes(s);
	for (uint32_t m = 0; m < s->n_modules; m++) {
		struct module *mod = &s->modules[m];
		layout_module(s, mod);
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
			ch->len = chunk_len(s, mod, c);
			ch->io_len = store_round_up(ch->len, IO_ALIGN);
		}
	}
	return 0;
}

/* The sum over every chunk homed on tier of its io_len, or with io of its extent's
 * footprint there (laid out first when not finalized: finalize lays it out the same
 * way). */
static uint64_t chunks_sum(struct zinf_store *s, enum zinf_tier tier, const struct zinf_io *io)
{
	uint64_t total = 0;

	pthread_mutex_lock(&s->lock);
	if (!s->finalized)
		assign_homes(s);
	for (uint32_t m = 0; m < s->n_modules; m++) {
		struct module *mod = &s->modules[m];
		if (!s->finalized)
			layout_module(s, mod);
		if (mod->home != tier)
			continue;
		for (uint32_t c = 0; c < mod->n_chunks; c++) {
			uint64_t len = store_round_up(chunk_len(s, mod, c), IO_ALIGN);
			total += io ? zinf_io_extent_footprint(io, len) : len;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return total;
}

uint64_t zinf_store_nvme_home_bytes(struct zinf_store *s)
{
	if (s->o.param_home != ZINF_TIER_NVME || !s->o.io)
		return 0;
	return chunks_sum(s, ZINF_TIER_NVME, s->o.io);
}

uint64_t zinf_store_chunk_bytes(struct zinf_store *s)
{
	/* host homes are copied to the device and read directly, never staged */
	return s->o.param_home == ZINF_TIER_NVME ? chunks_sum(s, ZINF_TIER_NVME, NULL) : 0;
}

uint64_t zinf_store_largest_chunk(struct zinf_store *s)
{
	uint64_t largest = 0;

	pthread_mutex_lock(&s->lock);
	for (uint32_t m = 0; m < s->n_modules; m++) {
		struct module *mod = &s->modules[m];
		if (!s->finalized)
			layout_module(s, mod);
		if (mod->n_chunks && chunk_len(s, mod, 0) > largest) /* chunk 0: the longest */
			largest = chunk_len(s, mod, 0);
	}
	pthread_mutex_unlock(&s->lock);
	return store_round_up(largest, IO_ALIGN);
}

uint64_t zinf_store_host_split_bytes(struct zinf_store *s)
{
	return s->o.param_home == ZINF_TIER_NVME ? chunks_sum(s, ZINF_TIER_HOST, NULL) : 0;
}

int zinf_store_set_pinned(struct zinf_store *s, struct zinf_pinned *pinned)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (s->finalized || s->o.pinned)
		rc = store_fail(s, ZINF_ESTATE, "pinned pool: set after finalize or twice");
	else
		s->o.pinned = pinned;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Budgets a fetch can never get around: refuse before any training step. */
static int check_budgets(struct zinf_store *s)
{
	struct zinf_device_stats ds;
	uint64_t total = 0, largest = 0, largest_nvme = 0;
	const struct module *big = NULL;
	char a[32], b[32];

	zinf_device_get_stats(s->o.device, &ds);
	for (uint32_t m = 0; m < s->n_modules; m++) {
		total += s->modules[m].dev_bytes;
		if (s->modules[m].dev_bytes > largest) {
			largest = s->modules[m].dev_bytes;
			big = &s->modules[m];
		}
		if (s->modules[m].home == ZINF_TIER_NVME && s->modules[m].dev_bytes > largest_nvme)
			largest_nvme = s->modules[m].dev_bytes;
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
	if (largest_nvme && !s->o.pinned)
		return store_fail(s, -EINVAL,
				  "parameters homed on nvme need a pinned pool (none was given)");
	if (largest_nvme) {
		uint64_t chunk = s->o.chunk_size < largest_nvme ? s->o.chunk_size : largest_nvme;
		if (chunk > zinf_pinned_size(s->o.pinned))
			return store_fail(
				s, ZINF_EBUDGET,
				"pinned budget: one chunk needs %s, more than the whole pool of %s (raise zinf.pinned_memory_limit or lower zinf.chunk_size)",
				zinf_format_bytes(chunk, a, sizeof(a)),
				zinf_format_bytes(zinf_pinned_size(s->o.pinned), b, sizeof(b)));
	}
	return 0;
}

/* pin_host: page-lock a chunk's host home with the device (whole pages: IO_ALIGN). */
static int pin_home(struct zinf_store *s, struct chunk *ch)
{
	char a[32], b[32];
	int rc;

	if (!s->o.pin_host || !zinf_device_registers_dma(s->o.device))
		return 0;
	rc = zinf_device_host_register(s->o.device, ch->host, ch->io_len);
	if (rc)
		return store_fail(
			s, rc,
			"zero_optimization.offload_param.pin_memory: "
			"cannot page-lock the host home of module %s (%s of %s so far): %s",
			ch->mod->name, zinf_format_bytes(ch->io_len, a, sizeof(a)),
			zinf_format_bytes(s->host_pinned + ch->io_len, b, sizeof(b)),
			zinf_device_last_error(s->o.device));
	ch->host_registered = true;
	s->host_pinned += ch->io_len;
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
		switch (ch->mod->home) {
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
			rc = pin_home(s, ch);
			if (rc)
				return rc;
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
	out->host_pinned = s->host_pinned;
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
		"\"host\": {\"now\": %" PRIu64 ", \"peak\": %" PRIu64 ", \"pinned\": %" PRIu64 "}, "
		"\"nvme\": {\"now\": %" PRIu64 ", \"peak\": %" PRIu64 "}, \"links\": {",
		st->device_now, st->device_peak, st->device_limit, st->pinned_now, st->pinned_peak,
		st->pinned_limit, st->host_now, st->host_peak, st->host_pinned, st->nvme_now,
		st->nvme_peak);
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

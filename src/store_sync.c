/*
 * Shard store (see store.h), synchronous contents: reading and writing parameters at
 * their home tier while their module is taken out of circulation (sync_begin / sync_end),
 * byte ranges of several parameters a chunk at a time (each chunk staged once on NVMe,
 * read only when partly covered), whole modules (each chunk written once), and the
 * refresh of a cached device copy. Registration and layout are in store.c, the moving in
 * store_move.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "pinned.h"
#include "store_internal.h"
#include "timeline.h"
#include "zinf/error.h"
#include "zinf/io.h"
#include "zinf/log.h"

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

	switch (mod->home) {
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

	if (ch->mod->home != ZINF_TIER_NVME) {
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
	struct module *mod = NULL; /* gcc -O2 cannot see module_for_write sets it */
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
 * written. The module is sync_busy: nothing fetches or evicts it meanwhile. From a host
 * home the copy is of its chunks, just written (page-locked with pin_host, where src is
 * the caller's pageable memory); on its own stream, so it waits for no fetch. Returns
 * true when the copy is current. */
static bool refresh_copy(struct zinf_store *s, struct module *mod, const void *const *src)
{
	uint64_t t0 = store_now_ns();
	int rc = 0, sync_rc;

	pthread_mutex_lock(&s->lock);
	if (mod->state != MOD_READY || !mod->dev) {
		pthread_mutex_unlock(&s->lock);
		return false;
	}
	pthread_mutex_unlock(&s->lock);
	if (mod->home == ZINF_TIER_HOST) {
		for (uint32_t c = 0; c < mod->n_chunks && !rc; c++) {
			const struct chunk *ch = &s->chunks[mod->first_chunk + c];
			rc = zinf_device_memcpy_async(s->refresh, (char *)mod->dev + ch->off,
						      ch->host, ch->len, ZINF_COPY_H2D);
		}
	} else {
		for (uint32_t i = 0; i < mod->n_params && !rc; i++) {
			const struct param *p = &s->params[mod->first_param + i];
			rc = zinf_device_memcpy_async(s->refresh, (char *)mod->dev + p->off, src[i],
						      p->bytes, ZINF_COPY_H2D);
		}
	}
	/* waited for even after a failed call: no copy queued before it may land in the
	 * device buffer once the module's copy is dropped */
	sync_rc = zinf_stream_synchronize(s->refresh);
	if (!rc)
		rc = sync_rc;
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
	struct module *mod = NULL; /* gcc -O2 cannot see module_for_write sets it */
	bool fresh = false;
	int rc;

	rc = module_for_write(s, module, &mod);
	if (rc)
		return rc;
	rc = sync_begin_module(s, mod, mod->name);
	if (rc)
		return rc;
	if (mod->home == ZINF_TIER_NVME) {
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

int zinf_store_module_write_device(struct zinf_store *s, uint32_t module, const void *const *src)
{
	struct module *mod = NULL; /* gcc -O2 cannot see module_for_write sets it */
	int rc, sync_rc;

	rc = module_for_write(s, module, &mod);
	if (rc)
		return rc;
	if (mod->home != ZINF_TIER_DEVICE)
		return store_fail(s, ZINF_ESTATE,
				  "module %s: written from device memory but homed on %s",
				  mod->name, zinf_tier_name(mod->home));
	rc = sync_begin_module(s, mod, mod->name);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < mod->n_params && !rc; i++) {
		const struct param *p = &s->params[mod->first_param + i];
		rc = zinf_device_memcpy_async(s->h2d, (char *)mod->dev + p->off, src[i], p->bytes,
					      ZINF_COPY_D2D);
	}
	/* waited for even after a failed call: what was queued still lands */
	sync_rc = zinf_stream_synchronize(s->h2d);
	if (!rc)
		rc = sync_rc;
	if (rc)
		store_fail(s, rc, "module %s: %s", mod->name, zinf_device_last_error(s->o.device));
	sync_end_module(s, mod, true);
	return rc;
}

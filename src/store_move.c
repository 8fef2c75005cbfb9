/*
 * Shard store, moving (see store.h): the mover thread advances each fetched chunk
 * HOME -> QUEUED -> READING (nvme -> pinned) -> COPYING (-> device) -> RESIDENT, places
 * waiting modules on the device (evicting the least recently released cached module when
 * the budget is short), and fetch / wait / release are the caller's side of it.
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
#include "timeline.h"
#include "zinf/config.h" /* zinf_format_bytes */
#include "zinf/error.h"
#include "zinf/io.h"
#include "zinf/log.h"

/* ---- the mover ---------------------------------------------------------------------- */

/* Runs on an I/O worker thread. It only flags the chunk: taking the store lock here
 * could deadlock against the mover, which holds it while it submits. The mover polls
 * flagged chunks every MOVER_POLL_NS while reads are in flight. */
static void io_done_cb(struct zinf_io_req *req)
{
	struct chunk *ch = req->user;

	__atomic_store_n(&ch->io_done, 1, __ATOMIC_RELEASE);
}

static void kick(struct zinf_store *s)
{
	s->kicks++;
	pthread_cond_signal(&s->kick);
}

void store_kick(struct zinf_store *s)
{
	kick(s);
}

void store_wait_ms(struct zinf_store *s)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* the conditions' clock (zinf_store_create) */
	ts.tv_nsec += 1000000;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&s->ready, &s->lock, &ts);
}

static void activate(struct zinf_store *s, struct chunk *ch)
{
	/* First in, first served: a module fetched earlier is needed earlier. */
	ch->mod->active++;
	ch->state = CHUNK_QUEUED;
	ch->next_active = NULL;
	*s->active_tail = ch;
	s->active_tail = &ch->next_active;
}

/* A module's device buffer goes back, unless the module is persistent: its buffer is
 * kept for the run, in its place (zinf_store_set_persistent), and loaded again there. */
static void give_back_buffer(struct zinf_store *s, struct module *mod)
{
	if (mod->persistent)
		return;
	zinf_device_free(s->o.device, mod->dev);
	mod->dev = NULL;
}

void store_drop_copy(struct zinf_store *s, struct module *mod)
{
	give_back_buffer(s, mod);
	mod->state = MOD_HOME;
	mod->resident = 0;
	for (uint32_t c = 0; c < mod->n_chunks; c++)
		s->chunks[mod->first_chunk + c].state = CHUNK_HOME;
}

/* The victim is the cached module needed furthest in the future (Belady), when the
 * prefetcher has said (zinf_store_set_next_use); among equals, the least recently
 * released. */
static bool evict_one(struct zinf_store *s, const struct module *keep)
{
	struct module *victim = NULL;

	if (s->o.param_home == ZINF_TIER_DEVICE)
		return false; /* homes are not caches */
	for (uint32_t m = 0; m < s->n_modules; m++) {
		struct module *mod = &s->modules[m];
		if (mod == keep || mod->state != MOD_READY || mod->refs || mod->sync_busy ||
		    mod->persistent)
			continue;
		if (!victim || mod->next_use > victim->next_use ||
		    (mod->next_use == victim->next_use && mod->last_use < victim->last_use))
			victim = mod;
	}
	if (!victim)
		return false;
	store_drop_copy(s, victim);
	s->evictions++;
	return true;
}

/* Give a waiting module its device buffer, evicting cached ones if needed; a persistent
 * module has its own already when there was room for it when it was marked. */
static int place(struct zinf_store *s, struct module *mod)
{
	int rc = 0;

	while (!mod->dev) {
		rc = mod->persistent
			     ? zinf_device_alloc_high(s->o.device, mod->dev_bytes, &mod->dev)
			     : zinf_device_alloc(s->o.device, mod->dev_bytes, &mod->dev);
		if (rc != ZINF_EBUDGET || !evict_one(s, mod))
			break;
	}
	if (rc)
		return rc;
	mod->state = MOD_LOADING;
	mod->resident = 0;
	for (uint32_t c = 0; c < mod->n_chunks; c++)
		activate(s, &s->chunks[mod->first_chunk + c]);
	return 0;
}

/* The mover's failures are recorded on the module, not as the mover thread's last error
 * (which nobody reads): zinf_store_wait hands the message to the waiting thread. The
 * first failure of a load is the one reported. */
static void module_failed(struct zinf_store *s, struct module *mod, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void module_failed(struct zinf_store *s, struct module *mod, int code, const char *fmt, ...)
{
	va_list ap;

	if (mod->state == MOD_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(mod->error_msg, sizeof(mod->error_msg), fmt, ap);
	va_end(ap);
	zinf_error_one_line(mod->error_msg);
	zinf_logf(ZINF_LOG_DEBUG, "store: %s", mod->error_msg);
	mod->state = MOD_FAILED;
	mod->error = code;
	pthread_cond_broadcast(&s->ready);
}

static void enqueue(struct zinf_store *s, struct module *mod)
{
	mod->state = MOD_WAITING_SPACE;
	mod->next_waiting = NULL;
	if (s->waiting_tail)
		s->waiting_tail->next_waiting = mod;
	else
		s->waiting_head = mod;
	s->waiting_tail = mod;
	kick(s);
}

/* A failed module gives its device buffer back once no chunk of it is in flight. It
 * stays FAILED for the fetches that saw the failure, until they are released or a new
 * fetch asks for another try. */
static void settle_failed(struct zinf_store *s, struct module *mod)
{
	if (mod->state != MOD_FAILED || mod->active)
		return;
	give_back_buffer(s, mod);
	mod->resident = 0;
	for (uint32_t c = 0; c < mod->n_chunks; c++)
		s->chunks[mod->first_chunk + c].state = CHUNK_HOME;
	if (mod->retry) {
		mod->retry = false;
		enqueue(s, mod);
	} else if (!mod->refs) {
		mod->state = MOD_HOME;
	}
}

/* The chunk's copy to the device (from its host home, or its staging buffer: zeroed
 * first for an NVMe chunk never written) is queued after the pass (queue_copies),
 * without the store lock: a copy from pageable memory (a host home without pin_memory)
 * returns on CUDA only once the driver has staged all of it, and zeroing a staging
 * buffer takes as long; neither may hold up the threads that fetch, wait and release. */
static void start_copy(struct zinf_store *s, struct chunk *ch)
{
	ch->state = CHUNK_COPYING;
	ch->next_copy = NULL;
	*s->copies_tail = ch;
	s->copies_tail = &ch->next_copy;
}

/* Queue the copies the pass started, the store lock released meanwhile (held on entry
 * and on return). The chunks stay on the active list, so their modules keep their device
 * buffers (a load given up or failed is settled only when its last chunk leaves it), and
 * only this thread polls their events, in the next pass; for host and NVMe homes only
 * the mover uses the h2d stream. */
static void queue_copies(struct zinf_store *s)
{
	struct chunk *list = s->copies;

	if (!list)
		return;
	s->copies = NULL;
	s->copies_tail = &s->copies;
	pthread_mutex_unlock(&s->lock);
	for (struct chunk *ch = list; ch; ch = ch->next_copy) {
		struct module *mod = ch->mod;
		bool host = mod->home == ZINF_TIER_HOST;
		int rc;

		if (!host && !ch->written)
			memset(ch->staging, 0, ch->len);
		ch->t_copy = store_now_ns();
		rc = zinf_device_memcpy_async(s->h2d, (char *)mod->dev + ch->off,
					      host ? ch->host : ch->staging, ch->len,
					      ZINF_COPY_H2D);
		if (!rc) {
			rc = zinf_event_record(ch->ev, s->h2d);
			/* the copy is queued but not its event, which reads complete: the module
			 * must not settle (and free its buffer) while the copy may still write */
			if (rc)
				zinf_stream_synchronize(s->h2d);
		}
		if (rc) {
			/* the event then reads complete: the chunk settles */
			pthread_mutex_lock(&s->lock);
			module_failed(s, mod, rc, "module %s: copy to device: %s", mod->name,
				      zinf_device_last_error(s->o.device));
			pthread_mutex_unlock(&s->lock);
		}
	}
	pthread_mutex_lock(&s->lock);
}

/* Advance one chunk; returns true when it left the active list. */
static bool advance(struct zinf_store *s, struct chunk *ch)
{
	struct module *mod = ch->mod;
	int rc;

	switch (ch->state) {
	case CHUNK_QUEUED:
		if (mod->state == MOD_FAILED) {
			ch->state = CHUNK_HOME;
			return true;
		}
		if (mod->home == ZINF_TIER_HOST) {
			start_copy(s, ch);
			return false;
		}
		if (zinf_pinned_try_alloc(s->o.pinned, ch->io_len, &ch->staging))
			return false; /* pinned pool full: back-pressure, retry later */
		if (!ch->written) {
			start_copy(s, ch);
			return false;
		}
		memset(&ch->req, 0, sizeof(ch->req));
		ch->req.op = ZINF_IO_READ;
		ch->req.extent = ch->extent;
		ch->req.len = ch->io_len;
		ch->req.buf = ch->staging;
		ch->req.done = io_done_cb;
		ch->req.user = ch;
		ch->io_done = 0;
		ch->t_submit = store_now_ns();
		{
			struct zinf_io_req *r = &ch->req;
			rc = zinf_io_submit(s->o.io, &r, 1);
		}
		if (rc) {
			module_failed(s, mod, rc, "module %s: nvme read: %s", mod->name,
				      zinf_io_last_error(s->o.io));
			zinf_pinned_free(s->o.pinned, ch->staging);
			ch->staging = NULL;
			ch->state = CHUNK_HOME;
			return true;
		}
		ch->state = CHUNK_READING;
		return false;
	case CHUNK_READING:
		if (!__atomic_load_n(&ch->io_done, __ATOMIC_ACQUIRE))
			return false;
		s->link[ZINF_LINK_NVME_TO_PINNED].ns += store_now_ns() - ch->t_submit;
		zinf_timeline_add(s->o.timeline, ZINF_TRACK_NVME_READ, mod->name, ch->t_submit,
				  store_now_ns());
		if (ch->req.status) {
			module_failed(s, mod, ch->req.status, "module %s: %s", mod->name,
				      ch->req.error);
		} else {
			s->link[ZINF_LINK_NVME_TO_PINNED].bytes += ch->io_len;
			s->link[ZINF_LINK_NVME_TO_PINNED].count++;
		}
		if (mod->state == MOD_FAILED) {
			zinf_pinned_free(s->o.pinned, ch->staging);
			ch->staging = NULL;
			ch->state = CHUNK_HOME;
			return true;
		}
		start_copy(s, ch);
		return false;
	case CHUNK_COPYING: {
		int q = zinf_event_query(ch->ev);

		if (q == -EAGAIN)
			return false;
		/* the copy failed (a device fault is sticky): the module did not arrive */
		if (q < 0)
			module_failed(s, mod, q, "module %s: copy to the device: %s", mod->name,
				      zinf_device_last_error(s->o.device));
		/* ends when the mover sees it: within MOVER_POLL_NS of the real end */
		zinf_timeline_add(s->o.timeline, ZINF_TRACK_H2D, mod->name, ch->t_copy,
				  store_now_ns());
		if (ch->staging) {
			zinf_pinned_free(s->o.pinned, ch->staging);
			ch->staging = NULL;
		}
		if (mod->state == MOD_FAILED) {
			ch->state = CHUNK_HOME;
			return true;
		}
		ch->state = CHUNK_RESIDENT;
		if (++mod->resident == mod->n_chunks) {
			mod->state = MOD_READY;
			pthread_cond_broadcast(&s->ready);
		}
		return true;
	}
	default:
		return true;
	}
}

/* Place waiting modules in fetch order; a module that does not fit holds the line. */
static void place_waiting(struct zinf_store *s)
{
	while (s->waiting_head) {
		struct module *mod = s->waiting_head;
		if (mod->state == MOD_WAITING_SPACE && place(s, mod) != 0)
			break;
		s->waiting_head = mod->next_waiting;
		if (!s->waiting_head)
			s->waiting_tail = NULL;
	}
}

/* One pass over the waiting modules and the active chunks. Returns whether anything is
 * still in flight (and so needs polling). */
static bool mover_pass(struct zinf_store *s)
{
	struct chunk **pp = &s->active;
	bool settled = false;

	place_waiting(s);
	while (*pp) {
		struct chunk *ch = *pp;
		if (!advance(s, ch)) {
			pp = &ch->next_active;
			continue;
		}
		*pp = ch->next_active;
		if (!*pp)
			s->active_tail = pp;
		ch->mod->active--;
		settle_failed(s, ch->mod); /* no-op unless it failed and this was its last chunk */
		settled = true;
	}
	/* A module that became ready here can be evicted, and a failed one gave its buffer
	 * back: a module waiting for space may fit now. Nobody else kicks for this, so
	 * without this pass the mover would sleep (a second) with a fetch waiting. */
	if (settled && s->waiting_head)
		place_waiting(s);
	return s->active != NULL;
}

void *store_mover_main(void *arg)
{
	struct zinf_store *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		uint64_t seen = s->kicks;
		bool busy = mover_pass(s);
		struct timespec ts;

		queue_copies(s);
		if (s->stop || s->kicks != seen)
			continue;
		uint64_t wait_ns = busy ? MOVER_POLL_NS : s->o.mover_idle_ns;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (time_t)(wait_ns / 1000000000ull);
		ts.tv_nsec += (long)(wait_ns % 1000000000ull);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&s->kick, &s->lock, &ts);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- use ---------------------------------------------------------------------------- */

static int check_module(struct zinf_store *s, uint32_t module)
{
	if (!s->finalized)
		return store_fail(s, ZINF_ESTATE, "module %u used before finalize", module);
	if (module >= s->n_modules)
		return store_fail(s, -EINVAL, "module %u: no such module (%u registered)", module,
				  s->n_modules);
	return 0;
}

int zinf_store_fetch(struct zinf_store *s, uint32_t module)
{
	struct module *mod;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = check_module(s, module);
	if (rc)
		goto out;
	mod = &s->modules[module];
	if (mod->sync_busy) {
		rc = store_fail(s, -EBUSY, "module %s: fetched during a synchronous read or write",
				mod->name);
		goto out;
	}
	s->fetches++;
	mod->refs++;
	if (mod->state == MOD_READY || mod->state == MOD_LOADING ||
	    mod->state == MOD_WAITING_SPACE) {
		s->hits += mod->state == MOD_READY;
		goto out;
	}
	if (mod->state == MOD_FAILED) {
		/* A new try, started once the failed one has settled. */
		mod->retry = true;
		settle_failed(s, mod);
		goto out;
	}
	enqueue(s, mod);
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Whether device space can still come without a release by the caller: a cached
 * module to evict, or an unheld module still loading (or failing) that will become one,
 * or a cached module another thread is writing (it is evictable again when the write
 * ends: sync_end_module wakes the waiters). Persistent modules are never evicted, and a
 * failed one keeps its buffer, so they never count. */
static bool space_can_come(struct zinf_store *s, const struct module *mod)
{
	/* Parameters homed on the device (offload_param none) are ready and unheld between
	 * uses, but they are homes, not caches: evict_one never drops them and none ever
	 * loads. Counted, they kept zinf_store_alloc_scratch polling for ever for room that
	 * could not come (gradient buffers in a budget too tight for them). */
	if (s->o.param_home == ZINF_TIER_DEVICE)
		return false;
	for (uint32_t m = 0; m < s->n_modules; m++) {
		const struct module *o = &s->modules[m];
		if (o == mod || o->refs)
			continue;
		if (o->sync_busy) {
			if (o->state == MOD_READY && !o->persistent)
				return true;
			continue;
		}
		if (o->persistent)
			continue;
		if (o->state == MOD_READY || o->active)
			return true;
	}
	return false;
}

static int fail_no_space(struct zinf_store *s, struct module *mod)
{
	char held[256] = "", need[32], freeb[32], split[80] = "", big[32];
	struct zinf_device_stats ds;
	size_t o = 0;

	for (uint32_t m = 0; m < s->n_modules && o + 40 < sizeof(held); m++)
		if (s->modules[m].dev && s->modules[m].refs && &s->modules[m] != mod)
			o += (size_t)snprintf(held + o, sizeof(held) - o, "%s%s", o ? ", " : "",
					      s->modules[m].name);
	zinf_device_get_stats(s->o.device, &ds);
	if (ds.largest_free < mod->dev_bytes && ds.limit - ds.used >= mod->dev_bytes)
		snprintf(split, sizeof(split), " but the largest free extent is %s (fragmented)",
			 zinf_format_bytes(ds.largest_free, big, sizeof(big)));
	return store_fail(
		s, ZINF_EBUDGET,
		"device budget: module %s needs %s, %s free%s, the rest held by modules in use (%s); release some before waiting",
		mod->name, zinf_format_bytes(mod->dev_bytes, need, sizeof(need)),
		zinf_format_bytes(ds.limit - ds.used, freeb, sizeof(freeb)), split,
		o ? held : "none");
}

int zinf_store_wait(struct zinf_store *s, uint32_t module)
{
	struct module *mod;
	uint64_t t0 = 0;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = check_module(s, module);
	if (rc)
		goto out;
	mod = &s->modules[module];
	if (!mod->refs) {
		rc = store_fail(s, ZINF_ESTATE, "module %s: waited for without a fetch", mod->name);
		goto out;
	}
	while (mod->state != MOD_READY && !(mod->state == MOD_FAILED && !mod->retry)) {
		if (!t0)
			t0 = store_now_ns();
		if (mod->state == MOD_WAITING_SPACE && !space_can_come(s, mod)) {
			/* Place what fits now; if this module still cannot, only the caller's own
			 * releases could make room: say so rather than hang. */
			place_waiting(s);
			kick(s); /* what it placed (this module or those ahead) needs the mover */
			if (mod->state != MOD_WAITING_SPACE)
				continue;
			rc = fail_no_space(s, mod);
			goto out_time;
		}
		store_wait_ms(s); /* re-check every millisecond */
	}
	if (mod->state == MOD_FAILED) /* the mover's message, now this thread's */
		rc = store_fail(s, mod->error, "%s", mod->error_msg);
out_time:
	if (t0) {
		s->wait_ns += store_now_ns() - t0;
		s->waits++;
	}
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void *zinf_store_param_data(struct zinf_store *s, uint32_t param)
{
	void *p = NULL;

	pthread_mutex_lock(&s->lock);
	if (s->finalized && param < s->n_params) {
		struct param *pr = &s->params[param];
		struct module *mod = &s->modules[pr->module];
		if (mod->state == MOD_READY && mod->refs)
			p = (char *)mod->dev + pr->off;
	}
	pthread_mutex_unlock(&s->lock);
	return p;
}

/* Take a module that waits for device space out of the line. */
static void unqueue(struct zinf_store *s, struct module *mod)
{
	struct module **pp = &s->waiting_head, *prev = NULL;

	while (*pp && *pp != mod) {
		prev = *pp;
		pp = &(*pp)->next_waiting;
	}
	if (!*pp)
		return;
	*pp = mod->next_waiting;
	if (s->waiting_tail == mod)
		s->waiting_tail = prev;
	mod->next_waiting = NULL;
	mod->state = MOD_HOME;
	/* a reserved buffer of a module no longer persistent: nothing else would free it */
	if (mod->dev)
		give_back_buffer(s, mod);
}

int zinf_store_release(struct zinf_store *s, uint32_t module)
{
	struct module *mod;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = check_module(s, module);
	if (rc)
		goto out;
	mod = &s->modules[module];
	if (!mod->refs) {
		rc = store_fail(s, ZINF_ESTATE, "module %s: released more often than fetched",
				mod->name);
		goto out;
	}
	mod->refs--;
	mod->last_use = ++s->tick;
	if (mod->state == MOD_FAILED)
		settle_failed(s, mod);
	if (!mod->refs && mod->state == MOD_WAITING_SPACE)
		unqueue(s, mod); /* nobody wants it any more: do not load it */
	kick(s);		 /* a waiting module may fit now */
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* A cached copy a fetch may evict (lock held). */
static bool evictable(const struct zinf_store *s, const struct module *mod)
{
	return s->o.param_home != ZINF_TIER_DEVICE && mod->state == MOD_READY && !mod->refs &&
	       !mod->sync_busy && !mod->persistent;
}

int zinf_store_evict(struct zinf_store *s, uint32_t module)
{
	struct module *mod;
	int rc = -EBUSY;

	if (module >= s->n_modules)
		return -EINVAL;
	mod = &s->modules[module];
	pthread_mutex_lock(&s->lock);
	if (evictable(s, mod)) {
		store_drop_copy(s, mod);
		s->evictions++;
		kick(s); /* a waiting module may fit now */
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void zinf_store_set_next_use(struct zinf_store *s, uint32_t module, uint64_t when)
{
	pthread_mutex_lock(&s->lock);
	if (module < s->n_modules)
		s->modules[module].next_use = when;
	pthread_mutex_unlock(&s->lock);
}

uint64_t zinf_store_device_need(struct zinf_store *s, uint32_t n, const uint32_t *modules)
{
	struct zinf_device_stats ds;
	uint64_t need;

	pthread_mutex_lock(&s->lock);
	zinf_device_get_stats(s->o.device, &ds);
	need = ds.used;
	for (uint32_t m = 0; m < s->n_modules; m++) {
		const struct module *mod = &s->modules[m];
		if (mod->dev && evictable(s, mod))
			need -= mod->dev_bytes;
		else if (!mod->dev && mod->persistent)
			need += mod->dev_bytes;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct module *mod =
			modules[i] < s->n_modules ? &s->modules[modules[i]] : NULL;
		if (mod && (mod->dev ? evictable(s, mod) : !mod->persistent))
			need += mod->dev_bytes;
	}
	pthread_mutex_unlock(&s->lock);
	return need;
}

uint64_t zinf_store_module_bytes(struct zinf_store *s, uint32_t module)
{
	uint64_t b = 0;

	pthread_mutex_lock(&s->lock);
	if (s->finalized && module < s->n_modules)
		b = s->modules[module].dev_bytes;
	pthread_mutex_unlock(&s->lock);
	return b;
}

/* A module nobody holds whose buffer lies above p: a cached copy, or a load whose fetch
 * was released (it becomes one when it lands), or NULL. */
static struct module *unheld_above(struct zinf_store *s, const void *p)
{
	for (uint32_t m = 0; m < s->n_modules; m++) {
		struct module *mod = &s->modules[m];
		bool released_load = mod->state == MOD_LOADING && !mod->refs && !mod->persistent &&
				     !mod->sync_busy;
		if (mod->dev && (evictable(s, mod) || released_load) &&
		    (uintptr_t)mod->dev > (uintptr_t)p)
			return mod;
	}
	return NULL;
}

bool zinf_store_held_above(struct zinf_store *s, const void *p)
{
	bool held = false;

	pthread_mutex_lock(&s->lock);
	for (uint32_t m = 0; m < s->n_modules && !held; m++)
		held = s->modules[m].dev && s->modules[m].refs && !s->modules[m].persistent &&
		       (uintptr_t)s->modules[m].dev > (uintptr_t)p;
	pthread_mutex_unlock(&s->lock);
	return held;
}

int zinf_store_alloc_scratch(struct zinf_store *s, uint64_t bytes, void **out)
{
	struct module *above;
	int rc;

	pthread_mutex_lock(&s->lock);
	/* Under the store's lock the mover cannot place a module into the room made here.
	 * An unheld module still loading becomes evictable when it is ready: wait for it. */
	for (;;) {
		/* from the top: modules are packed from the bottom (see zinf_store_alloc_scratch) */
		rc = zinf_device_alloc_high(s->o.device, bytes, out);
		/* Placed below a cached copy, the block would stay in the middle of the room
		 * the modules share once that copy goes: a module as large as that room (the
		 * head, with the embedding's vocabulary) then finds it in two pieces. The
		 * copies above give way instead, and the block goes as high as the buffers
		 * that stay allow. A load still landing there is waited for with the block
		 * kept, so that the mover places nothing else in its room meanwhile. */
		while (!rc && (above = unheld_above(s, *out)) != NULL && above->state != MOD_READY)
			store_wait_ms(s);
		if (!rc && above) {
			zinf_device_free(s->o.device, *out);
			*out = NULL;
			store_drop_copy(s, above);
			s->evictions++;
			kick(s);
			continue;
		}
		if (rc != ZINF_EBUDGET)
			break;
		if (evict_one(s, NULL))
			continue;
		if (!space_can_come(s, NULL))
			break;
		store_wait_ms(s); /* re-check every millisecond */
	}
	if (rc)
		store_fail(s, rc, "%s", zinf_device_last_error(s->o.device));
	if (!rc && s->n_scratch == s->cap_scratch) { /* remembered for the free */
		uint32_t cap = s->cap_scratch ? 2 * s->cap_scratch : 64;
		void **v = realloc(s->scratch, cap * sizeof(*v));

		if (v) {
			s->scratch = v;
			s->cap_scratch = cap;
		} else {
			zinf_device_free(s->o.device, *out);
			*out = NULL;
			rc = store_fail(s, -ENOMEM, "scratch: out of host memory");
		}
	}
	if (!rc)
		s->scratch[s->n_scratch++] = *out;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int zinf_store_free_scratch(struct zinf_store *s, void *ptr)
{
	uint32_t i;
	int rc;

	pthread_mutex_lock(&s->lock);
	for (i = 0; i < s->n_scratch && s->scratch[i] != ptr; i++)
		;
	if (i == s->n_scratch) { /* a parameter's or gradient's buffer, say: not ours to free */
		pthread_mutex_unlock(&s->lock);
		return store_fail(s, -EINVAL, "%p is not a block zinf_store_alloc_scratch gave",
				  ptr);
	}
	s->scratch[i] = s->scratch[--s->n_scratch];
	rc = zinf_device_free(s->o.device, ptr);
	kick(s); /* a waiting module may fit now */
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* A persistent module's buffer is taken now, from the top of the heap, beside the
 * buffers that stay for the run too (the model runtime's), and kept: placed first fit
 * at its first fetch, among the modules that come and go, it split the room they and
 * the gradient buffers share (a layer that fitted by bytes found no hole, with a small
 * head kept above the first layers' places). With no room now, its first fetch places
 * it. */
void zinf_store_set_persistent(struct zinf_store *s, uint32_t module, bool persistent)
{
	struct module *mod;

	pthread_mutex_lock(&s->lock);
	if (module >= s->n_modules)
		goto out;
	mod = &s->modules[module];
	if (s->finalized && s->o.param_home != ZINF_TIER_DEVICE && persistent && !mod->persistent &&
	    !mod->dev && zinf_device_alloc_high(s->o.device, mod->dev_bytes, &mod->dev) != 0) {
		mod->dev = NULL;
		zinf_logf(ZINF_LOG_INFO,
			  "module %s: kept on the device, but no room for it now: placed at its "
			  "first fetch, from the top of the heap",
			  mod->name);
	}
	mod->persistent = persistent;
	/* no longer kept: a buffer not holding a copy goes back */
	if (!persistent && mod->dev && mod->state == MOD_HOME)
		give_back_buffer(s, mod);
	kick(s);
out:
	pthread_mutex_unlock(&s->lock);
}

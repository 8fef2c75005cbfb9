/* Trace-based prefetch (see prefetch.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "prefetch.h"
#include "store.h"

struct zinf_prefetch {
	struct zinf_store *store;
	struct zinf_prefetch_opts o;
	uint32_t n_modules;
	uint64_t *elems; /* (n_modules) */
	uint32_t *held;	 /* (n_modules) fetches by the model not yet released */
	uint8_t *ahead;	 /* (n_modules) 1 = a prefetch holds a store reference */
	uint32_t *trace; /* the recorded order, n_trace entries */
	uint32_t n_trace;
	uint32_t *rec;	     /* this step's order so far */
	uint32_t n_rec, cap; /* cap: capacity of both trace and rec */
	uint32_t cursor;     /* next trace position expected */
	bool have_trace, diverged;
	uint64_t live_elems; /* held by the model or fetched ahead */
	struct zinf_prefetch_stats st;
};

int zinf_prefetch_create(struct zinf_store *store, uint32_t n_modules, const uint64_t *module_elems,
			 const struct zinf_prefetch_opts *opts, struct zinf_prefetch **out)
{
	struct zinf_prefetch *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->store = store;
	p->o = *opts;
	p->n_modules = n_modules;
	p->cap = 64;
	p->elems = malloc((n_modules + 1) * sizeof(*p->elems));
	p->held = calloc(n_modules + 1, sizeof(*p->held));
	p->ahead = calloc(n_modules + 1, 1);
	p->trace = malloc(p->cap * sizeof(*p->trace));
	p->rec = malloc(p->cap * sizeof(*p->rec));
	if (!p->elems || !p->held || !p->ahead || !p->trace || !p->rec) {
		zinf_prefetch_destroy(p);
		return -ENOMEM;
	}
	memcpy(p->elems, module_elems, n_modules * sizeof(*p->elems));
	*out = p;
	return 0;
}

void zinf_prefetch_destroy(struct zinf_prefetch *p)
{
	if (!p)
		return;
	zinf_prefetch_drop(p);
	free(p->elems);
	free(p->held);
	free(p->ahead);
	free(p->trace);
	free(p->rec);
	free(p);
}

static void record(struct zinf_prefetch *p, uint32_t m)
{
	if (p->n_rec == p->cap) {
		uint32_t cap = 2 * p->cap;
		uint32_t *rec = realloc(p->rec, cap * sizeof(*rec));
		uint32_t *trace = rec ? realloc(p->trace, cap * sizeof(*trace)) : NULL;
		if (rec)
			p->rec = rec;
		if (!trace) {
			p->diverged = true; /* cannot record this step: no prefetch, no harm */
			return;
		}
		p->trace = trace;
		p->cap = cap;
	}
	p->rec[p->n_rec++] = m;
}

/* Tell eviction when each module is needed next: its next position in the trace after
 * the cursor, or after the end (the next step) for modules not needed again this one. */
static void publish_next_use(struct zinf_prefetch *p)
{
	for (uint32_t m = 0; m < p->n_modules; m++) {
		uint64_t when = UINT64_MAX;
		for (uint32_t j = p->cursor; j < p->n_trace; j++) {
			if (p->trace[j] == m) {
				when = j;
				break;
			}
		}
		for (uint32_t j = 0; when == UINT64_MAX && j < p->cursor; j++)
			if (p->trace[j] == m)
				when = (uint64_t)p->n_trace + j;
		zinf_store_set_next_use(p->store, m, when);
	}
}

/* Fetch ahead along the trace within the bucket and the live-parameter limit. */
static void issue(struct zinf_prefetch *p)
{
	uint64_t ahead_elems = 0;

	for (uint32_t m = 0; m < p->n_modules; m++)
		if (p->ahead[m])
			ahead_elems += p->elems[m];
	for (uint32_t j = p->cursor; j < p->n_trace; j++) {
		uint32_t m = p->trace[j];
		if (p->held[m] || p->ahead[m])
			continue;
		if (p->o.can_fetch && !p->o.can_fetch(p->o.user, m))
			break; /* in trace order: nothing past a module that is not ready */
		if (ahead_elems + p->elems[m] > p->o.bucket_elems ||
		    p->live_elems + p->elems[m] > p->o.max_live_elems)
			break;
		if (zinf_store_fetch(p->store, m) != 0)
			break;
		p->ahead[m] = 1;
		ahead_elems += p->elems[m];
		p->live_elems += p->elems[m];
		p->st.issued++;
	}
}

int zinf_prefetch_fetch(struct zinf_prefetch *p, uint32_t m, bool *held)
{
	*held = false;
	if (m >= p->n_modules)
		return -EINVAL;
	record(p, m);
	if (p->have_trace && !p->diverged) {
		if (p->cursor < p->n_trace && p->trace[p->cursor] == m) {
			p->cursor++;
		} else {
			p->diverged = true;
			p->st.divergences++;
			zinf_prefetch_drop(p);
		}
	}
	if (p->ahead[m]) { /* the prefetch's store reference becomes the model's */
		p->ahead[m] = 0;
		p->live_elems -= p->elems[m];
		*held = true;
		p->st.hits++;
	}
	if (!p->held[m]++)
		p->live_elems += p->elems[m];
	return 0;
}

void zinf_prefetch_advance(struct zinf_prefetch *p)
{
	if (p->have_trace && !p->diverged && p->o.bucket_elems) {
		publish_next_use(p);
		issue(p);
	}
}

/* Elements of the other modules fetched between the cursor and m's next use along the
 * trace (wrapping into the next step); UINT64_MAX when m is not in the trace. */
static uint64_t reuse_distance(const struct zinf_prefetch *p, uint32_t m)
{
	uint64_t d = 0;

	for (uint32_t k = 0; k < p->n_trace; k++) {
		uint32_t j = (p->cursor + k) % p->n_trace;
		if (p->trace[j] == m)
			return d;
		d += p->elems[p->trace[j]];
	}
	return UINT64_MAX;
}

void zinf_prefetch_release(struct zinf_prefetch *p, uint32_t m)
{
	if (m >= p->n_modules || !p->held[m])
		return;
	if (--p->held[m])
		return;
	p->live_elems -= p->elems[m];
	if (p->have_trace && !p->diverged && !p->ahead[m] &&
	    reuse_distance(p, m) > p->o.max_reuse_elems && zinf_store_evict(p->store, m) == 0)
		p->st.reuse_evictions++;
}

int zinf_prefetch_drop(struct zinf_prefetch *p)
{
	int n = 0;

	for (uint32_t m = 0; m < p->n_modules; m++) {
		if (!p->ahead[m])
			continue;
		zinf_store_release(p->store, m);
		p->ahead[m] = 0;
		p->live_elems -= p->elems[m];
		n++;
	}
	return n;
}

void zinf_prefetch_end_step(struct zinf_prefetch *p)
{
	zinf_prefetch_drop(p);
	if (!p->have_trace || p->diverged || p->cursor != p->n_trace) {
		memcpy(p->trace, p->rec, p->n_rec * sizeof(*p->trace));
		p->n_trace = p->n_rec;
		p->have_trace = p->n_rec > 0;
		p->st.recordings++;
	}
	p->n_rec = 0;
	p->cursor = 0;
	p->diverged = false;
	if (p->have_trace)
		publish_next_use(p);
}

void zinf_prefetch_start_step(struct zinf_prefetch *p)
{
	if (p->have_trace && !p->diverged && p->o.bucket_elems && p->cursor == 0) {
		publish_next_use(p);
		issue(p);
	}
}

void zinf_prefetch_get_stats(const struct zinf_prefetch *p, struct zinf_prefetch_stats *out)
{
	*out = p->st;
}

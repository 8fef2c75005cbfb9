/*
 * Arena: first-fit extent allocator over one fixed range (see arena.h).
 *
 * Invariants: free_ext and alloc_ext are sorted by offset and never overlap; two free
 * extents are never adjacent (they are merged), so there is at least one allocation
 * between any two of them and nfree <= nalloc + 1 <= cap + 1; used is the sum of the
 * allocated lengths and never exceeds size.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arena.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int zinf_arena_init(struct zinf_arena *a, uint64_t base, uint64_t size, uint64_t granule,
		    uint32_t max_allocs)
{
	pthread_condattr_t attr;

	memset(a, 0, sizeof(*a));
	if (!size || !is_pow2(granule) || !max_allocs || max_allocs > (1u << 30))
		return -EINVAL;
	a->size = size;
	a->granule = granule;
	a->base = base;
	a->cap = max_allocs;
	a->free_ext = calloc((size_t)max_allocs + 1, sizeof(*a->free_ext));
	a->alloc_ext = calloc(max_allocs, sizeof(*a->alloc_ext));
	if (!a->free_ext || !a->alloc_ext) {
		free(a->free_ext);
		free(a->alloc_ext);
		return -ENOMEM;
	}
	a->free_ext[0] = (struct zinf_extent){0, size};
	a->nfree = 1;
	a->st.size = size;
	a->st.largest_free = size;
	pthread_mutex_init(&a->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cond, &attr);
	pthread_condattr_destroy(&attr);
	return 0;
}

void zinf_arena_fini(struct zinf_arena *a)
{
	if (!a->free_ext)
		return;
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a->free_ext);
	free(a->alloc_ext);
	a->free_ext = NULL;
	a->alloc_ext = NULL;
}

/* Index of the first extent with off >= key. */
static uint32_t lower_bound(const struct zinf_extent *v, uint32_t n, uint64_t key)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (v[mid].off < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void ext_insert(struct zinf_extent *v, uint32_t *n, uint32_t i, struct zinf_extent e)
{
	memmove(&v[i + 1], &v[i], (size_t)(*n - i) * sizeof(*v));
	v[i] = e;
	(*n)++;
}

static void ext_remove(struct zinf_extent *v, uint32_t *n, uint32_t i)
{
	memmove(&v[i], &v[i + 1], (size_t)(*n - i - 1) * sizeof(*v));
	(*n)--;
}

static uint64_t largest_free(const struct zinf_arena *a)
{
	uint64_t best = 0;

	for (uint32_t i = 0; i < a->nfree; i++) {
		if (a->free_ext[i].len > best)
			best = a->free_ext[i].len;
	}
	return best;
}

/* Where len bytes aligned to align fit in free extent f: its lowest such offset, or with
 * high its highest; false when they do not fit. */
static bool fit_in(const struct zinf_arena *a, struct zinf_extent f, uint64_t len, uint64_t align,
		   bool high, uint64_t *start)
{
	uint64_t lo = align_up(a->base + f.off, align) - a->base;

	if (lo - f.off >= f.len || f.len - (lo - f.off) < len)
		return false;
	*start = high ? (a->base + f.off + f.len - len) / align * align - a->base : lo;
	return true;
}

/* Carve len bytes aligned to align out of the first free extent that holds them (with
 * high: the last one, at its top end). Called with the lock held; len and align already
 * rounded. */
static int carve(struct zinf_arena *a, uint64_t len, uint64_t align, bool high, uint64_t *off)
{
	if (a->nalloc == a->cap)
		return -ENFILE;
	if (a->size - a->st.used < len)
		return -ENOSPC;
	for (uint32_t k = 0; k < a->nfree; k++) {
		uint32_t i = high ? a->nfree - 1 - k : k;
		struct zinf_extent f = a->free_ext[i];
		uint64_t start, lead, tail;

		if (!fit_in(a, f, len, align, high, &start))
			continue;
		lead = start - f.off;
		tail = f.len - lead - len;
		/* Replace f by its leading gap and trailing rest, whichever are non-empty;
		 * a split adds one free extent, which the nfree <= nalloc + 1 bound allows. */
		if (lead && tail) {
			a->free_ext[i].len = lead;
			ext_insert(a->free_ext, &a->nfree, i + 1,
				   (struct zinf_extent){start + len, tail});
		} else if (lead) {
			a->free_ext[i].len = lead;
		} else if (tail) {
			a->free_ext[i] = (struct zinf_extent){start + len, tail};
		} else {
			ext_remove(a->free_ext, &a->nfree, i);
		}
		ext_insert(a->alloc_ext, &a->nalloc, lower_bound(a->alloc_ext, a->nalloc, start),
			   (struct zinf_extent){start, len});
		a->st.used += len;
		if (a->st.used > a->st.peak)
			a->st.peak = a->st.used;
		a->st.live = a->nalloc;
		a->st.allocs++;
		*off = start;
		return 0;
	}
	return -EAGAIN;
}

static int round_request(const struct zinf_arena *a, uint64_t *len, uint64_t *align)
{
	if (!*len || (*align && !is_pow2(*align)))
		return -EINVAL;
	if (*align < a->granule)
		*align = a->granule;
	if (*len > a->size)
		return -E2BIG;
	*len = align_up(*len, a->granule);
	return 0;
}

static int count_refusal(struct zinf_arena *a, int rc)
{
	pthread_mutex_lock(&a->lock);
	a->st.failures++;
	pthread_mutex_unlock(&a->lock);
	return rc;
}

static int alloc_now(struct zinf_arena *a, uint64_t len, uint64_t align, bool high, uint64_t *off)
{
	int rc = round_request(a, &len, &align);

	if (rc)
		return count_refusal(a, rc);
	pthread_mutex_lock(&a->lock);
	rc = a->nwaiting ? -EAGAIN : carve(a, len, align, high, off);
	if (rc)
		a->st.failures++;
	pthread_mutex_unlock(&a->lock);
	return rc;
}

int zinf_arena_alloc(struct zinf_arena *a, uint64_t len, uint64_t align, uint64_t *off)
{
	return alloc_now(a, len, align, false, off);
}

int zinf_arena_alloc_high(struct zinf_arena *a, uint64_t len, uint64_t align, uint64_t *off)
{
	return alloc_now(a, len, align, true, off);
}

int zinf_arena_alloc_wait(struct zinf_arena *a, uint64_t len, uint64_t align, uint64_t timeout_ns,
			  uint64_t *off)
{
	struct zinf_arena_waiter self = {0}, **pp;
	struct timespec deadline;
	uint64_t start;
	int rc = round_request(a, &len, &align);
	bool waited = false;

	if (rc)
		return count_refusal(a, rc);
	start = now_ns();
	if (timeout_ns != UINT64_MAX) {
		uint64_t end = start + timeout_ns;

		deadline.tv_sec = (time_t)(end / 1000000000ull);
		deadline.tv_nsec = (long)(end % 1000000000ull);
	}
	pthread_mutex_lock(&a->lock);
	/* Join the tail of the line; only its head may allocate. */
	for (pp = &a->waiters; *pp; pp = &(*pp)->next)
		;
	*pp = &self;
	a->nwaiting++;
	for (;;) {
		if (a->waiters == &self) {
			rc = carve(a, len, align, false, off);
			if (rc != -ENOSPC && rc != -EAGAIN && rc != -ENFILE)
				break;
		}
		waited = true;
		if (timeout_ns == UINT64_MAX) {
			pthread_cond_wait(&a->cond, &a->lock);
		} else if (pthread_cond_timedwait(&a->cond, &a->lock, &deadline) == ETIMEDOUT) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	for (pp = &a->waiters; *pp != &self; pp = &(*pp)->next)
		;
	*pp = self.next;
	a->nwaiting--;
	if (waited) {
		a->st.waits++;
		a->st.wait_ns += now_ns() - start;
	}
	if (rc)
		a->st.failures++;
	/* The line moved (or space was taken): let the new head look again. */
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	return rc;
}

int zinf_arena_free(struct zinf_arena *a, uint64_t off, uint64_t *len_out)
{
	struct zinf_extent e;
	uint32_t i;

	pthread_mutex_lock(&a->lock);
	i = lower_bound(a->alloc_ext, a->nalloc, off);
	if (i == a->nalloc || a->alloc_ext[i].off != off) {
		pthread_mutex_unlock(&a->lock);
		return -EINVAL;
	}
	e = a->alloc_ext[i];
	ext_remove(a->alloc_ext, &a->nalloc, i);
	a->st.used -= e.len;
	a->st.live = a->nalloc;
	/* Insert into the free list, merging with the neighbours it touches. */
	i = lower_bound(a->free_ext, a->nfree, e.off);
	if (i > 0 && a->free_ext[i - 1].off + a->free_ext[i - 1].len == e.off) {
		a->free_ext[i - 1].len += e.len;
		if (i < a->nfree && e.off + e.len == a->free_ext[i].off) {
			a->free_ext[i - 1].len += a->free_ext[i].len;
			ext_remove(a->free_ext, &a->nfree, i);
		}
	} else if (i < a->nfree && e.off + e.len == a->free_ext[i].off) {
		a->free_ext[i].off = e.off;
		a->free_ext[i].len += e.len;
	} else {
		ext_insert(a->free_ext, &a->nfree, i, e);
	}
	if (a->nwaiting)
		pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	if (len_out)
		*len_out = e.len;
	return 0;
}

uint64_t zinf_arena_length(struct zinf_arena *a, uint64_t off)
{
	uint64_t len = 0;
	uint32_t i;

	pthread_mutex_lock(&a->lock);
	i = lower_bound(a->alloc_ext, a->nalloc, off);
	if (i < a->nalloc && a->alloc_ext[i].off == off)
		len = a->alloc_ext[i].len;
	pthread_mutex_unlock(&a->lock);
	return len;
}

bool zinf_arena_contains(struct zinf_arena *a, uint64_t off, uint64_t len)
{
	uint32_t i;
	bool in = false;

	pthread_mutex_lock(&a->lock);
	/* The allocation holding off is the last one starting at or before it. */
	i = lower_bound(a->alloc_ext, a->nalloc, off + 1);
	if (i > 0) {
		const struct zinf_extent *e = &a->alloc_ext[i - 1];

		in = off >= e->off && len <= e->len && off - e->off <= e->len - len;
	}
	pthread_mutex_unlock(&a->lock);
	return in;
}

void zinf_arena_get_stats(struct zinf_arena *a, struct zinf_arena_stats *out)
{
	pthread_mutex_lock(&a->lock);
	a->st.largest_free = largest_free(a);
	*out = a->st;
	pthread_mutex_unlock(&a->lock);
}

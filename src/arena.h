/*
 * Arena: a fixed address range carved into aligned extents, with exact accounting.
 *
 * Both memory tiers that zinf owns are one allocation made once and sub-allocated here:
 * the device heap (one cudaMalloc, or one host mapping on the host backend) and the
 * pinned pool (one locked mapping). The arena never grows and never falls back to
 * malloc, so "used" can never pass "size": the tier budget is the arena size.
 *
 * Extents are kept in two address-sorted arrays (free and allocated) preallocated at
 * init for max_allocs live allocations, so alloc and free allocate nothing. First fit,
 * free extents coalesce on free. Blocking allocation is FIFO: a waiter that cannot be
 * served blocks later blocking callers, so a large request is never starved by small ones.
 *
 * Threading: every function takes the arena's lock; all are thread-safe.
 */
#ifndef ZINF_SRC_ARENA_H
#define ZINF_SRC_ARENA_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct zinf_extent {
	uint64_t off; /* bytes from the arena base */
	uint64_t len; /* bytes */
};

/* A blocking caller's place in line (lives on its stack). */
struct zinf_arena_waiter {
	struct zinf_arena_waiter *next;
};

struct zinf_arena_stats {
	uint64_t size;	       /* bytes: the budget */
	uint64_t used;	       /* bytes allocated now (rounded up to the granule) */
	uint64_t peak;	       /* highest used since init */
	uint64_t largest_free; /* bytes in the largest free extent now */
	uint64_t live;	       /* allocations now */
	uint64_t allocs;       /* successful allocations since init */
	uint64_t failures;     /* allocations refused (no space, timeout) */
	uint64_t waits;	       /* blocking allocations that had to wait */
	uint64_t wait_ns;      /* total time spent waiting */
};

struct zinf_arena {
	uint64_t size;		       /* bytes */
	uint64_t granule;	       /* allocation unit and minimum alignment, a power of two */
	uint64_t base;		       /* address the offsets are relative to (for alignment) */
	uint32_t cap;		       /* max live allocations */
	uint32_t nfree;		       /* entries in free_ext */
	uint32_t nalloc;	       /* entries in alloc_ext */
	struct zinf_extent *free_ext;  /* (cap + 1) sorted by off, coalesced */
	struct zinf_extent *alloc_ext; /* (cap) sorted by off */
	struct zinf_arena_waiter *waiters; /* FIFO line of blocking callers; head may carve */
	uint32_t nwaiting;		   /* length of that line */
	struct zinf_arena_stats st;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

/* Set up an arena of size bytes starting at address base (used only for alignment),
 * allocating in units of granule bytes (power of two) for at most max_allocs live
 * allocations. Returns 0, -EINVAL or -ENOMEM. */
int zinf_arena_init(struct zinf_arena *a, uint64_t base, uint64_t size, uint64_t granule,
		    uint32_t max_allocs);
/* Free the bookkeeping (not the memory, which the caller owns). */
void zinf_arena_fini(struct zinf_arena *a);

/* Allocate len bytes (rounded up to the granule) at an address aligned to align (0 or a
 * power of two; at least the granule). *off is relative to base. Never waits.
 * Returns 0; -ENOSPC when fewer than len bytes are free; -EAGAIN when enough bytes are
 * free but no single extent holds them (fragmentation) or blocking callers are waiting;
 * -E2BIG when len can never fit (larger than the arena); -ENFILE when max_allocs are
 * live; -EINVAL for len 0 or a bad alignment. */
int zinf_arena_alloc(struct zinf_arena *a, uint64_t len, uint64_t align, uint64_t *off);
/* Same, from the top: the highest-addressed free extent that holds len bytes, at its
 * end. Short-lived buffers taken from the top keep away from the long-lived ones first
 * fit packs at the bottom, so neither splits the other's free space. */
int zinf_arena_alloc_high(struct zinf_arena *a, uint64_t len, uint64_t align, uint64_t *off);
/* Same, but wait up to timeout_ns (UINT64_MAX: forever) for frees when it does not fit
 * now. Returns -ETIMEDOUT when the time ran out, or the errors above that waiting
 * cannot cure (-E2BIG, -EINVAL). */
int zinf_arena_alloc_wait(struct zinf_arena *a, uint64_t len, uint64_t align, uint64_t timeout_ns,
			  uint64_t *off);
/* Free the allocation that starts at off; *len_out (may be NULL) gets its length.
 * Returns 0, or -EINVAL when no allocation starts at off. Wakes waiters. */
int zinf_arena_free(struct zinf_arena *a, uint64_t off, uint64_t *len_out);
/* Length of the live allocation that starts at off, or 0 if none does. */
uint64_t zinf_arena_length(struct zinf_arena *a, uint64_t off);
/* Whether [off, off + len) lies inside one live allocation. */
bool zinf_arena_contains(struct zinf_arena *a, uint64_t off, uint64_t len);
/* A consistent snapshot of the counters. */
void zinf_arena_get_stats(struct zinf_arena *a, struct zinf_arena_stats *out);

#endif /* ZINF_SRC_ARENA_H */

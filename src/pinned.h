/*
 * Pinned pool: the staging tier between NVMe and the device.
 *
 * One page-aligned mapping of the whole budget, made once at create, placed on the NUMA
 * node nearest the GPU (hwloc; on the host backend, the node of the calling thread),
 * locked (cudaHostRegister on CUDA, mlock otherwise) and sub-allocated into staging
 * buffers aligned for O_DIRECT (4096 bytes or more). It never grows and never falls back
 * to malloc: when it is full, zinf_pinned_alloc waits for frees (back-pressure) up to a
 * timeout, and zinf_pinned_try_alloc returns -EAGAIN at once. base and size are exposed
 * so the pool can be registered with the I/O engine (io_uring fixed buffers) once.
 *
 * Threading: every function is thread-safe; the pool must outlive its buffers' users.
 * Error messages are per thread (zinf_pinned_last_error).
 */
#ifndef ZINF_SRC_PINNED_H
#define ZINF_SRC_PINNED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct zinf_device;
struct zinf_pinned;

enum zinf_pinned_lock {
	ZINF_PINNED_LOCK_REQUIRED = 0, /* fail create if the pool cannot be locked (default) */
	ZINF_PINNED_LOCK_BEST_EFFORT,  /* lock if allowed, else warn and run unlocked */
	ZINF_PINNED_LOCK_NONE,	       /* do not lock (tests, host backend without limits) */
};

struct zinf_pinned_opts {
	/* Bytes, rounded up to the page size. 0 = a quarter of physical memory
	 * (zinf.pinned_memory_limit "auto"). */
	uint64_t size;
	/* Register with this device (cudaHostRegister on CUDA) and place the pool near
	 * it. NULL or a host device: mlock, and the calling thread's NUMA node. */
	struct zinf_device *device;
	enum zinf_pinned_lock lock;
	bool numa_bind;	      /* bind to the node found (default true) */
	uint64_t align;	      /* minimum buffer alignment, power of two >= 4096 (default) */
	uint32_t max_buffers; /* live buffers at most (default 4096) */
};

struct zinf_pinned_stats {
	uint64_t limit;	       /* pool size, bytes */
	uint64_t used;	       /* bytes in live buffers */
	uint64_t largest_free; /* the largest free extent (less than limit - used: split) */
	uint64_t peak;	       /* highest used since create */
	uint64_t live_buffers; /* buffers now */
	uint64_t allocs;       /* buffers handed out since create */
	uint64_t failures;     /* allocations refused (timeout, too large, try on full) */
	uint64_t waits;	       /* blocking allocations that had to wait */
	uint64_t wait_ns;      /* total time they waited */
	bool locked;	       /* the pool is locked in memory */
	int numa_node;	       /* node the pool is bound to, -1 if unknown/unbound */
};

void zinf_pinned_opts_init(struct zinf_pinned_opts *opts);
/* Map, place, lock and set up the pool. Fails with the numbers and the fix when
 * RLIMIT_MEMLOCK or the cgroup memory limit cannot hold it (-EPERM / -ENOMEM), with a
 * one-line reason in err. *out is owned by the caller. */
int zinf_pinned_create(const struct zinf_pinned_opts *opts, struct zinf_pinned **out, char *err,
		       size_t errlen);
/* Unlock/unregister and unmap. Buffers still live are logged. NULL is a no-op. */
void zinf_pinned_destroy(struct zinf_pinned *pool);

/* A staging buffer of len bytes (rounded up to 4096) aligned to the pool's alignment.
 * Waits up to timeout_ns (UINT64_MAX: forever) for space; waiters are served in
 * order. Returns 0, -ETIMEDOUT, or ZINF_EBUDGET when len exceeds the whole pool. */
int zinf_pinned_alloc(struct zinf_pinned *pool, uint64_t len, uint64_t timeout_ns, void **out);
/* Same without waiting: -EAGAIN when it does not fit now (or others are waiting). */
int zinf_pinned_try_alloc(struct zinf_pinned *pool, uint64_t len, void **out);
/* Return a buffer; wakes waiters. -EINVAL if p is not a live buffer of the pool. */
int zinf_pinned_free(struct zinf_pinned *pool, void *p);

void *zinf_pinned_base(const struct zinf_pinned *pool);
uint64_t zinf_pinned_size(const struct zinf_pinned *pool);
/* Whether [p, p + len) lies inside one live buffer. */
bool zinf_pinned_owns(struct zinf_pinned *pool, const void *p, uint64_t len);
void zinf_pinned_get_stats(struct zinf_pinned *pool, struct zinf_pinned_stats *out);
/* The calling thread's last error on pool, as one line: the message of this thread's
 * last failed call, when that call was on pool ("" otherwise). */
const char *zinf_pinned_last_error(struct zinf_pinned *pool);

/* Whether bytes more can be locked by this process (mlock, io_uring fixed buffers):
 * 0, or -EPERM with "<what>: cannot lock ...", the limit, what is locked already and
 * the fix in err. Raises the soft RLIMIT_MEMLOCK to the hard limit when that is enough.
 * Processes with CAP_IPC_LOCK always pass. */
int zinf_memlock_check(uint64_t bytes, const char *what, char *err, size_t errlen);

#endif /* ZINF_SRC_PINNED_H */

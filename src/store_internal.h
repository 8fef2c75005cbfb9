/*
 * Shard store internals shared by store.c (registration, layout, homes, synchronous
 * contents, counters) and store_move.c (the mover thread's state machine, fetch, wait,
 * release, eviction).
 *
 * Locking: one mutex (s->lock) guards every module, chunk and counter. The mover thread
 * holds it while it advances chunks and drops it to sleep and to queue the device copies
 * a pass started (store_move.c, queue_copies): then it alone touches those chunks'
 * staging, t_copy and ev, and the h2d stream (and reads their homes and written). The
 * I/O engine's completion callback only flags its chunk (taking the lock there could
 * deadlock against the mover, which holds it while submitting). Callers block on s->ready, which the mover
 * broadcasts whenever a module becomes ready or fails.
 */
#ifndef ZINF_SRC_STORE_INTERNAL_H
#define ZINF_SRC_STORE_INTERNAL_H

#include <pthread.h>
#include <time.h>

#include "name_index.h"
#include "store.h"
#include "zinf/io.h"

#define PARAM_ALIGN 256u
#define IO_ALIGN 4096u
#define MOVER_POLL_NS 100000ull /* while copies are in flight, look every 100 us */

enum chunk_state { CHUNK_HOME, CHUNK_QUEUED, CHUNK_READING, CHUNK_COPYING, CHUNK_RESIDENT };
enum module_state { MOD_HOME, MOD_WAITING_SPACE, MOD_LOADING, MOD_READY, MOD_FAILED };

struct param {
	char *name;
	uint32_t module;
	enum zinf_dtype dtype;
	int ndim;
	uint64_t shape[4];
	uint64_t bytes;
	uint64_t off; /* in the module's flat buffer */
};

struct module;

struct chunk {
	struct module *mod;
	uint64_t off;	      /* bytes into the module's flat buffer */
	uint64_t len;	      /* data bytes */
	uint64_t io_len;      /* len rounded up to IO_ALIGN */
	void *host;	      /* HOST home: (io_len) bytes */
	bool host_registered; /* HOST home page-locked with the device (pin_host) */
	void *dev_home;	      /* DEVICE home: inside the module's permanent buffer */
	uint32_t extent;      /* NVME home */
	bool has_extent;      /* NVME: extent allocated (freed on destroy) */
	bool written;	      /* NVME: the extent holds data (else it reads as zeros) */
	enum chunk_state state;
	void *staging; /* pinned buffer while READING / COPYING */
	struct zinf_io_req req;
	int io_done; /* set by the I/O callback */
	uint64_t t_submit;
	uint64_t t_copy; /* when its copy to the device was queued */
	struct zinf_event *ev;
	struct chunk *next_active; /* on the mover's list while QUEUED..COPYING */
	/* COPYING, its copy not queued yet: on the mover's copy list (store_move.c,
	 * queue_copies) */
	struct chunk *next_copy;
};

struct module {
	char *name;
	uint32_t id;
	uint32_t first_param, n_params;
	uint32_t first_chunk, n_chunks;
	uint64_t elems;	     /* parameter elements */
	enum zinf_tier home; /* the store's param_home; with NVME, HOST for host_elems' part */
	uint64_t bytes;	     /* packed parameter bytes */
	uint64_t dev_bytes;  /* device buffer size (rounded up to IO_ALIGN) */
	void *dev;	     /* device buffer while placed */
	enum module_state state;
	int refs;	   /* fetches not yet released */
	int error;	   /* FAILED: the code */
	bool sync_busy;	   /* a synchronous read/write holds it */
	bool retry;	   /* fetched again after a failure: load anew once settled */
	uint32_t resident; /* chunks RESIDENT */
	uint32_t active;   /* chunks on the mover's list (QUEUED..COPYING) */
	uint64_t last_use; /* LRU tick of the last release */
	uint64_t next_use; /* when it is needed next (zinf_store_set_next_use); 0 = unknown */
	bool persistent;   /* never evicted (stage3_param_persistence_threshold) */
	struct module *next_waiting;
	char error_msg[512]; /* FAILED: its one-line message (set by the mover) */
};

struct zinf_store {
	struct zinf_store_opts o;
	pthread_mutex_t lock;
	pthread_cond_t kick;  /* wakes the mover */
	pthread_cond_t ready; /* a module became ready or failed */
	pthread_t mover;
	bool mover_started, stop, finalized;
	uint64_t err_serial; /* tags this store's messages (io/thread_error.h) */
	uint64_t kicks;
	struct zinf_stream *h2d, *d2h;
	struct zinf_stream *refresh; /* write-through copies (store_sync.c), waited alone */
	void **scratch; /* (n_scratch) live zinf_store_alloc_scratch blocks, for the free */
	uint32_t n_scratch, cap_scratch;

	struct param *params;
	uint32_t n_params, cap_params;
	struct module *modules;
	uint32_t n_modules, cap_modules;
	struct zinf_name_index module_names, param_names; /* each name once */
	struct chunk *chunks;
	uint32_t n_chunks;

	struct chunk *active;	    /* chunks QUEUED..COPYING, in activation order */
	struct chunk **active_tail; /* where the next activated chunk is linked */
	struct chunk *copies;	    /* COPYING chunks whose copy the pass left to queue */
	struct chunk **copies_tail;
	struct module *waiting_head; /* modules waiting for device space, FIFO */
	struct module *waiting_tail;
	uint64_t tick;

	uint64_t host_now, host_peak, nvme_now, nvme_peak;
	uint64_t host_pinned; /* of host_now, page-locked host homes (pin_host) */
	struct zinf_store_link_stats link[ZINF_LINKS];
	uint64_t wait_ns, waits, fetches, hits, evictions, param_bytes;
	uint64_t param_elems; /* of every parameter registered (ZINF_MAX_MODEL_ELEMS) */
};

static inline uint64_t store_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t store_round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* Record a one-line error as the calling thread's last error on s (see
 * zinf_store_last_error) and return code. */
int store_fail(struct zinf_store *s, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The mover thread's body (store_move.c). */
void *store_mover_main(void *arg);
/* Give a cached module's device buffer back (its home keeps the values). Lock held. */
void store_drop_copy(struct zinf_store *s, struct module *mod);
/* Wait on s->ready for at most a millisecond (lock held): the waits that re-check a
 * condition no single event signals (room that may come, a load settling). */
void store_wait_ms(struct zinf_store *s);
/* Wake the mover (lock held): something it waits for may have changed. */
void store_kick(struct zinf_store *s);

#endif /* ZINF_SRC_STORE_INTERNAL_H */

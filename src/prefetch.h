/*
 * Trace-based prefetch (DeepSpeed's stage3 prefetch, by module).
 *
 * The first optimizer step records the order in which the model fetches modules
 * (forward, recompute, backward): the trace. Later steps follow it: each time the model
 * fetches the module the trace expects, the prefetcher fetches the next ones ahead (the
 * store moves them NVMe -> pinned -> device on its mover thread while the model computes),
 * as far as stage3_prefetch_bucket_size and stage3_max_live_parameters (elements) and the
 * device budget allow, and tells the store each module's next use so that eviction drops
 * the cached module needed furthest in the future (Belady). A fetch the trace did not
 * expect (an eval pass, another model path) is a divergence: the prefetched modules are
 * released, the rest of the step runs on demand, and the step is recorded anew. Prefetch
 * only ever adds fetches of modules the model will fetch itself, so results are the same
 * with it on or off.
 *
 * Threading: driven by the engine's one thread.
 */
#ifndef ZINF_SRC_PREFETCH_H
#define ZINF_SRC_PREFETCH_H

#include <stdbool.h>
#include <stdint.h>

struct zinf_store;
struct zinf_prefetch;

struct zinf_prefetch_opts {
	uint64_t bucket_elems;	 /* stage3_prefetch_bucket_size; 0 turns prefetch off */
	uint64_t max_live_elems; /* stage3_max_live_parameters */
	/* stage3_max_reuse_distance: a released module whose next use along the trace is
	 * more than this many elements of other modules' fetches away is evicted at once
	 * (its device memory is free for what comes sooner); nearer ones stay cached. */
	uint64_t max_reuse_elems;
	/* May module m be fetched ahead now? (false while the optimizer has not written
	 * its new values); NULL: always. Called on the engine's thread. */
	bool (*can_fetch)(void *user, uint32_t m);
	void *user;
};

struct zinf_prefetch_stats {
	uint64_t issued;	  /* modules fetched ahead */
	uint64_t hits;		  /* model fetches served by a prefetch */
	uint64_t divergences;	  /* steps that left the trace */
	uint64_t recordings;	  /* traces recorded */
	uint64_t reuse_evictions; /* released modules evicted: next use beyond the distance */
};

/* module_elems: parameter elements of each of n_modules store modules. */
int zinf_prefetch_create(struct zinf_store *store, uint32_t n_modules, const uint64_t *module_elems,
			 const struct zinf_prefetch_opts *opts, struct zinf_prefetch **out);
void zinf_prefetch_destroy(struct zinf_prefetch *p);

/* The model fetches module m. Returns 0 or a store error; *held is true when a prefetch
 * already holds m for the model (the caller must not fetch it again). */
int zinf_prefetch_fetch(struct zinf_prefetch *p, uint32_t m, bool *held);
/* After the model's own fetch of the module it is queued first: fetch ahead along the
 * trace, and tell eviction each module's next use. */
void zinf_prefetch_advance(struct zinf_prefetch *p);
/* The model released module m (after its own store release); with a trace, a module
 * not needed again within max_reuse_elems is evicted from the device. */
void zinf_prefetch_release(struct zinf_prefetch *p, uint32_t m);
/* Release every module fetched ahead (before writes to parameters, or when the device
 * budget is needed for a fetch the trace did not foresee). Returns how many. */
int zinf_prefetch_drop(struct zinf_prefetch *p);
/* An optimizer step ends the window: adopt the recorded order as the trace when there
 * was none or the step diverged. */
void zinf_prefetch_end_step(struct zinf_prefetch *p);
/* The optimizer step has written the parameters: fetch the first modules of the next
 * step ahead, so that step does not start by waiting. */
void zinf_prefetch_start_step(struct zinf_prefetch *p);
void zinf_prefetch_get_stats(const struct zinf_prefetch *p, struct zinf_prefetch_stats *out);

#endif /* ZINF_SRC_PREFETCH_H */

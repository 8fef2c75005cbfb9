/*
 * Shard store: where every byte of every parameter lives, and how it moves.
 *
 * Parameters are registered per module (the unit of fetch: an embedding, a decoder
 * layer, ...). At finalize each module's parameters are packed, in registration order
 * and 256-byte aligned, into one flat buffer that is cut into chunks of chunk_size bytes
 * (a parameter larger than a chunk simply spans several). A chunk is also the shard of
 * one rank (world size 1 for now: the comm layer splits chunks into per-rank shards).
 * Each chunk has a home tier:
 *
 *     device: allocated on the device at finalize and never moved
 *     host:   a host buffer; fetch copies host -> device
 *     nvme:   an extent of the I/O engine; fetch reads nvme -> pinned -> device
 *
 * Fetching a module allocates its device buffer (evicting cached modules, least
 * recently released first, when the device budget is short), then moves each chunk
 * through its states on a mover thread:
 *
 *     HOME --(pinned buffer)--> READING --(io done)--> COPYING --(event)--> RESIDENT
 *
 * A module whose chunks are all resident is ready; compute waits for exactly that
 * (zinf_store_wait), reads zinf_store_param_data(), and releases it. A released module
 * stays cached on the device until its space is needed. Device copies of parameters
 * are never dirty: the home tier holds the truth, so eviction is a free. A fetch that can
 * never fit (a module larger than the device budget, a chunk larger than the pinned
 * pool) is refused at finalize with the numbers; one that cannot fit now because every
 * resident module is held is an error naming them, never a hang.
 *
 * Threading: all functions are thread-safe (one lock); the mover thread does the
 * moving. zinf_store_param_data() pointers stay valid until the module's release.
 * Error messages are per thread (zinf_store_last_error); a load the mover fails is
 * reported, with its message, to the threads that wait for it.
 */
#ifndef ZINF_SRC_STORE_H
#define ZINF_SRC_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "zinf/dtype.h"

/* The most elements one parameter, and all of a model's together, may have: with 16
 * bytes of state an element (master, moments, gradient) and the sums over tiers, every
 * size the engine and the plan compute stays far inside 64 bits (2^50 elements: a
 * thousand times the largest models trained today). */
#define ZINF_MAX_PARAM_ELEMS (1ull << 48)
#define ZINF_MAX_MODEL_ELEMS (1ull << 50)

struct zinf_device;
struct zinf_pinned;
struct zinf_io;
struct zinf_store;

enum zinf_tier {
	ZINF_TIER_DEVICE = 0,
	ZINF_TIER_HOST = 1,
	ZINF_TIER_NVME = 2,
};

/* Links data moves over, for the counters. */
enum zinf_link {
	ZINF_LINK_NVME_TO_PINNED = 0,
	ZINF_LINK_PINNED_TO_DEVICE = 1, /* also host home -> device */
	ZINF_LINK_DEVICE_TO_PINNED = 2,
	ZINF_LINK_PINNED_TO_NVME = 3,
	ZINF_LINKS = 4,
};

struct zinf_store_opts {
	struct zinf_device *device;	/* required */
	struct zinf_pinned *pinned;	/* required when param_home is nvme (by finalize) */
	struct zinf_io *io;		/* required when param_home is nvme */
	enum zinf_tier param_home;	/* default DEVICE */
	uint64_t chunk_size;		/* bytes, a multiple of 4096; default 32 MiB */
	int world_size;			/* must be 1 for now */
	struct zinf_timeline *timeline; /* optional: NVMe reads, H2D copies (timeline.h) */
	/* NVME home: modules whose parameter elements fit in what is left of this many,
	 * first fit in registration order, are homed in host memory instead
	 * (offload_param.max_in_cpu; 0 = none): their fetches read no drive */
	uint64_t host_elems;
	/* HOST home (and host_elems' modules): page-lock the homes with the device
	 * (offload_param.pin_memory), so fetches copy from them by DMA; a device that does not
	 * register (host) ignores it */
	bool pin_host;
	/* How long the mover sleeps when nothing is in flight and nobody kicks it (default
	 * 1 s). Every change that gives it work kicks it, so this is only a safety net;
	 * tests set it long, which makes a missed kick a hang instead of a slow step. */
	uint64_t mover_idle_ns;
};

struct zinf_store_link_stats {
	uint64_t bytes;
	uint64_t ns; /* busy time summed over transfers (overlapping ones add up) */
	uint64_t count;
};

struct zinf_store_stats {
	/* bytes resident now / peak / budget per tier (0 budget = unbounded) */
	uint64_t device_now, device_peak, device_limit;
	uint64_t pinned_now, pinned_peak, pinned_limit;
	uint64_t host_now, host_peak;
	uint64_t host_pinned; /* of host_now, page-locked with the device (pin_host) */
	uint64_t nvme_now, nvme_peak;
	struct zinf_store_link_stats link[ZINF_LINKS];
	uint64_t wait_ns; /* time zinf_store_wait spent waiting for data */
	uint64_t waits;	  /* waits that had to block */
	uint64_t fetches; /* zinf_store_fetch calls */
	uint64_t hits;	  /* fetches served by a cached device copy */
	uint64_t evictions;
	uint64_t param_bytes; /* registered parameter bytes */
	uint32_t modules, params, chunks;
};

void zinf_store_opts_init(struct zinf_store_opts *opts);
/* Start the store (and its mover thread). Returns 0 or a negative code with a one-line
 * reason in err. */
int zinf_store_create(const struct zinf_store_opts *opts, struct zinf_store **out, char *err,
		      size_t errlen);
/* Stop the mover, free every device, host and pinned buffer and NVMe extent. NULL is a
 * no-op. No module may be in use. */
void zinf_store_destroy(struct zinf_store *store);
/* The calling thread's last error on store, as one line: the message of this thread's
 * last failed call, when that call was on this store ("" otherwise). Valid until the
 * thread's next failed store call; other threads' failures never change it. */
const char *zinf_store_last_error(struct zinf_store *store);

/* ---- registration (before finalize) ---------------------------------------------------- */

int zinf_store_module_add(struct zinf_store *store, const char *name, uint32_t *module);
/* A parameter of ndim (1..4) dims with dtype F32, BF16 or F16. */
int zinf_store_param_add(struct zinf_store *store, uint32_t module, const char *name,
			 enum zinf_dtype dtype, int ndim, const uint64_t *shape, uint32_t *param);
/* Lay out chunks and allocate every home. Refuses, with the numbers, a module larger
 * than the device budget or a chunk larger than the pinned pool (ZINF_EBUDGET). */
int zinf_store_finalize(struct zinf_store *store);
/* The drive bytes the parameters' NVMe homes take (or, before finalize, will take): the
 * footprint of every chunk's extent; 0 unless the home tier is nvme. */
uint64_t zinf_store_nvme_home_bytes(struct zinf_store *store);
/* The bytes of every parameter chunk homed on NVMe (0 for other homes: host homes are
 * never staged), each rounded to the I/O alignment: what staging all of them at once
 * takes. Before finalize too. */
uint64_t zinf_store_chunk_bytes(struct zinf_store *store);
/* The largest chunk of any module, rounded to the I/O alignment: chunk_size, or less when
 * every module is smaller. What one chunk staged in the pinned pool or written to NVMe
 * takes at most. Before finalize too. */
uint64_t zinf_store_largest_chunk(struct zinf_store *store);
/* With an NVME home, the bytes of the chunks host_elems keeps in host memory (each
 * rounded to the I/O alignment, as allocated); 0 for other homes. Before finalize too. */
uint64_t zinf_store_host_split_bytes(struct zinf_store *store);
/* Give a store created without a pinned pool (opts.pinned NULL) its pool, before
 * finalize. */
int zinf_store_set_pinned(struct zinf_store *store, struct zinf_pinned *pinned);

/* ---- contents (after finalize; the module must not be in use) --------------------------- */

/* Copy a parameter's bytes from src into its home tier (a cached device copy of its
 * module is dropped first). Synchronous. */
int zinf_store_param_write(struct zinf_store *store, uint32_t param, const void *src);
/* Bytes [first, first + len) of a parameter from src, the rest kept: a chunk is read
 * first only if the range covers part of its parameters' bytes. -EINVAL for a range
 * outside the parameter. */
int zinf_store_param_write_range(struct zinf_store *store, uint32_t param, uint64_t first,
				 uint64_t len, const void *src);
/* A byte range of one parameter, and its new bytes. */
struct zinf_store_range {
	uint32_t param;
	uint64_t first, len;
	const void *src;
};
/* Several ranges of the parameters of one module at once (they must not overlap: the
 * caller checks, as zinf_param_load_ranges does; overlapping ones could pass for a chunk
 * covered whole and leave its other bytes zero), the
 * rest kept: each chunk they touch is written once, and read first only if they cover
 * part of its parameters' bytes; so ranges cut at chunk ends across parameters
 * (zinf_store_param_chunk_left) write every chunk without reading it. A cached device
 * copy is dropped. -EINVAL for a range outside its parameter or of another module. */
int zinf_store_write_ranges(struct zinf_store *store, uint32_t module, uint32_t n,
			    const struct zinf_store_range *r);
/* Write every parameter of a module at once (src[i]: the module's i-th parameter, in
 * registration order). On NVMe each chunk is written whole, once, without reading it
 * first: the way to store an optimizer step's new parameters. A device copy still
 * cached is refreshed with the same values (the next fetch is a hit). Synchronous. */
int zinf_store_module_write(struct zinf_store *store, uint32_t module, const void *const *src);
/* zinf_store_module_write for a module homed on the device, from device memory (src[i]:
 * device addresses, complete before the call): copied device to device, nothing crosses
 * to the host. ZINF_ESTATE, nothing written, for a module homed elsewhere. Synchronous. */
int zinf_store_module_write_device(struct zinf_store *store, uint32_t module,
				   const void *const *src);
/* Copy a parameter's bytes from its home tier into dst. Synchronous. */
int zinf_store_param_read(struct zinf_store *store, uint32_t param, void *dst);

/* ---- use (after finalize) -------------------------------------------------------------- */

/* Ask for the module on the device (asynchronous; a use count is taken). */
int zinf_store_fetch(struct zinf_store *store, uint32_t module);
/* Block until a fetched module is on the device. Returns 0 or the error that stopped it
 * (I/O error, or a budget that cannot fit it while others are held). */
int zinf_store_wait(struct zinf_store *store, uint32_t module);
/* Device address of a parameter of a ready module (NULL otherwise). */
void *zinf_store_param_data(struct zinf_store *store, uint32_t param);
/* Drop the use count taken by fetch; at zero the module stays cached until evicted. */
int zinf_store_release(struct zinf_store *store, uint32_t module);

/* Tell eviction when a module is needed next (any increasing measure, e.g. a position
 * in the prefetcher's trace; UINT64_MAX = not again soon; 0 = unknown). Cached modules
 * needed furthest in the future are evicted first. */
void zinf_store_set_next_use(struct zinf_store *store, uint32_t module, uint64_t when);
/* Drop the device copy of a cached (fetched, released, not persistent) module now.
 * Returns 0, -EBUSY when it is held, loading, persistent or not on the device, or
 * -EINVAL. */
int zinf_store_evict(struct zinf_store *store, uint32_t module);
/* Keep a module on the device once fetched: eviction skips it (a module write refreshes
 * it; a parameter write drops the copy, to be loaded again). For small, often used
 * modules. Its device buffer is taken at once (after finalize, when there is room),
 * from the top of the heap, and kept in its place for the run: modules and gradient
 * buffers that come and go are not split by it. */
void zinf_store_set_persistent(struct zinf_store *store, uint32_t module, bool persistent);
/* Device memory for someone else's use (gradient buffers) from the same budget,
 * evicting cached modules to make room. Taken from the top of the heap, while modules
 * are placed first fit from the bottom: a module held in the middle cannot split the
 * room a gradient buffer needs when the buffer is taken before the module is fetched
 * (the trainer's backward does that). Nor does a block land below a cached copy (or a
 * released load): those above it give way first, so the block sits as high as the
 * buffers that stay allow, not in the middle of the room the modules share once they go.
 * Returns 0 or ZINF_EBUDGET (message set). */
int zinf_store_alloc_scratch(struct zinf_store *store, uint64_t bytes, void **out);
/* Whether a module in use (fetched and not released, by the model or a prefetcher; not a
 * persistent one) has its device buffer above p: a scratch block at p then sits below
 * it, in the middle of the room the modules share once it is released. */
bool zinf_store_held_above(struct zinf_store *store, const void *p);
int zinf_store_free_scratch(struct zinf_store *store, void *ptr);
/* Device bytes a module occupies when fetched (after finalize; 0 otherwise). */
uint64_t zinf_store_module_bytes(struct zinf_store *store, uint32_t module);
/* The packing of a module's parameters, for planning without a store: a parameter of
 * bytes placed after off bytes of its module ends at the offset returned (each starts
 * at a 256-byte offset); a module of packed bytes takes a buffer (device, host home,
 * NVMe extent) of the size returned (whole 4096-byte pages, one at least). */
uint64_t zinf_store_pack_param(uint64_t off, uint64_t bytes);
uint64_t zinf_store_buffer_bytes(uint64_t packed);
/* Device bytes in use once the n modules listed are all placed: everything allocated
 * now but the cached copies a fetch may evict, the persistent modules not placed yet
 * (placed at their first fetch and kept), and the listed modules. */
uint64_t zinf_store_device_need(struct zinf_store *store, uint32_t n, const uint32_t *modules);

/* ---- introspection --------------------------------------------------------------------- */

void zinf_store_get_stats(struct zinf_store *store, struct zinf_store_stats *out);
/* Write stats as one JSON object (no newline). Returns 0 or -EIO. */
int zinf_store_stats_json(const struct zinf_store_stats *st, FILE *f);
uint64_t zinf_store_param_bytes(struct zinf_store *store, uint32_t param);
uint32_t zinf_store_param_module(struct zinf_store *store, uint32_t param);
/* Bytes from byte `first` of a parameter to the end of the chunk that holds it, or to
 * the parameter's end when that comes first (0 when first is not inside it, or before
 * finalize): writes cut there cover the chunks between whole. With chunk not NULL, the
 * index of that chunk in the parameter's module. */
uint64_t zinf_store_param_chunk_left(struct zinf_store *store, uint32_t param, uint64_t first,
				     uint64_t *chunk);
const char *zinf_tier_name(enum zinf_tier tier); /* "device", "host", "nvme" */
const char *zinf_link_name(enum zinf_link link); /* "nvme_to_pinned", ... */

#endif /* ZINF_SRC_STORE_H */

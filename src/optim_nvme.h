/*
 * Internals of the pipelined NVMe optimizer step (include/zinf/optim.h, section
 * "Pipelined NVMe optimizer step"), shared by optim_nvme.c (the pipeline: slots, step,
 * state in and out) and optim_nvme_setup.c (layout, pinned budget, create, destroy):
 * the handle, its staging slots, and the create variant that takes its staging buffers
 * from a pinned pool the engine already owns (and has registered with the I/O engine).
 */
#ifndef ZINF_SRC_OPTIM_NVME_H
#define ZINF_SRC_OPTIM_NVME_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "zinf/io.h"
#include "zinf/optim.h"

struct zinf_pinned;

/* As zinf_adam_nvme_create, but the staging buffers come from pool (owned by the caller,
 * which must outlive the handle; opts->pinned_bytes is ignored). A pool whose size cannot
 * hold the buffers, or that has not enough free space now, is refused with the numbers.
 * pool NULL: make a pool of its own, as zinf_adam_nvme_create does. */
int zinf_adam_nvme_create_in_pool(const struct zinf_adam_nvme_opts *opts, struct zinf_pinned *pool,
				  struct zinf_adam_nvme **out, char *err, uint64_t err_len);

/* ---- The staging slots as the caller's sub-group buffers ----
 * Between calls every slot is idle, and its pinned buffer may hold one sub-group's state
 * for the caller (the engine's loads assemble a sub-group in one and write it from there;
 * its saves read one into one), so that loading and saving take no host memory beyond
 * the pool. The calls below touch slot k alone; a step, write_state, read_state and
 * write_sub_group / read_sub_group (slot 0) may overwrite any slot, and refuse to run
 * (ZINF_ESTATE) while a write started with _write_from_slot_start is in flight. */
unsigned zinf_adam_nvme_n_slots(const struct zinf_adam_nvme *h);
/* Slot k's buffer laid out for sub-group i: its master at [0], exp_avg at [*stride] and
 * exp_avg_sq at [2 * *stride] (floats); NULL when k or i is out of range. */
float *zinf_adam_nvme_slot_parts(struct zinf_adam_nvme *h, unsigned k, uint64_t i,
				 uint64_t *stride);
/* Write slot k's buffer as sub-group i's state, as zinf_adam_nvme_write_sub_group does
 * (but for the spare extents, below): its master, and its exp_avg and exp_avg_sq with
 * moments (zeros without: the buffer's moment parts may be overwritten). The master
 * part, and with moments the others, keep their values, also when the write fails. */
int zinf_adam_nvme_write_from_slot(struct zinf_adam_nvme *h, unsigned k, uint64_t i, bool moments);
/* The same write, started: slot k stays busy (no call may use it, and no call that may
 * use any slot may run: step, the state and sub-group calls) until
 * zinf_adam_nvme_slot_wait(h, k), which returns the write's error; its buffer is
 * unchanged either way, so a failed write can be started again. Errors of the start are
 * returned at once (the slot then idle). */
int zinf_adam_nvme_write_from_slot_start(struct zinf_adam_nvme *h, unsigned k, uint64_t i,
					 bool moments);
/* Wait for slot k's write (if one is in flight) and retire it: 0 and the sub-group's
 * state is what the slot wrote, or the write's error and its state is as it was. */
int zinf_adam_nvme_slot_wait(struct zinf_adam_nvme *h, unsigned k);
/* Once every sub-group has been written, zero the spare extents through slot k (whose
 * contents are then lost), as write_sub_group does when it writes the last one: once,
 * and not with fast_init; 0 and nothing done otherwise. After a failure the next call
 * tries again. */
int zinf_adam_nvme_zero_spares(struct zinf_adam_nvme *h, unsigned k);
/* Read sub-group i's state into slot k's buffer (ZINF_ESTATE if it was never written).
 * Without moments the caller needs the master alone, and only its part is read when
 * that loses no check (neither the handle nor its I/O handle checks CRC32C; with it, a
 * state whose moments are on NVMe is read whole, as its CRC covers the whole extent):
 * the moment parts are then undefined. */
int zinf_adam_nvme_read_into_slot(struct zinf_adam_nvme *h, unsigned k, uint64_t i, bool moments);

#define NVME_MAX_SLOTS 3
#define NVME_MIN_ALIGN 4096ull
/* With these two every byte count stays below 2^64 (each sub-group's parts are padded
 * to the alignment: many small ones take more than their elements) */
#define NVME_MAX_ELEMS (1ull << 56)
#define NVME_MAX_GROUPS (1ull << 32)

enum nvme_slot_state {
	NVME_SLOT_IDLE = 0,
	NVME_SLOT_READING, /* read in flight */
	NVME_SLOT_LOADED,  /* holds the state of its sub-group, no I/O in flight */
	NVME_SLOT_WRITING, /* write to the spare extent in flight (or not yet retired) */
};

/* What of a sub-group's state is zero and therefore not on NVMe (fast_init). */
enum nvme_zero {
	NVME_ZERO_NONE = 0, /* master, m and v are on NVMe */
	NVME_ZERO_MOMENTS,  /* the master part is; m and v are zero */
	NVME_ZERO_ALL,	    /* all zero; nothing on NVMe */
};

struct nvme_slot {
	struct zinf_adam_nvme *h;
	char *buf;		/* (extent_bytes) pinned: master | m | v of one sub-group */
	struct zinf_io_req req; /* the slot's one request */
	enum nvme_slot_state state;
	uint64_t group;	     /* sub-group staged here (unless IDLE) */
	uint32_t extent;     /* extent of the request in flight */
	enum nvme_zero zero; /* a read's: what it fills in; a write's: what it leaves out */
	uint32_t crc;	     /* CRC32C of the master part a master-only write records */
	bool master_only; /* a read of the master part alone, unverified (its m and v not needed) */
	bool io_done;	  /* set by the completion callback, under h->lock */
};

struct zinf_adam_nvme {
	struct zinf_adam *adam; /* not owned */
	struct zinf_io *io;	/* not owned */
	struct zinf_pinned *pool;
	bool own_pool;
	bool registered; /* own pool registered with io as fixed buffers */
	uint64_t n_elems, sub_group_size, n_groups;
	uint64_t align;	       /* I/O alignment of every part */
	uint64_t extent_bytes; /* 3 parts of a full sub-group */
	bool pipeline_read, pipeline_write;
	bool fast_init, crc32c;
	unsigned n_slots;
	struct nvme_slot slots[NVME_MAX_SLOTS];
	uint32_t *group_extent; /* (n_groups) extent holding each sub-group's state */
	uint32_t *spares;	/* (n_slots) extents holding no state */
	unsigned n_spares;
	uint64_t n_alloc; /* extents allocated at create */
	uint8_t *updated; /* (n_groups) this step's new states */
	uint64_t n_updated;
	uint8_t *written;   /* (n_groups) 1: the sub-group's state on NVMe was written */
	uint64_t n_written; /* sub-groups written; steps need all of them */
	bool spares_zeroed; /* the spares were zeroed once the state was complete */
	/* (n_groups) enum nvme_zero of each sub-group's state, set with its extent when a
	 * write completes (or at once for NVME_ZERO_ALL, which writes nothing) */
	uint8_t *zeroed;
	uint32_t *master_crc; /* (n_groups) the slot's crc, for NVME_ZERO_MOMENTS with crc32c */
	/* the call in progress: its first error wins */
	int err;
	int64_t err_group;
	double wait_s;
	uint64_t read_bytes, write_bytes; /* completed without error */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char last_error[512];
};

/* Bytes of one part (master, m or v) of a sub-group of n_elems, padded to align. */
static inline uint64_t nvme_round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

static inline uint64_t nvme_part_bytes(uint64_t n_elems, uint64_t align)
{
	return nvme_round_up(n_elems * sizeof(float), align);
}

/* Sub-group g: its first element and element count. */
static inline void nvme_group_range(const struct zinf_adam_nvme *h, uint64_t g, uint64_t *first,
				    uint64_t *n)
{
	*first = g * h->sub_group_size;
	*n = h->n_elems - *first < h->sub_group_size ? h->n_elems - *first : h->sub_group_size;
}

/* Wait for every request of h in flight and retire it (optim_nvme.c). */
void zinf_adam_nvme_drain(struct zinf_adam_nvme *h);

#endif /* ZINF_SRC_OPTIM_NVME_H */

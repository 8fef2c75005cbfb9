/*
 * zinf CPU Adam / AdamW: the optimizer step over one shard of fp32 master weights and
 * Adam moments, with gradients in fp32, bf16 or fp16, writing the updated bf16/fp16
 * parameter copy in the same pass.
 *
 * The math is torch.optim.AdamW (decoupled weight decay, p *= 1 - lr*wd before the Adam
 * update) or torch.optim.Adam (L2: grad += wd*p) with bias correction as torch and
 * DeepSpeed's CPU Adam define it. The grad is multiplied on the fly by grad_scale
 * (1/loss_scale times the clipping coefficient). See docs/optim.md for the exact
 * operation order, which every instruction-set path (scalar, AVX2, AVX-512, chosen at run
 * time by cpuid) and the CUDA kernel follow, so that they agree bit for bit.
 *
 * Threading: a struct zinf_adam owns a pool of opts.threads - 1 worker threads (the
 * calling thread is the last one). One zinf_adam_step() at a time per handle; distinct
 * handles are independent. The step allocates nothing.
 */
#ifndef ZINF_OPTIM_H
#define ZINF_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "zinf/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zinf_adam;

/* optimizer.type */
enum zinf_adam_type {
	ZINF_ADAMW = 0, /* "AdamW": decoupled weight decay (torch.optim.AdamW) */
	ZINF_ADAM = 1,	/* "Adam": L2 weight decay added to the grad (torch.optim.Adam) */
};

/* Instruction set of the update loop. AUTO picks the widest this CPU supports. */
enum zinf_adam_isa {
	ZINF_ADAM_ISA_AUTO = 0,
	ZINF_ADAM_ISA_SCALAR = 1, /* the reference; any x86-64 */
	ZINF_ADAM_ISA_AVX2 = 2,	  /* AVX2 + FMA + F16C */
	ZINF_ADAM_ISA_AVX512 = 3, /* AVX-512F */
};

/* Hyper-parameters are doubles, as in the JSON config and in torch: torch keeps betas,
 * eps and weight_decay as Python floats and derives 1 - beta and the bias corrections in
 * double before rounding them once to fp32, and so does zinf. */
struct zinf_adam_opts {
	enum zinf_adam_type type; /* default ZINF_ADAMW */
	double beta1, beta2;	  /* optimizer.params.betas; default 0.9, 0.999 */
	/* default 1e-8; a normal fp32 (from FLT_MIN to FLT_MAX): the kernels compute in fp32 */
	double eps;
	/* default 0.01 (torch.optim.AdamW's default); 0 to FLT_MAX, as the step's lr */
	double weight_decay;
	bool bias_correction; /* default true */
	unsigned threads;     /* threads that share a step, caller included; default 1 */
	/* >= 0: bind worker i to the i-th core of this NUMA node (hwloc), where the shard's
	 * memory lives; -1 (default): leave workers unbound; below -1: -EINVAL */
	int numa_node;
	enum zinf_adam_isa isa; /* default AUTO; a named ISA the CPU lacks is an error */
};

/* Fill opts with the defaults above. */
void zinf_adam_opts_init(struct zinf_adam_opts *opts);
/* The NUMA nodes numa_node can name (hwloc's, those this process may use: 0 to the count
 * less one); 0 when the topology cannot be read. */
int zinf_adam_numa_nodes(void);

/* Validate opts, pick the instruction set, start the worker threads. *out is owned by
 * the caller; free with zinf_adam_destroy(). Returns 0, -EINVAL (bad opts; the one-line
 * reason is logged at error level; also for a NULL out or opts), -ENOTSUP (isa not
 * supported by this CPU), -ENOMEM or a negative errno from thread creation. */
int zinf_adam_create(struct zinf_adam **out, const struct zinf_adam_opts *opts);
/* Stop the workers and free adam. NULL is a no-op. No step may be in progress. */
void zinf_adam_destroy(struct zinf_adam *adam);

/* "scalar", "avx2" or "avx512": the loop adam runs ("none" for NULL). */
const char *zinf_adam_isa_name(const struct zinf_adam *adam);
/* The last error on adam as one line ("" if none). */
const char *zinf_adam_last_error(const struct zinf_adam *adam);

/* One shard or sub-group of optimizer state. All buffers are the caller's, hold n_elems
 * elements each and must not overlap. */
struct zinf_adam_shard {
	float *master;	   /* (n_elems) fp32 master weights, updated in place */
	float *exp_avg;	   /* (n_elems) fp32 first moment m, updated in place */
	float *exp_avg_sq; /* (n_elems) fp32 second moment v, updated in place */
	const void *grad;  /* (n_elems) grad_dtype: F32, BF16 or F16 */
	void *param_out;   /* (n_elems) param_dtype: the new copy, or NULL */
	enum zinf_dtype grad_dtype;
	enum zinf_dtype param_dtype; /* F32, BF16, F16, or NONE when param_out is NULL */
	uint64_t n_elems;
};

/* Per-step values: the schedule's learning rate, the 1-based step count (torch's
 * state['step'] after its increment, which bias correction uses) and the factor applied
 * to every grad element before anything else (1/loss_scale x clip coefficient; 1 = none). */
struct zinf_adam_step_info {
	uint64_t step;
	double lr;
	float grad_scale;
};

/* Apply one Adam/AdamW step to shard, split across the handle's threads. Returns 0, or
 * -EINVAL with the reason (which field, which value) in zinf_adam_last_error() (also for
 * a NULL adam, shard or info); on error nothing was written. Not thread-safe per handle. */
int zinf_adam_step(struct zinf_adam *adam, const struct zinf_adam_shard *shard,
		   const struct zinf_adam_step_info *info);

/* ---- Pipelined NVMe optimizer step (offload_optimizer.device: nvme) ---------------
 *
 * The fp32 master, m and v of a shard of n_elems live on NVMe in sub-groups of
 * sub_group_size elements, one extent per sub-group holding master | m | v (each part
 * aligned for O_DIRECT), so a sub-group is read and written with one request each way.
 * A step reads sub-group i into a pinned staging buffer, runs zinf_adam_step on it and
 * writes it back; the read of i+1 and the write of i-1 overlap the update of i
 * (pipeline_read / pipeline_write). A sub-group's new state is written to a spare
 * extent that replaces the old one only once the write has completed, so after any
 * error every sub-group's state on NVMe is either the old or the new one, never a mix.
 * See docs/optim.md.
 *
 * Threading: one call at a time per handle. The handle uses adam and io (not owned; they
 * must outlive it); io may carry other traffic at the same time. */

struct zinf_io;
struct zinf_adam_nvme;

struct zinf_adam_nvme_opts {
	struct zinf_adam *adam; /* the update (its opts, threads, ISA); required */
	struct zinf_io *io;	/* where the state lives; required */
	uint64_t n_elems;	/* elements in the shard; required */
	/* zero_optimization.sub_group_size; default 1e9; at most 2^32 sub-groups */
	uint64_t sub_group_size;
	bool pipeline_read;  /* offload_optimizer.pipeline_read; default true */
	bool pipeline_write; /* offload_optimizer.pipeline_write; default true */
	/* offload_optimizer.fast_init; default true. A sub-group written with zero moments
	 * (exp_avg / exp_avg_sq NULL or all zero bits) has only its master part written, and
	 * reading it reads only that part and fills m and v with zeros; one whose master is
	 * all zero bits too is not written at all (it reads as zeros). A step's write of the
	 * sub-group writes all three parts, as always. false: every write writes all three. */
	bool fast_init;
	/* Check the master part of such sub-groups with CRC32C; set it when io checks CRC32C
	 * (zinf.checksum: crc32c). The I/O layer keeps one CRC per extent, recorded when the
	 * extent is written whole and checked when it is read whole, which a master part
	 * alone is not. Default false. */
	bool crc32c;
	/* Size of the pinned pool zinf_adam_nvme_create makes for the staging buffers;
	 * 0 (default): exactly zinf_adam_nvme_pinned_bytes(). */
	uint64_t pinned_bytes;
};

/* Fill opts with the defaults above (adam, io, n_elems NULL/0). */
void zinf_adam_nvme_opts_init(struct zinf_adam_nvme_opts *opts);

/* Pinned bytes the pipeline needs for opts with I/O alignment align (0: 4096): one
 * buffer per sub-group in flight (3 with both pipelines, 2 with one, 1 with none), each
 * holding the master, m and v of a full sub-group. 0 for invalid opts. */
uint64_t zinf_adam_nvme_pinned_bytes(const struct zinf_adam_nvme_opts *opts, uint64_t align);
/* Drive bytes zinf_adam_nvme_create takes on opts->io: one extent per sub-group plus one
 * spare per buffer, each holding a full sub-group (zinf_io_extent_footprint). 0 for
 * invalid opts (io NULL included). */
uint64_t zinf_adam_nvme_drive_bytes(const struct zinf_adam_nvme_opts *opts);
/* The length of one of those extents: a full sub-group's master, m and v, each part
 * padded to opts->io's alignment (at least 4096). 0 for invalid opts. */
uint64_t zinf_adam_nvme_extent_bytes(const struct zinf_adam_nvme_opts *opts);

/* Check opts, allocate the extents (one per sub-group plus one spare per buffer), create
 * a pinned pool of opts->pinned_bytes and take the staging buffers from it. A pool or a
 * sub-group that does not fit is refused here, with the numbers. The state is undefined
 * until zinf_adam_nvme_write_state(). Returns 0 or a negative code; on error *out is NULL
 * and the one-line reason is copied to err (when not NULL). */
int zinf_adam_nvme_create(const struct zinf_adam_nvme_opts *opts, struct zinf_adam_nvme **out,
			  char *err, uint64_t err_len);
/* Free the extents and buffers. NULL is a no-op. No call may be in progress. */
void zinf_adam_nvme_destroy(struct zinf_adam_nvme *h);
/* The last error on h as one line ("" if none). */
const char *zinf_adam_nvme_last_error(const struct zinf_adam_nvme *h);

/* Write the whole state from caller buffers of n_elems floats: master is required;
 * exp_avg / exp_avg_sq NULL write zeros (a fresh optimizer; with fast_init only the
 * master part of each sub-group is written, see the opts). Used to initialise and to
 * load a checkpoint; without fast_init the spare extents are written with zeros too, so
 * that no step writes into preallocated-but-unwritten blocks. On error the state counts as unwritten
 * (steps are refused) but for the sub-groups this call wrote before the error. */
int zinf_adam_nvme_write_state(struct zinf_adam_nvme *h, const float *master, const float *exp_avg,
			       const float *exp_avg_sq);
/* Read the whole state into caller buffers of n_elems floats (NULL: skip that part). */
int zinf_adam_nvme_read_state(struct zinf_adam_nvme *h, float *master, float *exp_avg,
			      float *exp_avg_sq);

/* Ranged state I/O: the master, m and v of sub-group i alone (its elements and request
 * size from zinf_adam_nvme_sub_group), from or to caller buffers of the sub-group's
 * n_elems floats, one request each way through the first staging buffer, with the same
 * CRC32C (when the I/O handle checks) and one-line errors (sub-group, elements, extent,
 * the I/O layer's message) as the whole-state calls. For loading and saving a state
 * larger than memory one sub-group at a time. Synchronous; no step may be in progress.
 *
 * write_sub_group: master is required; exp_avg / exp_avg_sq NULL write zeros (with
 * fast_init: only the master part, or nothing for a master of zeros). As in a step, the
 * write goes to a spare extent that replaces the sub-group's old one only once
 * it completed, so a failed write leaves the old state (or none) in place. Steps and
 * read_state need every sub-group written (by write_state or this call); when the last
 * one is, the spare extents are zeroed once, as write_state does (not with fast_init). */
int zinf_adam_nvme_write_sub_group(struct zinf_adam_nvme *h, uint64_t i, const float *master,
				   const float *exp_avg, const float *exp_avg_sq);
/* read_sub_group: NULL skips that part; ZINF_ESTATE for a sub-group never written. */
int zinf_adam_nvme_read_sub_group(struct zinf_adam_nvme *h, uint64_t i, float *master,
				  float *exp_avg, float *exp_avg_sq);
/* Whether sub-group i's state has been written (false for i out of range). */
bool zinf_adam_nvme_sub_group_written(const struct zinf_adam_nvme *h, uint64_t i);

/* The caller's side of one step: host buffers of n_elems elements. */
struct zinf_adam_nvme_bufs {
	const void *grad; /* (n_elems) grad_dtype: F32, BF16 or F16 */
	void *param_out;  /* (n_elems) param_dtype: the new copy, or NULL */
	enum zinf_dtype grad_dtype;
	enum zinf_dtype param_dtype; /* F32, BF16, F16, or NONE when param_out is NULL */
	/* (n_sub_groups) 1 = step this sub-group, 0 = leave it; NULL = all. Redoing a
	 * failed step for the sub-groups it did not update gives the same bits as a step
	 * that never failed (the update is element-wise). */
	const uint8_t *sub_groups;
	/* Called on the stepping thread as soon as sub-group i is updated (its param_out
	 * range is final; its state write may still be in flight), in stepping order. A
	 * negative return stops the step with that error (a positive one with -EIO). NULL:
	 * not called. */
	int (*on_updated)(void *user, uint64_t i);
	/* Called on the stepping thread before sub-group i is updated: where its gradient
	 * (the sub-group's n_elems of grad_dtype) is, and where its new copy goes (n_elems of
	 * param_dtype, or NULL with NONE); both must stay valid until on_updated(i) returns.
	 * A caller that keeps neither whole (gradients swapped to NVMe, copies written home
	 * as they come) hands them over one sub-group at a time. A negative return stops the
	 * step with that error (a positive one with -EIO). NULL: grad and param_out above
	 * are used. */
	int (*sub_buffers)(void *user, uint64_t i, const void **grad, void **param_out);
	void *user;
};

/* What a step did. updated[i] is 1 when sub-group i's new state is on NVMe, 0 when its
 * old state still is (the step failed before or while writing it); param_out of a
 * sub-group with updated[i] == 0 is unspecified. */
struct zinf_adam_nvme_result {
	uint64_t n_sub_groups;
	uint64_t n_updated;
	const uint8_t *updated;	  /* (n_sub_groups), owned by h, valid until the next call */
	int64_t failed_sub_group; /* first sub-group whose I/O or update failed, or -1 */
	uint64_t read_bytes;	  /* state bytes read from NVMe by this step (less than */
				  /* the info's step_read_bytes for fast_init sub-groups) */
	uint64_t write_bytes;	  /* state bytes written */
	double seconds;		  /* wall time of the step */
	double update_seconds;	  /* of which in zinf_adam_step */
	double wait_seconds;	  /* of which waiting for I/O */
};

/* One optimizer step over the whole shard. Returns 0, or the first error (I/O status,
 * or -EINVAL / ZINF_ESTATE for bad input or an unwritten state) with the sub-group and
 * the extent named in zinf_adam_nvme_last_error(); res (may be NULL) is filled either
 * way. After a failed step no I/O of it is in flight. */
int zinf_adam_nvme_step(struct zinf_adam_nvme *h, const struct zinf_adam_nvme_bufs *bufs,
			const struct zinf_adam_step_info *info, struct zinf_adam_nvme_result *res);

/* Layout, for planners and benchmarks. */
struct zinf_adam_nvme_info {
	uint64_t n_elems, sub_group_size, n_sub_groups;
	uint64_t extent_bytes; /* one extent: master | m | v of a full sub-group, aligned */
	uint64_t n_extents;    /* n_sub_groups + n_buffers spares */
	uint64_t buffer_bytes; /* one pinned staging buffer */
	unsigned n_buffers;
	/* per step of a state written whole (a fast_init sub-group's first read is its
	 * master part alone, or nothing) */
	uint64_t step_read_bytes, step_write_bytes;
};
/* h NULL: out zeroed; out NULL: nothing. */
void zinf_adam_nvme_get_info(const struct zinf_adam_nvme *h, struct zinf_adam_nvme_info *out);
/* Sub-group i: its first element, element count and the bytes of its one read (and one
 * write) request (each out-pointer may be NULL). Returns 0, or -EINVAL for i out of range
 * or h NULL. */
int zinf_adam_nvme_sub_group(const struct zinf_adam_nvme *h, uint64_t i, uint64_t *first_elem,
			     uint64_t *n_elems, uint64_t *request_bytes);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_OPTIM_H */

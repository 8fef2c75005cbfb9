/*
 * zinf engine: the API a model trains through.
 *
 * A model registers its parameters per module (the unit of fetch: an embedding, a
 * decoder layer, the final norm and head), finalizes, loads initial values, and then per
 * micro-batch and module: fetch -> wait -> compute with zinf_param_data() -> release; in
 * backward also zinf_module_grads() -> accumulate into zinf_param_grad() ->
 * zinf_module_grads_ready(). After gradient_accumulation_steps micro-batches,
 * zinf_step() runs the optimizer (clipping, loss scaling, schedule) and writes the new
 * parameters to their home tier. Where parameters and optimizer state live (device, host
 * or NVMe) is the config's business; the model's code is the same.
 *
 * Conventions:
 *   - Parameter data is in the parameter's dtype (bf16, fp16 or fp32); gradients are
 *     fp32 and are accumulated (+=) by the model. The engine averages over
 *     gradient_accumulation_steps, so the model back-propagates each micro-batch's own
 *     mean loss (multiplied by zinf_loss_scale() when fp16 is on).
 *   - Weight decay applies to parameters of 2 or more dimensions unless registered with
 *     ZINF_PARAM_NO_DECAY; 1-D parameters (norm weights, biases) never decay.
 *   - Step k (1-based, counting steps not skipped for fp16 overflow) runs with the
 *     schedule's rate at DeepSpeed's iteration k - 2 (the rate set at construction for
 *     the first step), as DeepSpeed steps its scheduler after each optimizer step.
 *
 * Threading: one thread drives an engine; the engine's own threads move data and run
 * the optimizer. Errors: 0 or a negative code; the one-line message is in
 * zinf_last_error().
 */
#ifndef ZINF_ENGINE_H
#define ZINF_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "zinf/config.h"
#include "zinf/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zinf_engine;

enum zinf_param_flags {
	ZINF_PARAM_NO_DECAY = 1u << 0, /* exclude from weight decay (embeddings may want it) */
};

/* Bring up the tiers the config asks for (device, pinned pool, NVMe I/O, store,
 * optimizer). cfg must be loaded and resolved (zinf_config_resolve; see docs/engine.md
 * for the info to give it) and must outlive the engine: no "auto" may be left but
 * zinf.device_memory_limit's, which the device resolves as it opens (a GPU's free
 * memory less 1 GiB; a quarter of RAM on the host backend); another is
 * ZINF_ECONFIG naming the key. On failure returns a negative code (-EINVAL for a NULL cfg or out) with a
 * one-line reason in err when err is not NULL; *out is NULL then. */
int zinf_engine_create(const struct zinf_config *cfg, struct zinf_engine **out, char *err,
		       size_t errlen);
/* Free everything; NULL is a no-op. With zinf.trace set, the timeline is written here
 * unless zinf_engine_write_trace wrote it (a failure here is only logged). */
void zinf_engine_destroy(struct zinf_engine *e);
/* Write zinf.trace now, with the events so far, so that a failure can fail the run: 0
 * (also when no trace is set, or it was written), or a negative code with the reason in
 * zinf_last_error. zinf_engine_destroy then writes nothing more. */
int zinf_engine_write_trace(struct zinf_engine *e);
/* The last failure's message as one line ("" if none yet, or e NULL); a call that
 * succeeds leaves it as it was (read it after a call returned non-zero). */
const char *zinf_last_error(const struct zinf_engine *e);

/* ---- registration (before finalize) ---------------------------------------------------- */

/* name and module are required; an empty name, or one another module has, is refused
 * too (-EINVAL naming both, nothing added). */
int zinf_module_add(struct zinf_engine *e, const char *name, uint32_t *module);
/* A parameter of the last module added: dtype F32, BF16 or F16, 1 to 4 dims, each 1 or
 * more, at most 2^48 elements (and 2^50 for all a model's together); name, shape
 * and param are required, and the name must be neither empty nor another parameter's, in
 * any module (-EINVAL naming both, nothing added). */
int zinf_param_add(struct zinf_engine *e, uint32_t module, const char *name, enum zinf_dtype dtype,
		   int ndim, const uint64_t *shape, unsigned flags, uint32_t *param);
/* Lay out parameters and optimizer state on their tiers; refuses, before any step, what
 * cannot fit the budgets (with the numbers). A refusal by the checks that come before
 * the layout (host memory, NVMe free space, the optimizer state on the device, the
 * pinned pool) changes nothing, and finalize may be called
 * again (after freeing space, say); after any later failure the engine can only be
 * destroyed (another finalize: ZINF_ESTATE). */
int zinf_engine_finalize(struct zinf_engine *e);

/* ---- contents ------------------------------------------------------------------------ */

/* Set the values of a module's parameters (fp32 master, zero Adam moments, and each
 * parameter's copy in its dtype): srcs[k] holds the module's k-th parameter (in
 * registration order; n_srcs must be the module's parameter count) as src_dtypes[k]
 * (f32, bf16 or f16; converted through fp32). The module's chunks are written once, and
 * with optimizer state on NVMe each sub-group of it is written as soon as it is
 * complete, so loading a model module by module holds one module's sources and about
 * one sub-group per optimizer group, never the whole model (see docs/engine.md). The
 * module must not be in use (fetched, not released: -EBUSY, nothing changed); the
 * sources are only read, and may be freed on return. Bad input is -EINVAL with the
 * module, source and value named. After an I/O error (named with the sub-group or chunk)
 * the call may be repeated with the same sources; what was loaded before the error is
 * kept meanwhile. */
int zinf_module_load(struct zinf_engine *e, uint32_t module, uint32_t n_srcs,
		     const void *const *srcs, const enum zinf_dtype *src_dtypes);
/* Set one parameter's value, as zinf_module_load does for each. The slower path: the
 * chunks the parameter shares with its neighbours are read, changed and written back,
 * per parameter (those it covers whole are only written). The module must not be in use
 * (-EBUSY, nothing changed). */
int zinf_param_load(struct zinf_engine *e, uint32_t param, const void *src,
		    enum zinf_dtype src_dtype);
/* Set elements [first_elem, first_elem + n_elems) of one parameter, as zinf_param_load
 * does for all of them: src holds n_elems values in src_dtype (f32, bf16 or f16); with
 * exp_avg and exp_avg_sq (fp32, n_elems each; both or neither) their Adam moments are
 * set too, else reset to zero. Every other element keeps its value and moments. So a
 * caller can load, or resume, a parameter of any size in pieces of bounded memory (the
 * counterpart of zinf_param_state_save); optimizer state on NVMe is assembled a
 * sub-group at a time and written once all of the sub-group is loaded, pieces in any
 * order. The module must not be in use (-EBUSY, nothing changed); -EINVAL for a range
 * outside the parameter, n_elems 0 or a missing buffer. */
int zinf_param_load_range(struct zinf_engine *e, uint32_t param, uint64_t first_elem,
			  uint64_t n_elems, const void *src, enum zinf_dtype src_dtype,
			  const float *exp_avg, const float *exp_avg_sq);
/* One range of zinf_param_load_ranges: zinf_param_load_range's arguments. */
struct zinf_param_range {
	uint32_t param;
	uint64_t first_elem, n_elems;
	const void *src; /* n_elems values in src_dtype */
	enum zinf_dtype src_dtype;
	const float *exp_avg, *exp_avg_sq; /* fp32, n_elems each; both or neither (zeros) */
};
/* zinf_param_load_range for n ranges of the parameters of one module at once (they must
 * not overlap): the parameter store writes each chunk they touch once, and reads it first
 * only if they cover part of its parameters' bytes. Ranges cut where
 * zinf_param_chunk_elems says, gathered across parameters up to a chunk's end, thus
 * write every chunk of a module once without reading any, holding one chunk's elements
 * (zinf_module_load writes them once too, but needs the whole module). Every range is
 * checked before anything changes: -EINVAL naming the range for one outside its
 * parameter, of another module, overlapping another, or missing a buffer. An I/O error
 * after that (named) may leave the copies written and some ranges' state not: repeat
 * the call. */
int zinf_param_load_ranges(struct zinf_engine *e, uint32_t n, const struct zinf_param_range *r);
/* Elements from first_elem to the end of the parameter store's chunk (zinf.chunk_size)
 * that holds it, or to the parameter's end when that comes first; 0 for an element
 * outside the parameter or before finalize. With chunk not NULL, also the index of that
 * chunk in the parameter's module. Ranges cut there and gathered per chunk across a
 * module's parameters (zinf_param_load_ranges) write each chunk once, without reading
 * it back, holding at most a chunk's elements at a time. */
uint64_t zinf_param_chunk_elems(const struct zinf_engine *e, uint32_t param, uint64_t first_elem,
				uint64_t *chunk);
/* Write a parameter's value (from the fp32 master) to dst (required: -EINVAL) as
 * dst_dtype. Refused with
 * ZINF_ESTATE while the engine is torn (zinf_step), as zinf_param_state_save is. */
int zinf_param_save(struct zinf_engine *e, uint32_t param, void *dst, enum zinf_dtype dst_dtype);

/* Training state, for checkpoints that resume bit-identically: elements [first_elem,
 * first_elem + n_elems) of a parameter's fp32 master and Adam moments into three caller
 * buffers of n_elems floats (master required; exp_avg and exp_avg_sq both or neither:
 * NULL reads the master alone), read from wherever they live (NVMe one sub-group at a
 * time, the last one kept for the next call), so that a caller can save a parameter of
 * any size in pieces of bounded memory. Waits for a step's updates. -EINVAL for a range
 * outside the parameter or n_elems 0. */
int zinf_param_state_save(struct zinf_engine *e, uint32_t param, uint64_t first_elem,
			  uint64_t n_elems, float *master, float *exp_avg, float *exp_avg_sq);
/* zinf_module_load with the state zinf_param_state_save gave: master[k], exp_avg[k] and
 * exp_avg_sq[k] (fp32, all required) for the module's k-th parameter; its copy in its
 * dtype is the master rounded, as after a step. Same rules and memory as
 * zinf_module_load. */
int zinf_module_load_state(struct zinf_engine *e, uint32_t module, uint32_t n_srcs,
			   const float *const *master, const float *const *exp_avg,
			   const float *const *exp_avg_sq);

/* Where the optimizer is: the step counter (Adam's bias correction and the schedule's
 * iteration follow from it) and the fp16 loss scaler. */
struct zinf_engine_progress {
	uint64_t steps;	  /* optimizer steps taken (skipped ones not counted) */
	uint64_t skipped; /* steps skipped for fp16 overflow */
	/* fp16 dynamic loss scaling (DeepSpeed's names); as initialised without fp16 */
	double loss_scale;
	uint64_t scaler_iteration;
	int64_t scaler_last_overflow_iter;
	uint32_t scaler_hysteresis_left;
};

/* Read, or set (to resume; after finalize, with no module held), the progress. Set
 * checks the values (steps, skipped and scaler_iteration at most 2^53; a loss scale > 0,
 * at most 1e42 and, dynamic, not below fp16.min_loss_scale; an overflow iteration before
 * the iteration; hysteresis 1 to fp16.hysteresis): -EINVAL with the field named, nothing
 * changed. What a step makes can always be set back: the dynamic scale does not double
 * past 1e42, and zinf_step refuses (ZINF_ESTATE) a step that would take a count past
 * 2^53. Read is refused
 * (ZINF_ESTATE) while the engine is torn (zinf_step): its modules are a mix of two steps.
 * Set on a torn engine whose modules have all been loaded whole since makes it whole
 * again and drops the gradients accumulated since the failed step. out / in NULL:
 * -EINVAL. */
int zinf_engine_progress_get(struct zinf_engine *e, struct zinf_engine_progress *out);
int zinf_engine_progress_set(struct zinf_engine *e, const struct zinf_engine_progress *in);
uint64_t zinf_param_elems(const struct zinf_engine *e, uint32_t param);

/* ---- per micro-batch ------------------------------------------------------------------ */

int zinf_module_fetch(struct zinf_engine *e, uint32_t module);
int zinf_module_wait(struct zinf_engine *e, uint32_t module);
/* Device address of a parameter of a fetched, ready module; NULL otherwise. */
void *zinf_param_data(struct zinf_engine *e, uint32_t param);
/* Give back one fetch of the module; ZINF_ESTATE for a module the model has not fetched
 * (more releases than fetches). */
int zinf_module_release(struct zinf_engine *e, uint32_t module);

/* Zeroed fp32 device buffers for the gradients of the module's parameters. */
int zinf_module_grads(struct zinf_engine *e, uint32_t module);
/* Device address of a parameter's fp32 gradient buffer, between zinf_module_grads and
 * zinf_module_grads_ready; NULL otherwise. */
float *zinf_param_grad(struct zinf_engine *e, uint32_t param);
/* The module's gradients for this micro-batch are final (the model's writes done): copy
 * them off the device, free the device buffers and add them to the gradient
 * accumulators. With zinf.overlap_gradients (the default) the adding runs on a
 * background thread and this returns after the copy; on a GPU with a roomy budget it
 * returns once the copy is queued, and the background thread frees the device buffers
 * after it. A failure there is returned by a later grads_ready or by zinf_engine_sync /
 * zinf_step (once). */
int zinf_module_grads_ready(struct zinf_engine *e, uint32_t module);

/* The factor the model multiplies its loss by before backward (fp16 loss scaling; 1
 * otherwise). */
double zinf_loss_scale(const struct zinf_engine *e);

/* ---- the compute device (src/engine_device.c) ----------------------------------------- */

/* Where the engine's device memory is and where a model computes: host memory with CPU
 * compute (zinf.device host), or a CUDA GPU. */
enum zinf_engine_device {
	ZINF_ENGINE_DEVICE_HOST = 0,
	ZINF_ENGINE_DEVICE_CUDA = 1,
};

enum zinf_engine_device zinf_engine_device_kind(const struct zinf_engine *e);
/* CUDA device ordinal the engine runs on; -1 on the host backend. */
int zinf_engine_device_ordinal(const struct zinf_engine *e);
/* Device memory for a model's own use (activations), after finalize, counted against
 * zinf.device_memory_limit like parameters and gradients (cached modules are evicted
 * to make room). Returns 0, ZINF_EBUDGET (the numbers in zinf_last_error), ZINF_ESTATE
 * before finalize, -EINVAL for 0 bytes, -ENOMEM, a device error, or an error of the
 * background gradient copies it waited for to make room (then reported here, not again
 * by zinf_engine_sync or zinf_step). out is required (-EINVAL). */
int zinf_engine_device_alloc(struct zinf_engine *e, uint64_t bytes, void **out);
/* Whether the device budget can hold at once the n modules listed (at most 8) and, with
 * grads, their gradient buffers, beside what stays on the device (the model's own
 * allocations, persistent modules; cached copies of other modules do not count, a fetch
 * evicts them): the most a model holds at one point of its step, such as a decoder layer
 * in its backward. For a check before the first step. 0, or ZINF_EBUDGET with the
 * numbers in zinf_last_error, ZINF_ESTATE before finalize, -EINVAL (more than 8, one
 * listed twice, or modules NULL with n > 0). */
int zinf_engine_check_room(struct zinf_engine *e, uint32_t n, const uint32_t *modules, bool grads);
/* Free a block zinf_engine_device_alloc gave, once no queued work uses it; NULL is a
 * no-op. Any other pointer (a parameter's or gradient buffer, a block freed already) is
 * refused with -EINVAL and nothing freed. */
int zinf_engine_device_free(struct zinf_engine *e, void *ptr);

/* ---- per optimizer step --------------------------------------------------------------- */

struct zinf_step_result {
	uint64_t step;	   /* optimizer steps taken so far (skipped ones not counted) */
	double lr;	   /* the rate this step used (skipped: the one it would have) */
	double grad_norm;  /* global L2 norm of the averaged, unscaled gradients */
	double loss_scale; /* the loss scale the step's gradients were computed with */
	bool skipped;	   /* fp16 overflow: no update, the scale was lowered */
	double seconds;	   /* wall time of the step */
};

/* Run the optimizer over every parameter with the accumulated gradients, write the new
 * values to their home tiers and clear the accumulators. The sums are divided by
 * gradient_accumulation_steps however many micro-batches were given (as DeepSpeed
 * scales each backward by it): a step after fewer averages as if the missing ones had
 * zero gradients. With zinf.overlap_optimizer
 * (the default) it computes the norm, clipping and fp16 check, and the updates then run
 * in the background (see zinf_engine_sync); their results are the same. Refused with
 * ZINF_ESTATE, nothing changed, while the model holds a module: fetched and not
 * released, or gradients taken and zinf_module_grads_ready not called (the message
 * names the first such module and which); release it or hand the gradients back, then
 * step. It first waits for the optimizer-state writes that loads left going on; one
 * that failed refuses the step (its error, nothing changed), and the step repeated
 * writes that sub-group again. After a failure of the background gradient additions
 * (even one already reported) the accumulated gradients are incomplete: the step is
 * dropped with -EIO and the accumulators cleared. An update that fails before changing
 * anything (NVMe state: no sub-group's new state in place, no module write begun, no
 * gradient sub-group on NVMe consumed) is undone (step count, fp16 scaler) and can be
 * repeated with the same gradients; one that fails after leaves the engine torn:
 * zinf_step, zinf_param_save, zinf_param_state_save and zinf_engine_progress_get are
 * then refused (ZINF_ESTATE, naming the failed step) until every module has been loaded
 * whole (zinf_module_load or zinf_module_load_state) and the progress set, which also
 * drops the gradients accumulated meanwhile (see docs/engine.md, "A step that fails"). */
int zinf_step(struct zinf_engine *e, struct zinf_step_result *out); /* out may be NULL */

/* With zinf.overlap_optimizer (the default) zinf_step computes the norm and returns; the
 * updates run in the background, module by module in forward order, and a fetch waits
 * only for its own module. Wait until the gradients handed over are all added
 * (zinf.overlap_gradients) and, with gradients on NVMe, written (a failed write keeps
 * the sum in host memory, with a warning, and the step writes it again), the last step's
 * updates are all home, and the optimizer state that loads wrote to NVMe is written
 * (those writes go on after the load calls return); returns 0 or the error of a failed
 * addition, update or write (a failed load write is written again by the next step or
 * save). That error is returned by fetches of the modules the update did not write, and
 * once by the first call that waits for the whole update
 * (zinf_engine_sync, zinf_step, zinf_param_load/_range/_ranges/save/state_save,
 * zinf_module_load and _load_state, zinf_engine_progress_get/_set); after that the
 * engine is as after a failed synchronous step (zinf_step: undone, or torn). */
int zinf_engine_sync(struct zinf_engine *e);

/* For a run that ends without saving (Ctrl-C, a scheduler's SIGTERM): once *stop is
 * nonzero (a signal handler may set it, on any thread: a volatile sig_atomic_t, an int on
 * Linux; the engine reads it atomically, on whichever thread updates), an update
 * (zinf_step's, in the background or not) stops before its next module or NVMe
 * sub-group and fails with -ECANCELED ("update stopped part way: asked to stop"), so
 * that zinf_engine_destroy waits for one module, not the rest of the update. An update
 * stopped before it changed anything is undone, and may be repeated once the flag is
 * down again; one stopped after leaves the engine torn (zinf_step): steps and saves are
 * refused until every module is loaded whole again and the progress set. Set (or NULL,
 * the default: off) while no update runs: before the first zinf_step, or after
 * zinf_engine_sync. zinf_engine_stopped: whether an update has ever been stopped so
 * (it stays true). */
void zinf_engine_set_stop(struct zinf_engine *e, const volatile int *stop);
bool zinf_engine_stopped(const struct zinf_engine *e);

/* ---- counters ------------------------------------------------------------------------- */

struct zinf_link_stats {
	uint64_t bytes;
	double seconds; /* busy time summed over transfers */
	uint64_t count;
};

struct zinf_stats {
	uint64_t device_now, device_peak, device_limit; /* bytes */
	/* pinned_limit: the pool's size (an "auto" pinned_memory_limit makes it at finalize,
	 * of what the run can use: 0 before) */
	uint64_t pinned_now, pinned_peak, pinned_limit;
	uint64_t host_now, host_peak; /* parameters homed on the host, optimizer state */
	/* of host_now, the parameters' host homes page-locked with the device
	 * (offload_param.pin_memory; beside pinned_limit, which bounds the staging pool) */
	uint64_t host_pinned;
	uint64_t nvme_now, nvme_peak;
	struct zinf_link_stats nvme_to_pinned, pinned_to_device, device_to_pinned, pinned_to_nvme;
	double wait_seconds; /* compute waited for data (incl. optimizer_wait_seconds) */
	/* of which for the previous step's update of a module (zinf.overlap_optimizer) */
	double optimizer_wait_seconds;
	uint64_t fetches, hits, evictions;
	uint64_t prefetches;	    /* modules fetched ahead along the recorded trace */
	uint64_t prefetch_hits;	    /* model fetches a prefetch had already started */
	uint64_t trace_divergences; /* steps whose fetch order left the trace */
	/* released modules evicted at once: next use beyond stage3_max_reuse_distance
	 * (also counted in evictions) */
	uint64_t reuse_evictions;
	uint64_t steps, skipped_steps;
	double optimizer_seconds; /* updating, in the background or not */
	uint64_t param_elems;
};

/* out NULL: nothing is done. */
void zinf_engine_get_stats(struct zinf_engine *e, struct zinf_stats *out);
/* One JSON object (no newline); a time that is not finite is null. f is flushed. Returns
 * 0, -EIO (a write failed), or -EINVAL for a NULL st or f. */
int zinf_stats_json(const struct zinf_stats *st, FILE *f);

/* ---- planning (no engine) ---------------------------------------------------------------- */

/* What a run would need on each tier, before any hardware is touched: modules and
 * parameters are described as they would be registered (zinf_plan_module_add and
 * zinf_plan_param_add, in the same order), and zinf_plan_estimate applies to them the
 * formulas zinf_engine_finalize and zinf_engine_check_room use, for a config (loaded and
 * resolved) and a machine described by its sizes. Nothing is allocated on a device, and
 * no pinned memory or NVMe path is needed. */
struct zinf_plan;

/* Returns 0, -EINVAL (out NULL) or -ENOMEM. */
int zinf_plan_create(struct zinf_plan **out);
/* NULL is a no-op. */
void zinf_plan_destroy(struct zinf_plan *p);
/* -EINVAL for a NULL p or module. */
int zinf_plan_module_add(struct zinf_plan *p, uint32_t *module);
/* A parameter of module (dtype F32, BF16 or F16, 1 to 4 dims, and the sizes
 * zinf_param_add takes); -EINVAL otherwise. */
int zinf_plan_param_add(struct zinf_plan *p, uint32_t module, enum zinf_dtype dtype, int ndim,
			const uint64_t *shape, unsigned flags);
/* Modules a and b are out on the device together (a tied head and its embedding), as a
 * model checks with zinf_engine_check_room(e, 2, ...). */
int zinf_plan_modules_together(struct zinf_plan *p, uint32_t a, uint32_t b);

struct zinf_plan_machine {
	uint64_t device_bytes; /* the device budget (zinf.device_memory_limit) */
	uint64_t host_bytes;   /* host RAM (0: unknown, not checked) */
	/* the pinned limit; auto: the pool is what the run needs, up to pinned_bytes */
	uint64_t pinned_bytes;
	bool pinned_auto;
	uint64_t nvme_free_bytes; /* free space the NVMe files may take, when known */
	bool nvme_free_known;
	uint64_t nvme_align; /* direct-I/O alignment (0: 4096) */
	/* the model runtime's buffers in device memory (activations on a GPU), and in
	 * host memory (the CPU runtime's, a GPU runtime's host buffers) */
	uint64_t runtime_device_bytes, runtime_host_bytes;
	bool host_device; /* the host backend: the device budget is host memory */
};

enum zinf_plan_tier { ZINF_PLAN_DEVICE, ZINF_PLAN_PINNED, ZINF_PLAN_HOST, ZINF_PLAN_NVME };

struct zinf_plan_need {
	uint64_t param_elems;
	/* device: what stays (parameter homes or persistent modules, the runtime's
	 * buffers), and the most at once (that + the largest module out with its gradient
	 * buffers), as zinf_engine_check_room counts */
	uint64_t device_base, device_bytes;
	uint64_t pinned_need;  /* the pool the run would use */
	uint64_t pinned_bytes; /* the pool it gets (the limit, or the need up to it) */
	/* host: what finalize checks against RAM (optimizer state, homes, accumulators),
	 * and all the run holds there (+ the pool, the runtime, staging, the host
	 * backend's device heap, with the optimizer on NVMe the new 16-bit copies) */
	uint64_t host_checked, host_bytes;
	uint64_t nvme_bytes; /* parameter homes, optimizer state with spares, gradients */
	bool grads_on_nvme;  /* zinf.offload_gradients, auto resolved */
	bool fits;
	enum zinf_plan_tier refused_tier; /* the first tier that does not fit */
	char why[256];			  /* one line, when !fits */
};

/* Fill out for the plan under cfg on mc. Returns 0, or -ENOMEM. */
int zinf_plan_estimate(const struct zinf_plan *p, const struct zinf_config *cfg,
		       const struct zinf_plan_machine *mc, struct zinf_plan_need *out);
/* With the optimizer state on NVMe: the largest sub_group_size, up to cfg's, whose
 * staging fits the pinned pool of mc beside a chunk and a module's gradients; 0 if
 * none. */
uint64_t zinf_plan_largest_sub_group(const struct zinf_plan *p, const struct zinf_config *cfg,
				     const struct zinf_plan_machine *mc);
/* offload_optimizer.ratio with offload_optimizer.device cpu keeps the optimizer state of
 * the first modules in host memory and the rest on the device: the shortest decimal
 * ratio (at most 9 significant digits) that keeps exactly the first k there, for k from
 * 1 to the modules described less one; 0 for any other k, or when none does (an empty
 * module k). */
double zinf_plan_ratio_of(const struct zinf_plan *p, uint32_t k);
/* This machine: the device the config opens (zinf.device; auto: a GPU when one is
 * usable) and its budget (zinf.device_memory_limit, or auto: the GPU's free memory less
 * its reserve, a quarter of RAM on the host backend), opened and closed again. 0, or a
 * negative code (-EINVAL for a NULL cfg, kind or limit) with one line in err (when not
 * NULL). */
int zinf_plan_device_probe(const struct zinf_config *cfg, enum zinf_engine_device *kind,
			   uint64_t *limit, char *err, size_t errlen);
/* Free space on the config's NVMe paths for files split evenly over them: the path with
 * the least, times their number. -ENOENT when the config names none; a path that cannot
 * be examined: its error, with one line in err (when not NULL); -EINVAL for a NULL cfg
 * or free_bytes. */
int zinf_plan_nvme_free(const struct zinf_config *cfg, uint64_t *free_bytes, char *err,
			size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_ENGINE_H */

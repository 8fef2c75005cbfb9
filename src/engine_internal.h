/*
 * Engine internals shared by engine.c (bring-up, registration, per micro-batch calls,
 * the step with host-resident state, counters) and engine_nvme.c (optimizer state on
 * NVMe through the pipelined step, offload_optimizer.device: nvme).
 */
#ifndef ZINF_SRC_ENGINE_INTERNAL_H
#define ZINF_SRC_ENGINE_INTERNAL_H

#include <pthread.h>
#include <time.h>

#include "config.h"
#include "device.h"
#include "loss_scale.h"
#include "lr_schedule.h"
#include "optim_nvme.h"
#include "pinned.h"
#include "store.h"
#include "zinf/engine.h"
#include "zinf/io.h"
#include "zinf/optim.h"

#define ENGINE_MAX_GROUPS 6 /* {decay, no decay} x {f32, bf16, f16} */

/* The part of a parameter that falls in one sub-group of its NVMe optimizer group: the
 * unit a load is assembled in (a parameter may span sub-groups). */
struct epiece {
	uint64_t sub;	    /* sub-group of the group */
	uint64_t sub_off;   /* first element inside the sub-group */
	uint64_t param_off; /* first element inside the parameter */
	uint64_t elems;
	uint64_t gstamp; /* serial of the gradient accumulator it was last added to */
	uint32_t param;	 /* the parameter it belongs to */
};

/* A sub-group being assembled from loads (engine_nvme_load.c): written as soon as every
 * element has been loaded, else at the next flush. Its values are in a staging slot of
 * the group's NVMe optimizer when one is free (pinned memory the step owns anyway), else
 * in an allocation of its own. */
struct esub {
	uint64_t *loaded;      /* (sub-group elems) bits: the elements loaded into it */
	uint64_t loaded_elems; /* distinct elements loaded: the bits set */
	uint64_t bytes;	       /* host bytes held: this, the bits, and own values */
	bool moments;	       /* exp_avg and exp_avg_sq were loaded too (a resume) */
	uint64_t sub;	       /* the sub-group */
	int slot;	       /* the staging slot holding the values; -1: own allocation */
	uint64_t writing;      /* 0, or its write from the slot is in flight (the g->writes-th) */
	/* (sub-group elems each) fp32: the loaded values, zeros elsewhere; with moments,
	 * the loaded exp_avg and exp_avg_sq */
	float *master, *m, *v;
};

/* A group's gradient accumulators with zinf.offload_gradients nvme (engine_grad.c): one
 * NVMe extent per sub-group; in host memory only the sub-groups being accumulated (open)
 * and the step's read-ahead. */
enum egrad_state {
	EGRAD_ZERO = 0, /* no gradient this step: reads as zeros */
	EGRAD_OPEN,	/* being accumulated in acc[s] (from NVMe when it was there) */
	EGRAD_NVME,	/* the step's sum so far is on NVMe */
	EGRAD_WRITING,	/* its sum is in a write in flight (struct egrad_write) */
};

#define EGRAD_WRITES 2 /* gradient sub-group writes in flight at most */

struct egrad_write {
	struct zinf_engine *e;
	struct zinf_io_req req;
	float *buf;	 /* the sum being written (owned until retired) */
	int gi;		 /* its group, -1 when the slot is idle */
	uint64_t s;	 /* its sub-group */
	uint64_t serial; /* submit order: the oldest is retired first */
	double t0;
	bool done; /* set by the completion, under grad_lock */
};

struct egrad_read {
	struct zinf_engine *e;
	struct zinf_io_req req;
	float *buf;  /* (sub_elems rounded up) aligned */
	int64_t sub; /* sub-group read into buf, -1 when none */
	bool busy;   /* a read is in flight */
	double t0;   /* when it was submitted */
	bool done;   /* set by the completion, under grad_lock */
};

struct egroup_grads {
	uint8_t *state;	  /* (n_sub) enum egrad_state */
	float **acc;	  /* (n_sub) open accumulators (aligned), NULL otherwise */
	uint64_t *serial; /* (n_sub) serial of the open accumulator */
	uint64_t *filled; /* (n_sub) distinct elements added since it was opened */
	double *sumsq;	  /* (n_sub) sum of squares when it was last closed */
	uint32_t *extent; /* (n_sub) its NVMe extent */
	uint64_t n_extents;
};

/* Parameters whose optimizer state lives on NVMe as one flat shard. */
struct egroup {
	bool decay;
	enum zinf_dtype dtype;
	uint64_t elems;
	struct zinf_adam_nvme *nvme;
	/* (elems) fp32, host: the members' gradient accumulators with offload_gradients
	 * cpu; NULL with nvme (gr below) */
	float *grad;
	struct egroup_grads gr;
	uint64_t n_sub, sub_elems; /* sub-groups, and elements of a full one */
	struct epiece *pieces;	   /* (n_pieces) in group order, so sub-group by sub-group */
	uint64_t n_pieces;
	uint64_t *sub_piece;   /* (n_sub + 1) sub-group s has pieces [sub_piece[s], [s + 1]) */
	struct esub **pending; /* (n_sub) assembly buffers of partly loaded sub-groups */
	bool flushed;	       /* every sub-group written, nothing pending */
	/* the assembly holding each staging slot of nvme between its calls (NULL: none) */
	struct esub *slot_sub[NVME_MAX_SLOTS];
	uint64_t writes;   /* assembly writes started from their slots (struct esub.writing) */
	int save_slot;	   /* the slot holding sub-group save_sub, read for saving; -1: none */
	uint64_t save_sub; /* (kept until a load or a step changes the state) */
	bool save_moments; /* ... with its moments (else maybe its master alone) */
	uint8_t *sg_done;  /* (n_sub) updated by the step in progress */
};

/* Elements of sub-group s of g (the last one may be short). */
static inline uint64_t engine_sub_len(const struct egroup *g, uint64_t s)
{
	uint64_t first = s * g->sub_elems;

	return g->elems - first < g->sub_elems ? g->elems - first : g->sub_elems;
}

#define GRAD_ALIGN 256u

/* The optimizer step in the background (zinf.overlap_optimizer; engine_opt.c): zinf_step
 * computes the norm and hands the updates to a worker thread, which updates and writes
 * home the modules in forward order; a fetch of a module waits only for that module. */
struct eopt {
	bool on;
	bool started; /* the thread runs */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool job;  /* a step is queued or running */
	bool quit; /* destroy: the thread ends */
	struct zinf_adam_step_info info;
	uint8_t *pending; /* (n_modules) 1: the running step has not written it yet */
	int error;	  /* the first failure of the last step, 0 if none */
	char msg[512];	  /* its one-line message */
	uint64_t wait_ns; /* the model waited for updates (fetch, gradients) */
};

/* Gradients added in the background (zinf.overlap_gradients; engine_gradq.c):
 * zinf_module_grads_ready queues the copy of a module's gradients to pinned memory and
 * the module; a worker thread waits for the copy, frees the device buffer and adds them
 * to the accumulators while backward goes on. */
#define EGQ_DEPTH 2 /* modules waiting to be added, at most */

struct egq_job {
	uint32_t module;
	void *stage;	 /* pinned: the module's gradients, laid out as its device buffer */
	void *grads;	 /* the device buffer being copied into stage (freed by the worker);
			  * NULL: stage holds the gradients already */
	uint64_t t_copy; /* when the copy was queued */
};

struct egradq {
	bool on, started;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct egq_job jobs[EGQ_DEPTH];
	struct zinf_event *copied[EGQ_DEPTH]; /* jobs[i]'s copy is done */
	unsigned head, n;		      /* queued, the worker's at jobs[head] */
	bool quit;
	int error;	   /* the first failure not reported yet */
	char msg[512];	   /* its message */
	char scratch[512]; /* engine_fail on the worker */
	uint64_t wait_ns;  /* the model waited for a free place in the queue */
};

struct eparam {
	uint32_t store_id;
	uint32_t module;
	enum zinf_dtype dtype;
	uint64_t elems;
	bool decay;
	float *master;			/* (elems) fp32, host; NULL when the state is on NVMe */
	float *exp_avg;			/* (elems) fp32, host; NULL when the state is on NVMe */
	float *exp_avg_sq;		/* (elems) fp32, host; NULL when the state is on NVMe */
	float *grad_acc;		/* (elems) fp32, host: sum over the step's micro-batches */
	int group;			/* NVMe state: its optimizer group; -1 otherwise */
	uint64_t group_off;		/* NVMe state: first element in the group */
	uint64_t first_piece, n_pieces; /* NVMe state: its pieces in the group's list */
	uint64_t grad_off;		/* bytes into the module's device gradient buffer */
	void *out; /* NVMe state: its new copy while a step assembles it, or NULL */
};

struct emodule {
	char *name;	  /* for the timeline */
	uint64_t t_ready; /* when the model last got it (start of its compute span) */
	uint32_t store_id;
	uint32_t first_param, n_params;
	uint64_t grad_bytes; /* fp32 gradients of all its params, each GRAD_ALIGN aligned */
	void *grads;	     /* device buffer between zinf_module_grads and _ready */
	uint64_t dstate_off; /* state on the device: its four blocks' offset in dstate */
	uint64_t elems;	     /* of all its params */
	uint32_t fetched;    /* the model's fetches not yet released */
};

/* The most steps, skipped steps and scaler iterations: counts a double holds exactly
 * (a checkpoint keeps them as JSON numbers), far from a wrap of the next step's. */
#define ENGINE_MAX_COUNT (1ull << 53)

struct zinf_engine {
	const struct zinf_config *cfg;
	struct zinf_device *dev;
	struct zinf_pinned *pinned; /* with an "auto" limit, made at finalize */
	uint64_t pinned_cap;	    /* the pool's limit */
	struct zinf_io *io;
	struct zinf_store *store;
	struct zinf_stream *d2h;  /* gradients to pinned memory */
	struct zinf_stream *zero; /* gradient buffers cleared (not behind d2h's copies) */
	/* gradients copied to pinned memory in the background (gq started, a GPU, a roomy
	 * budget: engine.c): the copy runs beside the next module's compute */
	bool grads_async;
	struct zinf_adam *adam_decay, *adam_no_decay;
	struct zinf_loss_scaler scaler;
	bool fp16;
	struct zinf_lr_schedule_opts sched;
	uint64_t gas; /* gradient_accumulation_steps */
	double max_norm;

	struct eparam *params;
	uint32_t n_params, cap_params;
	struct emodule *modules;
	uint32_t n_modules, cap_modules;
	/* blocks zinf_engine_device_alloc gave the model and it has not freed: all that
	 * zinf_engine_device_free takes (the store's scratch list holds gradient buffers
	 * too) */
	void **model_blocks;
	uint32_t n_model_blocks, cap_model_blocks;
	bool finalized;
	bool laid_out; /* finalize got past its checks (a failure after that is final) */

	/* offload_optimizer nvme: parameters grouped by (decay, dtype), one pipelined
	 * NVMe step each (engine_nvme.c); otherwise all state in host memory. */
	bool nvme_state;
	/* Master, moments and accumulators of modules [dev_first, n_modules) in one device
	 * allocation (engine_dstate.c), updated on the device: offload_optimizer none (all),
	 * or cpu with ratio < 1 (engine_state_split, kept up to date at every module and
	 * parameter added). dev_state: some are;
	 * dev_mode: the config may put some there (the background threads stay off). dparts:
	 * the norm's partial sums. */
	bool dev_state, dev_mode;
	uint32_t dev_first;
	void *dstate, *dparts;
	uint64_t dstate_bytes;
	struct zinf_prefetch *prefetch; /* trace-based prefetch (prefetch.c) */
	struct zinf_timeline *timeline; /* zinf.trace: written at destroy (timeline.c) */
	bool trace_written;		/* by zinf_engine_write_trace: not again at destroy */
	struct egroup groups[ENGINE_MAX_GROUPS];
	int n_groups;
	uint64_t nvme_state_bytes;
	struct zinf_link_stats nvme_opt_read, nvme_opt_write; /* under stats_lock */
	pthread_mutex_t stats_lock;			      /* counters several threads add to */
	/* Host bytes of the sub-group buffers loading holds outside the NVMe optimizer's
	 * staging slots (struct esub, its bits, and the values of those no slot was free
	 * for), now and at most: bounded by the sub-groups partly loaded, never a whole
	 * group (tests read the peak). */
	uint64_t load_bytes, load_peak_bytes;
	/* offload_gradients nvme (engine_grad.c): accumulators on NVMe per sub-group */
	bool grads_nvme;
	bool grad_setup;      /* engine_grad_setup ran (lock made) */
	bool grads_lost;      /* an accumulation failed: zinf_step drops this step */
	uint64_t grad_serial; /* last accumulator serial handed out */
	uint64_t grad_host_bytes, grad_host_peak; /* open accumulators and read-ahead */
	uint64_t out_bytes, out_peak;		  /* new copies being assembled (p->out) */
	struct egrad_read grad_rd[2];		  /* the step's read-ahead, alternating */
	struct egrad_write grad_wr[EGRAD_WRITES]; /* backward's writes (model thread) */
	uint64_t grad_wr_serial;
	pthread_mutex_t grad_lock; /* read-ahead completions */
	pthread_cond_t grad_cv;
	void *sub_out; /* (largest sub-group) in its dtype: the step's new copy of one sub-group */

	float *state; /* one host allocation carved into every eparam's buffers */
	uint64_t state_bytes;
	void *staging;	   /* (staging_bytes) the largest module's copies in their dtypes */
			   /* copies (fp32 or 16-bit), host */
	const void **srcs; /* (most params in a module) sources for zinf_store_module_write */
	uint64_t staging_bytes;

	uint64_t steps, skipped;
	/* A step's update that failed after it began changing state (update_touched, set on
	 * the updating thread as it does) leaves the modules a mix of two steps: torn.
	 * Steps and saves are then refused (engine_check_torn) until each module flagged in
	 * torn_mods (n_torn of them; made at finalize) is loaded whole again and the progress
	 * is set. An update that failed untouched changed nothing: the step is undone
	 * (steps, and the fp16 scaler from scaler_before) and can be repeated. */
	bool update_touched, torn;
	/* zinf_engine_set_stop's flag, read before each module or NVMe sub-group an update
	 * starts (engine_update_stop_asked); stopped: an update was cut short by it (set on
	 * the updating thread, read atomically) */
	const volatile int *stop;
	bool stopped;
	uint8_t *torn_mods;
	uint32_t n_torn;
	char torn_msg[512];
	struct zinf_loss_scaler scaler_before;
	double optimizer_seconds; /* updates, in the background or not (under opt.lock) */
	struct eopt opt;
	struct egradq gq;
	char last_error[512];
};

int engine_fail(struct zinf_engine *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Where each module's optimizer state lives: modules [0, split) keep theirs in host
 * memory or on NVMe (offload_optimizer cpu or nvme), [split, n) on the device. none: 0;
 * cpu with offload_optimizer.ratio r below 1 (DeepSpeed's Twin-Flow): the longest prefix
 * of modules, in registration order, whose elements add up to at most r of all; else n.
 * elems(ctx, m): module m's elements. The engine (finalize) and the plan both decide
 * with this. */
static inline uint32_t engine_state_split(const struct zinf_config_values *v, uint32_t n,
					  uint64_t (*elems)(const void *ctx, uint32_t m),
					  const void *ctx)
{
	double r = v->zero.offload_optimizer.ratio;
	uint64_t total = 0, sum = 0;
	uint32_t m;

	if (v->zero.offload_optimizer.device == ZINF_OFFLOAD_NONE)
		return 0;
	if (v->zero.offload_optimizer.device != ZINF_OFFLOAD_CPU || !(r < 1))
		return n;
	for (m = 0; m < n; m++)
		total += elems(ctx, m);
	for (m = 0, sum = 0; m < n; m++) {
		sum += elems(ctx, m);
		if ((double)sum > r * (double)total)
			break;
	}
	return m;
}

/* The Adam shard of p's state (in host memory or on the device, wherever its pointers
 * are), its 16-bit copy written to out (unused for fp32 parameters). */
static inline struct zinf_adam_shard engine_param_shard(const struct eparam *p, void *out)
{
	bool f32 = p->dtype == ZINF_DTYPE_F32;

	return (struct zinf_adam_shard){
		.master = p->master,
		.exp_avg = p->exp_avg,
		.exp_avg_sq = p->exp_avg_sq,
		.grad = p->grad_acc,
		.grad_dtype = ZINF_DTYPE_F32,
		.param_out = f32 ? NULL : out,
		.param_dtype = f32 ? ZINF_DTYPE_NONE : p->dtype,
		.n_elems = p->elems,
	};
}

/* Module m's optimizer state is on the device. */
static inline bool engine_on_dev(const struct zinf_engine *e, uint32_t m)
{
	return m >= e->dev_first;
}

/* engine.c: 0, or -EINVAL / ZINF_ESTATE (message set) for an unknown module or a call
 * before finalize; bytes per element of a stored dtype. */
int engine_check_module(struct zinf_engine *e, uint32_t module);
/* engine.c: 0, or code with "<call> refused: module <id> (<name>): fetched, not
 * released" (or, with grads, "gradients taken, zinf_module_grads_ready not called") for
 * the first of modules [first, first + n) the model still holds: what a call that
 * rewrites their parameters (or consumes the gradients) must not run under. */
int engine_check_not_held(struct zinf_engine *e, const char *call, uint32_t first, uint32_t n,
			  bool grads, int code);
uint64_t engine_dtype_bytes(enum zinf_dtype t);

static inline double engine_now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* engine.c: run the updates of one step module by module in forward order (host state:
 * module by module; NVMe state: engine_nvme_step), calling engine_module_updated after
 * each module's new values are home. Runs on the worker with opt.on. */
int engine_update(struct zinf_engine *e, const struct zinf_adam_step_info *info);
/* Module m's new values are home: clear its accumulators and let fetches of it go on. */
void engine_module_updated(struct zinf_engine *e, uint32_t m);
/* engine_step.c: ZINF_ESTATE naming what and why while the engine is torn, else 0.
 * Call after engine_opt_drain (the update that tears it may be running). */
int engine_check_torn(struct zinf_engine *e, const char *what);
/* On the updating thread, before a module or sub-group: -ECANCELED (message set,
 * e->stopped) when zinf_engine_set_stop's flag is up, else 0. */
int engine_update_stop_asked(struct zinf_engine *e);
/* A whole-module load of m succeeded: it is no longer torn. */
void engine_module_reloaded(struct zinf_engine *e, uint32_t m);

/* The buffer engine_fail writes to on the calling thread (the model's last_error, or a
 * background worker's own). */
char *engine_msg(struct zinf_engine *e);

/* Add module m's gradients (stage: its device buffer's layout, in host memory) to the
 * accumulators. A failure on NVMe gradients marks the step's gradients lost. */
int engine_grads_add(struct zinf_engine *e, uint32_t m, const void *stage);
/* dst[i] += src[i] for n floats, spread over the optimizer's threads (each element is
 * added once, by one thread: the bits do not depend on how many). */
void engine_add_f32(struct zinf_engine *e, float *dst, const float *src, uint64_t n);
/* zinf_grad_sumsq of n floats on the same threads (the same bits on any number). */
double engine_sumsq_f32(struct zinf_engine *e, const float *src, uint64_t n);

/* engine_gradq.c: the gradient worker. start at finalize (gq.on); submit queues the copy
 * of module m's gradients (grads, its device buffer, complete) into a pinned stage and
 * hands both over (the worker frees them; grads NULL: stage holds them already), and may
 * wait for room; drain waits until every queued module is added. Both return a failure
 * of the worker not reported yet (once); a failed submit has freed both. */
int engine_gq_start(struct zinf_engine *e);
int engine_gq_submit(struct zinf_engine *e, uint32_t m, void *stage, void *grads);
int engine_gq_drain(struct zinf_engine *e);
void engine_gq_stop(struct zinf_engine *e);
bool engine_gq_on_worker(const struct zinf_engine *e);

/* engine_opt.c: the worker. start at finalize (opt.on); submit a step's updates; wait
 * for module m (fetch, gradients) or for the whole step (step, load, save); stop at
 * destroy. The waits return 0 or the step's error (message in e->last_error). */
int engine_opt_start(struct zinf_engine *e);
void engine_opt_submit(struct zinf_engine *e, const struct zinf_adam_step_info *info);
int engine_opt_wait_module(struct zinf_engine *e, uint32_t m);
int engine_opt_drain(struct zinf_engine *e);
bool engine_opt_module_pending(struct zinf_engine *e, uint32_t m);
void engine_opt_stop(struct zinf_engine *e);
/* engine_fail on the worker writes opt.msg instead of last_error. */
bool engine_opt_on_worker(const struct zinf_engine *e);

/* Convert n elements between the dtypes zinf stores (f32, bf16, f16); bf16 <-> f16 goes
 * through fp32, as a load into the fp32 master and a copy from it would. */
void engine_convert(void *dst, enum zinf_dtype dt, const void *src, enum zinf_dtype st, uint64_t n);

#define ENGINE_NORM_BATCH 64u /* accumulators per wait in the step's norm */
/* The norm's partial sums for n parameters' accumulators on the device (a batch's worth,
 * at least one sum's). */
static inline uint64_t engine_dparts_bytes(uint32_t n)
{
	uint32_t slots = n < 1 ? 1 : n < ENGINE_NORM_BATCH ? n : ENGINE_NORM_BATCH;

	return (uint64_t)slots * ZINF_DEVICE_SUMSQ_BYTES;
}

/* engine_dstate.c, the optimizer state of modules [dev_first, n) on the device. bytes:
 * what alloc takes (4 x each of their gradient buffers, and engine_dparts_bytes of their
 * parameter count), known at finalize once dev_first is; alloc points their eparams'
 * state there (before anything else is laid out: ZINF_EBUDGET with the numbers when it
 * does not fit). grads_add: add m's gradient buffer to its accumulators; sumsq: out[i] =
 * the sum of squares of ps[i]'s accumulator, i < count <= ENGINE_NORM_BATCH, one wait;
 * clear: zero them all; out_alloc: device memory for the step's 16-bit copies of the
 * largest module (NULL when none is 16-bit; free it with zinf_store_free_scratch);
 * step_module: update m there, write its new copies home through staging, clear its
 * accumulators; load/save: as engine_nvme_load/_save, through host memory. */
uint64_t engine_dstate_bytes(const struct zinf_engine *e);
int engine_dstate_alloc(struct zinf_engine *e);
void engine_dstate_free(struct zinf_engine *e);
int engine_dstate_grads_add(struct zinf_engine *e, struct emodule *m);
int engine_dstate_sumsq(struct zinf_engine *e, const struct eparam *const *ps, uint32_t count,
			double *out);
int engine_dstate_clear(struct zinf_engine *e);
int engine_dstate_out_alloc(struct zinf_engine *e, void **out);
int engine_dstate_step_module(struct zinf_engine *e, struct emodule *m, void *out,
			      const struct zinf_adam_step_info *info);
int engine_dstate_load(struct zinf_engine *e, struct eparam *p, uint64_t first, uint64_t n,
		       const void *src, enum zinf_dtype src_dtype, const float *m, const float *v);
int engine_dstate_save(struct zinf_engine *e, const struct eparam *p, uint64_t first, uint64_t n,
		       float *master, float *m, float *v);

/* engine_nvme.c: set up groups and handles at finalize; the step. engine_nvme_load.c:
 * load and save. */
int engine_nvme_finalize(struct zinf_engine *e);
/* Load src (n elements in src_dtype) as elements [first, first + n) of p's fp32 master,
 * with moments m and v (fp32, n elements; NULL both: zeros), sub-group by sub-group: a
 * sub-group is written to NVMe once every element of it has been loaded. */
int engine_nvme_load(struct zinf_engine *e, struct eparam *p, uint64_t first, uint64_t n,
		     const void *src, enum zinf_dtype src_dtype, const float *m, const float *v);
/* Elements [first, first + n) of p's fp32 master, and with m and v not NULL its moments,
 * into caller buffers of n elements (master may be NULL too), reading one sub-group at a
 * time. */
int engine_nvme_save(struct zinf_engine *e, struct eparam *p, uint64_t first, uint64_t n,
		     float *master, float *m, float *v);
int engine_nvme_step(struct zinf_engine *e, const struct zinf_adam_step_info *info);
void engine_nvme_destroy(struct zinf_engine *e);
/* engine_nvme_load.c: everything loaded reaches NVMe (before a step or a save); the
 * sub-group read for saving is dropped (stale after a step); assembly buffers freed. */
int engine_nvme_flush(struct zinf_engine *e, struct egroup *g);
/* Wait for the writes of loaded sub-groups still in flight (zinf_engine_sync): 0, or the
 * first failure (the sub-group stays loaded, for the flush to write again). */
int engine_nvme_loads_wait(struct zinf_engine *e);
void engine_nvme_save_drop(struct egroup *g);
void engine_nvme_loads_free(struct zinf_engine *e, struct egroup *g);

/* engine_grad.c: the gradient accumulators of NVMe optimizer state. setup at finalize
 * (after the groups and their pieces): zinf.offload_gradients decides host memory (one
 * fp32 buffer per group, p->grad_acc) or NVMe (per sub-group, grads_nvme). */
int engine_grad_setup(struct zinf_engine *e);
/* At finalize, before anything is laid out: the bytes of host memory the accumulators
 * will take, as engine_grad_setup will decide from zinf.offload_gradients and
 * sub_group_size (0 when they go to NVMe). */
uint64_t engine_grad_host_bytes(const struct zinf_engine *e);
/* At finalize, before anything is laid out: the drive bytes of the accumulators' NVMe
 * extents (0 when they stay in host memory). */
uint64_t engine_grad_drive_bytes(const struct zinf_engine *e);
/* The elements of each group engine_nvme_finalize will make, at index
 * 3 * decay + (dtype - ZINF_DTYPE_F32). */
void engine_group_elems(const struct zinf_engine *e, uint64_t elems[ENGINE_MAX_GROUPS]);
/* At finalize, before anything is laid out: the drive bytes of the optimizer state's
 * extents, every group's sub-groups and spares. */
uint64_t engine_nvme_state_drive_bytes(const struct zinf_engine *e);
/* At finalize, before anything is laid out: the bytes of the optimizer state's largest
 * extent (an upper bound of the gradients' too). */
uint64_t engine_nvme_largest_extent(const struct zinf_engine *e);
/* At finalize, before anything is laid out: the pinned bytes of the optimizer's staging
 * buffers at zero_optimization.sub_group_size. */
uint64_t engine_nvme_staging_bytes(const struct zinf_engine *e);
/* ---- finalize's budgets (engine_budget.c) ---- */

/* Every drive byte finalize will lay out (parameter homes, optimizer state, gradients),
 * checked against the free space before any is. */
uint64_t engine_nvme_drive_bytes(struct zinf_engine *e);
/* What finalize lays out on NVMe must fit the drives, checked before any of it is (the
 * files are preallocated one unit at a time, so a run too big would fill the drives
 * before it failed). 0 or ZINF_EBUDGET with the message. */
int engine_check_nvme_space(struct zinf_engine *e);
/* What lives in host memory whatever the budgets say (parameters homed there, with
 * offload_param cpu; the optimizer state, 16 bytes a parameter, with offload_optimizer
 * cpu; with it on NVMe, the fp32 gradient accumulators unless they go there too) must
 * fit the host: a model far larger is refused here, not by the OOM killer. */
int engine_check_host_memory(struct zinf_engine *e);
/* What a pool sized by "auto" holds: the NVMe optimizer's staging buffers, every chunk
 * of parameters on their way from NVMe to the device at once (no more than the device
 * holds), two modules' gradients (the background copy's two stages; none with the
 * optimizer state on the device, where they stay) and a chunk for a
 * load or a save, with an eighth more and 4 MiB for the pool's fragmentation. More
 * would stay unused: the pool stages, it does not cache. */
uint64_t engine_pinned_need(struct zinf_engine *e);
/* Pinned memory a step can wait for must fit the pool, or the wait would never end: a
 * module's gradients come back through one buffer (the store checks its chunks). */
int engine_check_pinned(struct zinf_engine *e);
/* Gradients copied in the background (engine_gradq.c, started) on a roomy GPU budget. */
bool engine_grads_async_fits(struct zinf_engine *e);
/* With grads_nvme: add p's gradient g (p->elems floats) to its sub-groups' sums; a
 * sub-group is written to NVMe as soon as all of it has been added since it was opened. */
int engine_grad_add(struct zinf_engine *e, struct eparam *p, const float *g);
/* The sum of squares of every accumulator (closes the open sub-groups first). */
int engine_grad_sumsq(struct zinf_engine *e, double *sumsq);
/* The model's thread, the gradient queue drained: wait for the gradient writes under way;
 * one that failed leaves its sum open in host memory, with a warning, for the step to
 * write again (zinf_last_error is left as it was). */
void engine_grad_writes_wait(struct zinf_engine *e);
/* Forget every gradient of this step (a skipped step). */
void engine_grad_clear(struct zinf_engine *e);
/* The step (its thread): sub-group s of group gi's gradient, read ahead from NVMe when it
 * is there; then, once it is updated, consumed (the sub-group starts the next step at
 * zero). */
int engine_grad_for_step(struct zinf_engine *e, int gi, uint64_t s, const float **grad);
void engine_grad_consumed(struct zinf_engine *e, int gi, uint64_t s);
/* Wait for the read-ahead (end of a group's step, or a failed one). */
void engine_grad_step_end(struct zinf_engine *e);
void engine_grad_destroy(struct zinf_engine *e);

#endif /* ZINF_SRC_ENGINE_INTERNAL_H */

/*
 * zinf train: fine-tune (or train from a seeded random init) a Llama-family model through
 * the engine, one rank, on the host device backend (CPU runtime) or CUDA (cuBLAS runtime,
 * chosen by the engine's device). The trainer behind `zinf train`,
 * usable from C: fill a struct zinf_train_opts and call zinf_train_run().
 *
 * Setup checks every input before anything is trained or written (the model, the
 * config, the data, the sequence length against the model) and fails with one line
 * naming what and where; an option is named by its zinf train flag (seq_len as
 * --seq-len, config_path as --config, config_sets as --set). The loop per optimizer
 * step runs gradient_accumulation_steps micro-batches of train_micro_batch_size_per_gpu
 * rows (both from the config), module by
 * module through the engine (fetch, wait, compute, release; backward in reverse with
 * gradients accumulated into the engine's buffers), then zinf_step(). docs/train.md
 * describes every option, the log-json fields and the demo.
 *
 * The library prints nothing to stdout: progress goes to the caller's on_step callback,
 * per-step records to log_json_path. Threading: one call runs on the calling thread
 * (the engine and the model use their own threads internally).
 *
 * This header is implemented by the zinf_model library (link it beside zinf).
 */
#ifndef ZINF_TRAIN_H
#define ZINF_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zinf/dtype.h"
#include "zinf/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one optimizer step did: the fields of one log-json line. */
struct zinf_train_step {
	uint64_t step;	/* 1-based */
	uint64_t steps; /* of the run */
	double loss;	/* mean over the step's tokens, before the step's update */
	double lr;	/* the rate the step used (skipped: the one it would have) */
	double grad_norm;
	uint64_t tokens; /* tokens of this step (B x T x accumulation steps) */
	double step_seconds, fwd_bwd_seconds, optimizer_seconds, wait_seconds;
	double tokens_per_second;
	double elapsed_seconds;			       /* since the first step started */
	uint64_t peak_device_bytes, peak_pinned_bytes; /* peaks of the run so far */
	uint64_t device_limit_bytes, pinned_limit_bytes;
	/* bytes moved during this step per link */
	uint64_t nvme_read_bytes, nvme_write_bytes, h2d_bytes, d2h_bytes;
	bool skipped;	  /* fp16 overflow: no update */
	bool has_eval;	  /* eval_loss was computed after this step */
	double eval_loss; /* mean loss on the eval data */
	/* on the run's first step (1, or the one after a --resume's step) with eval data:
	 * the evaluation before it (the callback also gets it as a step-0 call) */
	bool has_eval_before;
	double eval_loss_before;
	bool saved;	       /* save_dir/checkpoint-<step> was written after this step */
	uint64_t resumed_from; /* resume_dir's step (0 without a resume): steps done before */
	/* the config's steps_per_print: how often a printer shows a step (it is called
	 * after every one) */
	uint64_t steps_per_print;
};

/* Called after each step (and, with step 0, after the evaluation before the run's first
 * step, step resumed_from + 1). Runs on the calling thread of zinf_train_run. */
typedef void (*zinf_train_step_fn)(const struct zinf_train_step *s, void *user);

struct zinf_train_opts {
	/* Model: exactly one of model_dir (a Hugging Face checkpoint directory: config.json
	 * + model.safetensors or model.safetensors.index.json and its shards), init_config
	 * (a Hugging Face-style config.json: seeded random init) and resume_dir (a
	 * checkpoint saved with save_state: the run goes on from its step, bit-identically
	 * to a run never stopped, with the same config, data, seq_len, seed, shuffle and
	 * steps; every file is checked before step 1). */
	const char *model_dir;
	const char *init_config;
	const char *resume_dir;
	/* DeepSpeed-style config (required), and "KEY=VALUE" overrides applied after it. */
	const char *config_path;
	const char *const *config_sets;
	int n_config_sets;
	/* Batch sizes as the Hugging Face Trainer gives them (0: not given): they fill the
	 * config's train_micro_batch_size_per_gpu and gradient_accumulation_steps where
	 * those are "auto" or absent, and must equal them where they are set. */
	uint64_t micro_batch_size;
	uint64_t gradient_accumulation_steps;
	/* Data: an llm.c token file, or bytes of any file with data_text; or a glob pattern
	 * naming shards of either, read in path order as one stream (docs/formats.md). */
	const char *data_path;
	bool data_text;
	uint64_t seq_len; /* T, required */
	uint64_t steps;	  /* optimizer steps, required */
	uint64_t seed;	  /* random init and shuffling; default 1337 */
	bool shuffle;	  /* seeded window order (docs/formats.md) */
	bool activation_checkpointing;
	/* Evaluation: eval_batches micro-batches of eval_data_path (same format as the
	 * data, a file or a pattern), in order from its start, before step 1 and after every eval_every steps
	 * and the last (eval_every 0: before step 1 and after the last only). */
	const char *eval_data_path;
	uint64_t eval_every;
	uint64_t eval_batches; /* default 4 */
	/* Save at the end (NULL: do not): config.json + safetensors in save_dtype
	 * (ZINF_DTYPE_NONE: the checkpoint's dtype, or fp32 for init_config), sharded in
	 * files of at most save_max_shard_bytes (default 5e9). */
	const char *save_dir;
	enum zinf_dtype save_dtype;
	uint64_t save_max_shard_bytes;
	/* Also save after every save_every steps before the last (0: only at the end), the
	 * same way, into save_dir/checkpoint-<step> (written under a .partial name and
	 * renamed when complete; such a directory that already exists is refused before
	 * step 1). */
	uint64_t save_every;
	/* With save_every: after each snapshot keep the newest save_total_limit
	 * save_dir/checkpoint-<step> directories and remove older ones (those holding only
	 * files a save writes, other than the one the run loaded from: model_dir, the
	 * directory of init_config, resume_dir unless save_state); 0 keeps all. */
	uint64_t save_total_limit;
	/* Every save also writes the training state (optimizer.safetensors: fp32 masters
	 * and Adam moments; zinf_state.json: the step, the data position, checksums), so
	 * that resume_dir can continue from it (docs/formats.md). */
	bool save_state;
	/* One JSON object per line per step (NULL: none). */
	const char *log_json_path;
	zinf_train_step_fn on_step;
	void *on_step_user;
	/* When non-NULL: once *stop is nonzero (a signal handler may set it, on any thread:
	 * a volatile sig_atomic_t, an int on Linux) the run stops at the next module its
	 * load would load or its forward or backward would fetch (a step in progress there
	 * is dropped, nothing of it applied; an evaluation after a step ends after that
	 * step's report), or before its next step when set between steps; an optimizer
	 * update under way is cut short (zinf_engine_set_stop), that of a step already
	 * reported included; a --save-every snapshot under way stops before its next piece
	 * and is dropped (its .partial removed; the step it follows is reported, earlier
	 * snapshots stay); the final save finishes first. Then, without the final save, it tears down as at the end (the NVMe run
	 * directory removed) and returns -EINTR with result->stopped set; nothing is saved
	 * after a stop. docs/train.md lists the messages. */
	const volatile int *stop;
};

void zinf_train_opts_init(struct zinf_train_opts *opts);

struct zinf_train_result {
	uint64_t steps;		/* steps run (by this call: after a resume, from its step) */
	double first_loss;	/* loss of the run's first step */
	double last_loss;	/* loss of the last step */
	double first_eval_loss; /* before step 1 (NaN without eval data) */
	double last_eval_loss;	/* after the last step (NaN without eval data) */
	uint64_t tokens;	/* trained on */
	double seconds;		/* of the whole run */
	uint64_t param_elems;
	uint64_t peak_device_bytes, peak_pinned_bytes, device_limit_bytes, pinned_limit_bytes;
	uint64_t host_pinned_bytes; /* page-locked host homes (offload_param.pin_memory) */
	/* by the run before the final save: the load's writes, the steps, evaluations and
	 * --save-every snapshots */
	uint64_t nvme_read_bytes, nvme_write_bytes;
	/* The final save (save_dir): its time and what it read from NVMe (the masters, 4
	 * bytes a parameter, and with save_state the moments too, 12 in all, when the
	 * optimizer state is on NVMe). */
	double save_seconds;
	uint64_t save_nvme_read_bytes;
	/* On failure: true when the input was at fault (a missing or malformed file, an
	 * invalid option or config; the CLI exits 2), false for a failure while running. */
	bool bad_input;
	bool stopped; /* opts.stop asked, and the run stopped (-EINTR) */
};

/* Run the training opts describes. Returns 0, or a negative code with one line in err
 * (required: errlen >= 1 bytes, always NUL-terminated) and result->bad_input set when the input was at
 * fault. The final save is written to save_dir only when the whole run succeeded (the
 * save_every checkpoints before it as they come). result may be NULL. */
int zinf_train_run(const struct zinf_train_opts *opts, struct zinf_train_result *result, char *err,
		   size_t errlen);

/* ---- zinf plan ---------------------------------------------------------------------------- */

/* Where a model's training state fits: the inputs of zinf_train_plan. */
struct zinf_plan_opts {
	const char *model_dir;		/* a checkpoint directory (its config.json is read), or */
	const char *init_config;	/* a config.json */
	const char *config_path;	/* DeepSpeed-style config to start from (NULL: defaults) */
	const char *const *config_sets; /* "KEY=VALUE" overrides applied after it */
	int n_config_sets;
	uint64_t micro_batch_size; /* 0: the config's (1 when it is "auto") */
	uint64_t seq_len;	   /* T, required */
	bool activation_checkpointing;
	/* The machine (0: this one): the device budget (else the config's
	 * zinf.device_memory_limit, else the device's own: a GPU's free memory less its
	 * reserve), host RAM, NVMe free space (else measured on the NVMe path). */
	uint64_t device_bytes, host_bytes, nvme_free_bytes;
	const char *nvme_path; /* for the placements on NVMe (NULL: the config's) */
};

void zinf_plan_opts_init(struct zinf_plan_opts *o);

#define ZINF_PLAN_ROWS 7

/* One placement: the parameters' home (none = the device, cpu, nvme) and the optimizer
 * state's (none = the device, cpu, nvme), the config keys it sets, and the estimate. */
struct zinf_plan_row {
	const char *param, *optimizer;
	int stage; /* zero_optimization.stage written (at least 1; 3 with offload_param) */
	uint64_t sub_group_size; /* the config's, or with the optimizer on NVMe the largest
				    that fits the pinned pool when the config's does not */
	/* parameters on NVMe: offload_param.max_in_cpu, the config's when it sets one, else
	 * the elements that half the host memory the row leaves free holds (rounded down to
	 * whole millions above a million, or every parameter; 0 when that is none) */
	uint64_t max_in_cpu;
	/* the optimizer state in host memory: offload_optimizer.ratio, the config's when it
	 * sets one, else with the parameters on the device the smallest that fits (the most
	 * state on the device; zinf_plan_ratio_of), 1 when none smaller does; 0 on other
	 * rows */
	double ratio;
	bool tried; /* false: not estimated (why says why) */
	struct zinf_plan_need need;
	char why[256]; /* one line when it does not fit or was not tried */
};

struct zinf_plan_result {
	struct zinf_plan_row rows[ZINF_PLAN_ROWS]; /* fastest first */
	int chosen;				   /* the first row that fits; -1: none */
	uint64_t param_elems, B, T;
	int layers, stage;
	enum zinf_dtype dtype;
	char dtype_name[8];
	enum zinf_engine_device device_kind;
	uint64_t device_bytes, host_bytes, pinned_bytes; /* pinned: the limit (a cap if auto) */
	bool pinned_auto;
	uint64_t nvme_free_bytes;
	bool nvme_free_known, has_nvme;
	char nvme_path[512]; /* set in the rows on NVMe ("" : the config's zinf.nvme_paths) */
	/* has_nvme but not nvme_free_known: why the free space could not be measured (a
	 * path missing on this machine), one line; "" otherwise */
	char nvme_free_why[256];
	uint64_t runtime_device_bytes, runtime_host_bytes; /* the model runtime's buffers */
	/* the config's offload_optimizer.ratio when it sets one, else 0: a written config of
	 * a row whose optimizer state is not in host memory sets 1 instead (below 1 the key
	 * would have no effect there, and the run would warn so) */
	double user_ratio;
	/* the config leaves the micro-batch size to the Trainer ("auto" or unset) and no
	 * --micro-batch-size is given: B is 1, and a written config sets it */
	bool B_assumed;
	bool bad_input; /* on failure: the input was at fault */
};

/* Estimate every placement (nothing is allocated but a probe of the device when its
 * budget is not given). Returns 0 (r->chosen may be -1: nothing fits), or a negative code
 * with one line in err. */
int zinf_train_plan(const struct zinf_plan_opts *o, struct zinf_plan_result *r, char *err,
		    size_t errlen);
/* Write o's config (config_path's JSON, or {}), with o's overrides and row's placement
 * set, to out_path (refused if it exists, unless force; written whole or not at all). */
int zinf_plan_write_config(const struct zinf_plan_opts *o, const struct zinf_plan_result *r,
			   int row, const char *out_path, bool force, char *err, size_t errlen);

/* The OpenBLAS kernel set ("core": "Haswell", "SkylakeX", ...) the CPU model's matrix
 * products run on. OpenBLAS picks it from the CPU model when it loads, or takes it from
 * OPENBLAS_CORETYPE. */
const char *zinf_blas_core(void);
/* A faster core than zinf_blas_core() that this CPU runs, when OpenBLAS did not recognise
 * the CPU and fell back to generic (pre-AVX2) kernels and OPENBLAS_CORETYPE is not set;
 * NULL otherwise. It takes effect only as OPENBLAS_CORETYPE in the environment of a
 * process that has not loaded OpenBLAS yet: the zinf CLI re-executes itself with it. */
const char *zinf_blas_core_suggested(void);
/* The threads the CPU model's parallel loops (OpenMP) and matrix products (OpenBLAS)
 * run on. Both libraries count the CPUs of the affinity mask as they load, not a control
 * group's CPU quota (zinf_host_cpus): under a lower quota the zinf CLI re-executes itself
 * with OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set to the quota's CPUs, where the user
 * set neither. Either pointer may be NULL. */
void zinf_cpu_model_threads(int *openmp, int *openblas);
/* Under an address-space limit (ulimit -v, RLIMIT_AS): whether it leaves room to map
 * what OpenBLAS maps, a 128 MiB buffer a thread, and two more for the rest (probed by a
 * reservation, nothing committed). OpenBLAS spins for ever when that mapping fails,
 * so a run or a program is better refused first. 0, or -ENOMEM with one line in err
 * (NULL: none). zinf_train_run checks it; the zinf CLI before any command. */
int zinf_cpu_model_check_address_space(char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_TRAIN_H */

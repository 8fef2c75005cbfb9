/*
 * The trainer's internals (zinf train): the model as the engine holds it, the
 * micro-batch pass through the engine, and the per-step log. Shared by train.c,
 * train_loop.c, train_model.c, train_save.c, train_pass.c and train_log.c.
 */
#ifndef ZINF_MODEL_TRAIN_INTERNAL_H
#define ZINF_MODEL_TRAIN_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hf_config.h"
#include "llama.h"
#include "llama_backend.h"
#include "zinf/config.h"
#include "zinf/engine.h"
#include "zinf/train.h"

struct zinf_token_file;

#define TRAIN_NO_PARAM UINT32_MAX

/* ---- the model in the engine (train_model.c) --------------------------------------------- */

/* Whether a stop flag (zinf_train_opts.stop; NULL: none) is up. A signal handler may set
 * it on any thread: read atomically. */
static inline bool train_stop_up(const volatile int *stop)
{
	return stop && __atomic_load_n(stop, __ATOMIC_RELAXED);
}

struct train_model {
	struct zinf_hf_config hf;     /* config.json as read (kept for saving) */
	struct zinf_llama_config lc;  /* the same for the runtime */
	int L;			      /* decoder layers */
	enum zinf_dtype param_dtype;  /* of every engine parameter */
	enum zinf_dtype source_dtype; /* checkpoint's dtype (F32 for a random init) */
	uint32_t *module;	      /* [L + 2] engine module ids: embed, layers, head */
	/* [L + 2][slot] engine parameter ids; TRAIN_NO_PARAM when the slot is absent or is
	 * the tied LM head (whose tensor is the embedding's) */
	uint32_t (*param)[ZINF_LLAMA_MAX_PARAMS];
	uint64_t param_elems;
	uint64_t largest_tensor_elems;
	/* zinf_train_opts.stop: once it is up, a load stops before its next module and a pass
	 * before its next fetch (-EINTR: train_load_module, train_pass.c) */
	const volatile int *stop;
	/* the same flag while a --save-every snapshot is written: once up, the save stops
	 * before its next piece (-EINTR, train_save_stop_asked); NULL: saves run to their
	 * end (the final save) */
	const volatile int *save_stop;
};

/* Whether module mod's parameter slot s holds an engine parameter, and its name, shape
 * and size in info when it does (train_model.c). */
bool train_model_slot(const struct train_model *tm, int mod, int s,
		      struct zinf_llama_param_info *info);
/* Module kind of engine-order index mod (0 embed, 1..L layers, L + 1 head). */
enum zinf_llama_module_kind train_module_kind(const struct train_model *tm, int mod);

/* Read config.json (model_dir's or init_config) into tm and convert it. Returns 0 or a
 * negative code with one line in err. */
int train_model_config(struct train_model *tm, const struct zinf_train_opts *o, char *err,
		       size_t errlen);
/* ---- loading a chunk at a time (train_load.c) ------------------------------------------- */

/* Piece [first, first + n) of module slot s's tensor into src (in the slot's source
 * dtype), and with moments into m and v (fp32). Returns 0 or a negative code with one
 * line in err. */
typedef int (*train_fill_fn)(void *user, int s, uint64_t first, uint64_t n, void *src, float *m,
			     float *v, char *err, size_t errlen);
/* The pieces of one store chunk on their way to the engine; reused across modules. */
struct train_load_batch {
	struct zinf_param_range *r;
	uint64_t *off; /* (2 per range) its source's and moments' places in buf and mom */
	uint32_t n, cap;
	bool moments;
	char *buf;
	uint64_t used, have;
	float *mom; /* exp_avg then exp_avg_sq of each range */
	uint64_t mom_used, mom_have;
};
/* Module mod's parameters into the engine, in pieces that end on the parameter store's
 * chunks, the pieces of one chunk together (zinf_param_load_ranges): each chunk written
 * once, at most one chunk's elements held. src_dtype[s]: slot s's source dtype; with
 * moments the fill gives them too (a resume), else they are zero. */
int train_load_module(struct train_model *tm, struct zinf_engine *e, int mod,
		      const enum zinf_dtype *src_dtype, bool moments, train_fill_fn fill,
		      void *user, struct train_load_batch *b, char *err, size_t errlen);
void train_load_batch_free(struct train_load_batch *b);
/* At most this many elements a piece (UINT64_MAX: the chunks alone cut them). Tests set
 * it small to load in many pieces. */
extern uint64_t train_load_piece_elems;
/* Ranges handed to the engine so far (tests count them). */
extern uint64_t train_load_ranges;
/* Register modules and parameters (dtype tm->param_dtype) with e and finalize. */
/* Where train_model_describe sends the modules and parameters: an engine's registration,
 * or a plan's (train_plan.c). */
struct train_sink {
	int (*module_add)(void *user, const char *name, uint32_t *module);
	int (*param_add)(void *user, uint32_t module, const char *name, enum zinf_dtype dtype,
			 int ndim, const uint64_t *shape, uint32_t *param);
	const char *(*last_error)(void *user);
	void *user;
};
/* One module per unit of fetch (embedding, each layer, norm + head), one parameter per
 * tensor (a tied head has none of its own), in the model's order, into sink. */
int train_model_describe(struct train_model *tm, const struct train_sink *sink, char *err,
			 size_t errlen);
int train_model_register(struct train_model *tm, struct zinf_engine *e, char *err, size_t errlen);
/* Load the parameters: from the checkpoint in o->model_dir, module by module (zinf_module_load), or a seeded
 * random init (normal(0, initializer_range) matrices and embeddings, ones for norms,
 * zeros for biases). */
int train_model_load(struct train_model *tm, struct zinf_engine *e, const struct zinf_train_opts *o,
		     char *err, size_t errlen);
/* A batch-size flag's value want (train's, plan's --micro-batch-size) for key, which the
 * config or a --set already sets otherwise: ZINF_ECONFIG with one line in err naming
 * which; else 0. */
int train_batch_flag_check(const struct zinf_config *cfg, const char *flag, uint64_t want,
			   const char *key, char *err, size_t errlen);
/* A list of n "KEY=VALUE" overrides (zinf_train_opts and zinf_plan_opts): 0, or -EINVAL
 * with a line in err for a count below 0 or a NULL list of some. */
static inline int train_check_config_sets(const char *const *sets, int n, char *err, size_t errlen)
{
	if (n >= 0 && (n == 0 || sets))
		return 0;
	snprintf(err, errlen, "--set: %d overrides in %s (expected a count >= 0 and a list)", n,
		 sets ? "a list" : "a NULL list");
	return -EINVAL;
}

/* The longest row a run takes (activations and attention scratch grow with it). */
#define TRAIN_MAX_SEQ_LEN (1u << 20)
/* --seq-len within 1 .. the positions the model reaches (zinf_hf_config_max_positions),
 * and at most TRAIN_MAX_SEQ_LEN: 0, or ZINF_ECONFIG with a one-line message naming the
 * limit. */
int train_model_check_seq_len(const struct zinf_hf_config *hf, uint64_t seq_len, char *err,
			      size_t errlen);
/* Check a checkpoint directory against tm's config without loading (setup validation). */
int train_model_check_checkpoint(struct train_model *tm, const char *dir, char *err, size_t errlen);
void train_model_free(struct train_model *tm);

/* ---- saving (train_save.c) ---------------------------------------------------------------- */

/* The files a save wrote through the safetensors writer, with each one's size and CRC32C
 * as it was written, so that the manifest lists them without reading them back
 * (train_state_files.c). */
struct train_file_sum {
	char *name;
	uint64_t bytes;
	uint32_t crc;
};
struct train_file_sums {
	struct train_file_sum *v;
	int n, cap;
};
struct zinf_st_writer;
/* Add one file; -ENOMEM */
int train_file_sums_push(struct train_file_sums *fs, const char *name, uint64_t bytes,
			 uint32_t crc);
/* Add every file a finished writer wrote. -ENOMEM */
int train_file_sums_add(struct train_file_sums *fs, const struct zinf_st_writer *w);
/* The entry for the file called name, or NULL. */
const struct train_file_sum *train_file_sums_find(const struct train_file_sums *fs,
						  const char *name);
void train_file_sums_free(struct train_file_sums *fs);

/* Write config.json + safetensors of every parameter to dir (created if missing) in
 * dtype, sharded at max_shard_bytes; with sums (may be NULL), add the safetensors files
 * to it. */
int train_model_save(struct train_model *tm, struct zinf_engine *e, const char *dir,
		     enum zinf_dtype dtype, uint64_t max_shard_bytes, struct train_file_sums *sums,
		     char *err, size_t errlen);
/* The same save in halves, for a caller that writes the masters itself (the training
 * state's save, from the pieces it reads anyway). begin creates dir and a writer with
 * every tensor declared in dtype, the writer's tensor i being the model's tensor i
 * (llama_names.h); end finishes it (every tensor written in full), adds its files to sums
 * and writes config.json; drop abandons it (end drops it too, either way). */
struct train_model_writer {
	struct zinf_st_writer *w;
	enum zinf_dtype dtype;
};
/* A stoppable save (tm->save_stop up) about to read tensor of dir: -EINTR with a line
 * naming both; else 0. */
int train_save_stop_asked(const struct train_model *tm, const char *dir, const char *tensor,
			  char *err, size_t errlen);
int train_model_writer_begin(struct train_model *tm, const char *dir, enum zinf_dtype dtype,
			     uint64_t max_shard_bytes, struct train_model_writer *mw, char *err,
			     size_t errlen);
int train_model_writer_end(struct train_model *tm, struct train_model_writer *mw, const char *dir,
			   struct train_file_sums *sums, char *err, size_t errlen);
void train_model_writer_drop(struct train_model_writer *mw);

/* The engine parameter holding the model's tensor called name (TRAIN_NO_PARAM: none). */
uint32_t train_model_param_of_name(const struct train_model *tm, const char *name);
/* The model's tensor i in Hugging Face's order (llama_names.h) and the engine parameter
 * holding it; -EINVAL with "DIR: tensor NAME: no engine parameter holds it" otherwise
 * (train_save.c). */
struct zinf_llama_tensor_name;
int train_model_tensor(const struct train_model *tm, int i, const char *dir,
		       struct zinf_llama_tensor_name *tn, uint32_t *param, char *err,
		       size_t errlen);

/* ---- the training state: --save-state and --resume (train_state.c) ------------------------ */

#define TRAIN_STATE_FILE "zinf_state.json"

struct cJSON;

/* Where a run is, and what must not change to continue it bit-identically. */
struct train_state {
	uint64_t step; /* trainer steps done, skipped ones included: the data position */
	struct zinf_engine_progress progress;
	uint64_t data_tokens, seq_len, seed;
	bool shuffle;
	uint32_t data_crc;	/* train_state_data_crc of the training data */
	char device[8];		/* "host" or "cuda": the engine's device the state was saved on */
	struct cJSON *numerics; /* {key: value} of the config keys that decide the numbers */
	/* The optimizer state's safetensors files as the manifest lists them: their sizes
	 * are checked when it is read, their CRC32C by train_state_load from what it reads */
	struct train_file_sums deferred;
};

void train_state_free(struct train_state *st);
/* The numerics keys of a resolved config (batch shape, precision, optimizer, schedule,
 * clipping) as a new object. */
int train_state_numerics(const struct zinf_config *cfg, struct cJSON **out, char *err,
			 size_t errlen);
/* The model and its training state into dir: optimizer.safetensors (every parameter's
 * master and moments, fp32) and the model (mw, begun by train_model_writer_begin and
 * ended here, also on failure) from the same pieces, then zinf_state.json (st, the
 * engine's progress, every file's size and CRC32C), written atomically. The sizes and
 * CRCs of files in sums (the safetensors, added here) are taken from it, after a check of
 * each size on disk; other files (config.json) are read. */
int train_state_save(struct train_model *tm, struct zinf_engine *e, const char *dir,
		     const struct train_state *st, struct train_model_writer *mw,
		     uint64_t max_shard_bytes, struct train_file_sums *sums, char *err,
		     size_t errlen);
/* "master", "exp_avg", "exp_avg_sq" for k 0, 1, 2: a tensor's parts in the optimizer
 * state, named NAME.<part>. */
const char *train_state_part_name(int k);
/* dir/optimizer.safetensors (sharded at max_shard_bytes): every parameter's parts, in
 * pieces of bounded size, written while the next piece is read (train_state_write.c);
 * each master piece into the model's writer too, which is ended (its files in place)
 * before the optimizer state's, and dropped on failure. */
int train_state_write_optimizer(struct train_model *tm, struct zinf_engine *e, const char *dir,
				uint64_t max_shard_bytes, struct train_model_writer *model,
				struct train_file_sums *sums, char *err, size_t errlen);
/* The piece size the saves use for tm: train_state_piece_elems, or the largest tensor. */
uint64_t train_state_piece_of(const struct train_model *tm);
/* Elements of a piece of a tensor the saves (model and optimizer state) read and write
 * at a time (4M; tests set it smaller to cut tensors into many pieces). */
extern uint64_t train_state_piece_elems;

/* Read dir/zinf_state.json and check every file it lists (its size; its CRC32C too,
 * except the optimizer state's shards: train_state_load checks theirs from what it
 * reads, and st->deferred keeps what the manifest lists for them). */
int train_state_read(const char *dir, struct train_state *st, char *err, size_t errlen);
/* A resume's run (now) against the checkpoint's (ck): same data order, same numerics. */
int train_state_check(const struct train_state *ck, const struct train_state *now, const char *dir,
		      char *err, size_t errlen);
/* The checkpoint was saved on the kind of device e computes on (the host and CUDA
 * runtimes do not compute the same bits). */
int train_state_check_device(const struct train_state *ck, struct zinf_engine *e, const char *dir,
			     char *err, size_t errlen);
/* CRC32C of the data's files in order, each one's size and first and last MiB (64 KiB
 * each when the data is shards): tells other data of the same length apart without
 * reading all of it. */
int train_state_data_crc(const struct zinf_token_file *tf, uint32_t *out, char *err, size_t errlen);
/* Load every module's master and moments from dir's optimizer state, a store chunk at
 * a time (train_load_module), and set the engine's progress to st's. */
int train_state_load(struct train_model *tm, struct zinf_engine *e, const char *dir,
		     const struct train_state *st, char *err, size_t errlen);

/* ---- the save directory: --save-total-limit, .partial saves (train_rotate.c) ------------- */

/* The directory --save-total-limit never removes: the one the run loaded from, as it was
 * at the start (a link retargeted since does not move it). */
struct train_source_dir {
	bool set;    /* there is one (and it could be looked at) */
	bool warned; /* its first keep was warned of; later ones are info lines */
	uint64_t dev, ino;
	const char *flag; /* "--model", "--resume" or "--init's file" */
};
/* The source of o: --model; --resume unless the run saves its state (its own snapshots
 * then resume in its place, so it may go, as the Trainer's rotation removes it); the
 * directory of --init's file. */
void train_source_dir_init(struct train_source_dir *src, const struct zinf_train_opts *o);
/* Keep the newest o->save_total_limit checkpoint-<k> directories of o->save_dir with
 * k <= step (this run's snapshot at step and the older ones), remove the others of those
 * that hold only files a save writes (others, and src, are kept, with a warning; nothing
 * is followed through a link). Returns 0, or a negative code when the save directory
 * cannot be listed. */
int train_snapshots_rotate(const struct zinf_train_opts *o, struct train_source_dir *src,
			   uint64_t step, char *err, size_t errlen);
/* --save-every must not write over an earlier run's checkpoint-<k> with k one of its
 * steps from first_step on; a checkpoint-<k>.partial a stopped run left is removed (or
 * refused when it holds foreign files), and a stopped final save moved in or removed
 * (train_save_recover). One pass over save_dir, whatever --steps is. 0, or a negative
 * code with err naming the entry. */
int train_snapshots_check(const struct zinf_train_opts *o, uint64_t first_step, char *err,
			  size_t errlen);
/* Remove save_dir/name, a checkpoint-<step>.partial or final.partial that a stopped or
 * failed save left, if it holds only files a save writes (or their NAME.tmp); 0 removed,
 * 1 kept, with the reason in why. */
int train_snapshot_remove_partial(const char *save_dir, const char *name, char *why, size_t whylen);

/* A file name a save writes: config.json, zinf_state.json, the model's and the
 * optimizer state's safetensors (single, shards or index), and the tokenizer and
 * generation files it carries over (train_companion_name). */
bool train_saved_name(const char *name);
/* A directory a save of the run o makes in its save directory: the final save's
 * final.partial, final.ready, final.done, or a checkpoint-<k> snapshot (or its .partial)
 * with k one of o's --save-every steps. */
bool train_save_dir_name(const struct zinf_train_opts *o, const char *name);

/* ---- the tokenizer and generation files a save carries over (train_companions.c) ------ */

struct train_companion {
	char *name;
	void *data;
	size_t len;
};

/* What a run writes into each save from the --model or --resume directory, read when
 * the run starts (zeroed: none). */
struct train_companions {
	struct train_companion *v;
	size_t n;
};

/* One of the names a save carries over (the list in train_companions.c, docs/train.md):
 * generation_config.json and the tokenizer's files. */
bool train_companion_name(const char *name);
/* Read dir's files of those names (links followed) into c, by name; flag (--model,
 * --resume) names dir in errors. One that is not a regular file, a link to nothing, too
 * large or unreadable is refused: 0, or a negative code with one line in err and c
 * empty. */
int train_companions_read(struct train_companions *c, const char *dir, const char *flag, char *err,
			  size_t errlen);
/* Write each into dir (made if missing) under its name, as NAME.tmp fsynced and renamed,
 * then sync dir: 0, or a negative code with err naming the file. */
int train_companions_write(const struct train_companions *c, const char *dir, char *err,
			   size_t errlen);
void train_companions_free(struct train_companions *c);

/* The final save: written into save_dir/TRAIN_FINAL_PARTIAL, committed by renaming it
 * TRAIN_FINAL_READY (with TRAIN_FINAL_LIST, its files), moved into save_dir, and the
 * emptied directory renamed TRAIN_FINAL_DONE and removed. */
#define TRAIN_FINAL_PARTIAL "final.partial"
#define TRAIN_FINAL_READY "final.ready"
#define TRAIN_FINAL_DONE "final.done"
#define TRAIN_FINAL_LIST "zinf_files.txt"

/* Commit the complete save in save_dir/TRAIN_FINAL_PARTIAL and move it into save_dir: the
 * earlier state file removed first, an earlier save's model and optimizer files that the
 * new ones do not replace removed, every file renamed in (the state file last), save_dir
 * fsynced. 0, or a negative code with err naming the file. */
int train_save_publish(const char *save_dir, char *err, size_t errlen);
/* Before a run saves into, loads from or resumes from save_dir (holding its lock): finish
 * moving in a committed save
 * a stopped run left (TRAIN_FINAL_READY), and remove a TRAIN_FINAL_PARTIAL or
 * TRAIN_FINAL_DONE it left if they hold only files a save writes. 0, or a negative code
 * with err (one line: a directory holding anything else is refused, and kept). */
int train_save_recover(const char *save_dir, char *err, size_t errlen);

/* ---- the directories a run reads and writes (train_dirs.c) ------------------------------ */

#define TRAIN_SAVE_LOCK ".zinf-save.lock"

/* One run saves into a directory at a time: an flock on dir/TRAIN_SAVE_LOCK. The
 * descriptor holding it, or a negative code with err naming dir and flag (-EBUSY: a
 * live run holds it). */
int train_save_lock(const char *dir, const char *flag, char *err, size_t errlen);
/* The save directory made if missing (*made set) and locked, so that no run removes (or
 * writes over) what a live one is writing: the lock's descriptor, held to the run's end,
 * or a negative code with err. */
int train_save_dir_make(const char *save_dir, bool *made, char *err, size_t errlen);
/* A failed run leaves a save directory it made as it was: gone, unless it holds more. */
void train_save_dir_unmake(const char *save_dir);
/* A --model or --resume directory (flag) that a stopped run was moving its final save
 * into: the move is finished first, under the directory's lock. 0, or a negative code
 * with err. */
int train_source_finish_move(const char *dir, const char *flag, char *err, size_t errlen);
/* The --model or --resume directory as train_save_seen found it (seen) before the run
 * read it: -ESTALE with err when a save moved in meanwhile (the load may mix both). */
int train_source_unchanged(const char *dir, const char *flag, uint64_t seen, char *err,
			   size_t errlen);
/* An output (--log-json, zinf.trace: what), which the run empties or writes over, must be
 * none of its inputs (--config, --data, --eval-data, --init) and no file a save writes in
 * the --model, --resume or --save directory (a link judged by what it names): a refused
 * run, or one that goes on, would destroy it. 0, or -EINVAL with err. */
int train_check_output(const struct zinf_train_opts *o, const char *what, const char *path,
		       char *err, size_t errlen);
/* No input (--config, --init, --data and --eval-data, each shard) is a file a save writes
 * in the --save directory, as given or where its links lead: the final save would move
 * its own file over it. 0, or -EINVAL with err naming the input and the flag. */
int train_check_inputs_unsaved(const struct zinf_train_opts *o, char *err, size_t errlen);
/* Two outputs (--log-json, zinf.trace) name one file, through links or not: -EINVAL
 * with a line in err. */
int train_check_outputs_differ(const char *what_a, const char *a, const char *what_b, const char *b,
			       char *err, size_t errlen);

/* What of dir a load reads, as it is now: a digest of the name, inode, size and
 * modification time of each file a save writes, and of a final save being moved in.
 * Taken before a run reads a --model or --resume directory and again after its load, it
 * tells whether a save moved into dir meanwhile (the load may have read files of both
 * saves). 0, or a negative code with err when dir cannot be listed. */
int train_save_seen(const char *dir, uint64_t *digest, char *err, size_t errlen);
/* Tests: called with the directory once a --model or --resume load is done, before
 * train_source_unchanged checks it (NULL: not called). */
extern void (*train_loaded_hook)(const char *dir);

/* ---- one micro-batch through the engine (train_pass.c) ----------------------------------- */

struct train_pass {
	struct train_model *tm;
	struct zinf_engine *e;
	/* the model runtime of the engine's device kind (llama_backend.h): cpu on the host
	 * backend, cuda on a GPU; xs, d and acts are memory of its kind (device memory from
	 * the engine's budget on cuda, malloc on the host) */
	const struct llama_rt_ops *ops;
	struct llama_rt *m;	     /* NULL until created (train.c tests it) */
	struct llama_rt_acts **acts; /* [ckpt ? 1 : L] */
	int n_acts;
	bool ckpt;
	bool cpu_ckpt; /* checkpoints in host_xs: xs is then a ring of two */
	int B, T, N, C;
	float *xs;	/* (L + 1, N, C) fp32 layer inputs, the last the head's input */
	float *host_xs; /* cpu_ckpt: (L - 1, N, C) in host memory, layer l's input at l */
	float *d;	/* (N, C) fp32 gradient flowing backward */
};

struct train_pass_opts {
	bool ckpt;     /* recompute each layer in backward from its saved input */
	bool cpu_ckpt; /* with ckpt: save those inputs in host memory, not the runtime's */
	bool tf32;     /* cuda runtime: TF32 matrix products (zinf.tf32) */
};

int train_pass_create(struct train_pass *p, struct train_model *tm, struct zinf_engine *e, int B,
		      int T, const struct train_pass_opts *po, char *err, size_t errlen);
/* Host memory of cpu_ckpt's checkpoints: L - 1 layer inputs of B x T x hidden fp32 (the
 * last layer's input never leaves the runtime's memory). */
uint64_t train_pass_cpu_ckpt_bytes(const struct train_model *tm, uint64_t B, uint64_t T);
/* What train_pass_create would take for a pass of B x T on the runtime of kind: in the
 * runtime's memory (on a GPU, the engine's device budget; on the cpu, host memory) and
 * in host memory beside it. Nothing is created. 0 or -ENOTSUP (a runtime this build
 * lacks). */
int train_pass_sizes(const struct train_model *tm, enum zinf_engine_device kind, int B, int T,
		     const struct train_pass_opts *po, uint64_t *runtime_bytes,
		     uint64_t *host_bytes);
void train_pass_destroy(struct train_pass *p);
/* Forward (and with backward true, backward into the engine's gradient buffers with
 * dloss = the engine's loss scale) of one micro-batch; *loss is its mean loss. */
int train_pass_run(struct train_pass *p, const int32_t *inputs, const int32_t *targets,
		   bool backward, float *loss, char *err, size_t errlen);

/* ---- the per-step log (train_log.c) --------------------------------------------------------- */

/* Write s as one JSON object and a newline, to f's descriptor (f's buffer unused): the
 * whole line or, in a regular file, none. Returns 0 or a negative errno. */
int train_log_write(FILE *f, const struct zinf_train_step *s);

#endif /* ZINF_MODEL_TRAIN_INTERNAL_H */

/*
 * One zinf train run as train.c sets it up and train_loop.c runs it: the checked inputs,
 * the engine and model, the data, and where the steps' saves go.
 */
#ifndef ZINF_MODEL_TRAIN_RUN_H
#define ZINF_MODEL_TRAIN_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tokens.h"
#include "train_internal.h"

/* One data file and its window rule. */
struct train_data {
	struct zinf_token_file *tf;
	struct zinf_token_windows win;
};

/* Token files up to this size are scanned whole before step 1. */
#define TRAIN_SCAN_WAIT_BYTES (64ull << 20)

struct train_run {
	const struct zinf_train_opts *o;
	struct zinf_config *cfg;
	struct train_model tm;
	struct train_data data, eval;
	struct zinf_token_scan *scan; /* --data against the vocabulary, beside the steps */
	uint64_t B, gas, vocab;
	uint64_t print_every; /* steps_per_print */
	bool cpu_ckpt;	      /* activation_checkpointing.cpu_checkpointing */
	bool tf32;	      /* zinf.tf32 */
	bool save_16bit;      /* stage3_gather_16bit_weights_on_model_save */
	struct zinf_engine *e;
	struct train_pass pass;
	int32_t *inputs, *targets;
	FILE *log;
	char *log_made;		/* the file made for log_json_path (through its links), NULL if it
			   existed: removed again if the run fails with it empty */
	struct train_state now; /* this run, as a checkpoint's state would describe it */
	struct train_state ck;	/* resume_dir's state */
	uint64_t first_step;	/* 1, or after resume_dir's step */
	int save_lock;		/* -1, or the flock on save_dir/.zinf-save.lock, held to the end */
	bool save_dir_made;	/* save_dir did not exist: removed again if the run fails */
	bool drop_final;	/* the final save failed before its commit: its .partial goes */
	uint64_t src_seen;	/* train_save_seen of the --model or --resume directory */
	struct train_source_dir src_dir;    /* the one --save-total-limit keeps */
	struct train_companions companions; /* its tokenizer and generation files, for --save */
	/* the engine's counters after the last step, while nothing but steps ran since (no
	 * evaluation, no snapshot): the next step's figures start there, so the background
	 * update's traffic between steps counts in the next step, not in none */
	struct zinf_stats last;
	bool last_valid;
};

/* Seconds on the monotonic clock. */
double train_now_seconds(void);
/* The steps from r->first_step to the last, each with its log line, evaluations and
 * --save-every snapshots; -EINTR once opts.stop is set. res gets the losses and tokens.
 * Returns 0 or a negative code with one line in err. */
int train_run_loop(struct train_run *r, struct zinf_train_result *res, char *err, size_t errlen);
/* After a save into save_dir/name failed: remove what it wrote (a warning if it cannot:
 * the next run into save_dir removes it). */
void train_drop_partial(const char *save_dir, const char *name);
/* --save at the end, written aside and moved in once complete; res gets its time and
 * NVMe reads. Returns 0 or a negative code with one line in err. */
int train_save_final(struct train_run *r, struct zinf_train_result *res, char *err, size_t errlen);

#endif /* ZINF_MODEL_TRAIN_RUN_H */

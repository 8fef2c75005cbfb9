/*
 * Learning-rate schedules with DeepSpeed's names, parameters and formulas
 * (deepspeed/runtime/lr_schedules.py): WarmupLR, WarmupDecayLR, WarmupCosineLR, and a
 * constant rate. A schedule is a pure function of the batch iteration, so it needs no
 * state beyond the step counter the engine already keeps (and checkpoints).
 *
 * Iterations are DeepSpeed's last_batch_iteration: the scheduler is created at -1 and
 * stepped once after every optimizer step that was not skipped for overflow, so the
 * optimizer's step k (1-based) runs with the rate at iteration k - 2 (iteration -1, the
 * value set at construction, for the first step). zinf_lr_at() gives the rate at any
 * iteration; which iteration a step uses is the engine's choice, documented there.
 */
#ifndef ZINF_SRC_LR_SCHEDULE_H
#define ZINF_SRC_LR_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

enum zinf_lr_schedule_type {
	ZINF_LR_CONSTANT = 0,	   /* no "scheduler": lr stays optimizer.params.lr */
	ZINF_LR_WARMUP = 1,	   /* "WarmupLR" */
	ZINF_LR_WARMUP_DECAY = 2,  /* "WarmupDecayLR" */
	ZINF_LR_WARMUP_COSINE = 3, /* "WarmupCosineLR" */
};

enum zinf_warmup_type {
	ZINF_WARMUP_LOG = 0,	/* "log" (DeepSpeed's default) */
	ZINF_WARMUP_LINEAR = 1, /* "linear" */
};

/* scheduler.params; defaults are DeepSpeed's. */
struct zinf_lr_schedule_opts {
	enum zinf_lr_schedule_type type;
	double lr;			   /* optimizer.params.lr: the constant rate, and the base
				      WarmupCosineLR multiplies by its ratio; default 1e-3 */
	double warmup_min_lr;		   /* WarmupLR, WarmupDecayLR; default 0 */
	double warmup_max_lr;		   /* WarmupLR, WarmupDecayLR; default 1e-3 */
	int64_t warmup_num_steps;	   /* all warmups; default 1000; values below 2 act as 2 */
	enum zinf_warmup_type warmup_type; /* default log */
	int64_t total_num_steps;	   /* WarmupDecayLR, WarmupCosineLR; required (> 0) */
	double warmup_min_ratio;	   /* WarmupCosineLR; default 0 */
	double cos_min_ratio;		   /* WarmupCosineLR; default 1e-4 */
	/* all types: the iteration the schedule was at before step 1, to resume it after
	 * that many steps (DeepSpeed's constructor argument); default -1, the start */
	int64_t last_batch_iteration;
};

void zinf_lr_schedule_opts_init(struct zinf_lr_schedule_opts *opts);

/* Check opts. Returns 0, or -EINVAL with one line naming the key and value written to
 * err (err_len bytes, may be 0) and logged at error level. */
int zinf_lr_schedule_check(const struct zinf_lr_schedule_opts *opts, char *err, size_t err_len);

/* The learning rate at DeepSpeed batch iteration `iteration` (>= -1) of a checked
 * schedule. Pure and thread-safe. */
double zinf_lr_at(const struct zinf_lr_schedule_opts *opts, int64_t iteration);
/* The rate optimizer step `step` (1-based, skipped steps not counted) runs with: the
 * iteration step - 2 after last_batch_iteration + 1 (so at -1, the start: iteration
 * step - 2, and -1 for step 1). */
double zinf_lr_of_step(const struct zinf_lr_schedule_opts *opts, uint64_t step);

/* "WarmupLR" etc. (DeepSpeed's names; "constant" or NULL for none) and "log"/"linear".
 * Return 0 or -EINVAL. */
int zinf_lr_schedule_parse_type(const char *name, enum zinf_lr_schedule_type *out);
int zinf_lr_warmup_parse_type(const char *name, enum zinf_warmup_type *out);

#endif /* ZINF_SRC_LR_SCHEDULE_H */

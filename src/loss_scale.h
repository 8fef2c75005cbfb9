/*
 * fp16 loss scaling with DeepSpeed's DynamicLossScaler semantics and keys
 * (fp16.loss_scale, initial_scale_power, loss_scale_window, hysteresis,
 * consecutive_hysteresis, min_loss_scale). loss_scale > 0 is a static scale.
 *
 * Per step: the engine scales the loss by zinf_loss_scaler_scale(), checks the grads of
 * every rank for inf/nan (a non-finite global sum of squares, see clip.h), skips the
 * optimizer step on overflow, then calls zinf_loss_scaler_update(). On overflow the scale
 * is divided by 2 once `hysteresis` overflows have been seen (never below
 * min_loss_scale); after loss_scale_window clean steps since the last overflow it is
 * multiplied by 2.
 *
 * Threading: a scaler is plain data owned by one thread.
 */
#ifndef ZINF_SRC_LOSS_SCALE_H
#define ZINF_SRC_LOSS_SCALE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest loss scale (fp16.loss_scale's bound, the dynamic scale's cap, what
 * zinf_engine_progress_set takes): the unscaling factor 1/scale stays a float > 0 (the
 * smallest is 2^-149), and any gradient overflows fp32 well before it. */
#define ZINF_MAX_LOSS_SCALE 1e42

/* fp16.* ; defaults are DeepSpeed's config defaults. */
struct zinf_loss_scale_opts {
	double loss_scale;	       /* > 0: static scale; 0 (default): dynamic */
	int initial_scale_power;       /* dynamic scale starts at 2^this; default 16 */
	uint32_t loss_scale_window;    /* clean steps before the scale doubles; default 1000 */
	uint32_t hysteresis;	       /* overflows tolerated before lowering; default 2 */
	bool consecutive_hysteresis;   /* refill hysteresis on every clean step; default false */
	double min_loss_scale;	       /* floor of the dynamic scale; default 1 */
	bool raise_error_at_min_scale; /* overflow at the floor is an error, as DeepSpeed's
					  DynamicLossScaler does by default; default true */
};

struct zinf_loss_scaler {
	struct zinf_loss_scale_opts opts;
	bool dynamic;
	double scale;		    /* the current loss scale */
	uint64_t iteration;	    /* updates so far (DeepSpeed's cur_iter) */
	int64_t last_overflow_iter; /* -1 before any overflow */
	uint32_t hysteresis_left;   /* DeepSpeed's cur_hysteresis */
	uint64_t overflows;	    /* steps skipped for overflow, counted */
	char last_error[192];
};

void zinf_loss_scale_opts_init(struct zinf_loss_scale_opts *opts);

/* Check opts and start s at its initial scale. Returns 0 or -EINVAL with the one-line
 * reason (key and value) in s->last_error and logged at error level. */
int zinf_loss_scaler_init(struct zinf_loss_scaler *s, const struct zinf_loss_scale_opts *opts);

/* The scale to multiply the loss by for this step; grads are divided by it. */
double zinf_loss_scaler_scale(const struct zinf_loss_scaler *s);

/* Record whether this step's grads overflowed (inf/nan on any rank) and move the scale.
 * The caller skips the optimizer step when overflow is true. Returns 0, or ZINF_ESTATE
 * when an overflow happens with the dynamic scale already at min_loss_scale and
 * raise_error_at_min_scale is set (message in s->last_error). */
int zinf_loss_scaler_update(struct zinf_loss_scaler *s, bool overflow);

#endif /* ZINF_SRC_LOSS_SCALE_H */

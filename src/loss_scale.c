/*
 * Dynamic and static loss scaling (loss_scale.h), following DeepSpeed's
 * DynamicLossScaler.update_scale step for step.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loss_scale.h"
#include "zinf/error.h"
#include "zinf/log.h"

void zinf_loss_scale_opts_init(struct zinf_loss_scale_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->loss_scale = 0.0;
	opts->initial_scale_power = 16;
	opts->loss_scale_window = 1000;
	opts->hysteresis = 2;
	opts->consecutive_hysteresis = false;
	opts->min_loss_scale = 1.0;
	opts->raise_error_at_min_scale = true;
}

int zinf_loss_scaler_init(struct zinf_loss_scaler *s, const struct zinf_loss_scale_opts *o)
{
	const char *key = NULL, *want = NULL;
	double value = 0;

	memset(s, 0, sizeof(*s));
	if (!(o->loss_scale >= 0 && isfinite(o->loss_scale)))
		key = "loss_scale", value = o->loss_scale,
		want = "0 (dynamic) or a finite value > 0";
	else if (o->initial_scale_power < 0 || o->initial_scale_power > 127)
		key = "initial_scale_power", value = o->initial_scale_power, want = "in [0, 127]";
	else if (o->loss_scale_window == 0)
		key = "loss_scale_window", value = 0, want = ">= 1";
	else if (o->hysteresis == 0)
		key = "hysteresis", value = 0, want = ">= 1";
	else if (!(o->min_loss_scale > 0 && isfinite(o->min_loss_scale)))
		key = "min_loss_scale", value = o->min_loss_scale, want = "a finite value > 0";
	if (key) {
		snprintf(s->last_error, sizeof(s->last_error),
			 "fp16.%s = %g is invalid (expected %s)", key, value, want);
		zinf_logf(ZINF_LOG_ERROR, "%s", s->last_error);
		return -EINVAL;
	}
	s->opts = *o;
	s->dynamic = o->loss_scale == 0;
	s->scale = s->dynamic ? ldexp(1.0, o->initial_scale_power) : o->loss_scale;
	s->last_overflow_iter = -1;
	s->hysteresis_left = o->hysteresis;
	return 0;
}

double zinf_loss_scaler_scale(const struct zinf_loss_scaler *s)
{
	return s->scale;
}

static int scaler_overflow(struct zinf_loss_scaler *s)
{
	const struct zinf_loss_scale_opts *o = &s->opts;

	if (o->hysteresis == 1 || s->hysteresis_left == 1) {
		if (s->scale == o->min_loss_scale && o->raise_error_at_min_scale) {
			snprintf(s->last_error, sizeof(s->last_error),
				 "fp16: gradient overflow at step %llu with the loss scale already "
				 "at min_loss_scale %g; cannot lower it further",
				 (unsigned long long)s->iteration, o->min_loss_scale);
			zinf_logf(ZINF_LOG_ERROR, "%s", s->last_error);
			return ZINF_ESTATE;
		}
		zinf_logf(ZINF_LOG_INFO,
			  "fp16: gradient overflow at step %llu, step skipped; loss scale %g -> %g",
			  (unsigned long long)s->iteration, s->scale,
			  fmax(s->scale / 2.0, o->min_loss_scale));
		s->scale = fmax(s->scale / 2.0, o->min_loss_scale);
	} else {
		zinf_logf(ZINF_LOG_INFO,
			  "fp16: gradient overflow at step %llu, step skipped; loss scale %g kept, "
			  "hysteresis %u -> %u",
			  (unsigned long long)s->iteration, s->scale, s->hysteresis_left,
			  s->hysteresis_left - 1);
		s->hysteresis_left--;
	}
	s->last_overflow_iter = (int64_t)s->iteration;
	return 0;
}

int zinf_loss_scaler_update(struct zinf_loss_scaler *s, bool overflow)
{
	int rc = 0;

	if (overflow)
		s->overflows++;
	if (!s->dynamic) {
		if (overflow)
			zinf_logf(ZINF_LOG_INFO,
				  "fp16: gradient overflow at step %llu, step skipped (static loss "
				  "scale %g)",
				  (unsigned long long)s->iteration, s->scale);
		s->iteration++;
		return 0;
	}
	if (overflow) {
		rc = scaler_overflow(s);
		if (rc)
			return rc;
	} else {
		if (s->opts.consecutive_hysteresis)
			s->hysteresis_left = s->opts.hysteresis;
		if (((int64_t)s->iteration - s->last_overflow_iter) % s->opts.loss_scale_window ==
		    0) {
			if (!s->opts.consecutive_hysteresis)
				s->hysteresis_left = s->opts.hysteresis;
			if (s->scale * 2.0 <= ZINF_MAX_LOSS_SCALE) /* (a power of 2 stays one) */
				s->scale *= 2.0;
		}
	}
	s->iteration++;
	return rc;
}

/*
 * Learning-rate schedules (lr_schedule.h): DeepSpeed's WarmupLR, WarmupDecayLR and
 * WarmupCosineLR, term for term, in double precision as Python computes them.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "lr_schedule.h"
#include "zinf/log.h"

void zinf_lr_schedule_opts_init(struct zinf_lr_schedule_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->type = ZINF_LR_CONSTANT;
	opts->lr = 1e-3;
	opts->warmup_min_lr = 0.0;
	opts->warmup_max_lr = 1e-3;
	opts->warmup_num_steps = 1000;
	opts->warmup_type = ZINF_WARMUP_LOG;
	opts->total_num_steps = 0;
	opts->warmup_min_ratio = 0.0;
	opts->cos_min_ratio = 1e-4;
	opts->last_batch_iteration = -1;
}

static const char *const type_names[] = {"constant", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"};

int zinf_lr_schedule_parse_type(const char *name, enum zinf_lr_schedule_type *out)
{
	if (!name) {
		*out = ZINF_LR_CONSTANT;
		return 0;
	}
	for (int i = 0; i < 4; i++) {
		if (strcmp(name, type_names[i]) == 0) {
			*out = (enum zinf_lr_schedule_type)i;
			return 0;
		}
	}
	return -EINVAL;
}

int zinf_lr_warmup_parse_type(const char *name, enum zinf_warmup_type *out)
{
	if (name && strcmp(name, "log") == 0)
		*out = ZINF_WARMUP_LOG;
	else if (name && strcmp(name, "linear") == 0)
		*out = ZINF_WARMUP_LINEAR;
	else
		return -EINVAL;
	return 0;
}

int zinf_lr_schedule_check(const struct zinf_lr_schedule_opts *o, char *err, size_t err_len)
{
	const char *key = NULL, *want = NULL;
	double value = 0;
	char line[256];

	if (o->type < ZINF_LR_CONSTANT || o->type > ZINF_LR_WARMUP_COSINE)
		key = "type", value = o->type,
		want = "one of constant, WarmupLR, WarmupDecayLR, WarmupCosineLR";
	else if (!(o->lr >= 0 && isfinite(o->lr)))
		key = "lr", value = o->lr, want = "a finite value >= 0";
	else if (o->type == ZINF_LR_CONSTANT)
		return 0;
	else if (o->last_batch_iteration < -1)
		key = "last_batch_iteration", value = (double)o->last_batch_iteration,
		want = ">= -1";
	else if (o->warmup_num_steps < 0)
		key = "warmup_num_steps", value = (double)o->warmup_num_steps, want = ">= 0";
	else if (o->warmup_type != ZINF_WARMUP_LOG && o->warmup_type != ZINF_WARMUP_LINEAR)
		key = "warmup_type", value = o->warmup_type, want = "log or linear";
	else if (o->type != ZINF_LR_WARMUP_COSINE &&
		 !(isfinite(o->warmup_min_lr) && o->warmup_min_lr >= 0))
		key = "warmup_min_lr", value = o->warmup_min_lr, want = "a finite value >= 0";
	else if (o->type != ZINF_LR_WARMUP_COSINE &&
		 !(isfinite(o->warmup_max_lr) && o->warmup_max_lr >= 0))
		key = "warmup_max_lr", value = o->warmup_max_lr, want = "a finite value >= 0";
	else if (o->type != ZINF_LR_WARMUP && o->total_num_steps <= 0)
		key = "total_num_steps", value = (double)o->total_num_steps, want = "> 0";
	else if (o->type == ZINF_LR_WARMUP_COSINE &&
		 !(o->warmup_min_ratio >= 0 && o->warmup_min_ratio <= 1))
		key = "warmup_min_ratio", value = o->warmup_min_ratio, want = "in [0, 1]";
	else if (o->type == ZINF_LR_WARMUP_COSINE &&
		 !(o->cos_min_ratio >= 0 && o->cos_min_ratio <= 1))
		key = "cos_min_ratio", value = o->cos_min_ratio, want = "in [0, 1]";
	if (!key)
		return 0;
	snprintf(line, sizeof(line), "scheduler %s: params.%s = %g is invalid (expected %s)",
		 o->type >= 0 && o->type <= 3 ? type_names[o->type] : "?", key, value, want);
	zinf_logf(ZINF_LOG_ERROR, "%s", line);
	if (err_len)
		snprintf(err, err_len, "%s", line);
	return -EINVAL;
}

/* DeepSpeed clamps warmup_num_steps to at least 2 (log(1) would divide by zero). */
static int64_t warmup_steps(const struct zinf_lr_schedule_opts *o)
{
	return o->warmup_num_steps < 2 ? 2 : o->warmup_num_steps;
}

/* The warmup fraction in [0, 1) at an iteration before the end of warmup. */
static double warmup_gamma(const struct zinf_lr_schedule_opts *o, int64_t it)
{
	double n = (double)warmup_steps(o);

	if (o->warmup_type == ZINF_WARMUP_LOG)
		return (1.0 / log(n)) * log((double)(it + 1));
	return (double)it / n;
}

static double warmup_lr(const struct zinf_lr_schedule_opts *o, int64_t it)
{
	double gamma = 1.0;

	if (it < 0)
		return o->warmup_min_lr;
	if (it < warmup_steps(o))
		gamma = warmup_gamma(o, it);
	else if (o->type == ZINF_LR_WARMUP_DECAY) {
		double left = (double)(o->total_num_steps - it);
		double span = (double)(o->total_num_steps - warmup_steps(o));

		gamma = fmax(0.0, left / fmax(1.0, span));
	}
	return o->warmup_min_lr + (o->warmup_max_lr - o->warmup_min_lr) * gamma;
}

static double cosine_ratio(const struct zinf_lr_schedule_opts *o, int64_t it)
{
	int64_t n = warmup_steps(o);
	double progress, ratio;

	if (it < 0)
		return 0.0;
	if (it < n) {
		ratio = warmup_gamma(o, it);
		return o->warmup_min_ratio + ratio * (1.0 - o->warmup_min_ratio);
	}
	/* Progress is clamped to 1, so past total_num_steps the rate stays at the floor
	 * (as in current DeepSpeed; older releases let the cosine rise again). */
	progress = (double)(it - n + 1) /
		   (double)(o->total_num_steps - n > 1 ? o->total_num_steps - n : 1);
	if (progress > 1.0)
		progress = 1.0;
	ratio = (1.0 + cos(M_PI * progress)) / 2.0;
	return fmax(0.0, o->cos_min_ratio + (1.0 - o->cos_min_ratio) * ratio);
}

double zinf_lr_at(const struct zinf_lr_schedule_opts *o, int64_t iteration)
{
	switch (o->type) {
	case ZINF_LR_WARMUP:
	case ZINF_LR_WARMUP_DECAY:
		return warmup_lr(o, iteration);
	case ZINF_LR_WARMUP_COSINE:
		return o->lr * cosine_ratio(o, iteration);
	default:
		return o->lr;
	}
}

double zinf_lr_of_step(const struct zinf_lr_schedule_opts *o, uint64_t step)
{
	return zinf_lr_at(o, (int64_t)step - 2 + (o->last_batch_iteration + 1));
}

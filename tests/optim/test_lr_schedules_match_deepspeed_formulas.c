/*
 * Each LR schedule gives DeepSpeed's value at chosen iterations (values worked out by
 * hand from deepspeed/runtime/lr_schedules.py), including the iteration -1 value set at
 * construction, warmup_num_steps < 2 acting as 2, the decay floor at 0 and the cosine
 * floor past total_num_steps; optimizer step k runs at iteration k - 2 after
 * last_batch_iteration + 1; bad parameters are refused with the key named.
 */
#include <errno.h>
#include <math.h>

#include "lr_schedule.h"
#include "test.h"

#define T_NEAR(got, want)                                                                          \
	T_CHECK(fabs((got) - (want)) <= 1e-12 * fmax(1.0, fabs(want)), "got %.17g want %.17g",     \
		(double)(got), (double)(want))

int main(void)
{
	struct zinf_lr_schedule_opts o;
	enum zinf_lr_schedule_type type;
	char err[256];

	/* constant */
	zinf_lr_schedule_opts_init(&o);
	o.lr = 3e-4;
	T_CHECK_RC(zinf_lr_schedule_check(&o, err, sizeof(err)));
	T_NEAR(zinf_lr_at(&o, 0), 3e-4);
	T_NEAR(zinf_lr_at(&o, 12345), 3e-4);

	/* WarmupLR, log: min + (max - min) * log(it + 1) / log(n) */
	zinf_lr_schedule_opts_init(&o);
	o.type = ZINF_LR_WARMUP;
	o.warmup_min_lr = 1e-5;
	o.warmup_max_lr = 1e-2;
	o.warmup_num_steps = 100;
	T_CHECK_RC(zinf_lr_schedule_check(&o, err, sizeof(err)));
	T_NEAR(zinf_lr_at(&o, -1), 1e-5);		       /* at construction */
	T_NEAR(zinf_lr_at(&o, 0), 1e-5);		       /* log(1) = 0 */
	T_NEAR(zinf_lr_at(&o, 9), 1e-5 + (1e-2 - 1e-5) * 0.5); /* log 10 / log 100 */
	T_NEAR(zinf_lr_at(&o, 99), 1e-5 + (1e-2 - 1e-5) * (log(100.0) / log(100.0)));
	T_NEAR(zinf_lr_at(&o, 100), 1e-2);
	T_NEAR(zinf_lr_at(&o, 1000000), 1e-2); /* WarmupLR never decays */

	/* WarmupLR, linear: it / n */
	o.warmup_type = ZINF_WARMUP_LINEAR;
	T_NEAR(zinf_lr_at(&o, 25), 1e-5 + (1e-2 - 1e-5) * 0.25);
	/* warmup_num_steps 1 acts as 2: iteration 1 is already past warmup */
	o.warmup_num_steps = 1;
	T_NEAR(zinf_lr_at(&o, 1), 1e-5 + (1e-2 - 1e-5) * 0.5);
	T_NEAR(zinf_lr_at(&o, 2), 1e-2);

	/* WarmupDecayLR: after warmup, (total - it) / (total - n), floored at 0 */
	zinf_lr_schedule_opts_init(&o);
	o.type = ZINF_LR_WARMUP_DECAY;
	o.warmup_min_lr = 0;
	o.warmup_max_lr = 1e-3;
	o.warmup_num_steps = 100;
	o.warmup_type = ZINF_WARMUP_LINEAR;
	o.total_num_steps = 300;
	T_CHECK_RC(zinf_lr_schedule_check(&o, err, sizeof(err)));
	T_NEAR(zinf_lr_at(&o, 50), 0.5e-3);
	T_NEAR(zinf_lr_at(&o, 100), 1e-3);
	T_NEAR(zinf_lr_at(&o, 150), 1e-3 * 0.75);
	T_NEAR(zinf_lr_at(&o, 299), 1e-3 / 200.0);
	T_NEAR(zinf_lr_at(&o, 300), 0.0);
	T_NEAR(zinf_lr_at(&o, 400), 0.0);

	/* WarmupCosineLR: lr * ratio; warmup from warmup_min_ratio, then
	 * cos_min + (1 - cos_min) * (1 + cos(pi * (it - n + 1) / (total - n))) / 2 */
	zinf_lr_schedule_opts_init(&o);
	o.type = ZINF_LR_WARMUP_COSINE;
	o.lr = 2e-3;
	o.warmup_num_steps = 10;
	o.warmup_type = ZINF_WARMUP_LINEAR;
	o.warmup_min_ratio = 0.1;
	o.cos_min_ratio = 0.01;
	o.total_num_steps = 110;
	T_CHECK_RC(zinf_lr_schedule_check(&o, err, sizeof(err)));
	T_NEAR(zinf_lr_at(&o, -1), 0.0);
	T_NEAR(zinf_lr_at(&o, 0), 2e-3 * 0.1);
	T_NEAR(zinf_lr_at(&o, 5), 2e-3 * (0.1 + 0.5 * 0.9));
	T_NEAR(zinf_lr_at(&o, 9), 2e-3 * (0.1 + 0.9 * 0.9));
	T_NEAR(zinf_lr_at(&o, 10), 2e-3 * (0.01 + 0.99 * (1 + cos(M_PI * 0.01)) / 2));
	T_NEAR(zinf_lr_at(&o, 59), 2e-3 * (0.01 + 0.99 * 0.5)); /* progress 1/2 */
	T_NEAR(zinf_lr_at(&o, 109), 2e-3 * 0.01);		/* progress 1 */
	T_NEAR(zinf_lr_at(&o, 500), 2e-3 * 0.01);		/* clamped, no rise */
	o.warmup_type = ZINF_WARMUP_LOG;
	T_NEAR(zinf_lr_at(&o, 4), 2e-3 * (0.1 + 0.9 * log(5.0) / log(10.0)));

	/* names */
	T_CHECK_RC(zinf_lr_schedule_parse_type("WarmupCosineLR", &type));
	T_CHECK(type == ZINF_LR_WARMUP_COSINE, "parsed %d", type);
	T_CHECK(zinf_lr_schedule_parse_type("OneCycle", &type) == -EINVAL, "OneCycle accepted");

	/* bad parameters name the key */
	o.total_num_steps = 0;
	T_CHECK(zinf_lr_schedule_check(&o, err, sizeof(err)) == -EINVAL, "total 0 accepted");
	T_CHECK(strstr(err, "total_num_steps") && strstr(err, "WarmupCosineLR"), "message: %s",
		err);
	zinf_lr_schedule_opts_init(&o);
	o.type = ZINF_LR_WARMUP;
	o.warmup_max_lr = -1;
	T_CHECK(zinf_lr_schedule_check(&o, err, sizeof(err)) == -EINVAL, "negative lr accepted");
	T_CHECK(strstr(err, "warmup_max_lr = -1"), "message: %s", err);
	/* the rate of optimizer step k: iteration k - 2, or after last_batch_iteration */
	zinf_lr_schedule_opts_init(&o);
	o.type = ZINF_LR_WARMUP;
	o.warmup_num_steps = 10;
	o.warmup_type = ZINF_WARMUP_LINEAR;
	T_CHECK_RC(zinf_lr_schedule_check(&o, err, sizeof(err)));
	T_NEAR(zinf_lr_of_step(&o, 1), 0.0); /* iteration -1 */
	T_NEAR(zinf_lr_of_step(&o, 2), 0.0);
	T_NEAR(zinf_lr_of_step(&o, 3), 1e-4);
	o.last_batch_iteration = 5;
	T_NEAR(zinf_lr_of_step(&o, 1), 5e-4);
	T_NEAR(zinf_lr_of_step(&o, 2), 6e-4);
	T_NEAR(zinf_lr_of_step(&o, 7), 1e-3);
	o.last_batch_iteration = -2;
	T_CHECK(zinf_lr_schedule_check(&o, err, sizeof(err)) == -EINVAL &&
			strstr(err, "last_batch_iteration = -2"),
		"last_batch_iteration -2 accepted: %s", err);
	return T_EXIT_PASS;
}

/*
 * The fp16 loss scaler follows DeepSpeed's DynamicLossScaler: overflows are counted and
 * logged as skipped steps, the scale halves after `hysteresis` overflows (never below
 * min_loss_scale), doubles after loss_scale_window clean steps since the last overflow,
 * consecutive_hysteresis refills the hysteresis on each clean step, an overflow at the
 * floor is an error when asked, and a static scale never moves. The expected sequences
 * were traced by hand through DeepSpeed's update_scale.
 */
#include <errno.h>

#include "loss_scale.h"
#include "test.h"
#include "zinf/error.h"
#include "zinf/log.h"

static int skipped_logged;

static void on_log(enum zinf_log_level level, const char *msg, void *user)
{
	if (strstr(msg, "step skipped"))
		skipped_logged++;
}

static const bool flags[] = {false, false, false, true,	 true, false,
			     true,  false, false, false, true};
#define N_FLAGS (sizeof(flags) / sizeof(flags[0]))

static void run(bool consecutive, const double *want)
{
	struct zinf_loss_scale_opts o;
	struct zinf_loss_scaler s;

	zinf_loss_scale_opts_init(&o);
	o.initial_scale_power = 4;
	o.loss_scale_window = 3;
	o.hysteresis = 2;
	o.consecutive_hysteresis = consecutive;
	T_CHECK_RC(zinf_loss_scaler_init(&s, &o));
	T_CHECK(zinf_loss_scaler_scale(&s) == 16.0, "initial scale %g", s.scale);
	skipped_logged = 0;
	for (size_t i = 0; i < N_FLAGS; i++) {
		T_CHECK_RC(zinf_loss_scaler_update(&s, flags[i]));
		T_CHECK(zinf_loss_scaler_scale(&s) == want[i],
			"consecutive %d: after update %zu (overflow %d) scale %g, want %g",
			consecutive, i, flags[i], zinf_loss_scaler_scale(&s), want[i]);
	}
	T_CHECK(s.overflows == 4, "overflows counted %llu", (unsigned long long)s.overflows);
	T_CHECK(skipped_logged == 4, "skips logged %d", skipped_logged);
}

int main(void)
{
	static const double plain[] = {16, 16, 32, 32, 16, 16, 8, 8, 8, 16, 16};
	static const double consecutive[] = {16, 16, 32, 32, 16, 16, 16, 16, 16, 32, 32};
	struct zinf_loss_scale_opts o;
	struct zinf_loss_scaler s;

	zinf_log_set_callback(on_log, NULL);
	zinf_log_set_level(ZINF_LOG_INFO);
	run(false, plain);
	run(true, consecutive);

	/* floor: 2 -> 1, then an overflow at 1 is an error (DeepSpeed raises) */
	zinf_loss_scale_opts_init(&o);
	o.initial_scale_power = 1;
	o.hysteresis = 1;
	T_CHECK_RC(zinf_loss_scaler_init(&s, &o));
	T_CHECK_RC(zinf_loss_scaler_update(&s, true));
	T_CHECK(s.scale == 1.0, "scale %g", s.scale);
	T_CHECK(zinf_loss_scaler_update(&s, true) == ZINF_ESTATE, "overflow at floor accepted");
	T_CHECK(strstr(s.last_error, "min_loss_scale"), "message: %s", s.last_error);
	/* ... or stays at the floor when not asked to fail */
	o.raise_error_at_min_scale = false;
	T_CHECK_RC(zinf_loss_scaler_init(&s, &o));
	for (int i = 0; i < 5; i++)
		T_CHECK_RC(zinf_loss_scaler_update(&s, true));
	T_CHECK(s.scale == 1.0 && s.overflows == 5, "scale %g overflows %llu", s.scale,
		(unsigned long long)s.overflows);

	/* static scale: never moves, overflows still counted */
	zinf_loss_scale_opts_init(&o);
	o.loss_scale = 128;
	o.loss_scale_window = 1;
	T_CHECK_RC(zinf_loss_scaler_init(&s, &o));
	for (int i = 0; i < 6; i++)
		T_CHECK_RC(zinf_loss_scaler_update(&s, i % 2 == 0));
	T_CHECK(s.scale == 128.0 && s.overflows == 3, "static scale %g overflows %llu", s.scale,
		(unsigned long long)s.overflows);

	/* bad keys are named */
	zinf_loss_scale_opts_init(&o);
	o.loss_scale_window = 0;
	T_CHECK(zinf_loss_scaler_init(&s, &o) == -EINVAL, "window 0 accepted");
	T_CHECK(strstr(s.last_error, "fp16.loss_scale_window"), "message: %s", s.last_error);
	zinf_loss_scale_opts_init(&o);
	o.min_loss_scale = -1;
	T_CHECK(zinf_loss_scaler_init(&s, &o) == -EINVAL, "negative min accepted");
	T_CHECK(strstr(s.last_error, "fp16.min_loss_scale = -1"), "message: %s", s.last_error);
	zinf_log_set_callback(NULL, NULL);
	return T_EXIT_PASS;
}

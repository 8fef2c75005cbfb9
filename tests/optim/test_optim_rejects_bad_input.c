/*
 * Bad input to the Adam interface is refused with a one-line error naming the field
 * and the value (logged for bad options, in zinf_adam_last_error() for a bad step), and
 * a refused step writes nothing. zinf_adam_destroy(NULL) is a no-op.
 */
#include <errno.h>
#include <math.h>

#include "optim.h"
#include "test.h"
#include "zinf/log.h"

static char logged[512];

static void on_log(enum zinf_log_level level, const char *msg, void *user)
{
	if (level == ZINF_LOG_ERROR)
		snprintf(logged, sizeof(logged), "%s", msg);
}

static void expect_bad_opts(struct zinf_adam_opts o, const char *needle)
{
	struct zinf_adam *adam = (struct zinf_adam *)&o; /* must be reset to NULL */

	logged[0] = '\0';
	T_CHECK(zinf_adam_create(&adam, &o) == -EINVAL, "opts with %s accepted", needle);
	T_CHECK(adam == NULL, "*out not cleared on error");
	T_CHECK(strstr(logged, needle) && !strchr(logged, '\n'), "logged '%s', want '%s'", logged,
		needle);
}

static void expect_bad_step(struct zinf_adam *adam, struct zinf_adam_shard sh,
			    struct zinf_adam_step_info info, const char *needle)
{
	T_CHECK(zinf_adam_step(adam, &sh, &info) == -EINVAL, "step with %s accepted", needle);
	T_CHECK(strstr(zinf_adam_last_error(adam), needle), "error '%s', want '%s'",
		zinf_adam_last_error(adam), needle);
}

int main(void)
{
	struct zinf_adam_opts o;
	struct zinf_adam *adam;
	float p[8] = {1, 2, 3, 4, 5, 6, 7, 8}, m[8] = {0}, v[8] = {0}, g[8] = {1};
	uint16_t out[8];
	struct zinf_adam_shard good = {p, m, v, g, out, ZINF_DTYPE_F32, ZINF_DTYPE_BF16, 8}, sh;
	struct zinf_adam_step_info info = {1, 1e-3, 1.0f}, bad;

	zinf_log_set_callback(on_log, NULL);
	zinf_adam_destroy(NULL);

	zinf_adam_opts_init(&o);
	o.beta1 = 1.0;
	expect_bad_opts(o, "optimizer.params.betas[0] = 1 ");
	zinf_adam_opts_init(&o);
	o.beta2 = -0.5;
	expect_bad_opts(o, "optimizer.params.betas[1] = -0.5");
	zinf_adam_opts_init(&o);
	o.eps = 0;
	expect_bad_opts(o, "optimizer.params.eps = 0");
	zinf_adam_opts_init(&o); /* 0 in fp32, the kernels' type: a division by 0 */
	o.eps = 1e-50;
	expect_bad_opts(o, "optimizer.params.eps = 1e-50");
	zinf_adam_opts_init(&o);
	o.weight_decay = NAN;
	expect_bad_opts(o, "optimizer.params.weight_decay = nan");
	zinf_adam_opts_init(&o); /* inf in fp32 */
	o.weight_decay = 1e39;
	expect_bad_opts(o, "optimizer.params.weight_decay = 1e+39");
	zinf_adam_opts_init(&o);
	o.threads = 5000;
	expect_bad_opts(o, "threads = 5000");
	zinf_adam_opts_init(&o);
	o.numa_node = -5;
	expect_bad_opts(o, "numa_node = -5");

	zinf_adam_opts_init(&o);
	o.isa = ZINF_ADAM_ISA_SCALAR;
	T_CHECK_RC(zinf_adam_create(&adam, &o));
	T_CHECK_STR(zinf_adam_isa_name(adam), "scalar");

	sh = good;
	sh.grad = NULL;
	expect_bad_step(adam, sh, info, "NULL grad buffer");
	sh = good;
	sh.exp_avg_sq = NULL;
	expect_bad_step(adam, sh, info, "NULL exp_avg_sq buffer");
	sh = good;
	sh.grad_dtype = ZINF_DTYPE_NONE;
	expect_bad_step(adam, sh, info, "grad_dtype 0 is not F32, BF16 or F16");
	sh = good;
	sh.param_dtype = ZINF_DTYPE_NONE;
	expect_bad_step(adam, sh, info, "param_dtype 0 is not F32, BF16 or F16");
	sh = good;
	sh.param_out = NULL;
	expect_bad_step(adam, sh, info, "param_out is NULL but param_dtype is 2");
	bad = info;
	bad.step = 0;
	expect_bad_step(adam, good, bad, "step count is 0");
	bad = info;
	bad.lr = -1;
	expect_bad_step(adam, good, bad, "lr -1 is not");
	bad.lr = 1e39; /* inf in fp32 */
	expect_bad_step(adam, good, bad, "lr 1e+39 is not");
	{ /* each within bounds, their product not: AdamW's decay 1 - lr * wd is -inf */
		struct zinf_adam *wide;
		struct zinf_adam_opts wo;

		zinf_adam_opts_init(&wo);
		wo.isa = ZINF_ADAM_ISA_SCALAR;
		wo.weight_decay = 1e30;
		T_CHECK_RC(zinf_adam_create(&wide, &wo));
		bad = info;
		bad.lr = 1e30;
		expect_bad_step(wide, good, bad, "decay factor past fp32");
		zinf_adam_destroy(wide);
	}
	bad = info;
	bad.grad_scale = INFINITY;
	expect_bad_step(adam, good, bad, "grad_scale inf is not");
	for (int i = 0; i < 8; i++)
		T_CHECK(p[i] == (float)(i + 1) && m[i] == 0 && v[i] == 0, "refused step wrote [%d]",
			i);

	T_CHECK_RC(zinf_adam_step(adam, &good, &info));
	T_CHECK_STR(zinf_adam_last_error(adam), "");
	T_CHECK(p[0] != 1.0f, "a good step changed nothing");
	zinf_adam_destroy(adam);
	zinf_log_set_callback(NULL, NULL);
	return T_EXIT_PASS;
}

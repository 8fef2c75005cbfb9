/*
 * Ten steps of the public zinf_adam_step (2 threads, the auto-chosen loop) agree with
 * a textbook Adam/AdamW written independently here in double precision
 *     m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr * m_hat / (sqrt(v_hat) + eps)
 * for the cases the torch fixtures do not cover: fp16 grads, a grad_scale (loss scale
 * and clipping folded in), bias_correction off, Adam without weight decay, an fp16
 * param copy, a learning rate that changes every step. Tolerance as in
 * test_adam_matches_torch_fixture: fp32 roundings over ten steps stay below 4e-6
 * relative (plus 4e-7 of the largest |x| for cancellation in m).
 */
#include <math.h>

#include "optim.h"
#include "test.h"

#define N 140001 /* above the size at which two threads share a step */
#define STEPS 10

static float p[N], m[N], v[N];
static uint16_t g16[STEPS][N], out[N];
static double rp[N], rm[N], rv[N];

static void reference(const struct zinf_adam_opts *o, const struct zinf_adam_step_info *s, int step)
{
	double bc1 = o->bias_correction ? 1 - pow(o->beta1, (double)s->step) : 1;
	double bc2 = o->bias_correction ? 1 - pow(o->beta2, (double)s->step) : 1;

	for (int i = 0; i < N; i++) {
		double g = (double)zinf_f16_to_f32(g16[step][i]) * s->grad_scale;

		if (o->type == ZINF_ADAM)
			g += o->weight_decay * rp[i];
		else
			rp[i] *= 1 - s->lr * o->weight_decay;
		rm[i] = o->beta1 * rm[i] + (1 - o->beta1) * g;
		rv[i] = o->beta2 * rv[i] + (1 - o->beta2) * g * g;
		rp[i] -= s->lr * (rm[i] / bc1) / (sqrt(rv[i] / bc2) + o->eps);
	}
}

static double max_abs(const double *x)
{
	double mx = 0;

	for (int i = 0; i < N; i++)
		mx = fmax(mx, fabs(x[i]));
	return mx;
}

static void check(const char *what, const char *name, const float *got, const double *want)
{
	double floor = 4e-7 * max_abs(want);

	for (int i = 0; i < N; i++) {
		double tol = 4e-6 * fabs(want[i]) + floor;

		T_CHECK(fabs(got[i] - want[i]) <= tol, "%s %s[%d]: %.9g vs reference %.9g", what,
			name, i, got[i], want[i]);
	}
}

static void run(const char *what, enum zinf_adam_type type, double wd, bool bias_correction)
{
	struct zinf_adam_opts o;
	struct zinf_adam *adam;
	uint32_t r = 7;

	zinf_adam_opts_init(&o);
	o.type = type;
	o.weight_decay = wd;
	o.bias_correction = bias_correction;
	o.beta1 = 0.85;
	o.beta2 = 0.98;
	o.eps = 1e-7;
	o.threads = 2;
	o.numa_node = type == ZINF_ADAM ? 0 : -1; /* bound workers give the same results */
	T_CHECK_RC(zinf_adam_create(&adam, &o));
	for (int i = 0; i < N; i++) {
		r = r * 1664525u + 1013904223u;
		p[i] = (float)((double)(r >> 8) / 16777216.0 * 4 - 2);
		rp[i] = p[i];
		m[i] = v[i] = 0;
		rm[i] = rv[i] = 0;
		for (int s = 0; s < STEPS; s++) {
			r = r * 1664525u + 1013904223u;
			/* fp16 grads from 2^-14 to 2^11 in size; the scale below brings them down */
			g16[s][i] =
				(uint16_t)(0x0400u + (r >> 16) % 0x6800u) | (uint16_t)(r & 0x8000u);
		}
	}
	for (int s = 0; s < STEPS; s++) {
		struct zinf_adam_shard sh = {p, m, v, g16[s], out, ZINF_DTYPE_F16, ZINF_DTYPE_F16,
					     N};
		struct zinf_adam_step_info info = {(uint64_t)s + 1, 1e-3 * (1 + s % 3), 0.25f};

		T_CHECK_RC(zinf_adam_step(adam, &sh, &info));
		reference(&o, &info, s);
	}
	check(what, "param", p, rp);
	check(what, "exp_avg", m, rm);
	check(what, "exp_avg_sq", v, rv);
	for (int i = 0; i < N; i++)
		T_CHECK(out[i] == zinf_f32_to_f16(p[i]), "%s: fp16 copy[%d] 0x%04x is not fp16(%a)",
			what, i, out[i], p[i]);
	fprintf(stderr, "%s: %d elements x %d steps match (%s)\n", what, N, STEPS,
		zinf_adam_isa_name(adam));
	zinf_adam_destroy(adam);
}

int main(void)
{
	run("AdamW wd 0.1", ZINF_ADAMW, 0.1, true);
	run("Adam L2 0.01", ZINF_ADAM, 0.01, true);
	run("Adam no decay, no bias correction", ZINF_ADAM, 0.0, false);
	run("AdamW no bias correction", ZINF_ADAMW, 0.02, false);
	return T_EXIT_PASS;
}

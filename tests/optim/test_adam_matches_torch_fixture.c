/*
 * Ten Adam / AdamW steps match torch.optim.AdamW and torch.optim.Adam (fixtures written
 * by gen_adam_fixture.py; see there for the format), with fp32 and with bf16 grads, on
 * every instruction set this CPU supports.
 *
 * Tolerance. zinf fuses what torch rounds twice (m = fma(b1, m, (1-b1) g) where torch
 * does mul then add; likewise v, the denominator sqrt(v)/sqrt(bc2) + eps and the update
 * p - step * (m / d)), so each step can differ by a few fp32 roundings (2^-24 relative
 * each) per quantity; through ten steps these add up to at most ~10 x 4 x 6e-8 = 2.4e-6
 * relative, so the bound is 4e-6 relative. m can cancel (b1 m and (1-b1) g of opposite
 * signs), so its error is bounded relative to the terms rather than the result: the
 * bound adds 4e-7 of the vector's largest |x|. (Measured: under 1/5 of the bound.) The
 * bf16 param copy may land one bf16 step away where the fp32 master sits within a few
 * ulps of a rounding boundary.
 */
#include <errno.h>
#include <math.h>

#include "cast.h"
#include "optim.h"
#include "test.h"

struct fixture {
	uint32_t n, steps, type, grad_dtype;
	double lr, beta1, beta2, eps, wd; /* as torch had them: Python floats */
	float *p0;
	void *grads; /* (steps, n) */
	float *p, *m, *v;
	uint16_t *p_bf16;
};

static void *read_exact(FILE *f, size_t bytes, const char *path, const char *what)
{
	void *buf = malloc(bytes ? bytes : 1);

	T_CHECK(buf, "malloc");
	T_CHECK(fread(buf, 1, bytes, f) == bytes, "%s: short read of %s (%zu bytes)", path, what,
		bytes);
	return buf;
}

static void load(const char *path, struct fixture *fx)
{
	FILE *f = fopen(path, "rb");
	char magic[8];
	size_t gbytes;

	T_CHECK(f, "cannot open fixture %s", path);
	T_CHECK(fread(magic, 1, 8, f) == 8 && memcmp(magic, "ZADAMFX1", 8) == 0, "%s: bad magic",
		path);
	T_CHECK(fread(&fx->n, 4, 4, f) == 4, "%s: short header", path);
	T_CHECK(fread(&fx->lr, 8, 5, f) == 5, "%s: short header", path);
	T_CHECK(fx->n > 0 && fx->n < 100000 && fx->steps > 0 && fx->steps < 1000,
		"%s: implausible n %u steps %u", path, fx->n, fx->steps);
	gbytes = (size_t)fx->steps * fx->n * (fx->grad_dtype == ZINF_DTYPE_F32 ? 4 : 2);
	fx->p0 = read_exact(f, fx->n * 4ul, path, "param0");
	fx->grads = read_exact(f, gbytes, path, "grads");
	fx->p = read_exact(f, fx->n * 4ul, path, "param");
	fx->m = read_exact(f, fx->n * 4ul, path, "exp_avg");
	fx->v = read_exact(f, fx->n * 4ul, path, "exp_avg_sq");
	fx->p_bf16 = read_exact(f, fx->n * 2ul, path, "param bf16");
	T_CHECK(fgetc(f) == EOF, "%s: trailing bytes", path);
	fclose(f);
}

static double max_abs(const float *x, uint32_t n)
{
	double m = 0;

	for (uint32_t i = 0; i < n; i++)
		m = fmax(m, fabs(x[i]));
	return m;
}

static double check_vec(const char *what, const char *name, const float *got, const float *want,
			uint32_t n)
{
	double floor = 4e-7 * max_abs(want, n), worst = 0;

	for (uint32_t i = 0; i < n; i++) {
		double err = fabs((double)got[i] - want[i]);
		double tol = 4e-6 * fabs(want[i]) + floor;

		T_CHECK(err <= tol, "%s %s[%u]: %.9g vs torch %.9g (|diff| %.3g > %.3g)", what,
			name, i, got[i], want[i], err, tol);
		worst = fmax(worst, err / tol);
	}
	return worst;
}

static void run(const char *path, enum zinf_adam_isa isa)
{
	struct fixture fx;
	struct zinf_adam_opts o;
	struct zinf_adam *adam;
	float *p, *m, *v;
	uint16_t *out;
	size_t gsize;
	double worst;

	zinf_adam_opts_init(&o);
	o.isa = isa;
	if (zinf_adam_create(&adam, &o) == -ENOTSUP)
		return; /* this CPU lacks isa; scalar always runs */
	zinf_adam_destroy(adam);
	load(path, &fx);
	o.type = fx.type ? ZINF_ADAM : ZINF_ADAMW;
	o.beta1 = fx.beta1;
	o.beta2 = fx.beta2;
	o.eps = fx.eps;
	o.weight_decay = fx.wd;
	T_CHECK_RC(zinf_adam_create(&adam, &o));
	gsize = fx.grad_dtype == ZINF_DTYPE_F32 ? 4 : 2;
	p = malloc(fx.n * 4ul);
	m = calloc(fx.n, 4);
	v = calloc(fx.n, 4);
	out = calloc(fx.n, 2);
	T_CHECK(p && m && v && out, "malloc");
	memcpy(p, fx.p0, fx.n * 4ul);
	for (uint32_t s = 0; s < fx.steps; s++) {
		struct zinf_adam_shard sh = {p,
					     m,
					     v,
					     (const char *)fx.grads + (size_t)s * fx.n * gsize,
					     out,
					     (enum zinf_dtype)fx.grad_dtype,
					     ZINF_DTYPE_BF16,
					     fx.n};
		struct zinf_adam_step_info info = {s + 1, fx.lr, 1.0f};

		T_CHECK_RC(zinf_adam_step(adam, &sh, &info));
	}
	worst = check_vec(path, "param", p, fx.p, fx.n);
	worst = fmax(worst, check_vec(path, "exp_avg", m, fx.m, fx.n));
	worst = fmax(worst, check_vec(path, "exp_avg_sq", v, fx.v, fx.n));
	for (uint32_t i = 0; i < fx.n; i++) {
		int d = (int)out[i] - (int)fx.p_bf16[i];

		T_CHECK(out[i] == zinf_f32_to_bf16(p[i]), "%s: bf16 copy[%u] is not bf16(master)",
			path, i);
		T_CHECK(d >= -1 && d <= 1, "%s: bf16 param[%u] 0x%04x vs torch 0x%04x", path, i,
			out[i], fx.p_bf16[i]);
	}
	fprintf(stderr, "%s (%s): worst error %.3f of tolerance\n", path, zinf_adam_isa_name(adam),
		worst);
	zinf_adam_destroy(adam);
	free(fx.p0);
	free(fx.grads);
	free(fx.p);
	free(fx.m);
	free(fx.v);
	free(fx.p_bf16);
	free(p);
	free(m);
	free(v);
	free(out);
}

int main(int argc, char **argv)
{
	static const char *const names[] = {"adamw_fp32", "adam_fp32", "adamw_bf16", "adam_bf16"};
	char path[4096];

	T_CHECK(argc == 2, "usage: %s FIXTURE_DIR", argv[0]);
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s.bin", argv[1], names[i]);
		for (int isa = ZINF_ADAM_ISA_SCALAR; isa <= ZINF_ADAM_ISA_AVX512; isa++)
			run(path, (enum zinf_adam_isa)isa);
	}
	return T_EXIT_PASS;
}

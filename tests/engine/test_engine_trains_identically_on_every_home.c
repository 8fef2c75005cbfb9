/* Training through the engine API gives the same parameters, bit for bit, whether they
 * live on the device, in host memory or on NVMe, and whether the optimizer state is on
 * the device (no gradient leaves it), in host memory, split between the two by
 * offload_optimizer.ratio, or on NVMe (pipelined step); in fp32 it matches an independent
 * double-precision AdamW with global-norm clipping, gradient accumulation and weight
 * decay on 2-D parameters only. bf16 parameters train through the same paths, and so do
 * fp32 ones and bf16 weights beside fp32 biases with the optimizer state on NVMe. */
#include <math.h>
#include <unistd.h>

#include "config_fixture.h"
#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

#define STEPS 5
#define GAS 2
#define N_MOD 3
#define LR 0.01
#define WD 0.1
#define CLIP 1.0

static const uint64_t shapes[N_MOD][2][2] = {
	{{64, 32}, {32, 0}}, {{128, 96}, {96, 0}}, {{40, 50}, {50, 0}}};

static double target(int m, int k, uint64_t i)
{
	return sin(0.37 * (double)i + m + 0.5 * k);
}

static double init_value(int m, int k, uint64_t i)
{
	return 0.2 * cos(0.11 * (double)i * (m + 1) + k);
}

static double first_norm, ref_first_norm; /* grad norms of step 1: engine, reference */
/* offload_optimizer.ratio of the next runs: with cpu, the first modules up to that share
 * of the elements keep their state in host memory, the rest on the device */
static double opt_ratio = 1;
/* >= 0: in that step an infinite gradient (the step is skipped, its gradients cleared);
 * after that step the weights are saved and loaded again (the moments start over) */
static int inf_step = -1, reload_step = -1;

static uint64_t elems(int m, int k)
{
	return shapes[m][k][0] * (shapes[m][k][1] ? shapes[m][k][1] : 1);
}

/* Element i of a parameter as the model reads it (bf16 is the upper half of an fp32). */
static float weight_at(const void *w, enum zinf_dtype dtype, uint64_t i)
{
	uint32_t u;
	float f;

	if (dtype == ZINF_DTYPE_F32)
		return ((const float *)w)[i];
	u = (uint32_t)((const uint16_t *)w)[i] << 16;
	memcpy(&f, &u, 4);
	return f;
}

/* Train STEPS steps with weights of dtype and biases of bdtype (0: dtype) homed per
 * `home`; return all params (fp32). */
static float *train(const char *home, const char *opt_home, const char *grads,
		    enum zinf_dtype dtype, enum zinf_dtype bdtype, const char *dir)
{
	char json[1152], err[512];
	struct zinf_config *cfg;
	struct zinf_engine *e;
	uint32_t mod[N_MOD], par[N_MOD][2];
	uint64_t total = 0, off = 0;
	float *out, *buf = malloc(128 * 96 * 4);

	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": %d, \"gradient_clipping\": %g,"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": %g, \"weight_decay\": %g}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"%s\", \"ratio\": %g},"
		"  \"sub_group_size\": 5000},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"2MiB\", \"pinned_memory_limit\": \"4MiB\","
		"  \"chunk_size\": \"64KiB\", \"offload_gradients\": \"%s\"}}",
		GAS, CLIP, LR, WD, home, dir, opt_home, dir, opt_ratio, grads);
	cfg = t_config(json, "engine.json", true);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s: %s", home, err);
	for (int m = 0; m < N_MOD; m++) {
		char name[32];
		snprintf(name, sizeof(name), "block%d", m);
		T_CHECK_RC(zinf_module_add(e, name, &mod[m]));
		for (int k = 0; k < 2; k++) {
			snprintf(name, sizeof(name), "block%d.%s", m, k ? "bias" : "weight");
			T_CHECK_RC(zinf_param_add(e, mod[m], name, k && bdtype ? bdtype : dtype,
						  k ? 1 : 2, shapes[m][k], 0, &par[m][k]));
			total += elems(m, k);
		}
	}
	T_CHECK(zinf_engine_finalize(e) == 0, "%s", zinf_last_error(e));
	for (int m = 0; m < N_MOD; m++)
		for (int k = 0; k < 2; k++) {
			for (uint64_t i = 0; i < elems(m, k); i++)
				buf[i] = (float)init_value(m, k, i);
			T_CHECK(zinf_param_load(e, par[m][k], buf, ZINF_DTYPE_F32) == 0, "%s",
				zinf_last_error(e));
		}
	for (int s = 0; s < STEPS; s++) {
		struct zinf_step_result r;
		for (int mb = 0; mb < GAS; mb++) {
			double c = mb ? 0.5 : 1.5; /* micro-batches weigh differently */
			for (int m = 0; m < N_MOD; m++) {
				T_CHECK(zinf_module_fetch(e, mod[m]) == 0 &&
						zinf_module_wait(e, mod[m]) == 0,
					"%s", zinf_last_error(e));
				T_CHECK_RC(zinf_module_grads(e, mod[m]));
				for (int k = 0; k < 2; k++) {
					const void *w = zinf_param_data(e, par[m][k]);
					float *g = zinf_param_grad(e, par[m][k]);
					T_CHECK(w && g, "data and grad pointers");
					for (uint64_t i = 0; i < elems(m, k); i++) {
						float wi = weight_at(
							w, k && bdtype ? bdtype : dtype, i);
						g[i] += (float)(c * ((double)wi - target(m, k, i)));
					}
					if (s == inf_step && mb == 1 && m == 1 && k == 0)
						g[7] = INFINITY;
				}
				T_CHECK_RC(zinf_module_grads_ready(e, mod[m]));
				T_CHECK_RC(zinf_module_release(e, mod[m]));
			}
		}
		T_CHECK(zinf_step(e, &r) == 0, "%s", zinf_last_error(e));
		if (s == 0)
			first_norm = r.grad_norm;
		T_CHECK(r.skipped == (s == inf_step), "step %d: skipped %d", s, r.skipped);
		T_CHECK(r.step == (uint64_t)s + 1 - (inf_step >= 0 && s >= inf_step) &&
				(r.skipped || r.lr == LR),
			"step %d: %llu lr %g", s, (unsigned long long)r.step, r.lr);
		for (int m = 0; s == reload_step && m < N_MOD; m++)
			for (int k = 0; k < 2; k++) {
				T_CHECK_RC(zinf_param_save(e, par[m][k], buf, ZINF_DTYPE_F32));
				T_CHECK(zinf_param_load(e, par[m][k], buf, ZINF_DTYPE_F32) == 0,
					"%s", zinf_last_error(e));
			}
	}
	out = malloc(total * 4);
	for (int m = 0; m < N_MOD; m++)
		for (int k = 0; k < 2; k++) {
			T_CHECK_RC(zinf_param_save(e, par[m][k], out + off, ZINF_DTYPE_F32));
			off += elems(m, k);
		}
	{
		struct zinf_stats st;
		zinf_engine_get_stats(e, &st);
		T_CHECK(st.device_peak <= st.device_limit && st.pinned_peak <= st.pinned_limit,
			"budgets");
		T_CHECK(st.steps == STEPS - (inf_step >= 0) && st.param_elems == total, "counters");
		if (strcmp(home, "nvme") == 0)
			T_CHECK(st.nvme_to_pinned.bytes > 0 && st.pinned_to_nvme.bytes > 0,
				"nvme traffic");
		if (opt_ratio < 1) {
			/* blocks 1 and 2 on the device (0 alone is under half the elements):
			 * only block 0's gradients come off it */
			uint64_t dev_elems = elems(1, 0) + elems(1, 1) + elems(2, 0) + elems(2, 1);
			T_CHECK(st.device_peak >= 16 * dev_elems, "device peak %llu, state %llu",
				(unsigned long long)st.device_peak,
				(unsigned long long)(16 * dev_elems));
			T_CHECK(st.device_to_pinned.bytes < STEPS * GAS * 4 * total,
				"device to host %llu bytes with a ratio of %g",
				(unsigned long long)st.device_to_pinned.bytes, opt_ratio);
		} else if (strcmp(opt_home, "none") == 0) {
			/* the state on the device; off it only the steps' new copies and the
			 * save's masters, never a gradient */
			T_CHECK(st.device_peak >= 16 * total, "device peak %llu, state %llu",
				(unsigned long long)st.device_peak,
				(unsigned long long)(16 * total));
			T_CHECK(st.device_to_pinned.bytes <= (STEPS + 2) * 4 * total,
				"device to host %llu bytes with the state on the device",
				(unsigned long long)st.device_to_pinned.bytes);
		} else {
			T_CHECK(st.device_to_pinned.bytes >= STEPS * GAS * 4 * total,
				"device to host %llu bytes: every micro-batch's gradients",
				(unsigned long long)st.device_to_pinned.bytes);
		}
	}
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	free(buf);
	return out;
}

/* x rounded to bf16 (nearest even), as the engine's bf16 parameter copy holds it. */
static double to_bf16(double x)
{
	float f = (float)x;
	uint32_t u;

	memcpy(&u, &f, 4);
	u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	memcpy(&f, &u, 4);
	return f;
}

/* The same training in double precision, straight from the formulas; with bf16 the
 * gradients see the weights rounded to bf16, as the model does. */
static void reference(double *w, uint64_t total, bool bf16)
{
	double *m = calloc(total, 8), *v = calloc(total, 8), *g = calloc(total, 8);
	const double b1 = 0.9, b2 = 0.999, eps = 1e-8, cmean = (1.5 + 0.5) / GAS;

	for (int s = 1; s <= STEPS; s++) {
		double sumsq = 0, coef;
		uint64_t o = 0;
		for (int mm = 0; mm < N_MOD; mm++)
			for (int k = 0; k < 2; k++)
				for (uint64_t i = 0; i < elems(mm, k); i++, o++) {
					g[o] = cmean *
					       ((bf16 ? to_bf16(w[o]) : w[o]) - target(mm, k, i));
					sumsq += g[o] * g[o];
				}
		if (s == 1)
			ref_first_norm = sqrt(sumsq);
		coef = CLIP / (sqrt(sumsq) + 1e-6);
		if (coef > 1)
			coef = 1;
		o = 0;
		for (int mm = 0; mm < N_MOD; mm++)
			for (int k = 0; k < 2; k++)
				for (uint64_t i = 0; i < elems(mm, k); i++, o++) {
					double gi = g[o] * coef;
					if (k == 0) /* weights decay, biases do not */
						w[o] *= 1 - LR * WD;
					m[o] = b1 * m[o] + (1 - b1) * gi;
					v[o] = b2 * v[o] + (1 - b2) * gi * gi;
					w[o] -= LR / (1 - pow(b1, s)) * m[o] /
						(sqrt(v[o] / (1 - pow(b2, s))) + eps);
				}
	}
	free(m);
	free(v);
	free(g);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-engine-test-XXXXXX";
	uint64_t total = 0, o = 0;
	float *dev, *host, *nvme, *b_dev, *b_nvme, *b_all_nvme, *b_grads_nvme;
	float *f_nvme, *mixed_dev, *mixed_nvme, *s_dev, *s_b_nvme, *s_mixed, *s_ratio;
	float *e_cpu, *e_dev, *e_ratio;
	double *ref, *ref_b, dev_first_norm;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	for (int m = 0; m < N_MOD; m++)
		for (int k = 0; k < 2; k++)
			total += elems(m, k);
	dev = train("none", "cpu", "auto", ZINF_DTYPE_F32, 0, dir);
	dev_first_norm = first_norm;
	host = train("cpu", "cpu", "auto", ZINF_DTYPE_F32, 0, dir);
	nvme = train("nvme", "cpu", "auto", ZINF_DTYPE_F32, 0, dir);
	T_CHECK(memcmp(dev, host, total * 4) == 0, "device and host homes differ");
	T_CHECK(memcmp(dev, nvme, total * 4) == 0, "device and nvme homes differ");
	b_dev = train("none", "cpu", "auto", ZINF_DTYPE_BF16, 0, dir);
	b_nvme = train("nvme", "cpu", "auto", ZINF_DTYPE_BF16, 0, dir);
	/* Parameters and optimizer state both on NVMe: the pipelined step, sub-groups of
	 * 5000 elements that do not divide any group. */
	b_all_nvme = train("nvme", "nvme", "cpu", ZINF_DTYPE_BF16, 0, dir);
	T_CHECK(memcmp(b_dev, b_all_nvme, total * 4) == 0, "bf16: optimizer state on nvme differs");
	/* ... and the gradient accumulators on NVMe too: the second micro-batch reads each
	 * sub-group's sum back, the step reads it ahead. */
	b_grads_nvme = train("nvme", "nvme", "nvme", ZINF_DTYPE_BF16, 0, dir);
	T_CHECK(memcmp(b_dev, b_grads_nvme, total * 4) == 0, "bf16: gradients on nvme differ");
	T_CHECK(memcmp(b_dev, b_nvme, total * 4) == 0, "bf16: device and nvme homes differ");
	/* fp32 parameters with the optimizer state on NVMe: fp32 copies from the pipelined
	 * step; and bf16 weights beside fp32 biases: a bf16 and an fp32 group */
	f_nvme = train("nvme", "nvme", "nvme", ZINF_DTYPE_F32, 0, dir);
	T_CHECK(memcmp(dev, f_nvme, total * 4) == 0, "fp32: optimizer state on nvme differs");
	mixed_dev = train("none", "cpu", "auto", ZINF_DTYPE_BF16, ZINF_DTYPE_F32, dir);
	mixed_nvme = train("nvme", "nvme", "nvme", ZINF_DTYPE_BF16, ZINF_DTYPE_F32, dir);
	T_CHECK(memcmp(mixed_dev, mixed_nvme, total * 4) == 0,
		"bf16 weights, fp32 biases: optimizer state on nvme differs");
	T_CHECK(memcmp(mixed_dev, b_dev, total * 4) != 0 && memcmp(mixed_dev, dev, total * 4) != 0,
		"mixed dtypes train like neither bf16 nor fp32 alone");
	/* The optimizer state on the device (offload_optimizer none): the same bits, with
	 * parameters homed on the device, on NVMe and in host memory. */
	s_dev = train("none", "none", "auto", ZINF_DTYPE_F32, 0, dir);
	T_CHECK(memcmp(dev, s_dev, total * 4) == 0, "fp32: optimizer state on the device differs");
	s_b_nvme = train("nvme", "none", "auto", ZINF_DTYPE_BF16, 0, dir);
	T_CHECK(memcmp(b_dev, s_b_nvme, total * 4) == 0,
		"bf16: optimizer state on the device differs");
	s_mixed = train("cpu", "none", "auto", ZINF_DTYPE_BF16, ZINF_DTYPE_F32, dir);
	T_CHECK(memcmp(mixed_dev, s_mixed, total * 4) == 0,
		"bf16 weights, fp32 biases: optimizer state on the device differs");
	/* offload_optimizer.ratio 0.5 (Twin-Flow): block 0's state in host memory, updated by
	 * the CPU, blocks 1 and 2's on the device */
	opt_ratio = 0.5;
	s_ratio = train("nvme", "cpu", "auto", ZINF_DTYPE_BF16, 0, dir);
	T_CHECK(memcmp(b_dev, s_ratio, total * 4) == 0,
		"bf16: optimizer state split by ratio 0.5 differs");
	opt_ratio = 1;
	/* a step skipped for an infinite gradient (the accumulators cleared wherever they
	 * are), and the weights loaded again without moments (zeroed wherever they are):
	 * the same bits with the state in host memory, on the device and split */
	inf_step = 1;
	reload_step = 2;
	e_cpu = train("nvme", "cpu", "auto", ZINF_DTYPE_BF16, 0, dir);
	e_dev = train("nvme", "none", "auto", ZINF_DTYPE_BF16, 0, dir);
	opt_ratio = 0.5;
	e_ratio = train("nvme", "cpu", "auto", ZINF_DTYPE_BF16, 0, dir);
	opt_ratio = 1;
	inf_step = reload_step = -1;
	T_CHECK(memcmp(e_cpu, b_dev, total * 4) != 0, "a skipped step and a reload change nothing");
	T_CHECK(memcmp(e_cpu, e_dev, total * 4) == 0,
		"bf16, a skipped step and a reload: optimizer state on the device differs");
	T_CHECK(memcmp(e_cpu, e_ratio, total * 4) == 0,
		"bf16, a skipped step and a reload: optimizer state split by ratio 0.5 differs");
	ref = malloc(total * 8);
	ref_b = malloc(total * 8);
	for (int m = 0; m < N_MOD; m++)
		for (int k = 0; k < 2; k++)
			for (uint64_t i = 0; i < elems(m, k); i++, o++)
				ref[o] = ref_b[o] = (double)(float)init_value(m, k, i);
	reference(ref, total, false);
	/* The norm of the averaged gradients (the accumulators hold GAS micro-batches). */
	T_CHECK(fabs(dev_first_norm - ref_first_norm) <= 1e-6 * ref_first_norm,
		"step 1 grad norm %.9g, reference %.9g", dev_first_norm, ref_first_norm);
	reference(ref_b, total, true);
	for (uint64_t i = 0; i < total; i++) {
		/* fp32 against fp64 over 5 Adam steps: a few fp32 ulps of the largest terms */
		T_CHECK(fabs(dev[i] - ref[i]) <= 2e-6 + 2e-5 * fabs(ref[i]),
			"element %llu: engine %.9g, reference %.9g", (unsigned long long)i, dev[i],
			ref[i]);
		T_CHECK(fabs(b_dev[i] - ref_b[i]) <= 2e-6 + 2e-5 * fabs(ref_b[i]),
			"bf16 element %llu: %.9g vs %.9g", (unsigned long long)i, b_dev[i],
			ref_b[i]);
	}
	T_CHECK(rmdir(dir) == 0, "scratch directory not empty after the engines closed");
	free(dev);
	free(host);
	free(nvme);
	free(b_dev);
	free(b_nvme);
	free(b_all_nvme);
	free(b_grads_nvme);
	free(f_nvme);
	free(mixed_dev);
	free(mixed_nvme);
	free(s_dev);
	free(s_b_nvme);
	free(s_mixed);
	free(s_ratio);
	free(e_cpu);
	free(e_dev);
	free(e_ratio);
	free(ref);
	free(ref_b);
	return T_EXIT_PASS;
}

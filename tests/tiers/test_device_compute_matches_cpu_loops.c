/*
 * The device layer's compute on device memory (the optimizer state on the device) gives
 * the CPU loops' results: the gradient accumulation and the Adam/AdamW update (with a
 * bf16 or fp16 copy, or none) to the bit, the sum of squares to the bit on the host
 * backend and within 1e-12 on a GPU (its own order of summation, the same bits run to
 * run), for lengths from 0 to past one block of every part, with inf and NaN carried to
 * the sum; several sums at once (one wait) give each one's bits alone, also when one is
 * empty. Pointers outside device memory are refused with a one-line error naming the
 * operation and the buffer, and nothing runs. With --device=cuda the same on the CUDA
 * backend (label gpu; skips without a GPU).
 */
#include <errno.h>
#include <math.h>

#include "clip.h"
#include "gpu_test.h"
#include "optim.h"
#include "tiers_test.h"
#include "zinf/log.h"

static const uint64_t lens[] = {0, 1, 255, 256 * 256 + 3, (1u << 20) + 17};
#define N_LENS (sizeof(lens) / sizeof(lens[0]))
#define MAX_N ((1u << 20) + 17)

static float value(uint64_t i, int salt)
{
	return (float)(sin(0.001 * (double)i * (salt + 1) + salt) * (1 + (double)(i % 7)));
}

struct bufs {
	float *p, *m, *v, *g, *acc;
	uint16_t *out;
	void *parts, *parts_many; /* one sum's partial sums; N_LENS sums' */
};

static void put(struct zinf_stream *s, void *dst, const void *src, uint64_t bytes)
{
	T_CHECK_RC(zinf_device_memcpy_async(s, dst, src, bytes, ZINF_COPY_H2D));
	T_CHECK_RC(zinf_stream_synchronize(s));
}

static void get(struct zinf_stream *s, void *dst, const void *src, uint64_t bytes)
{
	T_CHECK_RC(zinf_device_memcpy_async(s, dst, src, bytes, ZINF_COPY_D2H));
	T_CHECK_RC(zinf_stream_synchronize(s));
}

/* Adam with out_dtype on n elements, on the device and on the CPU: the same bits. */
static void check_adam(struct zinf_stream *s, const struct bufs *d, uint64_t n,
		       enum zinf_dtype out_dtype, bool adamw)
{
	float *p = malloc(MAX_N * 4), *m = malloc(MAX_N * 4), *v = malloc(MAX_N * 4);
	float *g = malloc(MAX_N * 4), *got = malloc(MAX_N * 4);
	uint16_t *out = malloc(MAX_N * 2), *got16 = malloc(MAX_N * 2);
	struct zinf_adam_opts o;
	struct zinf_adam_step_info info = {.step = 3, .lr = 1e-3, .grad_scale = 0.5f};
	struct zinf_adam_shard sh = {.grad_dtype = ZINF_DTYPE_F32, .n_elems = n};
	struct zinf_adam_args cpu, dev;

	T_CHECK(p && m && v && g && got && out && got16, "malloc");
	for (uint64_t i = 0; i < n; i++) {
		p[i] = value(i, 1);
		m[i] = 0.01f * value(i, 2);
		v[i] = fabsf(0.001f * value(i, 3));
		g[i] = value(i, 4);
	}
	put(s, d->p, p, n * 4);
	put(s, d->m, m, n * 4);
	put(s, d->v, v, n * 4);
	put(s, d->g, g, n * 4);
	zinf_adam_opts_init(&o);
	o.type = adamw ? ZINF_ADAMW : ZINF_ADAM;
	o.weight_decay = 0.1;
	sh.master = p;
	sh.exp_avg = m;
	sh.exp_avg_sq = v;
	sh.grad = g;
	sh.param_out = out_dtype ? out : NULL;
	sh.param_dtype = out_dtype;
	zinf_adam_args_init(&cpu, &o, &sh, &info);
	sh.master = d->p;
	sh.exp_avg = d->m;
	sh.exp_avg_sq = d->v;
	sh.grad = d->g;
	sh.param_out = out_dtype ? d->out : NULL;
	zinf_adam_args_init(&dev, &o, &sh, &info);
	zinf_adam_update_scalar(&cpu, 0, n);
	T_CHECK_RC(zinf_device_adam_update(s, &dev, n));
	T_CHECK_RC(zinf_stream_synchronize(s));
	get(s, got, d->p, n * 4);
	T_CHECK(memcmp(got, p, n * 4) == 0, "adam n %llu: masters differ", (unsigned long long)n);
	get(s, got, d->m, n * 4);
	T_CHECK(memcmp(got, m, n * 4) == 0, "adam n %llu: exp_avg differs", (unsigned long long)n);
	get(s, got, d->v, n * 4);
	T_CHECK(memcmp(got, v, n * 4) == 0, "adam n %llu: exp_avg_sq differs",
		(unsigned long long)n);
	if (out_dtype) {
		get(s, got16, d->out, n * 2);
		T_CHECK(memcmp(got16, out, n * 2) == 0, "adam n %llu: 16-bit copies differ",
			(unsigned long long)n);
	}
	free(p);
	free(m);
	free(v);
	free(g);
	free(got);
	free(out);
	free(got16);
}

static void check_sums(struct zinf_stream *s, const struct bufs *d, uint64_t n, bool exact)
{
	float *a = malloc(MAX_N * 4), *b = malloc(MAX_N * 4), *got = malloc(MAX_N * 4);
	double sum, again, want;

	T_CHECK(a && b && got, "malloc");
	for (uint64_t i = 0; i < n; i++) {
		a[i] = value(i, 5);
		b[i] = value(i, 6);
	}
	put(s, d->acc, a, n * 4);
	put(s, d->g, b, n * 4);
	T_CHECK_RC(zinf_device_add_f32(s, d->acc, d->g, n));
	get(s, got, d->acc, n * 4);
	for (uint64_t i = 0; i < n; i++)
		a[i] += b[i];
	T_CHECK(memcmp(got, a, n * 4) == 0, "add n %llu: sums differ", (unsigned long long)n);
	want = zinf_grad_sumsq(a, ZINF_DTYPE_F32, n);
	T_CHECK_RC(zinf_device_sumsq_f32(s, d->acc, n, d->parts, &sum));
	T_CHECK_RC(zinf_device_sumsq_f32(s, d->acc, n, d->parts, &again));
	T_CHECK(memcmp(&sum, &again, sizeof(sum)) == 0, "sumsq n %llu: %.17g then %.17g",
		(unsigned long long)n, sum, again);
	T_CHECK(exact ? memcmp(&sum, &want, sizeof(sum)) == 0 : fabs(sum - want) <= 1e-12 * want,
		"sumsq n %llu: %.17g, the CPU's %.17g", (unsigned long long)n, sum, want);
	if (n >= 2) { /* inf and NaN reach the sum: the overflow check sees them */
		a[n / 2] = INFINITY;
		put(s, d->acc, a, n * 4);
		T_CHECK_RC(zinf_device_sumsq_f32(s, d->acc, n, d->parts, &sum));
		T_CHECK(isinf(sum), "sumsq n %llu with an inf: %g", (unsigned long long)n, sum);
		a[n - 1] = NAN;
		put(s, d->acc, a, n * 4);
		T_CHECK_RC(zinf_device_sumsq_f32(s, d->acc, n, d->parts, &sum));
		T_CHECK(isnan(sum), "sumsq n %llu with a NaN: %g", (unsigned long long)n, sum);
	}
	free(a);
	free(b);
	free(got);
}

/* Sums of lens[i] elements from different places of two buffers, all at once: each is
 * the bits of the same sum alone. */
static void check_sums_many(struct zinf_stream *s, const struct bufs *d)
{
	float *a = malloc(MAX_N * 4);
	const float *src[N_LENS];
	uint64_t n[N_LENS];
	double alone[N_LENS], many[N_LENS];

	T_CHECK(a != NULL, "malloc");
	for (uint64_t i = 0; i < MAX_N; i++)
		a[i] = value(i, 9);
	put(s, d->acc, a, MAX_N * 4);
	put(s, d->g, a, MAX_N * 4);
	for (size_t i = 0; i < N_LENS; i++) {
		n[i] = lens[N_LENS - 1 - i]; /* the longest first, then shorter ones past it */
		src[i] = (i % 2 ? d->g : d->acc) + (MAX_N - n[i]) / (i + 1);
		T_CHECK_RC(zinf_device_sumsq_f32(s, src[i], n[i], d->parts, &alone[i]));
	}
	T_CHECK_RC(zinf_device_sumsq_f32_many(s, N_LENS, src, n, d->parts_many, many));
	for (size_t i = 0; i < N_LENS; i++)
		T_CHECK(memcmp(&alone[i], &many[i], sizeof(double)) == 0,
			"sum %zu of %llu elements: %.17g alone, %.17g with the others", i,
			(unsigned long long)n[i], alone[i], many[i]);
	T_CHECK(many[N_LENS - 1] == 0 && many[0] > 0, "the empty sum %g, the longest %g",
		many[N_LENS - 1], many[0]);
	/* partial sums too small for the count: refused, nothing summed */
	T_CHECK(zinf_device_sumsq_f32_many(s, 2, src, n, d->parts, many) == -EINVAL &&
			many[0] == 0 && many[1] == 0 &&
			strstr(zinf_device_last_error(s->dev), "of 4096 bytes: partial sums"),
		"two sums in one sum's partial sums: %s", zinf_device_last_error(s->dev));
	free(a);
}

static void check_refusals(struct zinf_device *dev, struct zinf_stream *s, const struct bufs *d)
{
	static float host[64];
	struct zinf_adam_args a = {
		.p = d->p, .m = d->m, .v = host, .g = d->g, .g_dtype = ZINF_DTYPE_F32};
	double sum = 1;

	T_CHECK(zinf_device_add_f32(s, d->acc, host, 64) == -EINVAL &&
			strstr(zinf_device_last_error(dev), "add of 256 bytes: source"),
		"add from host memory: %s", zinf_device_last_error(dev));
	T_CHECK(zinf_device_add_f32(s, host, d->g, 64) == -EINVAL &&
			strstr(zinf_device_last_error(dev), "destination"),
		"add into host memory: %s", zinf_device_last_error(dev));
	T_CHECK(zinf_device_sumsq_f32(s, host, 64, d->parts, &sum) == -EINVAL && sum == 0 &&
			strstr(zinf_device_last_error(dev), "sum of squares"),
		"sumsq of host memory: %s", zinf_device_last_error(dev));
	T_CHECK(zinf_device_sumsq_f32(s, d->g, 64, host, &sum) == -EINVAL &&
			strstr(zinf_device_last_error(dev), "partial sums"),
		"sumsq parts in host memory: %s", zinf_device_last_error(dev));
	T_CHECK(zinf_device_adam_update(s, &a, 64) == -EINVAL &&
			strstr(zinf_device_last_error(dev), "adam of 256 bytes: exp_avg_sq"),
		"adam on host memory: %s", zinf_device_last_error(dev));
	host[0] = 7;
	T_CHECK(host[0] == 7, "host memory touched");
}

int main(int argc, char **argv)
{
	bool cuda = argc > 1 && strcmp(argv[1], "--device=cuda") == 0;
	struct zinf_device_opts o;
	struct zinf_device *dev;
	struct zinf_stream *s;
	struct bufs d;
	char err[512];

	zinf_log_set_level(ZINF_LOG_ERROR);
	if (cuda)
		t_require_gpu();
	zinf_device_opts_init(&o);
	o.backend = cuda ? ZINF_DEVICE_BACKEND_CUDA : ZINF_DEVICE_BACKEND_HOST;
	o.memory_limit = 32ull << 20;
	T_CHECK(zinf_device_create(&o, &dev, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_stream_create(dev, &s));
	T_CHECK_RC(zinf_device_alloc(dev, MAX_N * 4, (void **)&d.p));
	T_CHECK_RC(zinf_device_alloc(dev, MAX_N * 4, (void **)&d.m));
	T_CHECK_RC(zinf_device_alloc(dev, MAX_N * 4, (void **)&d.v));
	T_CHECK_RC(zinf_device_alloc(dev, MAX_N * 4, (void **)&d.g));
	T_CHECK_RC(zinf_device_alloc(dev, MAX_N * 4, (void **)&d.acc));
	T_CHECK_RC(zinf_device_alloc(dev, MAX_N * 2, (void **)&d.out));
	T_CHECK_RC(zinf_device_alloc(dev, ZINF_DEVICE_SUMSQ_BYTES, &d.parts));
	T_CHECK_RC(zinf_device_alloc(dev, N_LENS * ZINF_DEVICE_SUMSQ_BYTES, &d.parts_many));
	for (size_t i = 0; i < N_LENS; i++) {
		check_sums(s, &d, lens[i], !cuda);
		check_adam(s, &d, lens[i], ZINF_DTYPE_BF16, true);
		check_adam(s, &d, lens[i], ZINF_DTYPE_F16, false);
		check_adam(s, &d, lens[i], ZINF_DTYPE_NONE, true);
	}
	check_sums_many(s, &d);
	check_refusals(dev, s, &d);
	zinf_stream_destroy(s);
	T_CHECK_RC(zinf_device_free(dev, d.p));
	T_CHECK_RC(zinf_device_free(dev, d.m));
	T_CHECK_RC(zinf_device_free(dev, d.v));
	T_CHECK_RC(zinf_device_free(dev, d.g));
	T_CHECK_RC(zinf_device_free(dev, d.acc));
	T_CHECK_RC(zinf_device_free(dev, d.out));
	T_CHECK_RC(zinf_device_free(dev, d.parts));
	T_CHECK_RC(zinf_device_free(dev, d.parts_many));
	zinf_device_destroy(dev);
	return T_EXIT_PASS;
}

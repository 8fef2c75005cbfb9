/*
 * The pipelined NVMe optimizer step produces bit-identical master, m, v and param copy
 * to the in-memory step (zinf_adam_step over the whole shard) for the same inputs: over
 * three steps with changing grads and learning rate, with a sub_group_size that does
 * not divide the shard (and one sub-group holding it all), with each pipeline on and
 * off, for fp32 / bf16 / fp16 grads and bf16 / fp16 / no copy, on every I/O backend
 * (io_uring, libaio, psync), each with fast_init off and on (a fresh state written
 * with NULL moments; the second sub-group's master all zero). Also: every sub-group is
 * reported updated and the bytes moved are exactly the layout's, but for the first step
 * with fast_init, which reads the master parts alone and nothing of the zero sub-group.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_test_util.h"
#include "optim.h"
#include "optim_nvme.h"
#include "test.h"

#define N 1000003ull
#define STEPS 3

static float ref_p[N], ref_m[N], ref_v[N], got_p[N], got_m[N], got_v[N], grad32[N];
static uint16_t grad16[N], ref_out[N], got_out[N];

struct config {
	bool pipeline_read, pipeline_write;
	uint64_t sub_group_size;
	enum zinf_dtype grad_dtype, param_dtype;
	bool fast_init; /* set by main: each config runs with it off, then on */
};

static const struct config configs[] = {
	{true, true, 131071, ZINF_DTYPE_BF16, ZINF_DTYPE_BF16, false},
	{false, false, 131071, ZINF_DTYPE_F32, ZINF_DTYPE_F16, false},
	{true, false, 200003, ZINF_DTYPE_F16, ZINF_DTYPE_NONE, false},
	{false, true, 99991, ZINF_DTYPE_BF16, ZINF_DTYPE_F16, false},
	{true, true, 2 * N, ZINF_DTYPE_F32, ZINF_DTYPE_BF16, false}, /* one sub-group */
};
#define N_CONFIGS (sizeof(configs) / sizeof(configs[0]))

static uint64_t rng = 88172645463325252ull;

static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)(rng >> 40) / 16777216.0f - 0.5f;
}

/* New grads for a step, in dtype: fp32 values, then rounded to bf16 or fp16. */
static const void *make_grads(enum zinf_dtype dtype)
{
	for (uint64_t i = 0; i < N; i++) {
		float x = frand() * 0.02f;
		uint32_t u;

		grad32[i] = x;
		memcpy(&u, &x, sizeof(u));
		if (dtype == ZINF_DTYPE_BF16)
			grad16[i] = (uint16_t)(u >> 16);
		else if (dtype == ZINF_DTYPE_F16)
			grad16[i] = zinf_f32_to_f16(x);
	}
	return dtype == ZINF_DTYPE_F32 ? (const void *)grad32 : (const void *)grad16;
}

/* The first element where got and want differ bitwise (N when none). */
static uint64_t first_diff(const void *got, const void *want, uint64_t elem_size)
{
	for (uint64_t i = 0; i < N; i++) {
		if (memcmp((const char *)got + i * elem_size, (const char *)want + i * elem_size,
			   elem_size))
			return i;
	}
	return N;
}

static void check_same(const void *got, const void *want, uint64_t elem_size, const char *what,
		       const char *engine, const struct config *c, uint64_t t)
{
	uint64_t i = first_diff(got, want, elem_size), last = i;

	if (i == N)
		return;
	for (uint64_t k = i; k < N; k++) {
		if (memcmp((const char *)got + k * elem_size, (const char *)want + k * elem_size,
			   elem_size))
			last = k;
	}
	T_CHECK(0,
		"%s, sub-groups of %llu, pipelines %d/%d, fast_init %d, step %llu: %s differs at "
		"elements %llu..%llu (sub-group %llu..%llu)",
		engine, (unsigned long long)c->sub_group_size, c->pipeline_read, c->pipeline_write,
		c->fast_init, (unsigned long long)t, what, (unsigned long long)i,
		(unsigned long long)last, (unsigned long long)(i / c->sub_group_size),
		(unsigned long long)(last / c->sub_group_size));
}

static void run_config(struct zinf_io *io, struct zinf_adam *adam, const struct config *c,
		       const char *engine)
{
	struct zinf_adam_nvme_opts o;
	struct zinf_adam_nvme *h;
	struct zinf_adam_nvme_info info;
	char err[512];
	uint64_t bytes = 0, first_read = 0;
	unsigned want_buffers;

	zinf_adam_nvme_opts_init(&o);
	o.adam = adam;
	o.io = io;
	o.n_elems = N;
	o.sub_group_size = c->sub_group_size;
	o.pipeline_read = c->pipeline_read;
	o.pipeline_write = c->pipeline_write;
	o.fast_init = c->fast_init;
	T_CHECK(zinf_adam_nvme_create(&o, &h, err, sizeof(err)) == 0, "%s: create: %s", engine,
		err);
	zinf_adam_nvme_get_info(h, &info);
	want_buffers = 1 + c->pipeline_read + c->pipeline_write;
	if (info.n_sub_groups < want_buffers)
		want_buffers = (unsigned)info.n_sub_groups;
	T_CHECK(info.n_buffers == want_buffers, "%s: %u buffers, want %u", engine, info.n_buffers,
		want_buffers);
	T_CHECK(info.n_sub_groups == (N + c->sub_group_size - 1) / c->sub_group_size,
		"%s: %llu sub-groups", engine, (unsigned long long)info.n_sub_groups);
	for (uint64_t g = 0; g < info.n_sub_groups; g++) {
		uint64_t first, n, req;

		T_CHECK_RC(zinf_adam_nvme_sub_group(h, g, &first, &n, &req));
		T_CHECK(req % 4096 == 0 && req >= 3 * n * 4 && req < 3 * (n * 4 + 4096),
			"request of %llu bytes for %llu elements", (unsigned long long)req,
			(unsigned long long)n);
		bytes += req;
		/* fast_init: the master part alone, nothing for sub-group 1 (all zero) */
		first_read += c->fast_init ? (g == 1 ? 0 : req / 3) : req;
	}
	T_CHECK(bytes == info.step_read_bytes && bytes == info.step_write_bytes,
		"layout bytes %llu vs info %llu", (unsigned long long)bytes,
		(unsigned long long)info.step_read_bytes);

	for (uint64_t i = 0; i < N; i++) {
		ref_p[i] = frand();
		ref_m[i] = 0;
		ref_v[i] = 0;
		if (i / c->sub_group_size == 1)
			ref_p[i] = 0;
	}
	T_CHECK(zinf_adam_nvme_write_state(h, ref_p, NULL, NULL) == 0, "%s: write state: %s",
		engine, zinf_adam_nvme_last_error(h));
	for (uint64_t g = 0; g < info.n_sub_groups; g++)
		T_CHECK(h->zeroed[g] == (!c->fast_init ? NVME_ZERO_NONE
					 : g == 1      ? NVME_ZERO_ALL
						       : NVME_ZERO_MOMENTS),
			"%s, fast_init %d: sub-group %llu marked %d after the write", engine,
			c->fast_init, (unsigned long long)g, h->zeroed[g]);
	for (uint64_t t = 1; t <= STEPS; t++) {
		const void *grad = make_grads(c->grad_dtype);
		void *out = c->param_dtype ? got_out : NULL;
		struct zinf_adam_shard sh = {
			ref_p,	       ref_m,	       ref_v, grad, c->param_dtype ? ref_out : NULL,
			c->grad_dtype, c->param_dtype, N};
		struct zinf_adam_step_info si = {t, 1e-3 * (double)(4 - t), t == 2 ? 0.5f : 1.0f};
		struct zinf_adam_nvme_bufs b = {.grad = grad,
						.param_out = out,
						.grad_dtype = c->grad_dtype,
						.param_dtype = c->param_dtype};
		struct zinf_adam_nvme_result r;

		T_CHECK_RC(zinf_adam_step(adam, &sh, &si));
		T_CHECK(zinf_adam_nvme_step(h, &b, &si, &r) == 0, "%s step %llu: %s", engine,
			(unsigned long long)t, zinf_adam_nvme_last_error(h));
		T_CHECK(r.n_updated == info.n_sub_groups && r.failed_sub_group == -1,
			"%s: %llu of %llu sub-groups updated, failed %lld", engine,
			(unsigned long long)r.n_updated, (unsigned long long)info.n_sub_groups,
			(long long)r.failed_sub_group);
		for (uint64_t g = 0; g < info.n_sub_groups; g++)
			T_CHECK(r.updated[g] == 1, "sub-group %llu not marked updated",
				(unsigned long long)g);
		T_CHECK(r.read_bytes == (t == 1 ? first_read : bytes) && r.write_bytes == bytes,
			"%s, fast_init %d, step %llu: read %llu, wrote %llu bytes, layout says %llu "
			"(%llu for the first read)",
			engine, c->fast_init, (unsigned long long)t,
			(unsigned long long)r.read_bytes, (unsigned long long)r.write_bytes,
			(unsigned long long)bytes, (unsigned long long)first_read);
		for (uint64_t g = 0; g < info.n_sub_groups; g++)
			T_CHECK(h->zeroed[g] == NVME_ZERO_NONE,
				"sub-group %llu still marked %d after a step",
				(unsigned long long)g, h->zeroed[g]);
		memset(got_p, 0xff, sizeof(got_p));
		memset(got_m, 0xff, sizeof(got_m));
		memset(got_v, 0xff, sizeof(got_v));
		T_CHECK(zinf_adam_nvme_read_state(h, got_p, got_m, got_v) == 0, "read state: %s",
			zinf_adam_nvme_last_error(h));
		check_same(got_p, ref_p, 4, "master", engine, c, t);
		check_same(got_m, ref_m, 4, "exp_avg", engine, c, t);
		check_same(got_v, ref_v, 4, "exp_avg_sq", engine, c, t);
		if (c->param_dtype)
			check_same(got_out, ref_out, 2, "param copy", engine, c, t);
	}
	zinf_adam_nvme_destroy(h);
}

int main(void)
{
	struct zinf_adam_opts ao;
	struct zinf_adam *adam;
	char *dir = t_mkdtemp("/var/tmp");
	int ran = 0;

	T_CHECK(dir, "cannot make a scratch directory under /var/tmp");
	zinf_adam_opts_init(&ao);
	ao.threads = 2;
	T_CHECK_RC(zinf_adam_create(&adam, &ao));
	for (int e = 0; e < T_N_ENGINES; e++) {
		struct zinf_io_opts o;
		struct zinf_io *io;

		zinf_io_opts_init(&o);
		o.nvme_paths[0] = dir;
		o.n_paths = 1;
		o.block_size = 256 << 10; /* several pieces per sub-group request */
		o.file_size = 64 << 20;
		if (t_create(&o, &io, e) == 77)
			continue;
		for (unsigned k = 0; k < 2 * N_CONFIGS; k++) {
			struct config c = configs[k % N_CONFIGS];

			c.fast_init = k >= N_CONFIGS;
			run_config(io, adam, &c, t_engine_names[e]);
		}
		zinf_io_destroy(io);
		ran++;
	}
	zinf_adam_destroy(adam);
	t_rmrf(dir);
	if (!ran)
		T_SKIP("no I/O backend available");
	return T_EXIT_PASS;
}

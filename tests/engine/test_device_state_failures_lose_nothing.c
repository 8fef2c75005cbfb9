/* With the optimizer state on the device, a device failure loses nothing and leaks
 * nothing (failures injected into the device's ops table):
 * - a failed add of a module's gradients drops the step (-EIO, "step dropped"), as a
 *   failed accumulation on NVMe does, and the next step trains as if the failed one had
 *   never been: the weights equal an engine's that only ran the good step;
 * - a failed clearing of the state in finalize gives its device memory back and leaves
 *   finalize to be called again, which then trains as a fresh engine does;
 * - a step failing on the device gives back its buffer for the new 16-bit copies (and
 *   waits for what was queued before freeing it): the device holds what it held before.
 * White-box: the engine's device (engine_internal.h). */
#include <errno.h>
#include <math.h>

#include "engine_internal.h"
#include "test.h"
#include "zinf/engine.h"
#include "zinf/log.h"
#include "zinf/zinf.h"

#define N_MOD 2
#define ROWS 16
#define COLS 24
#define ELEMS (ROWS * COLS)

static struct zinf_device_ops fake_ops;
static const struct zinf_device_ops *real_ops;
static int fail_add = -1, fail_memset = -1; /* fail the n-th call from now (0: the next) */

static int fake_add(struct zinf_stream *s, float *dst, const float *src, uint64_t n)
{
	if (fail_add >= 0 && fail_add-- == 0)
		return zinf_device_set_error(s->dev, ZINF_EDEVICE, "add: injected failure");
	return real_ops->add_f32(s, dst, src, n);
}

static int fake_memset(struct zinf_stream *s, void *dst, int value, uint64_t len)
{
	/* ZINF_DEVICE_POISON's fills of new allocations are not the engine's */
	if (s != s->dev->poison && fail_memset >= 0 && fail_memset-- == 0)
		return zinf_device_set_error(s->dev, ZINF_EDEVICE, "memset: injected failure");
	return real_ops->memset_async(s, dst, value, len);
}

struct run {
	struct zinf_config *cfg;
	struct zinf_engine *e;
	uint32_t mod[N_MOD], par[N_MOD];
};

static uint64_t used(const struct run *r)
{
	struct zinf_device_stats ds;

	zinf_device_get_stats(r->e->dev, &ds);
	return ds.used;
}

/* An engine with the optimizer state on the device and N_MOD modules of one
 * ROWS x COLS matrix in dtype, finalized when fin. */
static void up(struct run *r, enum zinf_dtype dtype, bool fin)
{
	struct zinf_config_resolve_info info = {.world_size = 1};
	uint64_t shape[2] = {ROWS, COLS};
	char err[512];

	T_CHECK_RC(zinf_config_create(&r->cfg));
	T_CHECK(zinf_config_load_string(
			r->cfg,
			"{\"train_micro_batch_size_per_gpu\": 1,"
			" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
			" \"zero_optimization\": {\"stage\": 3},"
			" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"1MiB\","
			" \"pinned_memory_limit\": \"2MiB\"}}",
			"state.json") == 0,
		"%s", zinf_config_last_error(r->cfg));
	T_CHECK(zinf_config_resolve(r->cfg, &info) == 0, "%s", zinf_config_last_error(r->cfg));
	T_CHECK(zinf_engine_create(r->cfg, &r->e, err, sizeof(err)) == 0, "%s", err);
	real_ops = r->e->dev->ops;
	fake_ops = *real_ops;
	fake_ops.add_f32 = fake_add;
	fake_ops.memset_async = fake_memset;
	r->e->dev->ops = &fake_ops;
	for (int m = 0; m < N_MOD; m++) {
		char name[16];
		snprintf(name, sizeof(name), "block%d", m);
		T_CHECK_RC(zinf_module_add(r->e, name, &r->mod[m]));
		T_CHECK_RC(zinf_param_add(r->e, r->mod[m], name, dtype, 2, shape, 0, &r->par[m]));
	}
	if (fin)
		T_CHECK(zinf_engine_finalize(r->e) == 0, "%s", zinf_last_error(r->e));
}

static void load(struct run *r)
{
	float w[ELEMS];

	for (int m = 0; m < N_MOD; m++) {
		for (int i = 0; i < ELEMS; i++)
			w[i] = (float)(0.1 * sin(0.3 * i + m));
		T_CHECK(zinf_param_load(r->e, r->par[m], w, ZINF_DTYPE_F32) == 0, "%s",
			zinf_last_error(r->e));
	}
}

/* One micro-batch: gradients scale * (w - 0.5); 0, or the first failure of grads_ready
 * (the other modules still run). */
static int micro(struct run *r, double scale)
{
	int first = 0;

	for (int m = 0; m < N_MOD; m++) {
		const void *w;
		float *g;
		int rc;

		T_CHECK(zinf_module_fetch(r->e, r->mod[m]) == 0 &&
				zinf_module_wait(r->e, r->mod[m]) == 0,
			"%s", zinf_last_error(r->e));
		T_CHECK_RC(zinf_module_grads(r->e, r->mod[m]));
		w = zinf_param_data(r->e, r->par[m]);
		g = zinf_param_grad(r->e, r->par[m]);
		T_CHECK(w && g, "pointers");
		for (int i = 0; i < ELEMS; i++) {
			uint32_t u = r->e->params[r->par[m]].dtype == ZINF_DTYPE_F32
					     ? ((const uint32_t *)w)[i]
					     : (uint32_t)((const uint16_t *)w)[i] << 16;
			float wi;
			memcpy(&wi, &u, 4);
			g[i] += (float)(scale * (wi - 0.5));
		}
		rc = zinf_module_grads_ready(r->e, r->mod[m]);
		if (rc && !first)
			first = rc;
		T_CHECK_RC(zinf_module_release(r->e, r->mod[m]));
	}
	return first;
}

static void weights(struct run *r, float out[N_MOD][ELEMS])
{
	for (int m = 0; m < N_MOD; m++)
		T_CHECK_RC(zinf_param_save(r->e, r->par[m], out[m], ZINF_DTYPE_F32));
}

static void down(struct run *r)
{
	zinf_engine_destroy(r->e);
	zinf_config_destroy(r->cfg);
}

int main(void)
{
	static float ref[N_MOD][ELEMS], got[N_MOD][ELEMS];
	struct zinf_step_result res;
	struct run a, b;
	uint64_t before;
	int rc;

	zinf_log_set_level(ZINF_LOG_ERROR);

	/* the reference: one step of the good micro-batch */
	up(&a, ZINF_DTYPE_F32, true);
	load(&a);
	T_CHECK_RC(micro(&a, 2.0));
	T_CHECK(zinf_step(a.e, &res) == 0 && res.step == 1, "%s", zinf_last_error(a.e));
	weights(&a, ref);
	down(&a);

	/* an add failing on the second module: that step is dropped, the next is clean */
	up(&b, ZINF_DTYPE_F32, true);
	load(&b);
	fail_add = 1;
	rc = micro(&b, -7.0);
	T_CHECK(rc == ZINF_EDEVICE && strstr(zinf_last_error(b.e), "injected failure"),
		"grads_ready with a failed add: %d %s", rc, zinf_last_error(b.e));
	rc = zinf_step(b.e, &res);
	T_CHECK(rc == -EIO && strstr(zinf_last_error(b.e), "step dropped"),
		"step after a failed add: %d %s", rc, zinf_last_error(b.e));
	T_CHECK_RC(micro(&b, 2.0));
	T_CHECK(zinf_step(b.e, &res) == 0 && res.step == 1, "%s", zinf_last_error(b.e));
	weights(&b, got);
	T_CHECK(memcmp(ref, got, sizeof(ref)) == 0,
		"after a dropped step the weights differ from one clean step");
	down(&b);

	/* the state's clearing failing in finalize: its memory given back, a second
	 * finalize trains as a fresh engine */
	up(&b, ZINF_DTYPE_F32, false);
	before = used(&b);
	fail_memset = 0;
	rc = zinf_engine_finalize(b.e);
	T_CHECK(rc == ZINF_EDEVICE && strstr(zinf_last_error(b.e), "injected failure"),
		"finalize with a failed clearing: %d %s", rc, zinf_last_error(b.e));
	T_CHECK(used(&b) == before && !b.e->dstate,
		"after the failed finalize: %llu bytes used, %llu before",
		(unsigned long long)used(&b), (unsigned long long)before);
	T_CHECK(zinf_engine_finalize(b.e) == 0, "finalize again: %s", zinf_last_error(b.e));
	load(&b);
	T_CHECK_RC(micro(&b, 2.0));
	T_CHECK(zinf_step(b.e, &res) == 0, "%s", zinf_last_error(b.e));
	weights(&b, got);
	T_CHECK(memcmp(ref, got, sizeof(ref)) == 0, "after a second finalize the weights differ");
	down(&b);

	/* a step failing on the device (the first module's clearing, after its copies were
	 * queued): nothing stays allocated */
	up(&b, ZINF_DTYPE_BF16, true);
	load(&b);
	T_CHECK_RC(micro(&b, 2.0));
	before = used(&b);
	fail_memset = 0;
	rc = zinf_step(b.e, &res);
	T_CHECK(rc == ZINF_EDEVICE, "step with a failed clearing: %d %s", rc, zinf_last_error(b.e));
	T_CHECK(used(&b) == before, "after the failed step: %llu bytes used, %llu before",
		(unsigned long long)used(&b), (unsigned long long)before);
	down(&b);
	return T_EXIT_PASS;
}

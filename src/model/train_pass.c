/*
 * zinf train: one micro-batch through the engine. Forward module by module (fetch, wait,
 * bind the weights from zinf_param_data, run, release), the loss, and backward in
 * reverse: fetch again (recomputing the layer's forward from its saved input with
 * activation checkpointing), take the module's gradient buffers, accumulate into them,
 * hand them back (zinf_module_grads_ready) and release. docs/model.md has the order.
 *
 * The model runtime is the one of the engine's device kind (llama_backend.h): the CPU
 * runtime on the host backend, the CUDA runtime on a GPU, whose activations come from
 * the engine's device budget. The runtime's queued work is waited for (sync) before the
 * engine may copy or free what it uses: before zinf_module_grads_ready and
 * zinf_module_release.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "zinf/error.h"

#define ROUND_UP(x, a) (((x) + (a)-1) / (a) * (a))

/* Device memory of the CUDA runtime: the engine's budget. */
static int engine_mem_alloc(void *ctx, uint64_t bytes, void **out)
{
	return zinf_engine_device_alloc(ctx, bytes, out);
}

static int engine_mem_free(void *ctx, void *ptr)
{
	return zinf_engine_device_free(ctx, ptr);
}

static const char *engine_mem_error(void *ctx)
{
	return zinf_last_error(ctx);
}

uint64_t train_pass_cpu_ckpt_bytes(const struct train_model *tm, uint64_t B, uint64_t T)
{
	return tm->L > 1 ? (uint64_t)(tm->L - 1) * B * T * tm->lc.hidden_size * sizeof(float) : 0;
}

/* Saved activations kept: every layer's, or with checkpointing the one being recomputed. */
static int acts_count(const struct train_model *tm, bool ckpt)
{
	return ckpt ? 1 : tm->L;
}

/* Layer inputs in runtime memory: every layer's and the head's, or with cpu_ckpt two
 * (the rest in host memory). */
static uint64_t xs_count(const struct train_model *tm, bool cpu_ckpt)
{
	return cpu_ckpt ? 2 : (uint64_t)tm->L + 1;
}

static void rt_opts_for(const struct train_model *tm, const struct train_pass_opts *po,
			struct llama_rt_opts *opts)
{
	llama_rt_opts_init(opts);
	opts->weight_dtype = tm->param_dtype;
	opts->tf32 = po->tf32;
}

int train_pass_sizes(const struct train_model *tm, enum zinf_engine_device kind, int B, int T,
		     const struct train_pass_opts *po, uint64_t *runtime_bytes,
		     uint64_t *host_bytes)
{
	const struct llama_rt_ops *ops = llama_rt_ops_for(kind);
	/* on a GPU each is one allocation from the engine's budget, in 256-byte units */
	uint64_t unit = kind == ZINF_ENGINE_DEVICE_CUDA ? 256 : 1;
	uint64_t nc = (uint64_t)B * T * tm->lc.hidden_size * sizeof(float);
	bool cpu_ckpt = po->ckpt && po->cpu_ckpt;
	struct llama_rt_opts opts;
	struct llama_rt_sizes z;
	int rc;

	rt_opts_for(tm, po, &opts);
	rc = ops->sizes(&tm->lc, &opts, B, T, &z);
	if (rc)
		return rc;
	*runtime_bytes = ROUND_UP(z.runtime_bytes, unit) +
			 (uint64_t)acts_count(tm, po->ckpt) * ROUND_UP(z.acts_bytes, unit) +
			 ROUND_UP(xs_count(tm, cpu_ckpt) * nc, unit) + ROUND_UP(nc, unit);
	*host_bytes = z.host_bytes;
	if (cpu_ckpt && tm->L > 1)
		*host_bytes += train_pass_cpu_ckpt_bytes(tm, B, T);
	return 0;
}

int train_pass_create(struct train_pass *p, struct train_model *tm, struct zinf_engine *e, int B,
		      int T, const struct train_pass_opts *po, char *err, size_t errlen)
{
	struct llama_rt_opts opts;
	uint64_t nc_bytes;
	int rc;

	memset(p, 0, sizeof(*p));
	p->tm = tm;
	p->e = e;
	p->B = B;
	p->T = T;
	p->N = B * T;
	p->C = tm->lc.hidden_size;
	p->ckpt = po->ckpt;
	p->cpu_ckpt = po->ckpt && po->cpu_ckpt;
	p->ops = llama_rt_ops_for(zinf_engine_device_kind(e));
	rt_opts_for(tm, po, &opts);
	opts.mem.alloc = engine_mem_alloc;
	opts.mem.free = engine_mem_free;
	opts.mem.last_error = engine_mem_error;
	opts.mem.ctx = e;
	opts.cuda_device = zinf_engine_device_ordinal(e);
	rc = p->ops->create(&tm->lc, &opts, B, T, &p->m, err, errlen);
	if (rc)
		return rc;
	nc_bytes = (uint64_t)p->N * p->C * sizeof(float);
	p->n_acts = acts_count(tm, p->ckpt);
	p->acts = calloc((size_t)p->n_acts, sizeof(*p->acts));
	if (!p->acts) {
		rc = -ENOMEM;
		snprintf(err, errlen, "model runtime: out of memory for B %d x T %d activations", B,
			 T);
		goto out_fail;
	}
	if (p->cpu_ckpt && tm->L > 1) { /* x[L-1] never leaves its buffer */
		rc = p->ops->host_alloc(p->m, train_pass_cpu_ckpt_bytes(tm, B, T),
					(void **)&p->host_xs);
		if (rc) {
			snprintf(err, errlen,
				 "model runtime: out of host memory for the activation checkpoints "
				 "(%llu bytes: %d layer inputs x B %d x T %d x %d floats)",
				 (unsigned long long)train_pass_cpu_ckpt_bytes(tm, B, T), tm->L - 1,
				 B, T, p->C);
			goto out_fail;
		}
	}
	rc = p->ops->buf_alloc(p->m, xs_count(tm, p->cpu_ckpt) * nc_bytes, (void **)&p->xs);
	if (!rc)
		rc = p->ops->buf_alloc(p->m, nc_bytes, (void **)&p->d);
	for (int i = 0; !rc && i < p->n_acts; i++)
		rc = p->ops->acts_create(p->m, &p->acts[i]);
	if (rc) {
		snprintf(err, errlen, "model runtime (%s): activations of B %d x T %d: %s",
			 p->ops->name, B, T, p->ops->last_error(p->m));
		goto out_fail;
	}
	return 0;
out_fail:
	train_pass_destroy(p);
	return rc;
}

void train_pass_destroy(struct train_pass *p)
{
	if (p->m) {
		if (p->acts)
			for (int i = 0; i < p->n_acts; i++)
				if (p->acts[i])
					p->ops->acts_destroy(p->m, p->acts[i]);
		if (p->xs)
			p->ops->buf_free(p->m, p->xs);
		if (p->d)
			p->ops->buf_free(p->m, p->d);
		if (p->host_xs)
			p->ops->host_free(p->m, p->host_xs);
		p->ops->destroy(p->m);
	}
	free(p->acts);
	memset(p, 0, sizeof(*p));
}

/* Layer l's input (l = L: the head's) in runtime memory; with cpu_ckpt the forward
 * alternates between two buffers, and backward brings the input back into the one. */
static float *layer_x(const struct train_pass *p, int l)
{
	return p->xs + (size_t)(p->cpu_ckpt ? l & 1 : l) * p->N * p->C;
}

static float *host_x(const struct train_pass *p, int l)
{
	return p->host_xs + (size_t)l * p->N * p->C;
}

/* The engine parameter of slot s of module mod; the tied LM head is the embedding's. */
static uint32_t slot_param(const struct train_pass *p, int mod, int s)
{
	const struct train_model *tm = p->tm;

	if (mod == tm->L + 1 && s == ZINF_LLAMA_LM_HEAD && tm->lc.tie_word_embeddings)
		return tm->param[0][ZINF_LLAMA_EMBED_TOKENS];
	return tm->param[mod][s];
}

static int engine_fail(const struct train_pass *p, int rc, const char *what, int mod, char *err,
		       size_t errlen)
{
	snprintf(err, errlen, "%s of module %d: %s", what, mod, zinf_last_error(p->e));
	return rc ? rc : ZINF_ESTATE;
}

static int model_fail(const struct train_pass *p, int rc, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s", p->ops->last_error(p->m));
	return rc;
}

/* fp32 views of module mod's weights (fetched and ready) in w. */
static int bind(struct train_pass *p, int mod, const float **w, char *err, size_t errlen)
{
	struct llama_rt_tensor in[ZINF_LLAMA_MAX_PARAMS];
	int rc;

	for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
		uint32_t id = slot_param(p, mod, s);

		in[s].data = id == TRAIN_NO_PARAM ? NULL : zinf_param_data(p->e, id);
		in[s].dtype = p->tm->param_dtype;
	}
	rc = p->ops->bind(p->m, train_module_kind(p->tm, mod), mod > 0 ? mod - 1 : 0, in, w);
	return rc ? model_fail(p, rc, err, errlen) : 0;
}

static int fetch(struct train_pass *p, int mod, char *err, size_t errlen)
{
	uint32_t id = p->tm->module[mod];
	int rc;

	if (train_stop_up(p->tm->stop)) { /* a stop asked for mid-pass: at the next module */
		snprintf(err, errlen, "asked to stop, at module %d", mod);
		return -EINTR;
	}
	rc = zinf_module_fetch(p->e, id);
	if (!rc)
		rc = zinf_module_wait(p->e, id);
	return rc ? engine_fail(p, rc, "fetch", mod, err, errlen) : 0;
}

/* The runtime's queued work is done before the engine may evict or copy its inputs. */
static int sync(struct train_pass *p, char *err, size_t errlen)
{
	int rc = p->ops->sync(p->m);

	return rc ? model_fail(p, rc, err, errlen) : 0;
}

static int release(struct train_pass *p, int mod, char *err, size_t errlen)
{
	int rc = sync(p, err, errlen);

	if (rc)
		return rc;
	rc = zinf_module_release(p->e, p->tm->module[mod]);
	return rc ? engine_fail(p, rc, "release", mod, err, errlen) : 0;
}

/* Gradient buffers of module mod's slots (the tied LM head: the embedding's). */
static void grads_of(struct train_pass *p, int mod, float **g)
{
	for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
		uint32_t id = slot_param(p, mod, s);

		g[s] = id == TRAIN_NO_PARAM ? NULL : zinf_param_grad(p->e, id);
	}
}

static int grads_out(struct train_pass *p, int mod, char *err, size_t errlen)
{
	int rc = zinf_module_grads(p->e, p->tm->module[mod]);

	return rc ? engine_fail(p, rc, "gradients", mod, err, errlen) : 0;
}

static int grads_in(struct train_pass *p, int mod, char *err, size_t errlen)
{
	int rc = sync(p, err, errlen);

	if (rc)
		return rc;
	rc = zinf_module_grads_ready(p->e, p->tm->module[mod]);
	return rc ? engine_fail(p, rc, "gradients ready", mod, err, errlen) : 0;
}

#define TRY(call)                                                                                  \
	do {                                                                                       \
		rc = (call);                                                                       \
		if (rc)                                                                            \
			return rc;                                                                 \
	} while (0)

#define TRY_MODEL(call)                                                                            \
	do {                                                                                       \
		rc = (call);                                                                       \
		if (rc)                                                                            \
			return model_fail(p, rc, err, errlen);                                     \
	} while (0)

static int forward_layers(struct train_pass *p, bool backward, char *err, size_t errlen)
{
	uint64_t nc_bytes = (uint64_t)p->N * p->C * sizeof(float);
	const float *w[ZINF_LLAMA_MAX_PARAMS];
	int rc, L = p->tm->L;

	TRY(fetch(p, 0, err, errlen));
	TRY(bind(p, 0, w, err, errlen));
	TRY_MODEL(p->ops->embed_forward(p->m, w, layer_x(p, 0)));
	TRY(release(p, 0, err, errlen));
	for (int l = 0; l < L; l++) {
		/* its input to host memory, queued on the runtime's stream before layer l + 1
		 * writes its output into the ring buffer holding it (the stream keeps them in
		 * order); the last layer's input stays (the head writes no layer input) */
		if (p->cpu_ckpt && backward && l < L - 1)
			TRY_MODEL(p->ops->download_queued(p->m, host_x(p, l), layer_x(p, l),
							  nc_bytes));
		TRY(fetch(p, l + 1, err, errlen));
		TRY(bind(p, l + 1, w, err, errlen));
		TRY_MODEL(p->ops->layer_forward(p->m, w, layer_x(p, l), layer_x(p, l + 1),
						p->acts[p->ckpt ? 0 : l]));
		TRY(release(p, l + 1, err, errlen));
	}
	return 0;
}

/* The head: forward (loss), and backward into the head's gradients (and the embedding's,
 * when tied: both gradient buffers are out while the head runs). */
static int head(struct train_pass *p, bool backward, float *loss, char *err, size_t errlen)
{
	const float *w[ZINF_LLAMA_MAX_PARAMS];
	float *g[ZINF_LLAMA_MAX_PARAMS];
	bool tied = p->tm->lc.tie_word_embeddings;
	int rc, H = p->tm->L + 1;

	if (backward) { /* gradient buffers before the weights, as in backward_layers */
		TRY(grads_out(p, H, err, errlen));
		if (tied)
			TRY(grads_out(p, 0, err, errlen));
	}
	TRY(fetch(p, H, err, errlen));
	if (tied)
		TRY(fetch(p, 0, err, errlen));
	TRY(bind(p, H, w, err, errlen));
	TRY_MODEL(p->ops->head_forward(p->m, w, layer_x(p, H - 1), loss));
	if (backward) {
		grads_of(p, H, g);
		TRY_MODEL(p->ops->head_backward(p->m, w, layer_x(p, H - 1),
						(float)zinf_loss_scale(p->e), p->d, g));
		TRY(grads_in(p, H, err, errlen));
		if (tied)
			TRY(grads_in(p, 0, err, errlen));
	}
	if (tied)
		TRY(release(p, 0, err, errlen));
	return release(p, H, err, errlen);
}

static int backward_layers(struct train_pass *p, char *err, size_t errlen)
{
	const float *w[ZINF_LLAMA_MAX_PARAMS];
	float *g[ZINF_LLAMA_MAX_PARAMS];
	uint64_t nc_bytes = (uint64_t)p->N * p->C * sizeof(float);
	int rc;

	for (int l = p->tm->L - 1; l >= 0; l--) {
		/* The gradient buffer first: it comes from the top of the device heap, the
		 * layer's weights then from the bottom, so a tight budget never fails on a
		 * layer held in the middle of the free space. */
		TRY(grads_out(p, l + 1, err, errlen));
		TRY(fetch(p, l + 1, err, errlen));
		TRY(bind(p, l + 1, w, err, errlen));
		/* queued before the backward that reads it, after the previous layer's that
		 * read the buffer (the stream keeps them in order); x[L-1] never left */
		if (p->cpu_ckpt && l < p->tm->L - 1)
			TRY_MODEL(
				p->ops->upload_queued(p->m, layer_x(p, l), host_x(p, l), nc_bytes));
		grads_of(p, l + 1, g);
		TRY_MODEL(p->ops->layer_backward(p->m, w, layer_x(p, l), p->acts[p->ckpt ? 0 : l],
						 p->ckpt, p->d, p->d, g));
		TRY(grads_in(p, l + 1, err, errlen));
		TRY(release(p, l + 1, err, errlen));
	}
	/* The embedding's backward needs no weights, only its gradient buffer. */
	TRY(grads_out(p, 0, err, errlen));
	grads_of(p, 0, g);
	TRY_MODEL(p->ops->embed_backward(p->m, p->d, g));
	return grads_in(p, 0, err, errlen);
}

int train_pass_run(struct train_pass *p, const int32_t *inputs, const int32_t *targets,
		   bool backward, float *loss, char *err, size_t errlen)
{
	int rc;

	TRY_MODEL(p->ops->set_tokens(p->m, inputs, targets));
	TRY(forward_layers(p, backward, err, errlen));
	TRY(head(p, backward, loss, err, errlen));
	if (backward)
		TRY(backward_layers(p, err, errlen));
	return 0;
}

/*
 * zinf train: one micro-batch through the engine. Forward module by module (fetch, wait,
 * bind the weights from zinf_param_data, run, release), the loss, and backward in
 * reverse: fetch again (recomputing the layer's forward from its saved input with
 * activation checkpointing), take the module's gradient buffers, accumulate into them,
 * hand them back (zinf_module_grads_ready) and release. docs/model.md has the order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "train_internal.h"
#include "zinf/error.h"

int train_pass_create(struct train_pass *p, struct train_model *tm, struct zinf_engine *e, int B,
		      int T, bool ckpt, char *err, size_t errlen)
{
	uint64_t scratch = 0, embed;
	int rc;

	memset(p, 0, sizeof(*p));
	p->tm = tm;
	p->e = e;
	p->B = B;
	p->T = T;
	p->N = B * T;
	p->C = tm->lc.hidden_size;
	p->ckpt = ckpt;
	rc = zinf_llama_create(&tm->lc, NULL, B, T, &p->m, err, errlen);
	if (rc)
		return rc;
	p->n_acts = ckpt ? 1 : tm->L;
	p->acts = calloc((size_t)p->n_acts, sizeof(*p->acts));
	p->xs = malloc((size_t)(tm->L + 1) * p->N * p->C * sizeof(float));
	p->d = malloc((size_t)p->N * p->C * sizeof(float));
	if (!p->acts || !p->xs || !p->d)
		goto out_nomem;
	for (int i = 0; i < p->n_acts; i++)
		if (zinf_llama_acts_create(p->m, &p->acts[i]))
			goto out_nomem;
	if (tm->param_dtype == ZINF_DTYPE_F16) {
		/* fp16 weights are viewed as fp32 here: the runtime reads fp32 and bf16. */
		embed = (uint64_t)tm->lc.vocab_size * tm->lc.hidden_size;
		for (int mod = 0; mod < tm->L + 2; mod++) {
			uint64_t sum = 0;

			for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++)
				if (tm->param[mod][s] != TRAIN_NO_PARAM)
					sum += zinf_param_elems(e, tm->param[mod][s]);
			if (sum > scratch)
				scratch = sum;
		}
		p->scratch = malloc((scratch + embed) * sizeof(float));
		if (!p->scratch)
			goto out_nomem;
	}
	return 0;
out_nomem:
	snprintf(err, errlen, "model runtime: out of memory for B %d x T %d activations", B, T);
	train_pass_destroy(p);
	return -ENOMEM;
}

void train_pass_destroy(struct train_pass *p)
{
	if (p->acts)
		for (int i = 0; i < p->n_acts; i++)
			zinf_llama_acts_destroy(p->acts[i]);
	free(p->acts);
	free(p->xs);
	free(p->d);
	free(p->scratch);
	zinf_llama_destroy(p->m);
	memset(p, 0, sizeof(*p));
}

static float *layer_x(const struct train_pass *p, int l)
{
	return p->xs + (size_t)l * p->N * p->C;
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

/* fp32 views of module mod's weights (fetched and ready) in w. */
static int bind(struct train_pass *p, int mod, const float **w, char *err, size_t errlen)
{
	struct zinf_llama_tensor in[ZINF_LLAMA_MAX_PARAMS];
	float *scratch = p->scratch;
	int rc;

	for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
		uint32_t id = slot_param(p, mod, s);
		void *data = id == TRAIN_NO_PARAM ? NULL : zinf_param_data(p->e, id);

		in[s].dtype =
			p->tm->param_dtype == ZINF_DTYPE_BF16 ? ZINF_LLAMA_BF16 : ZINF_LLAMA_F32;
		in[s].data = data;
		if (data && p->tm->param_dtype == ZINF_DTYPE_F16) {
			uint64_t n = zinf_param_elems(p->e, id);

			zinf_st_convert(scratch, ZINF_ST_F32, data, ZINF_ST_F16, n);
			in[s].data = scratch;
			scratch += n;
		}
	}
	rc = zinf_llama_bind(p->m, train_module_kind(p->tm, mod), mod > 0 ? mod - 1 : 0, in, w);
	if (rc)
		snprintf(err, errlen, "%s", zinf_llama_last_error(p->m));
	return rc;
}

static int fetch(struct train_pass *p, int mod, char *err, size_t errlen)
{
	uint32_t id = p->tm->module[mod];
	int rc = zinf_module_fetch(p->e, id);

	if (!rc)
		rc = zinf_module_wait(p->e, id);
	return rc ? engine_fail(p, rc, "fetch", mod, err, errlen) : 0;
}

static int release(struct train_pass *p, int mod, char *err, size_t errlen)
{
	int rc = zinf_module_release(p->e, p->tm->module[mod]);

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
	int rc = zinf_module_grads_ready(p->e, p->tm->module[mod]);

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
		if (rc) {                                                                          \
			snprintf(err, errlen, "%s", zinf_llama_last_error(p->m));                  \
			return rc;                                                                 \
		}                                                                                  \
	} while (0)

static int forward_layers(struct train_pass *p, const int32_t *inputs, char *err, size_t errlen)
{
	const float *w[ZINF_LLAMA_MAX_PARAMS];
	int rc, L = p->tm->L;

	TRY(fetch(p, 0, err, errlen));
	TRY(bind(p, 0, w, err, errlen));
	TRY_MODEL(zinf_llama_embed_forward(p->m, w, inputs, layer_x(p, 0)));
	TRY(release(p, 0, err, errlen));
	for (int l = 0; l < L; l++) {
		TRY(fetch(p, l + 1, err, errlen));
		TRY(bind(p, l + 1, w, err, errlen));
		TRY_MODEL(zinf_llama_layer_forward(p->m, w, layer_x(p, l), layer_x(p, l + 1),
						   p->acts[p->ckpt ? 0 : l]));
		TRY(release(p, l + 1, err, errlen));
	}
	return 0;
}

/* The head: forward (loss), and backward into the head's gradients (and the embedding's,
 * when tied: both gradient buffers are out while the head runs). */
static int head(struct train_pass *p, const int32_t *targets, bool backward, float *loss, char *err,
		size_t errlen)
{
	const float *w[ZINF_LLAMA_MAX_PARAMS];
	float *g[ZINF_LLAMA_MAX_PARAMS];
	bool tied = p->tm->lc.tie_word_embeddings;
	int rc, H = p->tm->L + 1;

	TRY(fetch(p, H, err, errlen));
	if (tied)
		TRY(fetch(p, 0, err, errlen));
	TRY(bind(p, H, w, err, errlen));
	TRY_MODEL(zinf_llama_head_forward(p->m, w, layer_x(p, H - 1), targets, loss));
	if (backward) {
		TRY(grads_out(p, H, err, errlen));
		if (tied)
			TRY(grads_out(p, 0, err, errlen));
		grads_of(p, H, g);
		TRY_MODEL(zinf_llama_head_backward(p->m, w, layer_x(p, H - 1), targets,
						   (float)zinf_loss_scale(p->e), p->d, g));
		TRY(grads_in(p, H, err, errlen));
		if (tied)
			TRY(grads_in(p, 0, err, errlen));
	}
	if (tied)
		TRY(release(p, 0, err, errlen));
	return release(p, H, err, errlen);
}

static int backward_layers(struct train_pass *p, const int32_t *inputs, char *err, size_t errlen)
{
	const float *w[ZINF_LLAMA_MAX_PARAMS];
	float *g[ZINF_LLAMA_MAX_PARAMS];
	int rc;

	for (int l = p->tm->L - 1; l >= 0; l--) {
		TRY(fetch(p, l + 1, err, errlen));
		TRY(grads_out(p, l + 1, err, errlen));
		TRY(bind(p, l + 1, w, err, errlen));
		grads_of(p, l + 1, g);
		TRY_MODEL(zinf_llama_layer_backward(
			p->m, w, layer_x(p, l), p->acts[p->ckpt ? 0 : l], p->ckpt, p->d, p->d, g));
		TRY(grads_in(p, l + 1, err, errlen));
		TRY(release(p, l + 1, err, errlen));
	}
	/* The embedding's backward needs no weights, only its gradient buffer. */
	TRY(grads_out(p, 0, err, errlen));
	grads_of(p, 0, g);
	TRY_MODEL(zinf_llama_embed_backward(p->m, inputs, p->d, g));
	return grads_in(p, 0, err, errlen);
}

int train_pass_run(struct train_pass *p, const int32_t *inputs, const int32_t *targets,
		   bool backward, float *loss, char *err, size_t errlen)
{
	int rc;

	TRY(forward_layers(p, inputs, err, errlen));
	TRY(head(p, targets, backward, loss, err, errlen));
	if (backward)
		TRY(backward_layers(p, inputs, err, errlen));
	return 0;
}

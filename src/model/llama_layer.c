/*
 * One Llama decoder layer on the CPU, composed from the kernels of llama_ops.h:
 *
 *   h = x + o_proj(attention(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))), n1 = norm1(x)
 *   y = h + down_proj(silu(gate_proj(n2)) * up_proj(n2)),                      n2 = norm2(h)
 *
 * Projections carry their biases when the config has them (attention_bias: q/k/v,
 * attention_out_bias: o, mlp_bias: gate/up/down), and attention uses the sliding window
 * the last zinf_llama_bind of this layer chose (llama.h: layers >= max_window_layers).
 *
 * Forward saves what backward needs in a struct zinf_llama_acts; with activation
 * checkpointing the trainer keeps only x and backward recomputes the rest with the same
 * code, which is what makes both modes bit-identical.
 */
#include <errno.h>
#include <stdlib.h>

#include "llama_internal.h"
#include "llama_ops.h"

/* Lay a's buffers out in base (NULL: only measure); returns the floats needed. */
static uint64_t acts_layout(const struct zinf_llama *m, struct zinf_llama_acts *a, float *base)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	uint64_t N = m->N, C = cfg->hidden_size, I = cfg->intermediate_size;
	uint64_t qd = (uint64_t)cfg->num_attention_heads * cfg->head_dim;
	uint64_t kvd = (uint64_t)cfg->num_key_value_heads * cfg->head_dim, off = 0;

	a->xn1 = llama_carve(base, &off, N * C);
	a->rstd1 = llama_carve(base, &off, N);
	a->q = llama_carve(base, &off, N * qd);
	a->k = llama_carve(base, &off, N * kvd);
	a->v = llama_carve(base, &off, N * kvd);
	a->lse = llama_carve(base, &off, N * cfg->num_attention_heads);
	a->ctx = llama_carve(base, &off, N * qd);
	a->h = llama_carve(base, &off, N * C);
	a->xn2 = llama_carve(base, &off, N * C);
	a->rstd2 = llama_carve(base, &off, N);
	a->gate = llama_carve(base, &off, N * I);
	a->up = llama_carve(base, &off, N * I);
	a->act = llama_carve(base, &off, N * I);
	return off;
}

uint64_t zinf_llama_acts_bytes(const struct zinf_llama *m)
{
	struct zinf_llama_acts a;

	return acts_layout(m, &a, NULL) * sizeof(float);
}

int zinf_llama_acts_create(const struct zinf_llama *m, struct zinf_llama_acts **out)
{
	struct zinf_llama_acts *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a)
		return -ENOMEM;
	a->arena = aligned_alloc(64, acts_layout(m, a, NULL) * sizeof(float));
	if (!a->arena) {
		free(a);
		return -ENOMEM;
	}
	acts_layout(m, a, a->arena);
	*out = a;
	return 0;
}

void zinf_llama_acts_destroy(struct zinf_llama_acts *a)
{
	if (!a)
		return;
	free(a->arena);
	free(a);
}

/* dst (n) += src (n) */
static void add_inplace(float *dst, const float *src, int64_t n)
{
#pragma omp parallel for schedule(static)
	for (int64_t i = 0; i < n; i++)
		dst[i] += src[i];
}

int zinf_llama_layer_forward(struct zinf_llama *m, const float *const *w, const float *x, float *y,
			     struct zinf_llama_acts *a)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	int N = m->N, C = cfg->hidden_size, I = cfg->intermediate_size, hd = cfg->head_dim;
	int nh = cfg->num_attention_heads, nkv = cfg->num_key_value_heads;
	int64_t NC = (int64_t)N * C;
	bool bias = cfg->attention_bias, mbias = cfg->mlp_bias;

	if (y == x)
		return llama_fail(m, -EINVAL, "llama layer forward: output y aliases input x");
	/* attention block */
	llama_rmsnorm_forward(a->xn1, a->rstd1, x, w[ZINF_LLAMA_INPUT_NORM], N, C,
			      cfg->rms_norm_eps);
	llama_linear_forward(a->q, a->xn1, w[ZINF_LLAMA_Q], bias ? w[ZINF_LLAMA_Q_BIAS] : NULL, N,
			     C, nh * hd);
	llama_linear_forward(a->k, a->xn1, w[ZINF_LLAMA_K], bias ? w[ZINF_LLAMA_K_BIAS] : NULL, N,
			     C, nkv * hd);
	llama_linear_forward(a->v, a->xn1, w[ZINF_LLAMA_V], bias ? w[ZINF_LLAMA_V_BIAS] : NULL, N,
			     C, nkv * hd);
	llama_rope_forward(a->q, m->rope_cos, m->rope_sin, m->B, m->T, nh, hd);
	llama_rope_forward(a->k, m->rope_cos, m->rope_sin, m->B, m->T, nkv, hd);
	llama_attention_forward(a->ctx, a->lse, a->q, a->k, a->v, m->att_scratch, m->B, m->T, nh,
				nkv, hd, m->window);
	llama_linear_forward(a->h, a->ctx, w[ZINF_LLAMA_O],
			     cfg->attention_out_bias ? w[ZINF_LLAMA_O_BIAS] : NULL, N, nh * hd, C);
	add_inplace(a->h, x, NC);
	/* MLP block */
	llama_rmsnorm_forward(a->xn2, a->rstd2, a->h, w[ZINF_LLAMA_POST_NORM], N, C,
			      cfg->rms_norm_eps);
	llama_linear_forward(a->gate, a->xn2, w[ZINF_LLAMA_GATE],
			     mbias ? w[ZINF_LLAMA_GATE_BIAS] : NULL, N, C, I);
	llama_linear_forward(a->up, a->xn2, w[ZINF_LLAMA_UP], mbias ? w[ZINF_LLAMA_UP_BIAS] : NULL,
			     N, C, I);
	llama_swiglu_forward(a->act, a->gate, a->up, (int64_t)N * I);
	llama_linear_forward(y, a->act, w[ZINF_LLAMA_DOWN], mbias ? w[ZINF_LLAMA_DOWN_BIAS] : NULL,
			     N, I, C);
	add_inplace(y, a->h, NC);
	return 0;
}

int zinf_llama_layer_backward(struct zinf_llama *m, const float *const *w, const float *x,
			      struct zinf_llama_acts *a, bool recompute, const float *dy, float *dx,
			      float *const *g)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	int N = m->N, C = cfg->hidden_size, I = cfg->intermediate_size, hd = cfg->head_dim;
	int nh = cfg->num_attention_heads, nkv = cfg->num_key_value_heads;
	bool bias = cfg->attention_bias, mbias = cfg->mlp_bias;
	size_t nc_bytes = (size_t)N * C * sizeof(float);
	int rc;

	if (recompute && (rc = zinf_llama_layer_forward(m, w, x, m->yscratch, a)))
		return rc;
	/* MLP block; dy is read only here, so dx may alias it */
	llama_linear_backward(m->dact, g[ZINF_LLAMA_DOWN], mbias ? g[ZINF_LLAMA_DOWN_BIAS] : NULL,
			      dy, a->act, w[ZINF_LLAMA_DOWN], N, I, C, false);
	memcpy(m->dh, dy, nc_bytes);
	llama_swiglu_backward(m->dgate, m->dup, m->dact, a->gate, a->up, (int64_t)N * I);
	llama_linear_backward(m->dxn, g[ZINF_LLAMA_GATE], mbias ? g[ZINF_LLAMA_GATE_BIAS] : NULL,
			      m->dgate, a->xn2, w[ZINF_LLAMA_GATE], N, C, I, false);
	llama_linear_backward(m->dxn, g[ZINF_LLAMA_UP], mbias ? g[ZINF_LLAMA_UP_BIAS] : NULL,
			      m->dup, a->xn2, w[ZINF_LLAMA_UP], N, C, I, true);
	llama_rmsnorm_backward(m->dh, g[ZINF_LLAMA_POST_NORM], m->dxn, a->h,
			       w[ZINF_LLAMA_POST_NORM], a->rstd2, N, C);
	/* attention block */
	llama_linear_backward(m->dctx, g[ZINF_LLAMA_O],
			      cfg->attention_out_bias ? g[ZINF_LLAMA_O_BIAS] : NULL, m->dh, a->ctx,
			      w[ZINF_LLAMA_O], N, nh * hd, C, false);
	llama_attention_backward(m->dq, m->dk, m->dv, m->dkp, m->dvp, m->dctx, a->q, a->k, a->v,
				 a->lse, m->att_scratch, m->B, m->T, nh, nkv, hd, m->window);
	llama_rope_backward(m->dq, m->rope_cos, m->rope_sin, m->B, m->T, nh, hd);
	llama_rope_backward(m->dk, m->rope_cos, m->rope_sin, m->B, m->T, nkv, hd);
	llama_linear_backward(m->dxn, g[ZINF_LLAMA_Q], bias ? g[ZINF_LLAMA_Q_BIAS] : NULL, m->dq,
			      a->xn1, w[ZINF_LLAMA_Q], N, C, nh * hd, false);
	llama_linear_backward(m->dxn, g[ZINF_LLAMA_K], bias ? g[ZINF_LLAMA_K_BIAS] : NULL, m->dk,
			      a->xn1, w[ZINF_LLAMA_K], N, C, nkv * hd, true);
	llama_linear_backward(m->dxn, g[ZINF_LLAMA_V], bias ? g[ZINF_LLAMA_V_BIAS] : NULL, m->dv,
			      a->xn1, w[ZINF_LLAMA_V], N, C, nkv * hd, true);
	memcpy(dx, m->dh, nc_bytes);
	llama_rmsnorm_backward(dx, g[ZINF_LLAMA_INPUT_NORM], m->dxn, x, w[ZINF_LLAMA_INPUT_NORM],
			       a->rstd1, N, C);
	return 0;
}

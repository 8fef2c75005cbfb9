/*
 * The cuda model runtime's ops (llama_backend.h): binding a module's weights, the tokens,
 * and the forward and backward of the embedding, a decoder layer and the head, on the
 * runtime's stream. Matrix products are cuBLAS sgemm calls on row-major buffers; the
 * rest are the kernels of kernels/llama_cuda.h. The math is the CPU runtime's step for
 * step (see llama_cuda.c for the design).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_cuda.h"
#include "llama_cuda_internal.h"
#include "llama_ops.h"
#include "zinf/error.h"

/* ---- building blocks ------------------------------------------------------------------------- */

/* Row-major C (M, N) = alpha op(A) op(B) + beta C, batch times with element strides sA,
 * sB, sC: cuBLAS is column-major, so it computes C^T = op(B)^T op(A)^T. */
static int gemm(struct cuda_rt *m, const char *step, bool ta, bool tb, int M, int N, int K,
		float alpha, const float *A, int lda, long long sA, const float *B, int ldb,
		long long sB, float beta, float *C, int ldc, long long sC, int batch)
{
	cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;

	if (batch == 1)
		BLAS(Sgemm, (m->blas, ob, oa, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc),
		     step);
	else
		BLAS(SgemmStridedBatched,
		     (m->blas, ob, oa, N, M, K, &alpha, B, ldb, sB, A, lda, sA, &beta, C, ldc, sC,
		      batch),
		     step);
	return 0;
}

/* y (n, out) = x (n, in) w^T + b; w (out, in). */
static int linear_forward(struct cuda_rt *m, const char *step, float *y, const float *x,
			  const float *w, const float *b, int n, int in, int out)
{
	TRY(gemm(m, step, false, true, n, out, in, 1.0f, x, in, 0, w, in, 0, 0.0f, y, out, 0, 1));
	if (b)
		CU(zinf_cuda_llama_bias_add, (y, b, n, out, m->stream), step);
	return 0;
}

/* dx (n, in) = (or += when acc) dy w; dw (out, in) += dy^T x; db += column sums of dy. */
static int linear_backward(struct cuda_rt *m, const char *step, float *dx, float *dw, float *db,
			   const float *dy, const float *x, const float *w, int n, int in, int out,
			   bool acc)
{
	if (dx)
		TRY(gemm(m, step, false, false, n, in, out, 1.0f, dy, out, 0, w, in, 0,
			 acc ? 1.0f : 0.0f, dx, in, 0, 1));
	TRY(gemm(m, step, true, false, out, in, n, 1.0f, dy, out, 0, x, in, 0, 1.0f, dw, in, 0, 1));
	if (db)
		CU(zinf_cuda_llama_column_sums_add, (db, dy, n, out, m->stream), step);
	return 0;
}

/* Keys visible to a query of the bound layer: 0 = all earlier ones (plain causal). */
static int attn_window(const struct cuda_rt *m)
{
	const struct zinf_llama_config *cfg = &m->cfg;

	return cfg->sliding_window > 0 && m->layer >= cfg->max_window_layers ? cfg->sliding_window
									     : 0;
}

/* The block of query rows [r0, r0 + attn_rows) of head h (fewer at the end) and the keys
 * they see: from the first key row r0 sees (0 without a window) to the last row. Keys
 * beyond a row are masked in its block, so causal attention computes about half of the
 * (T, T) scores when T spans several blocks. */
static void attn_block(const struct cuda_rt *m, int h, int r0, struct zinf_cuda_attn_block *ab)
{
	int window = attn_window(m);

	ab->B = m->B;
	ab->T = m->T;
	ab->nh = m->cfg.num_attention_heads;
	ab->h = h;
	ab->window = window;
	ab->r0 = r0;
	ab->rows = m->T - r0 < m->attn_rows ? m->T - r0 : m->attn_rows;
	ab->k0 = window > 0 && r0 - window + 1 > 0 ? r0 - window + 1 : 0;
	ab->nk = r0 + ab->rows - ab->k0;
}

static int attention_forward(struct cuda_rt *m, struct cuda_acts *a)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	int B = m->B, T = m->T, nh = cfg->num_attention_heads, hd = cfg->head_dim;
	int rep = nh / cfg->num_key_value_heads, qs = nh * hd, ks = cfg->num_key_value_heads * hd;
	long long tq = (long long)T * qs, tk = (long long)T * ks;
	float scale = 1.0f / sqrtf((float)hd);
	struct zinf_cuda_attn_block ab;

	for (int h = 0; h < nh; h++) {
		size_t kvo = (size_t)(h / rep) * hd;

		for (int r0 = 0; r0 < T; r0 += m->attn_rows) {
			long long sp;

			attn_block(m, h, r0, &ab);
			sp = (long long)ab.rows * ab.nk;
			TRY(gemm(m, "attention scores", false, true, ab.rows, ab.nk, hd, scale,
				 a->q + (size_t)r0 * qs + (size_t)h * hd, qs, tq,
				 a->k + (size_t)ab.k0 * ks + kvo, ks, tk, 0.0f, m->att_p, ab.nk, sp,
				 B));
			CU(zinf_cuda_llama_attn_softmax_forward, (m->att_p, a->lse, &ab, m->stream),
			   "attention softmax");
			TRY(gemm(m, "attention output", false, false, ab.rows, hd, ab.nk, 1.0f,
				 m->att_p, ab.nk, sp, a->v + (size_t)ab.k0 * ks + kvo, ks, tk, 0.0f,
				 a->ctx + (size_t)r0 * qs + (size_t)h * hd, qs, tq, B));
		}
	}
	return 0;
}

/* dq (overwritten), dk, dv (zeroed, then summed over each group's query heads). */
static int attention_backward(struct cuda_rt *m, struct cuda_acts *a)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	int B = m->B, T = m->T, nh = cfg->num_attention_heads, hd = cfg->head_dim;
	int rep = nh / cfg->num_key_value_heads, qs = nh * hd, ks = cfg->num_key_value_heads * hd;
	long long tq = (long long)T * qs, tk = (long long)T * ks;
	float scale = 1.0f / sqrtf((float)hd);
	size_t kv_bytes = (size_t)m->N * ks * sizeof(float);
	struct zinf_cuda_attn_block ab;

	CU(cudaMemsetAsync, (m->dk, 0, kv_bytes, m->stream), "attention dk");
	CU(cudaMemsetAsync, (m->dv, 0, kv_bytes, m->stream), "attention dv");
	for (int h = 0; h < nh; h++) {
		size_t kvo = (size_t)(h / rep) * hd;

		for (int r0 = 0; r0 < T; r0 += m->attn_rows) {
			size_t qo = (size_t)r0 * qs + (size_t)h * hd, ko;
			const float *qh = a->q + qo, *dout = m->dctx + qo, *kg, *vg;
			long long sp;

			attn_block(m, h, r0, &ab);
			sp = (long long)ab.rows * ab.nk;
			ko = (size_t)ab.k0 * ks + kvo;
			kg = a->k + ko;
			vg = a->v + ko;
			TRY(gemm(m, "attention scores", false, true, ab.rows, ab.nk, hd, scale, qh,
				 qs, tq, kg, ks, tk, 0.0f, m->att_p, ab.nk, sp, B));
			TRY(gemm(m, "attention dp", false, true, ab.rows, ab.nk, hd, 1.0f, dout, qs,
				 tq, vg, ks, tk, 0.0f, m->att_ds, ab.nk, sp, B));
			CU(zinf_cuda_llama_attn_softmax_backward,
			   (m->att_p, m->att_ds, a->lse, &ab, scale, m->stream),
			   "attention softmax backward");
			TRY(gemm(m, "attention dq", false, false, ab.rows, hd, ab.nk, 1.0f,
				 m->att_ds, ab.nk, sp, kg, ks, tk, 0.0f, m->dq + qo, qs, tq, B));
			TRY(gemm(m, "attention dk", true, false, ab.nk, hd, ab.rows, 1.0f,
				 m->att_ds, ab.nk, sp, qh, qs, tq, 1.0f, m->dk + ko, ks, tk, B));
			TRY(gemm(m, "attention dv", true, false, ab.nk, hd, ab.rows, 1.0f, m->att_p,
				 ab.nk, sp, dout, qs, tq, 1.0f, m->dv + ko, ks, tk, B));
		}
	}
	return 0;
}

/* ---- ops ------------------------------------------------------------------------------------ */

static int check_device_pointer(struct cuda_rt *m, const void *p, const char *name)
{
	struct cudaPointerAttributes attr;
	cudaError_t ce = cudaPointerGetAttributes(&attr, p);

	if (ce != cudaSuccess)
		return crt_cuda_fail(m, ce, "cudaPointerGetAttributes", name);
	if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
		return crt_fail(m, -EINVAL,
				"model runtime (cuda): %s: tensor %s at %p is not device memory",
				m->op, name, p);
	return 0;
}

int cuda_bind(struct llama_rt *rt, enum zinf_llama_module_kind kind, int layer,
	      const struct llama_rt_tensor *in, const float **w)
{
	struct cuda_rt *m = to_cuda(rt);
	struct zinf_llama_param_info info;
	float *scratch = m->wscratch;
	int n = zinf_llama_module_nparams(kind);

	crt_set_op(m, "bind of layer %d", layer);
	if (n == 0)
		return crt_fail(m, -EINVAL, "llama bind: unknown module kind %d", (int)kind);
	for (int i = 0; i < n; i++) {
		if (zinf_llama_param_info(&m->cfg, kind, layer, i, &info))
			return crt_fail(m, -EINVAL, "llama bind: layer %d is outside [0, %d)",
					layer, m->cfg.num_hidden_layers);
		w[i] = NULL;
		if (!info.present)
			continue;
		if (!in[i].data)
			return crt_fail(m, -EINVAL, "llama bind: tensor %s (slot %d) is NULL",
					info.name, i);
		TRY(check_device_pointer(m, in[i].data, info.name));
		if (in[i].dtype != ZINF_DTYPE_F32 && in[i].dtype != ZINF_DTYPE_BF16 &&
		    in[i].dtype != ZINF_DTYPE_F16)
			return crt_fail(m, -EINVAL, "llama bind: tensor %s has unknown dtype %d",
					info.name, (int)in[i].dtype);
		if (in[i].dtype == ZINF_DTYPE_F32) {
			w[i] = in[i].data;
			continue;
		}
		if (scratch + info.elems > m->wscratch + m->wscratch_elems)
			return crt_fail(
				m, -EINVAL,
				"model runtime (cuda): bind: tensor %s is 16-bit but the runtime was created for fp32 weights (llama_rt_opts.weight_dtype)",
				info.name);
		if (in[i].dtype == ZINF_DTYPE_BF16)
			CU(zinf_cuda_llama_bf16_to_f32,
			   (scratch, in[i].data, info.elems, m->stream), info.name);
		else
			CU(zinf_cuda_llama_f16_to_f32, (scratch, in[i].data, info.elems, m->stream),
			   info.name);
		w[i] = scratch;
		scratch += info.elems;
	}
	m->layer = kind == ZINF_LLAMA_LAYER ? layer : 0;
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The rows of each distinct token, in row order, for the deterministic embedding
 * backward: keys token << 32 | row sorted, then cut where the token changes. */
static int group_rows_by_token(struct cuda_rt *m, const int32_t *tokens)
{
	int32_t *tok = m->h_emb, *start = m->h_emb + m->N, *rows = m->h_emb + 2 * (size_t)m->N + 1;
	int u = 0;

	for (int n = 0; n < m->N; n++)
		m->h_key[n] = ((int64_t)tokens[n] << 32) | n;
	qsort(m->h_key, (size_t)m->N, sizeof(*m->h_key), cmp_key);
	for (int n = 0; n < m->N; n++) {
		int32_t t = (int32_t)(m->h_key[n] >> 32);
		if (n == 0 || t != tok[u - 1]) {
			tok[u] = t;
			start[u++] = n;
		}
		rows[n] = (int32_t)(m->h_key[n] & 0xffffffff);
	}
	start[u] = m->N;
	m->n_uniq = u;
	/* tok | start | rows as one array: start and rows at fixed offsets N and 2N + 1 */
	return crt_copy(m, m->emb_tok, m->h_emb, (3 * (size_t)m->N + 1) * sizeof(int32_t),
			cudaMemcpyHostToDevice);
}

int cuda_set_tokens(struct llama_rt *rt, const int32_t *tokens, const int32_t *targets)
{
	struct cuda_rt *m = to_cuda(rt);
	int V = m->cfg.vocab_size;
	size_t bytes = (size_t)m->N * sizeof(int32_t);

	crt_set_op(m, "tokens");
	m->head_ready = false;
	m->have_targets = false;
	m->head_count = 0;
	for (int n = 0; n < m->N; n++) {
		if (tokens[n] < 0 || tokens[n] >= V)
			return crt_fail(
				m, -EINVAL,
				"llama embedding: token %d at position %d (row %d, col %d) is outside [0, %d)",
				tokens[n], n, n / m->T, n % m->T, V);
		if (!targets)
			continue;
		if (targets[n] < -1 || targets[n] >= V)
			return crt_fail(
				m, -EINVAL,
				"llama loss: target %d at position %d (row %d, col %d) is outside [0, %d) and not the ignore index -1",
				targets[n], n, n / m->T, n % m->T, V);
		m->head_count += targets[n] != -1;
	}
	TRY(crt_copy(m, m->tokens, tokens, bytes, cudaMemcpyHostToDevice));
	TRY(group_rows_by_token(m, tokens));
	if (targets)
		TRY(crt_copy(m, m->targets, targets, bytes, cudaMemcpyHostToDevice));
	m->have_targets = targets != NULL;
	return 0;
}

int cuda_embed_forward(struct llama_rt *rt, const float *const *w, float *x)
{
	struct cuda_rt *m = to_cuda(rt);

	crt_set_op(m, "embedding forward");
	CU(zinf_cuda_llama_embed_forward,
	   (x, w[ZINF_LLAMA_EMBED_TOKENS], m->tokens, m->N, m->cfg.hidden_size, m->stream), NULL);
	return 0;
}

int cuda_embed_backward(struct llama_rt *rt, const float *dx, float *const *g)
{
	struct cuda_rt *m = to_cuda(rt);

	crt_set_op(m, "embedding backward");
	CU(zinf_cuda_llama_embed_backward,
	   (g[ZINF_LLAMA_EMBED_TOKENS], dx, m->emb_tok, m->emb_start, m->emb_rows, m->n_uniq,
	    m->cfg.hidden_size, m->stream),
	   NULL);
	return 0;
}

static int layer_forward(struct cuda_rt *m, const float *const *w, const float *x, float *y,
			 struct cuda_acts *a)
{
	const struct zinf_llama_config *cfg = &m->cfg;
	int N = m->N, C = cfg->hidden_size, I = cfg->intermediate_size, hd = cfg->head_dim;
	int nh = cfg->num_attention_heads, nkv = cfg->num_key_value_heads;
	bool ab = cfg->attention_bias, mb = cfg->mlp_bias;
	size_t NC = (size_t)N * C;
	cudaStream_t s = m->stream;

	if (y == x)
		return crt_fail(m, -EINVAL, "llama layer forward: output y aliases input x");
	/* attention block */
	CU(zinf_cuda_llama_rmsnorm_forward,
	   (a->xn1, a->rstd1, x, w[ZINF_LLAMA_INPUT_NORM], N, C, cfg->rms_norm_eps, s),
	   "input_layernorm");
	TRY(linear_forward(m, "q_proj", a->q, a->xn1, w[ZINF_LLAMA_Q],
			   ab ? w[ZINF_LLAMA_Q_BIAS] : NULL, N, C, nh * hd));
	TRY(linear_forward(m, "k_proj", a->k, a->xn1, w[ZINF_LLAMA_K],
			   ab ? w[ZINF_LLAMA_K_BIAS] : NULL, N, C, nkv * hd));
	TRY(linear_forward(m, "v_proj", a->v, a->xn1, w[ZINF_LLAMA_V],
			   ab ? w[ZINF_LLAMA_V_BIAS] : NULL, N, C, nkv * hd));
	CU(zinf_cuda_llama_rope, (a->q, m->rope_cos, m->rope_sin, m->B, m->T, nh, hd, 1.0f, s),
	   "rope q");
	CU(zinf_cuda_llama_rope, (a->k, m->rope_cos, m->rope_sin, m->B, m->T, nkv, hd, 1.0f, s),
	   "rope k");
	TRY(attention_forward(m, a));
	TRY(linear_forward(m, "o_proj", a->h, a->ctx, w[ZINF_LLAMA_O],
			   cfg->attention_out_bias ? w[ZINF_LLAMA_O_BIAS] : NULL, N, nh * hd, C));
	CU(zinf_cuda_llama_add, (a->h, x, NC, s), "attention residual");
	/* MLP block */
	CU(zinf_cuda_llama_rmsnorm_forward,
	   (a->xn2, a->rstd2, a->h, w[ZINF_LLAMA_POST_NORM], N, C, cfg->rms_norm_eps, s),
	   "post_attention_layernorm");
	TRY(linear_forward(m, "gate_proj", a->gate, a->xn2, w[ZINF_LLAMA_GATE],
			   mb ? w[ZINF_LLAMA_GATE_BIAS] : NULL, N, C, I));
	TRY(linear_forward(m, "up_proj", a->up, a->xn2, w[ZINF_LLAMA_UP],
			   mb ? w[ZINF_LLAMA_UP_BIAS] : NULL, N, C, I));
	CU(zinf_cuda_llama_swiglu_forward, (a->act, a->gate, a->up, (size_t)N * I, s), "swiglu");
	TRY(linear_forward(m, "down_proj", y, a->act, w[ZINF_LLAMA_DOWN],
			   mb ? w[ZINF_LLAMA_DOWN_BIAS] : NULL, N, I, C));
	CU(zinf_cuda_llama_add, (y, a->h, NC, s), "mlp residual");
	return 0;
}

int cuda_layer_forward(struct llama_rt *rt, const float *const *w, const float *x, float *y,
		       struct llama_rt_acts *a)
{
	struct cuda_rt *m = to_cuda(rt);

	crt_set_op(m, "layer %d forward", m->layer);
	return layer_forward(m, w, x, y, (struct cuda_acts *)a);
}

int cuda_layer_backward(struct llama_rt *rt, const float *const *w, const float *x,
			struct llama_rt_acts *acts, bool recompute, const float *dy, float *dx,
			float *const *g)
{
	struct cuda_rt *m = to_cuda(rt);
	struct cuda_acts *a = (struct cuda_acts *)acts;
	const struct zinf_llama_config *cfg = &m->cfg;
	int N = m->N, C = cfg->hidden_size, I = cfg->intermediate_size, hd = cfg->head_dim;
	int nh = cfg->num_attention_heads, nkv = cfg->num_key_value_heads;
	bool ab = cfg->attention_bias, mb = cfg->mlp_bias;
	size_t nc_bytes = (size_t)N * C * sizeof(float);
	cudaStream_t s = m->stream;

	crt_set_op(m, "layer %d backward", m->layer);
	if (recompute)
		TRY(layer_forward(m, w, x, m->yscratch, a));
	/* MLP block; dy is read only here, so dx may alias it */
	TRY(linear_backward(m, "down_proj", m->dact, g[ZINF_LLAMA_DOWN],
			    mb ? g[ZINF_LLAMA_DOWN_BIAS] : NULL, dy, a->act, w[ZINF_LLAMA_DOWN], N,
			    I, C, false));
	CU(cudaMemcpyAsync, (m->dh, dy, nc_bytes, cudaMemcpyDeviceToDevice, s), "mlp residual");
	CU(zinf_cuda_llama_swiglu_backward,
	   (m->dgate, m->dup, m->dact, a->gate, a->up, (size_t)N * I, s), "swiglu");
	TRY(linear_backward(m, "gate_proj", m->dxn, g[ZINF_LLAMA_GATE],
			    mb ? g[ZINF_LLAMA_GATE_BIAS] : NULL, m->dgate, a->xn2,
			    w[ZINF_LLAMA_GATE], N, C, I, false));
	TRY(linear_backward(m, "up_proj", m->dxn, g[ZINF_LLAMA_UP],
			    mb ? g[ZINF_LLAMA_UP_BIAS] : NULL, m->dup, a->xn2, w[ZINF_LLAMA_UP], N,
			    C, I, true));
	CU(zinf_cuda_llama_rmsnorm_backward,
	   (m->dh, g[ZINF_LLAMA_POST_NORM], m->dxn, a->h, w[ZINF_LLAMA_POST_NORM], a->rstd2, N, C,
	    s),
	   "post_attention_layernorm");
	/* attention block */
	TRY(linear_backward(m, "o_proj", m->dctx, g[ZINF_LLAMA_O],
			    cfg->attention_out_bias ? g[ZINF_LLAMA_O_BIAS] : NULL, m->dh, a->ctx,
			    w[ZINF_LLAMA_O], N, nh * hd, C, false));
	TRY(attention_backward(m, a));
	CU(zinf_cuda_llama_rope, (m->dq, m->rope_cos, m->rope_sin, m->B, m->T, nh, hd, -1.0f, s),
	   "rope dq");
	CU(zinf_cuda_llama_rope, (m->dk, m->rope_cos, m->rope_sin, m->B, m->T, nkv, hd, -1.0f, s),
	   "rope dk");
	TRY(linear_backward(m, "q_proj", m->dxn, g[ZINF_LLAMA_Q], ab ? g[ZINF_LLAMA_Q_BIAS] : NULL,
			    m->dq, a->xn1, w[ZINF_LLAMA_Q], N, C, nh * hd, false));
	TRY(linear_backward(m, "k_proj", m->dxn, g[ZINF_LLAMA_K], ab ? g[ZINF_LLAMA_K_BIAS] : NULL,
			    m->dk, a->xn1, w[ZINF_LLAMA_K], N, C, nkv * hd, true));
	TRY(linear_backward(m, "v_proj", m->dxn, g[ZINF_LLAMA_V], ab ? g[ZINF_LLAMA_V_BIAS] : NULL,
			    m->dv, a->xn1, w[ZINF_LLAMA_V], N, C, nkv * hd, true));
	CU(cudaMemcpyAsync, (dx, m->dh, nc_bytes, cudaMemcpyDeviceToDevice, s),
	   "attention residual");
	CU(zinf_cuda_llama_rmsnorm_backward,
	   (dx, g[ZINF_LLAMA_INPUT_NORM], m->dxn, x, w[ZINF_LLAMA_INPUT_NORM], a->rstd1, N, C, s),
	   "input_layernorm");
	return 0;
}

/* logits of rows [r0, r0 + rows) into m->logits */
static int head_logits(struct cuda_rt *m, const float *lm, int r0, int rows)
{
	int C = m->cfg.hidden_size;

	return linear_forward(m, "lm_head", m->logits, m->xf + (size_t)r0 * C, lm, NULL, rows, C,
			      m->cfg.vocab_size);
}

int cuda_head_forward(struct llama_rt *rt, const float *const *w, const float *x, float *loss)
{
	struct cuda_rt *m = to_cuda(rt);
	int C = m->cfg.hidden_size, V = m->cfg.vocab_size;
	double total = 0.0;

	crt_set_op(m, "head forward");
	m->head_ready = false;
	*loss = 0.0f;
	CU(zinf_cuda_llama_rmsnorm_forward,
	   (m->xf, m->rstdf, x, w[ZINF_LLAMA_FINAL_NORM], m->N, C, m->cfg.rms_norm_eps, m->stream),
	   "norm");
	for (int r0 = 0; r0 < m->N; r0 += m->head_rows) {
		int rows = m->N - r0 < m->head_rows ? m->N - r0 : m->head_rows;

		TRY(head_logits(m, w[ZINF_LLAMA_LM_HEAD], r0, rows));
		CU(zinf_cuda_llama_ce_forward,
		   (m->lse + r0, m->rowloss + r0, m->logits,
		    m->have_targets ? m->targets + r0 : NULL, rows, V, m->stream),
		   "cross-entropy");
	}
	if (!m->have_targets) { /* synchronous either way (llama_backend.h) */
		CU(cudaStreamSynchronize, (m->stream), NULL);
		return 0;
	}
	TRY(crt_copy(m, m->h_rowloss, m->rowloss, (size_t)m->N * sizeof(double),
		     cudaMemcpyDeviceToHost));
	for (int n = 0; n < m->N; n++)
		total += m->h_rowloss[n]; /* 0 on ignored rows */
	if (m->head_count)
		*loss = (float)(total / (double)m->head_count);
	m->head_ready = true;
	return 0;
}

int cuda_head_backward(struct llama_rt *rt, const float *const *w, const float *x, float dloss,
		       float *dx, float *const *g)
{
	struct cuda_rt *m = to_cuda(rt);
	int C = m->cfg.hidden_size, V = m->cfg.vocab_size;

	crt_set_op(m, "head backward");
	if (!m->head_ready)
		return crt_fail(m, ZINF_ESTATE,
				"llama head backward: no head forward with targets precedes it");
	m->head_ready = false;
	CU(cudaMemsetAsync, (dx, 0, (size_t)m->N * C * sizeof(float), m->stream), "dx");
	if (m->head_count == 0)
		return 0; /* every position ignored: the loss is a constant 0 */
	for (int r0 = 0; r0 < m->N; r0 += m->head_rows) {
		int rows = m->N - r0 < m->head_rows ? m->N - r0 : m->head_rows;

		if (m->head_rows < m->N) /* chunked: this chunk's logits are gone, redo them */
			TRY(head_logits(m, w[ZINF_LLAMA_LM_HEAD], r0, rows));
		CU(zinf_cuda_llama_ce_backward,
		   (m->logits, m->lse + r0, m->targets + r0, rows, V, dloss / (float)m->head_count,
		    m->stream),
		   "cross-entropy");
		TRY(linear_backward(m, "lm_head", m->dxn + (size_t)r0 * C, g[ZINF_LLAMA_LM_HEAD],
				    NULL, m->logits, m->xf + (size_t)r0 * C, w[ZINF_LLAMA_LM_HEAD],
				    rows, C, V, false));
	}
	CU(zinf_cuda_llama_rmsnorm_backward,
	   (dx, g[ZINF_LLAMA_FINAL_NORM], m->dxn, x, w[ZINF_LLAMA_FINAL_NORM], m->rstdf, m->N, C,
	    m->stream),
	   "norm");
	return 0;
}

/* The cuda model runtime computes what the cpu runtime computes: on tiny configs covering
 * GQA, q/k/v/o and MLP biases, Llama-3 and YaRN RoPE scaling, a sliding window shorter than T in
 * some layers, tied and untied LM heads, a chunked head, attention in blocks of query rows
 * (with and without a window), ignored targets and fp32, bf16 and fp16 weights, every layer output, the loss, the gradient flowing back after the head and
 * after each layer, and every parameter gradient agree within 1e-4 relative error, where
 * the error of a tensor is max|cuda - cpu| / max|cpu| (normalised by the tensor's largest
 * magnitude, so tiny elements do not inflate it). Every comparison is printed with its
 * error, so a failure names each tensor that is off. Skips (77) without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "device.h"
#include "gpu_test.h"
#include "llama_backend.h"
#include "safetensors.h"
#include "test.h"
#include "zinf/log.h"

#define L 2
#define NMOD (L + 2)
#define TOL 1e-4

struct model {
	struct zinf_llama_config cfg;
	enum zinf_dtype dtype;
	uint64_t head_chunk_bytes;
	uint64_t attn_scores_bytes; /* 0: the default (all T rows in one block here) */
	int B, T;
	const char *name;
	float *master[NMOD][ZINF_LLAMA_MAX_PARAMS]; /* host fp32 values (rounded to dtype) */
	void *stored[NMOD][ZINF_LLAMA_MAX_PARAMS];  /* host copies in dtype */
	uint64_t elems[NMOD][ZINF_LLAMA_MAX_PARAMS];
	int32_t *tokens, *targets;
};

/* One runtime's run: weights, gradients and activations in the runtime's memory, and the
 * host snapshots compared afterwards. */
struct side {
	const struct llama_rt_ops *ops;
	struct llama_rt *rt;
	void *w[NMOD][ZINF_LLAMA_MAX_PARAMS];
	float *g[NMOD][ZINF_LLAMA_MAX_PARAMS];
	float *x[L + 1], *d;
	struct llama_rt_acts *acts[L];
	float loss;
	float *h_x[L + 1], *h_d_head, *h_d_layer[L], *h_g[NMOD][ZINF_LLAMA_MAX_PARAMS];
};

static uint64_t rng_state;

static float uniform(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static enum zinf_llama_module_kind kind_of(int mod)
{
	return mod == 0 ? ZINF_LLAMA_EMBED : mod <= L ? ZINF_LLAMA_LAYER : ZINF_LLAMA_HEAD;
}

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	T_CHECK(p != NULL, "out of memory (%zu bytes)", n);
	return p;
}

static void model_init(struct model *md, uint64_t seed)
{
	struct zinf_llama_param_info info;
	int N = md->B * md->T, V = md->cfg.vocab_size;

	rng_state = seed;
	for (int mod = 0; mod < NMOD; mod++) {
		for (int s = 0; s < zinf_llama_module_nparams(kind_of(mod)); s++) {
			T_CHECK_RC(zinf_llama_param_info(&md->cfg, kind_of(mod), mod ? mod - 1 : 0,
							 s, &info));
			if (!info.present || info.tied)
				continue;
			bool norm = info.cols == 0 && strstr(info.name, "norm");
			float *f = xmalloc(info.elems * sizeof(float));

			for (uint64_t i = 0; i < info.elems; i++)
				f[i] = norm ? 1.0f + 0.1f * uniform()
					    : (info.cols ? 0.2f : 0.1f) * uniform();
			md->elems[mod][s] = info.elems;
			md->master[mod][s] = f;
			if (md->dtype == ZINF_DTYPE_F32) {
				md->stored[mod][s] = f;
				continue;
			}
			/* both runtimes see the same 16-bit values: round, then widen back */
			enum zinf_st_dtype st =
				md->dtype == ZINF_DTYPE_BF16 ? ZINF_ST_BF16 : ZINF_ST_F16;
			md->stored[mod][s] = xmalloc(info.elems * 2);
			zinf_st_convert(md->stored[mod][s], st, f, ZINF_ST_F32, info.elems);
			zinf_st_convert(f, ZINF_ST_F32, md->stored[mod][s], st, info.elems);
		}
	}
	md->tokens = xmalloc(N * sizeof(int32_t));
	md->targets = xmalloc(N * sizeof(int32_t));
	for (int n = 0; n < N; n++) {
		md->tokens[n] = (int32_t)((uniform() * 0.5f + 0.5f) * V) % V;
		md->targets[n] = n % 7 == 3 ? -1 : (int32_t)((uniform() * 0.5f + 0.5f) * V) % V;
	}
}

static void model_free(struct model *md)
{
	for (int mod = 0; mod < NMOD; mod++)
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
			if (md->stored[mod][s] != md->master[mod][s])
				free(md->stored[mod][s]);
			free(md->master[mod][s]);
		}
	free(md->tokens);
	free(md->targets);
}

/* The tensor of slot s of module mod in the side's memory (the tied LM head: the
 * embedding's), and its gradient buffer. */
static void slot_buffers(struct side *sd, const struct model *md, int mod, int s, const void **w,
			 float **g)
{
	if (mod == NMOD - 1 && s == ZINF_LLAMA_LM_HEAD && md->cfg.tie_word_embeddings) {
		mod = 0;
		s = ZINF_LLAMA_EMBED_TOKENS;
	}
	*w = sd->w[mod][s];
	*g = sd->g[mod][s];
}

#define RT_CHECK(sd, call)                                                                         \
	T_CHECK((call) == 0, "%s runtime: %s: %s", (sd)->ops->name, #call,                         \
		(sd)->ops->last_error((sd)->rt))

static void side_bind(struct side *sd, const struct model *md, int mod, const float **w, float **g)
{
	struct llama_rt_tensor in[ZINF_LLAMA_MAX_PARAMS];

	for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
		const void *data = NULL;
		float *grad = NULL;

		if (s < zinf_llama_module_nparams(kind_of(mod)))
			slot_buffers(sd, md, mod, s, &data, &grad);
		in[s].data = data;
		in[s].dtype = md->dtype;
		g[s] = grad;
	}
	RT_CHECK(sd, sd->ops->bind(sd->rt, kind_of(mod), mod ? mod - 1 : 0, in, w));
}

static float *snapshot(struct side *sd, const float *src, uint64_t elems)
{
	float *h = xmalloc(elems * sizeof(float));

	RT_CHECK(sd, sd->ops->download(sd->rt, h, src, elems * sizeof(float)));
	return h;
}

static void side_run(struct side *sd, const struct model *md)
{
	struct llama_rt_opts opts;
	const float *w[ZINF_LLAMA_MAX_PARAMS];
	float *g[ZINF_LLAMA_MAX_PARAMS];
	char err[512];
	uint64_t nc = (uint64_t)md->B * md->T * md->cfg.hidden_size;

	llama_rt_opts_init(&opts);
	opts.llama.head_chunk_bytes = md->head_chunk_bytes;
	opts.attn_scores_bytes = md->attn_scores_bytes;
	opts.weight_dtype = md->dtype;
	T_CHECK(sd->ops->create(&md->cfg, &opts, md->B, md->T, &sd->rt, err, sizeof(err)) == 0,
		"%s: %s runtime: %s", md->name, sd->ops->name, err);
	for (int mod = 0; mod < NMOD; mod++) {
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
			uint64_t n = md->elems[mod][s];
			uint64_t wb = n * (md->dtype == ZINF_DTYPE_F32 ? 4 : 2);

			if (!n)
				continue;
			RT_CHECK(sd, sd->ops->buf_alloc(sd->rt, wb, &sd->w[mod][s]));
			RT_CHECK(sd,
				 sd->ops->upload(sd->rt, sd->w[mod][s], md->stored[mod][s], wb));
			RT_CHECK(sd, sd->ops->buf_alloc(sd->rt, n * 4, (void **)&sd->g[mod][s]));
			RT_CHECK(sd, sd->ops->zero(sd->rt, sd->g[mod][s], n * 4));
		}
	}
	for (int l = 0; l <= L; l++)
		RT_CHECK(sd, sd->ops->buf_alloc(sd->rt, nc * 4, (void **)&sd->x[l]));
	RT_CHECK(sd, sd->ops->buf_alloc(sd->rt, nc * 4, (void **)&sd->d));
	for (int l = 0; l < L; l++)
		RT_CHECK(sd, sd->ops->acts_create(sd->rt, &sd->acts[l]));

	RT_CHECK(sd, sd->ops->set_tokens(sd->rt, md->tokens, md->targets));
	side_bind(sd, md, 0, w, g);
	RT_CHECK(sd, sd->ops->embed_forward(sd->rt, w, sd->x[0]));
	for (int l = 0; l < L; l++) {
		side_bind(sd, md, l + 1, w, g);
		RT_CHECK(sd,
			 sd->ops->layer_forward(sd->rt, w, sd->x[l], sd->x[l + 1], sd->acts[l]));
	}
	side_bind(sd, md, NMOD - 1, w, g);
	RT_CHECK(sd, sd->ops->head_forward(sd->rt, w, sd->x[L], &sd->loss));
	RT_CHECK(sd, sd->ops->head_backward(sd->rt, w, sd->x[L], 0.5f, sd->d, g));
	sd->h_d_head = snapshot(sd, sd->d, nc);
	for (int l = L - 1; l >= 0; l--) {
		side_bind(sd, md, l + 1, w, g);
		/* layer 0 recomputes its activations (checkpointing), the others reuse them */
		RT_CHECK(sd, sd->ops->layer_backward(sd->rt, w, sd->x[l], sd->acts[l], l == 0,
						     sd->d, sd->d, g));
		sd->h_d_layer[l] = snapshot(sd, sd->d, nc);
	}
	side_bind(sd, md, 0, w, g);
	RT_CHECK(sd, sd->ops->embed_backward(sd->rt, sd->d, g));
	RT_CHECK(sd, sd->ops->sync(sd->rt));
	for (int l = 0; l <= L; l++)
		sd->h_x[l] = snapshot(sd, sd->x[l], nc);
	for (int mod = 0; mod < NMOD; mod++)
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++)
			if (md->elems[mod][s])
				sd->h_g[mod][s] = snapshot(sd, sd->g[mod][s], md->elems[mod][s]);
}

static void side_free(struct side *sd)
{
	for (int l = 0; l < L; l++)
		sd->ops->acts_destroy(sd->rt, sd->acts[l]);
	for (int mod = 0; mod < NMOD; mod++)
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
			if (sd->w[mod][s])
				sd->ops->buf_free(sd->rt, sd->w[mod][s]);
			if (sd->g[mod][s])
				sd->ops->buf_free(sd->rt, sd->g[mod][s]);
			free(sd->h_g[mod][s]);
		}
	for (int l = 0; l <= L; l++) {
		sd->ops->buf_free(sd->rt, sd->x[l]);
		free(sd->h_x[l]);
	}
	for (int l = 0; l < L; l++)
		free(sd->h_d_layer[l]);
	sd->ops->buf_free(sd->rt, sd->d);
	free(sd->h_d_head);
	sd->ops->destroy(sd->rt);
}

static int failures;

/* max|b - a| / max|a|, printed; counts a failure above TOL (or a non-finite value). */
static void compare(const char *model, const char *what, const float *a, const float *b, uint64_t n)
{
	double diff = 0.0, mag = 0.0, rel;
	uint64_t worst = 0;

	for (uint64_t i = 0; i < n; i++) {
		double dd = fabs((double)b[i] - (double)a[i]);

		if (!(dd <= diff)) { /* NaN counts as worst */
			diff = isnan(dd) ? INFINITY : dd;
			worst = i;
		}
		mag = fmax(mag, fabs((double)a[i]));
	}
	rel = diff / (mag > 0 ? mag : 1e-30);
	printf("%-9s %-44s rel err %.3g (max |cpu| %.3g, worst element %llu: cpu %.9g cuda %.9g)\n",
	       model, what, rel, mag, (unsigned long long)worst, (double)a[worst],
	       (double)b[worst]);
	if (!(rel <= TOL) || mag == 0.0) {
		printf("  FAIL: %s %s%s\n", model, what,
		       mag == 0.0 ? " is all zero on the cpu" : "");
		failures++;
	}
}

static void check_model(struct model *md, uint64_t seed)
{
	struct side cpu = {.ops = &llama_rt_cpu_ops}, cuda = {.ops = &llama_rt_cuda_ops};
	struct zinf_llama_param_info info;
	uint64_t nc = (uint64_t)md->B * md->T * md->cfg.hidden_size;
	char what[160];

	model_init(md, seed);
	side_run(&cpu, md);
	side_run(&cuda, md);
	for (int l = 0; l <= L; l++) {
		snprintf(what, sizeof(what), l ? "layer %d output" : "embedding output", l - 1);
		compare(md->name, what, cpu.h_x[l], cuda.h_x[l], nc);
	}
	compare(md->name, "loss", &cpu.loss, &cuda.loss, 1);
	compare(md->name, "dx of the head", cpu.h_d_head, cuda.h_d_head, nc);
	for (int l = L - 1; l >= 0; l--) {
		snprintf(what, sizeof(what), "dx of layer %d%s", l, l == 0 ? " (recomputed)" : "");
		compare(md->name, what, cpu.h_d_layer[l], cuda.h_d_layer[l], nc);
	}
	for (int mod = 0; mod < NMOD; mod++)
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
			if (!md->elems[mod][s])
				continue;
			zinf_llama_param_info(&md->cfg, kind_of(mod), mod ? mod - 1 : 0, s, &info);
			snprintf(what, sizeof(what), "grad %s", info.name);
			compare(md->name, what, cpu.h_g[mod][s], cuda.h_g[mod][s],
				md->elems[mod][s]);
		}
	side_free(&cpu);
	side_free(&cuda);
	model_free(md);
}

static void base_config(struct model *md, const char *name, enum zinf_dtype dtype)
{
	struct zinf_llama_config *c = &md->cfg;

	memset(md, 0, sizeof(*md));
	md->name = name;
	md->dtype = dtype;
	md->B = 2;
	md->T = 12;
	md->head_chunk_bytes = 64ull << 20;
	zinf_llama_config_init(c);
	c->vocab_size = 64;
	c->hidden_size = 32;
	c->intermediate_size = 48;
	c->num_hidden_layers = L;
	c->num_attention_heads = 4;
	c->num_key_value_heads = 2;
	c->head_dim = 8;
	c->rms_norm_eps = 1e-5f;
}

int main(void)
{
	struct model md;

	zinf_log_set_level(ZINF_LOG_ERROR);
	t_require_gpu();

	/* every bias, Llama-3 RoPE, a window of 5 < T = 12 in layer 1 only, untied, fp32 */
	base_config(&md, "biases", ZINF_DTYPE_F32);
	md.cfg.attention_bias = true;
	md.cfg.attention_out_bias = true;
	md.cfg.mlp_bias = true;
	md.cfg.rope_theta = 500000.0f;
	md.cfg.rope_type = ZINF_ROPE_LLAMA3;
	md.cfg.rope_factor = 8.0f;
	md.cfg.rope_low_freq_factor = 1.0f;
	md.cfg.rope_high_freq_factor = 4.0f;
	md.cfg.rope_original_max_position_embeddings = 8;
	md.cfg.sliding_window = 5;
	md.cfg.max_window_layers = 1;
	check_model(&md, 1);

	/* tied LM head, bf16 weights, head in chunks of 5 rows of N = 24, attention in blocks
	 * of 5 query rows of T = 12 (the last 2) */
	base_config(&md, "tied-bf16", ZINF_DTYPE_BF16);
	md.cfg.tie_word_embeddings = true;
	md.head_chunk_bytes = 5ull * md.cfg.vocab_size * sizeof(float);
	md.attn_scores_bytes = 5ull * md.B * md.T * sizeof(float);
	check_model(&md, 2);

	/* fp16 weights, q/k/v biases (qwen2), YaRN RoPE (scaled cos and sin), a window of 4 in
	 * every layer, attention in blocks of 3 query rows (each block's keys start 3 before
	 * its first row) */
	base_config(&md, "qwen2-f16", ZINF_DTYPE_F16);
	md.cfg.attention_bias = true;
	md.cfg.rope_type = ZINF_ROPE_YARN;
	md.cfg.rope_factor = 4.0f;
	md.cfg.rope_original_max_position_embeddings = 4096;
	md.cfg.sliding_window = 4;
	md.cfg.max_window_layers = 0;
	md.attn_scores_bytes = 3ull * md.B * md.T * sizeof(float);
	check_model(&md, 3);

	T_CHECK(failures == 0, "%d tensors differ by more than %g relative (see above)", failures,
		TOL);
	return T_EXIT_PASS;
}

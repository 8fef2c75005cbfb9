/*
 * Llama-family decoder (llama, mistral, qwen2): model dimensions, the parameter table
 * of each module, and the CPU forward/backward of the three module kinds the trainer
 * fetches one at a time: the token embedding, a decoder layer, and the head (final
 * RMSNorm + LM head + mean cross-entropy). The math follows Hugging Face's
 * LlamaForCausalLM exactly; see docs/model.md.
 *
 * Shapes: N = B * T rows; C hidden size; nh query heads and nkv key/value heads of head_dim
 * hd; I intermediate size; V vocabulary. Every buffer is row-major fp32 unless said.
 * Weights are stored as Hugging Face stores them (y = x W^T).
 *
 * Threading: a struct zinf_llama is used by one thread at a time; each call parallelises
 * internally (OpenMP loops, OpenBLAS sgemm). Results are deterministic for a fixed thread
 * count, which is what makes recomputed and stored activations bit-identical.
 */
#ifndef ZINF_MODEL_LLAMA_H
#define ZINF_MODEL_LLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- configuration (the config.json fields the three model types share) ---------------- */

/* Rotary embedding variants (transformers' rope_type). */
enum zinf_rope_type {
	ZINF_ROPE_DEFAULT = 0, /* no scaling */
	ZINF_ROPE_LINEAR,      /* every frequency divided by factor */
	ZINF_ROPE_DYNAMIC,     /* NTK: theta raised for sequences longer than the context */
	ZINF_ROPE_YARN,	       /* YaRN: low frequencies interpolated, cos and sin scaled */
	ZINF_ROPE_LLAMA3,      /* Llama 3.1: three frequency bands */
};

/* transformers' name of a rope type ("default", "linear", ...), or NULL. */
const char *zinf_rope_type_name(enum zinf_rope_type type);

struct zinf_llama_config {
	int vocab_size;		 /* V */
	int hidden_size;	 /* C */
	int intermediate_size;	 /* I */
	int num_hidden_layers;	 /* L */
	int num_attention_heads; /* nh */
	int num_key_value_heads; /* nkv; nh % nkv == 0 */
	int head_dim;		 /* hd, even; Hugging Face's default is C / nh */
	float rms_norm_eps;	 /* e.g. 1e-5 */
	float rope_theta;	 /* e.g. 10000 or 500000 */
	/* q/k/v projections carry biases (qwen2; llama's attention_bias) */
	bool attention_bias;
	bool attention_out_bias; /* o_proj carries a bias (llama's attention_bias) */
	bool mlp_bias;		 /* gate/up/down projections carry biases (llama's mlp_bias) */
	/* Sliding-window attention (mistral; qwen2 with use_sliding_window): in layers with
	 * index >= max_window_layers (the layer given to zinf_llama_bind), the query at
	 * position i attends to keys j with i - sliding_window < j <= i. sliding_window 0:
	 * plain causal attention everywhere; max_window_layers 0 (mistral): every layer. */
	int sliding_window;
	int max_window_layers;
	bool tie_word_embeddings; /* lm_head is embed_tokens */
	/* Rotary scaling: rope_scaling's (or rope_parameters') rope_type and its fields, as
	 * transformers 5 computes them (docs/model.md). */
	enum zinf_rope_type rope_type;
	float rope_factor;	     /* linear, dynamic, yarn, llama3 */
	float rope_low_freq_factor;  /* llama3 */
	float rope_high_freq_factor; /* llama3 */
	/* llama3, yarn: the pretrained context; dynamic: max_position_embeddings, the length
	 * beyond which theta grows. zinf_llama_config_init() sets 8192 (Llama 3's): set it
	 * for any other model. */
	int rope_original_max_position_embeddings;
	/* yarn: the rotation counts bounding the ramp between interpolated and kept
	 * frequencies (32, 1); the scale of cos and sin (0: derived from factor, mscale and
	 * mscale_all_dim, as transformers does); whether the ramp's ends are rounded out to
	 * whole dimensions (true) */
	float rope_beta_fast;
	float rope_beta_slow;
	float rope_attention_factor;
	float rope_mscale;
	float rope_mscale_all_dim;
	bool rope_truncate;
};

/* Defaults of a Llama-2-style config without the dimensions (all dims 0, eps 1e-6,
 * theta 10000, no biases, untied, no rope scaling; yarn's betas 32 and 1, truncate on). */
void zinf_llama_config_init(struct zinf_llama_config *cfg);

/* Validate cfg. Returns 0, or ZINF_ECONFIG with a one-line message naming the field in err
 * (err may be NULL; errlen bytes, always NUL-terminated). */
int zinf_llama_config_check(const struct zinf_llama_config *cfg, char *err, size_t errlen);

/* ---- modules and their parameters ------------------------------------------------------ */

enum zinf_llama_module_kind {
	ZINF_LLAMA_EMBED = 0, /* model.embed_tokens */
	ZINF_LLAMA_LAYER = 1, /* model.layers.<l> */
	ZINF_LLAMA_HEAD = 2,  /* model.norm + lm_head */
};

/* Parameter slots of each module kind: arrays of weights and grads are indexed by these. */
enum { ZINF_LLAMA_EMBED_TOKENS = 0, ZINF_LLAMA_EMBED_NPARAMS };
enum {
	ZINF_LLAMA_INPUT_NORM = 0, /* (C) input_layernorm.weight */
	ZINF_LLAMA_Q,		   /* (nh*hd, C) self_attn.q_proj.weight */
	ZINF_LLAMA_K,		   /* (nkv*hd, C) */
	ZINF_LLAMA_V,		   /* (nkv*hd, C) */
	ZINF_LLAMA_O,		   /* (C, nh*hd) */
	ZINF_LLAMA_Q_BIAS,	   /* (nh*hd) only with attention_bias */
	ZINF_LLAMA_K_BIAS,	   /* (nkv*hd) only with attention_bias */
	ZINF_LLAMA_V_BIAS,	   /* (nkv*hd) only with attention_bias */
	ZINF_LLAMA_O_BIAS,	   /* (C) only with attention_out_bias */
	ZINF_LLAMA_POST_NORM,	   /* (C) post_attention_layernorm.weight */
	ZINF_LLAMA_GATE,	   /* (I, C) mlp.gate_proj.weight */
	ZINF_LLAMA_UP,		   /* (I, C) mlp.up_proj.weight */
	ZINF_LLAMA_DOWN,	   /* (C, I) mlp.down_proj.weight */
	ZINF_LLAMA_GATE_BIAS,	   /* (I) only with mlp_bias */
	ZINF_LLAMA_UP_BIAS,	   /* (I) only with mlp_bias */
	ZINF_LLAMA_DOWN_BIAS,	   /* (C) only with mlp_bias */
	ZINF_LLAMA_LAYER_NPARAMS
};
enum {
	ZINF_LLAMA_FINAL_NORM = 0, /* (C) model.norm.weight */
	ZINF_LLAMA_LM_HEAD,	   /* (V, C) lm_head.weight, or embed_tokens when tied */
	ZINF_LLAMA_HEAD_NPARAMS
};

#define ZINF_LLAMA_MAX_PARAMS ZINF_LLAMA_LAYER_NPARAMS

struct zinf_llama_param_info {
	char name[96];	/* Hugging Face tensor name, e.g. model.layers.3.mlp.up_proj.weight */
	uint64_t rows;	/* first dim */
	uint64_t cols;	/* second dim; 0 for 1-D tensors */
	uint64_t elems; /* rows * max(cols, 1) */
	bool present;	/* false: the slot is unused (a bias the config does not have) */
	bool tied;	/* the head's lm_head when tied: it is the embedding's tensor, owned
			   * (registered, fetched, its grad accumulated) by the embed module */
	bool decay;	/* weight decay applies: 2-D tensors, not norm weights or biases */
};

/* Number of slots of a module kind (the *_NPARAMS above). */
int zinf_llama_module_nparams(enum zinf_llama_module_kind kind);

/* Describe slot idx of module kind (layer: its index, for the name). Returns 0, or -EINVAL
 * for an out-of-range kind, layer or idx. */
int zinf_llama_param_info(const struct zinf_llama_config *cfg, enum zinf_llama_module_kind kind,
			  int layer, int idx, struct zinf_llama_param_info *info);

/* fp32 elements of the largest module's present tensors (the scratch that 16-bit weights
 * are converted into). */
uint64_t zinf_llama_largest_module_elems(const struct zinf_llama_config *cfg);

/* ---- weights as they arrive from the engine --------------------------------------------- */

enum zinf_llama_dtype { ZINF_LLAMA_F32 = 0, ZINF_LLAMA_BF16 = 1 };

struct zinf_llama_tensor {
	const void *data; /* elems of dtype; NULL for slots that are not present */
	enum zinf_llama_dtype dtype;
};

static inline float zinf_llama_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

/* Round to nearest even; NaN stays a (quiet) NaN. */
static inline uint16_t zinf_llama_f32_to_bf16(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* ---- the model runtime ------------------------------------------------------------------ */

/* Holds the config, the micro-batch shape (B, T), RoPE tables, the fp32 weight scratch of
 * the bound module, backward temporaries and the head's activations. */
struct zinf_llama;

/* Per-layer saved activations for one micro-batch. A trainer without checkpointing keeps
 * one per layer; with checkpointing it keeps one, refilled by recompute in backward. */
struct zinf_llama_acts;

struct zinf_llama_opts {
	/* Bytes of fp32 logits the head holds at once: it works through the N rows in chunks
	 * of that many (and recomputes each chunk's logits in backward) when all N * V do not
	 * fit. 0: always hold all of them. Default 64 MiB. */
	uint64_t head_chunk_bytes;
};

void zinf_llama_opts_init(struct zinf_llama_opts *opts);

/* Create a runtime for cfg and micro-batches of B rows of T tokens (positions 0..T-1);
 * opts NULL means the defaults. Returns 0, ZINF_ECONFIG (message logged and in err,
 * naming the field), -EINVAL or -ENOMEM. err may be NULL. */
int zinf_llama_create(const struct zinf_llama_config *cfg, const struct zinf_llama_opts *opts,
		      int B, int T, struct zinf_llama **out, char *err, size_t errlen);
void zinf_llama_destroy(struct zinf_llama *m);
const struct zinf_llama_config *zinf_llama_config_of(const struct zinf_llama *m);
/* One-line message of the last failed call on m ("" if none). */
const char *zinf_llama_last_error(const struct zinf_llama *m);
/* Bytes of fp32 saved activations one layer keeps (struct zinf_llama_acts). */
uint64_t zinf_llama_acts_bytes(const struct zinf_llama *m);
/* Rows of logits the head holds at once for N rows: all N, or as many as
 * opts->head_chunk_bytes allow (at least 1); both runtimes size their logits by it. */
int llama_head_rows(const struct zinf_llama_config *cfg, const struct zinf_llama_opts *opts, int N);
/* What zinf_llama_create for cfg and B x T with opts (NULL: defaults) allocates for its
 * buffers, and zinf_llama_acts_create for one layer, in bytes; nothing is allocated. */
void zinf_llama_sizes(const struct zinf_llama_config *cfg, const struct zinf_llama_opts *opts,
		      int B, int T, uint64_t *runtime_bytes, uint64_t *acts_bytes);

int zinf_llama_acts_create(const struct zinf_llama *m, struct zinf_llama_acts **out);
void zinf_llama_acts_destroy(struct zinf_llama_acts *a);

/* Make the weights of one module (layer: its index, for messages) usable: w[i] = fp32 view
 * of in[i] for every present slot
 * of kind (fp32 tensors are used in place; bf16 ones are converted into m's scratch, which
 * the next bind of any module overwrites). For the head of a tied model pass the embedding
 * tensor as ZINF_LLAMA_LM_HEAD. Returns 0 or -EINVAL (a present slot is NULL, named in
 * last_error). */
int zinf_llama_bind(struct zinf_llama *m, enum zinf_llama_module_kind kind, int layer,
		    const struct zinf_llama_tensor *in, const float **w);

/* Embedding. tokens (N) int32 in [0, V); x (N, C). Backward accumulates dx into
 * g[ZINF_LLAMA_EMBED_TOKENS] (V, C). Returns 0 or -EINVAL (a token out of range, named
 * with its position). */
int zinf_llama_embed_forward(struct zinf_llama *m, const float *const *w, const int32_t *tokens,
			     float *x);
int zinf_llama_embed_backward(struct zinf_llama *m, const int32_t *tokens, const float *dx,
			      float *const *g);

/* Decoder layer: y = h + mlp(norm2(h)), h = x + attn(norm1(x)). x (N, C) is the layer
 * input and must stay unchanged until backward; y (N, C) must not alias x. a receives what
 * backward needs. */
int zinf_llama_layer_forward(struct zinf_llama *m, const float *const *w, const float *x, float *y,
			     struct zinf_llama_acts *a);
/* Backward of the layer whose input was x: dx (N, C) from dy (N, C); parameter grads are
 * accumulated (+=) into g (slots as w; bias slots only when present). recompute
 * true refills a from x first (activation checkpointing); false uses what forward left in
 * a. Both give bit-identical results. dx may alias dy. */
int zinf_llama_layer_backward(struct zinf_llama *m, const float *const *w, const float *x,
			      struct zinf_llama_acts *a, bool recompute, const float *dy, float *dx,
			      float *const *g);

/* Head: logits = norm(x) lm_head^T, loss = mean over positions with targets[n] != -1 of
 * -log softmax(logits)[targets[n]] (0 when there are none). targets may be NULL (logits
 * only; loss 0). Returns 0 or -EINVAL (a target out of range, named). */
int zinf_llama_head_forward(struct zinf_llama *m, const float *const *w, const float *x,
			    const int32_t *targets, float *loss);
/* (N, V) logits of the last head forward, until head backward overwrites them; NULL when
 * the head works in chunks (N * V * 4 > opts.head_chunk_bytes). */
const float *zinf_llama_logits(const struct zinf_llama *m);
/* Backward of the last head forward with the same x and targets: dx (N, C) =
 * d(dloss * loss)/dx; grads accumulated into g[ZINF_LLAMA_FINAL_NORM] and
 * g[ZINF_LLAMA_LM_HEAD] (for a tied model pass the embedding's grad buffer). dloss scales
 * the loss (1 / accumulation steps, a loss scale). */
int zinf_llama_head_backward(struct zinf_llama *m, const float *const *w, const float *x,
			     const int32_t *targets, float dloss, float *dx, float *const *g);

#endif /* ZINF_MODEL_LLAMA_H */

/*
 * The Hugging Face tensor names of a Llama-family checkpoint (llama, mistral, qwen2) and
 * the shapes its config implies, in the order Hugging Face's state dict lists them, with
 * the module (the engine's unit of fetch) each belongs to; and the check of a safetensors
 * checkpoint against that list.
 *
 * Modules: 0 = model.embed_tokens, 1 + l = model.layers.l, L + 1 = model.norm + lm_head.
 */
#ifndef ZINF_MODEL_LLAMA_NAMES_H
#define ZINF_MODEL_LLAMA_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "hf_config.h"
#include "safetensors.h"

enum zinf_llama_tensor_kind {
	ZINF_LLAMA_T_EMBED = 0,	 /* model.embed_tokens.weight (V, C) */
	ZINF_LLAMA_T_Q,		 /* self_attn.q_proj.weight (nh*hd, C) */
	ZINF_LLAMA_T_Q_BIAS,	 /* self_attn.q_proj.bias (nh*hd) */
	ZINF_LLAMA_T_K,		 /* self_attn.k_proj.weight (nkv*hd, C) */
	ZINF_LLAMA_T_K_BIAS,	 /* self_attn.k_proj.bias (nkv*hd) */
	ZINF_LLAMA_T_V,		 /* self_attn.v_proj.weight (nkv*hd, C) */
	ZINF_LLAMA_T_V_BIAS,	 /* self_attn.v_proj.bias (nkv*hd) */
	ZINF_LLAMA_T_O,		 /* self_attn.o_proj.weight (C, nh*hd) */
	ZINF_LLAMA_T_O_BIAS,	 /* self_attn.o_proj.bias (C): llama with attention_bias only */
	ZINF_LLAMA_T_GATE,	 /* mlp.gate_proj.weight (I, C) */
	ZINF_LLAMA_T_UP,	 /* mlp.up_proj.weight (I, C) */
	ZINF_LLAMA_T_DOWN,	 /* mlp.down_proj.weight (C, I) */
	ZINF_LLAMA_T_INPUT_NORM, /* input_layernorm.weight (C) */
	ZINF_LLAMA_T_POST_NORM,	 /* post_attention_layernorm.weight (C) */
	ZINF_LLAMA_T_FINAL_NORM, /* model.norm.weight (C) */
	ZINF_LLAMA_T_LM_HEAD,	 /* lm_head.weight (V, C); absent when tie_word_embeddings */
	ZINF_LLAMA_T_GATE_BIAS,	 /* mlp.gate_proj.bias (I): llama with mlp_bias only */
	ZINF_LLAMA_T_UP_BIAS,	 /* mlp.up_proj.bias (I): llama with mlp_bias only */
	ZINF_LLAMA_T_DOWN_BIAS,	 /* mlp.down_proj.bias (C): llama with mlp_bias only */
};

#define ZINF_LLAMA_NAME_BYTES 96

struct zinf_llama_tensor_name {
	char name[ZINF_LLAMA_NAME_BYTES];
	enum zinf_llama_tensor_kind kind;
	int layer;  /* decoder layer, or -1 */
	int module; /* 0 embed, 1 + layer, L + 1 head */
	int ndim;   /* 1 or 2 */
	uint64_t shape[2];
	uint64_t n_elems;
};

/* Number of tensors the checkpoint of cfg (validated) holds. */
int zinf_llama_names_count(const struct zinf_hf_config *cfg);

/* Tensor i (0 <= i < zinf_llama_names_count) in Hugging Face's state-dict order. Returns 0 or
 * -EINVAL for i out of range. */
int zinf_llama_names_get(const struct zinf_hf_config *cfg, int i,
			 struct zinf_llama_tensor_name *out);

/* Check checkpoint r against cfg: every expected tensor is present with its shape (dtype
 * BF16, F16 or F32, as the reader guarantees). Tensors the model does not use are
 * logged at info level and ignored (as Hugging Face does with rotary inv_freq buffers or
 * a tied lm_head). Returns 0 or ZINF_EFORMAT with one line in err (err_bytes, may be 0):
 * "FILE: tensor NAME: missing (expected shape [a, b])" or "...: shape [x] (expected [a, b])". */
int zinf_llama_names_check(const struct zinf_hf_config *cfg, const struct zinf_st_reader *r,
			   char *err, size_t err_bytes);

#endif /* ZINF_MODEL_LLAMA_NAMES_H */

/*
 * The insides of struct zinf_llama and struct zinf_llama_acts, shared by llama.c (runtime,
 * embedding, head) and llama_layer.c (decoder layer). Internal to src/model.
 */
#ifndef ZINF_MODEL_LLAMA_INTERNAL_H
#define ZINF_MODEL_LLAMA_INTERNAL_H

#include "llama.h"

struct zinf_llama {
	struct zinf_llama_config cfg;
	int B, T, N;	 /* micro-batch rows, sequence length, N = B * T */
	int head_rows;	 /* rows of logits the head holds at once (N: all) */
	int window;	 /* attention window of the bound layer (0: plain causal) */
	float *arena;	 /* one allocation carved into the buffers below */
	float *rope_cos; /* (T, hd/2) */
	float *rope_sin; /* (T, hd/2) */
	float *wscratch; /* fp32 copies of the bound module's bf16 weights */
	/* backward temporaries of a decoder layer */
	float *dh;	    /* (N, C) gradient of the attention residual stream */
	float *dxn;	    /* (N, C) gradient of a norm's output */
	float *dact;	    /* (N, I) */
	float *dgate;	    /* (N, I) */
	float *dup;	    /* (N, I) */
	float *dq;	    /* (N, nh*hd) */
	float *dk;	    /* (N, nkv*hd) */
	float *dv;	    /* (N, nkv*hd) */
	float *dctx;	    /* (N, nh*hd) */
	float *dkp;	    /* (N, nh*hd) per-query-head partials of dk */
	float *dvp;	    /* (N, nh*hd) per-query-head partials of dv */
	float *att_scratch; /* llama_attention_scratch_elems(T) */
	float *yscratch;    /* (N, C) output of a recompute, discarded */
	/* head activations, kept from head forward to head backward */
	float *xf;	    /* (N, C) final norm output */
	float *rstdf;	    /* (N) */
	float *logits;	    /* (head_rows, V); dlogits after backward */
	float *lse;	    /* (N) log-sum-exp of each logits row */
	int64_t head_count; /* targets != -1 in the last head forward */
	bool head_ready;    /* a head forward with targets awaits its backward */
	char err[256];
};

struct zinf_llama_acts {
	float *arena;
	float *xn1;   /* (N, C) input_layernorm output */
	float *rstd1; /* (N) */
	float *q;     /* (N, nh*hd) after RoPE */
	float *k;     /* (N, nkv*hd) after RoPE */
	float *v;     /* (N, nkv*hd) */
	float *lse;   /* (B, nh, T) attention row log-sum-exp */
	float *ctx;   /* (N, nh*hd) attention output, o_proj input */
	float *h;     /* (N, C) x + attention: the residual after attention */
	float *xn2;   /* (N, C) post_attention_layernorm output */
	float *rstd2; /* (N) */
	float *gate;  /* (N, I) */
	float *up;    /* (N, I) */
	float *act;   /* (N, I) silu(gate) * up, down_proj input */
};

/* Carve elems floats at *off of base, 64-byte aligned (base NULL: only count): one
 * allocation per object, laid out by running the same carving twice. */
static inline float *llama_carve(float *base, uint64_t *off, uint64_t elems)
{
	float *p = base ? base + *off : NULL;

	*off += (elems + 15) & ~(uint64_t)15;
	return p;
}

/* Set m's last error (one line) and return rc. */
int llama_fail(struct zinf_llama *m, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* ZINF_MODEL_LLAMA_INTERNAL_H */

/*
 * The model runtime the trainer drives (train_pass.c): one ops table over the
 * Llama-family forward and backward of llama.h, with two implementations chosen by the
 * engine's device kind:
 *
 *   - cpu  (llama_backend_cpu.c): the zinf_llama_* functions; buffers are host memory
 *     (malloc), every call is synchronous;
 *   - cuda (llama_cuda.c): cuBLAS sgemm and the kernels of kernels/llama_cuda.h on the
 *     runtime's own stream; buffers are device memory from opts.mem (the engine's
 *     budget) or cudaMalloc. llama_cuda_none.c stands in when CUDA is not built: its
 *     create fails with "model runtime: built without CUDA".
 *
 * Pointers given to an op (weights, gradients, activations, layer inputs) are memory of
 * the runtime's kind: host memory for cpu, device memory for cuda. Ops queue their work
 * and may return before it is done (cuda); sync() waits for all of it, and must be
 * called before the engine reads or frees memory the runtime used (grads_ready,
 * release). upload/download/head_forward are synchronous.
 *
 * Errors: 0 or a negative code; the one-line message is in last_error().
 */
#ifndef ZINF_MODEL_LLAMA_BACKEND_H
#define ZINF_MODEL_LLAMA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llama.h"
#include "zinf/dtype.h"
#include "zinf/engine.h"

struct llama_rt;
struct llama_rt_acts;

/* A weight as the engine hands it out: data in dtype (F32, BF16 or F16). */
struct llama_rt_tensor {
	const void *data; /* NULL for slots that are not present */
	enum zinf_dtype dtype;
};

/* Where a device runtime gets its memory. alloc NULL: the runtime allocates directly
 * (cudaMalloc); otherwise alloc/free are called with ctx and last_error(ctx) explains a
 * failed alloc. */
struct llama_rt_mem {
	int (*alloc)(void *ctx, uint64_t bytes, void **out);
	int (*free)(void *ctx, void *ptr);
	const char *(*last_error)(void *ctx);
	void *ctx;
};

struct llama_rt_opts {
	struct zinf_llama_opts llama; /* head_chunk_bytes */
	/* dtype of the weights bind() will get: non-fp32 needs a conversion scratch */
	enum zinf_dtype weight_dtype;
	struct llama_rt_mem mem; /* cuda: device memory for buffers and activations */
	int cuda_device;	 /* cuda: ordinal */
	bool tf32;		 /* cuda: TF32 tensor-core matrix products (zinf.tf32) */
	/* cuda: most bytes of one attention score buffer, (B, rows, T) floats; the query
	 * rows go in blocks of as many as fit (0: LLAMA_ATTN_SCORES_BYTES) */
	uint64_t attn_scores_bytes;
};

#define LLAMA_ATTN_SCORES_BYTES (128ull << 20)

void llama_rt_opts_init(struct llama_rt_opts *opts);

struct llama_rt_sizes {
	uint64_t runtime_bytes, acts_bytes, host_bytes;
};

struct llama_rt_ops {
	const char *name; /* "cpu", "cuda" */
	/* Create for cfg and micro-batches of B x T tokens. Returns 0 or a negative code
	 * with one line in err. */
	int (*create)(const struct zinf_llama_config *cfg, const struct llama_rt_opts *opts, int B,
		      int T, struct llama_rt **out, char *err, size_t errlen);
	void (*destroy)(struct llama_rt *rt); /* NULL is a no-op */
	/* Saved activations of one layer (struct zinf_llama_acts' contents) */
	int (*acts_create)(struct llama_rt *rt, struct llama_rt_acts **out);
	void (*acts_destroy)(struct llama_rt *rt, struct llama_rt_acts *a);
	uint64_t (*acts_bytes)(const struct llama_rt *rt);
	/* What create (runtime_bytes, in the runtime's memory, and host_bytes beside it)
	 * and one acts_create (acts_bytes) would allocate for cfg, opts and B x T, without
	 * creating anything: for planning. 0, or -ENOTSUP (one line in err) when this build
	 * cannot run the runtime. */
	int (*sizes)(const struct zinf_llama_config *cfg, const struct llama_rt_opts *opts, int B,
		     int T, struct llama_rt_sizes *out);
	/* A buffer of the runtime's kind (layer inputs, the gradient flowing back) */
	int (*buf_alloc)(struct llama_rt *rt, uint64_t bytes, void **out);
	void (*buf_free)(struct llama_rt *rt, void *ptr);
	/* Synchronous copies between host memory and the runtime's memory; zero fills */
	int (*upload)(struct llama_rt *rt, void *dst, const void *src, uint64_t bytes);
	int (*download)(struct llama_rt *rt, void *dst, const void *src, uint64_t bytes);
	/* Host memory for the queued copies below: page-locked where the runtime can (cuda:
	 * copied by DMA; plain memory, with a warning, when the driver refuses), plain
	 * memory on the cpu. host_free waits for queued copies first. */
	int (*host_alloc)(struct llama_rt *rt, uint64_t bytes, void **out);
	void (*host_free)(struct llama_rt *rt, void *ptr);
	/* Copies between host_alloc memory and the runtime's, queued in order with the
	 * runtime's work (cpu: done at once): the host must not touch the host side before
	 * a sync, and the runtime's later work sees them done. */
	int (*upload_queued)(struct llama_rt *rt, void *dst, const void *src, uint64_t bytes);
	int (*download_queued)(struct llama_rt *rt, void *dst, const void *src, uint64_t bytes);
	int (*zero)(struct llama_rt *rt, void *dst, uint64_t bytes);
	/* fp32 views w[] of a module's weights (as zinf_llama_bind; layer names the layer
	 * and selects its attention window). F16/BF16 are converted into the runtime's
	 * scratch, which the next bind overwrites. */
	int (*bind)(struct llama_rt *rt, enum zinf_llama_module_kind kind, int layer,
		    const struct llama_rt_tensor *in, const float **w);
	/* The micro-batch's tokens (N) and targets (N, or NULL: no loss), host memory,
	 * validated and taken in (cpu: kept by pointer until the next call). */
	int (*set_tokens)(struct llama_rt *rt, const int32_t *tokens, const int32_t *targets);
	int (*embed_forward)(struct llama_rt *rt, const float *const *w, float *x);
	int (*embed_backward)(struct llama_rt *rt, const float *dx, float *const *g);
	int (*layer_forward)(struct llama_rt *rt, const float *const *w, const float *x, float *y,
			     struct llama_rt_acts *a);
	int (*layer_backward)(struct llama_rt *rt, const float *const *w, const float *x,
			      struct llama_rt_acts *a, bool recompute, const float *dy, float *dx,
			      float *const *g);
	/* The loss (host float) of the targets of set_tokens; synchronous. */
	int (*head_forward)(struct llama_rt *rt, const float *const *w, const float *x,
			    float *loss);
	int (*head_backward)(struct llama_rt *rt, const float *const *w, const float *x,
			     float dloss, float *dx, float *const *g);
	/* Wait for every queued op; reports an asynchronous failure. */
	int (*sync)(struct llama_rt *rt);
	const char *(*last_error)(const struct llama_rt *rt);
};

/* Every runtime struct starts with this. */
struct llama_rt {
	const struct llama_rt_ops *ops;
};

extern const struct llama_rt_ops llama_rt_cpu_ops;
extern const struct llama_rt_ops llama_rt_cuda_ops; /* llama_cuda.c or llama_cuda_none.c */

/* The runtime for an engine's device kind: cpu for host, cuda for cuda. */
const struct llama_rt_ops *llama_rt_ops_for(enum zinf_engine_device kind);

#endif /* ZINF_MODEL_LLAMA_BACKEND_H */

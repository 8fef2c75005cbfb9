/*
 * The cpu model runtime (llama_backend.h): the zinf_llama_* functions of llama.h behind
 * the ops table, on host memory. fp16 weights are widened into a scratch of the largest
 * module (plus the embedding, the tied LM head) first, since llama.c reads fp32 and bf16.
 * The runtime picked for the engine's device kind (llama_rt_ops_for) lives here too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_backend.h"
#include "llama_ops.h"
#include "safetensors.h"
#include "zinf/error.h"

struct cpu_rt {
	struct llama_rt base;
	struct zinf_llama *m;
	float *f16_scratch; /* fp32 views of fp16 weights; NULL unless weight_dtype F16 */
	const int32_t *tokens, *targets;
	char err[256];
};

void llama_rt_opts_init(struct llama_rt_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	zinf_llama_opts_init(&opts->llama);
	opts->weight_dtype = ZINF_DTYPE_F32;
}

const struct llama_rt_ops *llama_rt_ops_for(enum zinf_engine_device kind)
{
	return kind == ZINF_ENGINE_DEVICE_CUDA ? &llama_rt_cuda_ops : &llama_rt_cpu_ops;
}

static struct cpu_rt *to_cpu(struct llama_rt *rt)
{
	return (struct cpu_rt *)rt;
}

static void cpu_destroy(struct llama_rt *rt)
{
	struct cpu_rt *c = to_cpu(rt);

	if (!rt)
		return;
	zinf_llama_destroy(c->m);
	free(c->f16_scratch);
	free(c);
}

static int cpu_create(const struct zinf_llama_config *cfg, const struct llama_rt_opts *opts, int B,
		      int T, struct llama_rt **out, char *err, size_t errlen)
{
	struct cpu_rt *c = calloc(1, sizeof(*c));
	int rc;

	*out = NULL;
	if (!c)
		goto out_nomem;
	c->base.ops = &llama_rt_cpu_ops;
	blas_core_check();
	rc = zinf_llama_create(cfg, &opts->llama, B, T, &c->m, err, errlen);
	if (rc) {
		free(c);
		return rc;
	}
	if (opts->weight_dtype == ZINF_DTYPE_F16) {
		uint64_t n = zinf_llama_largest_module_elems(cfg) +
			     (uint64_t)cfg->vocab_size * (uint64_t)cfg->hidden_size;

		c->f16_scratch = malloc(n * sizeof(float));
		if (!c->f16_scratch) {
			cpu_destroy(&c->base);
			goto out_nomem;
		}
	}
	*out = &c->base;
	return 0;
out_nomem:
	snprintf(err, errlen, "model runtime (cpu): out of memory for B %d x T %d", B, T);
	return -ENOMEM;
}

static int cpu_sizes(const struct zinf_llama_config *cfg, const struct llama_rt_opts *opts, int B,
		     int T, struct llama_rt_sizes *out)
{
	zinf_llama_sizes(cfg, &opts->llama, B, T, &out->runtime_bytes, &out->acts_bytes);
	out->host_bytes = 0;
	if (opts->weight_dtype == ZINF_DTYPE_F16) /* as cpu_create's f16_scratch */
		out->host_bytes = (zinf_llama_largest_module_elems(cfg) +
				   (uint64_t)cfg->vocab_size * (uint64_t)cfg->hidden_size) *
				  sizeof(float);
	return 0;
}

static int cpu_acts_create(struct llama_rt *rt, struct llama_rt_acts **out)
{
	return zinf_llama_acts_create(to_cpu(rt)->m, (struct zinf_llama_acts **)out);
}

static void cpu_acts_destroy(struct llama_rt *rt, struct llama_rt_acts *a)
{
	zinf_llama_acts_destroy((struct zinf_llama_acts *)a);
}

static uint64_t cpu_acts_bytes(const struct llama_rt *rt)
{
	return zinf_llama_acts_bytes(((const struct cpu_rt *)rt)->m);
}

static int cpu_buf_alloc(struct llama_rt *rt, uint64_t bytes, void **out)
{
	*out = malloc(bytes ? bytes : 1);
	if (!*out) {
		snprintf(to_cpu(rt)->err, sizeof(to_cpu(rt)->err),
			 "model runtime (cpu): out of memory for a %llu-byte buffer",
			 (unsigned long long)bytes);
		return -ENOMEM;
	}
	return 0;
}

static void cpu_buf_free(struct llama_rt *rt, void *ptr)
{
	free(ptr);
}

static int cpu_upload(struct llama_rt *rt, void *dst, const void *src, uint64_t bytes)
{
	memcpy(dst, src, bytes);
	return 0;
}

static int cpu_host_alloc(struct llama_rt *rt, uint64_t bytes, void **out)
{
	return cpu_buf_alloc(rt, bytes, out);
}

static int cpu_zero(struct llama_rt *rt, void *dst, uint64_t bytes)
{
	memset(dst, 0, bytes);
	return 0;
}

static int cpu_bind(struct llama_rt *rt, enum zinf_llama_module_kind kind, int layer,
		    const struct llama_rt_tensor *in, const float **w)
{
	struct cpu_rt *c = to_cpu(rt);
	struct zinf_llama_tensor t[ZINF_LLAMA_MAX_PARAMS];
	float *scratch = c->f16_scratch;
	int n = zinf_llama_module_nparams(kind);

	for (int s = 0; s < n; s++) {
		t[s].data = in[s].data;
		t[s].dtype = in[s].dtype == ZINF_DTYPE_BF16 ? ZINF_LLAMA_BF16 : ZINF_LLAMA_F32;
		if (in[s].data && in[s].dtype == ZINF_DTYPE_F16) {
			struct zinf_llama_param_info info;

			if (!scratch || zinf_llama_param_info(zinf_llama_config_of(c->m), kind,
							      layer, s, &info)) {
				snprintf(
					c->err, sizeof(c->err),
					"model runtime (cpu): bind: fp16 weight in slot %d of a module not created for fp16",
					s);
				return -EINVAL;
			}
			zinf_st_convert(scratch, ZINF_ST_F32, in[s].data, ZINF_ST_F16, info.elems);
			t[s].data = scratch;
			scratch += info.elems;
		}
	}
	c->err[0] = '\0';
	return zinf_llama_bind(c->m, kind, layer, t, w);
}

static int cpu_set_tokens(struct llama_rt *rt, const int32_t *tokens, const int32_t *targets)
{
	to_cpu(rt)->tokens = tokens;
	to_cpu(rt)->targets = targets;
	return 0;
}

static int cpu_embed_forward(struct llama_rt *rt, const float *const *w, float *x)
{
	to_cpu(rt)->err[0] = '\0';
	return zinf_llama_embed_forward(to_cpu(rt)->m, w, to_cpu(rt)->tokens, x);
}

static int cpu_embed_backward(struct llama_rt *rt, const float *dx, float *const *g)
{
	to_cpu(rt)->err[0] = '\0';
	return zinf_llama_embed_backward(to_cpu(rt)->m, to_cpu(rt)->tokens, dx, g);
}

static int cpu_layer_forward(struct llama_rt *rt, const float *const *w, const float *x, float *y,
			     struct llama_rt_acts *a)
{
	to_cpu(rt)->err[0] = '\0';
	return zinf_llama_layer_forward(to_cpu(rt)->m, w, x, y, (struct zinf_llama_acts *)a);
}

static int cpu_layer_backward(struct llama_rt *rt, const float *const *w, const float *x,
			      struct llama_rt_acts *a, bool recompute, const float *dy, float *dx,
			      float *const *g)
{
	to_cpu(rt)->err[0] = '\0';
	return zinf_llama_layer_backward(to_cpu(rt)->m, w, x, (struct zinf_llama_acts *)a,
					 recompute, dy, dx, g);
}

static int cpu_head_forward(struct llama_rt *rt, const float *const *w, const float *x, float *loss)
{
	to_cpu(rt)->err[0] = '\0';
	return zinf_llama_head_forward(to_cpu(rt)->m, w, x, to_cpu(rt)->targets, loss);
}

static int cpu_head_backward(struct llama_rt *rt, const float *const *w, const float *x,
			     float dloss, float *dx, float *const *g)
{
	to_cpu(rt)->err[0] = '\0';
	return zinf_llama_head_backward(to_cpu(rt)->m, w, x, to_cpu(rt)->targets, dloss, dx, g);
}

static int cpu_sync(struct llama_rt *rt)
{
	return 0;
}

static const char *cpu_last_error(const struct llama_rt *rt)
{
	const struct cpu_rt *c = (const struct cpu_rt *)rt;

	return c->err[0] ? c->err : zinf_llama_last_error(c->m);
}

const struct llama_rt_ops llama_rt_cpu_ops = {
	.name = "cpu",
	.create = cpu_create,
	.destroy = cpu_destroy,
	.acts_create = cpu_acts_create,
	.acts_destroy = cpu_acts_destroy,
	.acts_bytes = cpu_acts_bytes,
	.sizes = cpu_sizes,
	.buf_alloc = cpu_buf_alloc,
	.buf_free = cpu_buf_free,
	.upload = cpu_upload,
	.download = cpu_upload,
	.host_alloc = cpu_host_alloc,
	.host_free = cpu_buf_free,
	.upload_queued = cpu_upload,
	.download_queued = cpu_upload,
	.zero = cpu_zero,
	.bind = cpu_bind,
	.set_tokens = cpu_set_tokens,
	.embed_forward = cpu_embed_forward,
	.embed_backward = cpu_embed_backward,
	.layer_forward = cpu_layer_forward,
	.layer_backward = cpu_layer_backward,
	.head_forward = cpu_head_forward,
	.head_backward = cpu_head_backward,
	.sync = cpu_sync,
	.last_error = cpu_last_error,
};

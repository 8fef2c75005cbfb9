/*
 * Test support for the Llama ops: a fixture reader (NAME.txt table + NAME.bin tensors, as
 * gen_llama_fixture.py writes them) and a small whole-model driver that runs the modules in
 * the order a trainer does (embedding, each layer, head; backward in reverse), binding each
 * module's weights before use, with or without activation checkpointing, fp32 or bf16
 * weights. Header-only: every test is one executable.
 */
#ifndef ZINF_TESTS_MODEL_TEST_LLAMA_NET_H
#define ZINF_TESTS_MODEL_TEST_LLAMA_NET_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "test.h"

/* ---- fixture ------------------------------------------------------------------------------ */

struct fx_entry {
	char name[128];
	char dtype[8];
	size_t off, n;
};

struct fixture {
	struct zinf_llama_config cfg;
	int B, T;
	int bf16;
	unsigned char *bin;
	size_t bin_size;
	struct fx_entry e[256];
	int ne;
};

static inline void *fx_read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;

	T_CHECK(f != NULL, "cannot open fixture %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	T_CHECK(buf && fread(buf, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
	buf[n] = 0;
	fclose(f);
	*size = (size_t)n;
	return buf;
}

static inline void fx_config(struct fixture *f, const char *key, const char *val)
{
	struct zinf_llama_config *c = &f->cfg;
	struct {
		const char *key;
		int *i;
		float *f;
		bool *b;
	} keys[] = {
		{"vocab_size", &c->vocab_size, NULL, NULL},
		{"hidden_size", &c->hidden_size, NULL, NULL},
		{"intermediate_size", &c->intermediate_size, NULL, NULL},
		{"num_hidden_layers", &c->num_hidden_layers, NULL, NULL},
		{"num_attention_heads", &c->num_attention_heads, NULL, NULL},
		{"num_key_value_heads", &c->num_key_value_heads, NULL, NULL},
		{"head_dim", &c->head_dim, NULL, NULL},
		{"B", &f->B, NULL, NULL},
		{"T", &f->T, NULL, NULL},
		{"bf16_weights", &f->bf16, NULL, NULL},
		{"rope_original_max_position_embeddings", &c->rope_original_max_position_embeddings,
		 NULL, NULL},
		{"sliding_window", &c->sliding_window, NULL, NULL},
		{"max_window_layers", &c->max_window_layers, NULL, NULL},
		{"rms_norm_eps", NULL, &c->rms_norm_eps, NULL},
		{"rope_theta", NULL, &c->rope_theta, NULL},
		{"rope_factor", NULL, &c->rope_factor, NULL},
		{"rope_low_freq_factor", NULL, &c->rope_low_freq_factor, NULL},
		{"rope_high_freq_factor", NULL, &c->rope_high_freq_factor, NULL},
		{"attention_bias", NULL, NULL, &c->attention_bias},
		{"attention_out_bias", NULL, NULL, &c->attention_out_bias},
		{"mlp_bias", NULL, NULL, &c->mlp_bias},
		{"tie_word_embeddings", NULL, NULL, &c->tie_word_embeddings},
		{"rope_beta_fast", NULL, &c->rope_beta_fast, NULL},
		{"rope_beta_slow", NULL, &c->rope_beta_slow, NULL},
		{"rope_attention_factor", NULL, &c->rope_attention_factor, NULL},
		{"rope_mscale", NULL, &c->rope_mscale, NULL},
		{"rope_mscale_all_dim", NULL, &c->rope_mscale_all_dim, NULL},
		{"rope_truncate", NULL, NULL, &c->rope_truncate},
	};

	if (strcmp(key, "rope_type") == 0) {
		for (int t = ZINF_ROPE_DEFAULT; t <= ZINF_ROPE_LLAMA3; t++) {
			if (strcmp(val, zinf_rope_type_name((enum zinf_rope_type)t)) == 0) {
				c->rope_type = (enum zinf_rope_type)t;
				return;
			}
		}
		T_CHECK(0, "fixture: unknown rope_type %s", val);
	}

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strcmp(key, keys[i].key))
			continue;
		if (keys[i].i)
			*keys[i].i = atoi(val);
		else if (keys[i].f)
			*keys[i].f = strtof(val, NULL);
		else
			*keys[i].b = atoi(val) != 0;
		return;
	}
	T_CHECK(0, "fixture: unknown config key %s", key);
}

/* Load base.txt and base.bin. */
static inline void fixture_load(const char *base, struct fixture *f)
{
	char path[1024];
	size_t tsize;
	char *txt, *save = NULL;

	memset(f, 0, sizeof(*f));
	zinf_llama_config_init(&f->cfg);
	snprintf(path, sizeof(path), "%s.bin", base);
	f->bin = fx_read_file(path, &f->bin_size);
	snprintf(path, sizeof(path), "%s.txt", base);
	txt = fx_read_file(path, &tsize);
	for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char key[128], val[128];
		struct fx_entry *e = &f->e[f->ne];

		if (line[0] == '#')
			continue;
		if (sscanf(line, "config %127s %127s", key, val) == 2) {
			fx_config(f, key, val);
			continue;
		}
		T_CHECK(f->ne < 256 && sscanf(line, "tensor %127s %7s %zu %zu", e->name, e->dtype,
					      &e->off, &e->n) == 4,
			"%s: bad line: %s", path, line);
		T_CHECK(e->off + e->n * 4 <= f->bin_size, "%s: tensor %s past the end", path,
			e->name);
		f->ne++;
	}
	free(txt);
}

/* The tensor called name with n elements (n 0: any), or NULL when absent. */
static inline const void *fixture_find(const struct fixture *f, const char *name, size_t n)
{
	for (int i = 0; i < f->ne; i++) {
		if (strcmp(f->e[i].name, name))
			continue;
		T_CHECK(n == 0 || f->e[i].n == n, "fixture tensor %s has %zu elements, want %zu",
			name, f->e[i].n, n);
		return f->bin + f->e[i].off;
	}
	return NULL;
}

static inline const void *fixture_get(const struct fixture *f, const char *name, size_t n)
{
	const void *p = fixture_find(f, name, n);

	T_CHECK(p != NULL, "fixture has no tensor %s", name);
	return p;
}

/* ---- whole-model driver ------------------------------------------------------------------- */

/* Module index: 0 embedding, 1..L layers, L+1 head. */
struct net {
	struct zinf_llama_config cfg;
	int B, T, N, L;
	struct zinf_llama *m;
	float *(*w)[ZINF_LLAMA_MAX_PARAMS];	 /* [L + 2][slot] fp32 weights (head LM slot is
						   * the embedding when tied) */
	uint16_t *(*wbf)[ZINF_LLAMA_MAX_PARAMS]; /* bf16 copies of w */
	struct zinf_llama_acts **acts;		 /* [L] */
	float *xs;				 /* (L + 1, N, C) layer inputs, then head input */
	float *d;				 /* (N, C) gradient flowing backward */
};

static inline enum zinf_llama_module_kind net_kind(const struct net *n, int mod)
{
	return mod == 0 ? ZINF_LLAMA_EMBED : mod == n->L + 1 ? ZINF_LLAMA_HEAD : ZINF_LLAMA_LAYER;
}

static inline void net_info(const struct net *n, int mod, int slot,
			    struct zinf_llama_param_info *info)
{
	T_CHECK_RC(zinf_llama_param_info(&n->cfg, net_kind(n, mod), mod - 1 < 0 ? 0 : mod - 1, slot,
					 info));
}

/* Allocate grads shaped like the weights, zeroed. [L + 2][slot]; tied LM slot aliases the
 * embedding's grad, as a trainer passes it. */
static inline float *(*net_grads_alloc(const struct net *n))[ZINF_LLAMA_MAX_PARAMS]
{
	float *(*g)[ZINF_LLAMA_MAX_PARAMS];

	T_CHECK(n->L >= 0, "%d layers", n->L); /* (and gcc -O2 sees the size is sane) */
	g = calloc((size_t)n->L + 2, sizeof(*g));
	for (int mod = 0; mod < n->L + 2; mod++) {
		for (int s = 0; s < zinf_llama_module_nparams(net_kind(n, mod)); s++) {
			struct zinf_llama_param_info info;

			net_info(n, mod, s, &info);
			if (!info.present)
				continue;
			g[mod][s] = info.tied ? g[0][ZINF_LLAMA_EMBED_TOKENS]
					      : calloc(info.elems, sizeof(float));
		}
	}
	return g;
}

static inline void net_grads_free(const struct net *n, float *(*g)[ZINF_LLAMA_MAX_PARAMS])
{
	struct zinf_llama_param_info info;

	for (int mod = 0; mod < n->L + 2; mod++) {
		for (int s = 0; s < zinf_llama_module_nparams(net_kind(n, mod)); s++) {
			net_info(n, mod, s, &info);
			if (info.present && !info.tied)
				free(g[mod][s]);
		}
	}
	free(g);
}

/* Create the runtime and allocate weights (uninitialised; fill n->w then call
 * net_sync_bf16). */
static inline void net_init_opts(struct net *n, const struct zinf_llama_config *cfg,
				 const struct zinf_llama_opts *opts, int B, int T)
{
	char err[256];

	memset(n, 0, sizeof(*n));
	n->cfg = *cfg;
	n->B = B;
	n->T = T;
	n->N = B * T;
	n->L = cfg->num_hidden_layers;
	T_CHECK(zinf_llama_create(cfg, opts, B, T, &n->m, err, sizeof(err)) == 0, "create: %s",
		err);
	n->w = calloc((size_t)n->L + 2, sizeof(*n->w));
	n->wbf = calloc((size_t)n->L + 2, sizeof(*n->wbf));
	for (int mod = 0; mod < n->L + 2; mod++) {
		for (int s = 0; s < zinf_llama_module_nparams(net_kind(n, mod)); s++) {
			struct zinf_llama_param_info info;

			net_info(n, mod, s, &info);
			if (!info.present)
				continue;
			if (info.tied) {
				n->w[mod][s] = n->w[0][ZINF_LLAMA_EMBED_TOKENS];
				n->wbf[mod][s] = n->wbf[0][ZINF_LLAMA_EMBED_TOKENS];
				continue;
			}
			n->w[mod][s] = calloc(info.elems, sizeof(float));
			n->wbf[mod][s] = calloc(info.elems, sizeof(uint16_t));
		}
	}
	n->acts = calloc((size_t)n->L, sizeof(*n->acts));
	for (int l = 0; l < n->L; l++)
		T_CHECK_RC(zinf_llama_acts_create(n->m, &n->acts[l]));
	n->xs = calloc((size_t)(n->L + 1) * n->N * cfg->hidden_size, sizeof(float));
	n->d = calloc((size_t)n->N * cfg->hidden_size, sizeof(float));
}

static inline void net_init(struct net *n, const struct zinf_llama_config *cfg, int B, int T)
{
	net_init_opts(n, cfg, NULL, B, T);
}

/* Refresh the bf16 copies from the fp32 weights (round to nearest even). */
static inline void net_sync_bf16(struct net *n)
{
	for (int mod = 0; mod < n->L + 2; mod++) {
		for (int s = 0; s < zinf_llama_module_nparams(net_kind(n, mod)); s++) {
			struct zinf_llama_param_info info;

			net_info(n, mod, s, &info);
			if (!info.present || info.tied)
				continue;
			for (uint64_t i = 0; i < info.elems; i++)
				n->wbf[mod][s][i] = zinf_llama_f32_to_bf16(n->w[mod][s][i]);
		}
	}
}

static inline void net_destroy(struct net *n)
{
	struct zinf_llama_param_info info;

	for (int mod = 0; mod < n->L + 2; mod++) {
		for (int s = 0; s < zinf_llama_module_nparams(net_kind(n, mod)); s++) {
			net_info(n, mod, s, &info);
			if (info.present && !info.tied) {
				free(n->w[mod][s]);
				free(n->wbf[mod][s]);
			}
		}
	}
	for (int l = 0; l < n->L; l++)
		zinf_llama_acts_destroy(n->acts[l]);
	free(n->acts);
	free(n->w);
	free(n->wbf);
	free(n->xs);
	free(n->d);
	zinf_llama_destroy(n->m);
}

/* Bind module mod's weights (bf16 or fp32 source) and return the fp32 views. */
static inline void net_bind(struct net *n, int mod, bool bf16, const float **wf)
{
	struct zinf_llama_tensor in[ZINF_LLAMA_MAX_PARAMS];

	for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
		in[s].data = bf16 ? (const void *)n->wbf[mod][s] : (const void *)n->w[mod][s];
		in[s].dtype = bf16 ? ZINF_LLAMA_BF16 : ZINF_LLAMA_F32;
	}
	T_CHECK(zinf_llama_bind(n->m, net_kind(n, mod), mod - 1 < 0 ? 0 : mod - 1, in, wf) == 0,
		"bind module %d: %s", mod, zinf_llama_last_error(n->m));
}

static inline float *net_x(const struct net *n, int l)
{
	return n->xs + (size_t)l * n->N * n->cfg.hidden_size;
}

/* Forward through the whole model; returns the loss. ckpt: layers share one acts. */
static inline float net_forward(struct net *n, const int32_t *tokens, const int32_t *targets,
				bool ckpt, bool bf16)
{
	const float *wf[ZINF_LLAMA_MAX_PARAMS];
	float loss;

	net_bind(n, 0, bf16, wf);
	T_CHECK(zinf_llama_embed_forward(n->m, wf, tokens, net_x(n, 0)) == 0, "%s",
		zinf_llama_last_error(n->m));
	for (int l = 0; l < n->L; l++) {
		net_bind(n, l + 1, bf16, wf);
		T_CHECK_RC(zinf_llama_layer_forward(n->m, wf, net_x(n, l), net_x(n, l + 1),
						    n->acts[ckpt ? 0 : l]));
	}
	net_bind(n, n->L + 1, bf16, wf);
	T_CHECK(zinf_llama_head_forward(n->m, wf, net_x(n, n->L), targets, &loss) == 0, "%s",
		zinf_llama_last_error(n->m));
	return loss;
}

/* Backward after net_forward with the same arguments; grads accumulated into g. */
static inline void net_backward(struct net *n, const int32_t *tokens, const int32_t *targets,
				bool ckpt, bool bf16, float dloss,
				float *(*g)[ZINF_LLAMA_MAX_PARAMS])
{
	const float *wf[ZINF_LLAMA_MAX_PARAMS];

	net_bind(n, n->L + 1, bf16, wf);
	T_CHECK(zinf_llama_head_backward(n->m, wf, net_x(n, n->L), targets, dloss, n->d,
					 g[n->L + 1]) == 0,
		"%s", zinf_llama_last_error(n->m));
	for (int l = n->L - 1; l >= 0; l--) {
		net_bind(n, l + 1, bf16, wf);
		T_CHECK_RC(zinf_llama_layer_backward(n->m, wf, net_x(n, l), n->acts[ckpt ? 0 : l],
						     ckpt, n->d, n->d, g[l + 1]));
	}
	T_CHECK_RC(zinf_llama_embed_backward(n->m, tokens, n->d, g[0]));
}

/* ---- random numbers (xorshift64*, seeded) --------------------------------------------------- */

static inline uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static inline float rng_uniform(uint64_t *s) /* [-1, 1) */
{
	return (float)((double)(rng_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Fill every weight: norms 1 + 0.2 u, biases 0.2 u, matrices scale * u / sqrt(cols) * 1.7. */
static inline void net_randomize(struct net *n, uint64_t seed)
{
	uint64_t s = seed * 2654435761ULL + 1;

	for (int mod = 0; mod < n->L + 2; mod++) {
		for (int k = 0; k < zinf_llama_module_nparams(net_kind(n, mod)); k++) {
			struct zinf_llama_param_info info;

			net_info(n, mod, k, &info);
			if (!info.present || info.tied)
				continue;
			for (uint64_t i = 0; i < info.elems; i++) {
				float u = rng_uniform(&s);

				if (!info.cols)
					n->w[mod][k][i] = strstr(info.name, "norm")
								  ? 1.0f + 0.2f * u
								  : 0.2f * u;
				else
					n->w[mod][k][i] = 1.7f * u / sqrtf((float)info.cols);
			}
		}
	}
	net_sync_bf16(n);
}

#endif /* ZINF_TESTS_MODEL_TEST_LLAMA_NET_H */

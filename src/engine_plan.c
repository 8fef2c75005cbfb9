/*
 * Planning without an engine: what a run of the modules described would need on each
 * tier, with the formulas zinf_engine_finalize and the model's check before step 1 use
 * (engine_budget.c, store.c's check_budgets and layout, engine_nvme.c's staging, the
 * NVMe optimizer's extents, engine_grad.c's choice of the gradients' tier). Nothing is
 * allocated, opened or probed: no device, pinned pool or NVMe path is needed, so a run
 * can be planned for a machine not yet bought. test_plan_matches_engine compares every
 * figure here with a finalized engine's, so the two cannot drift apart unnoticed.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "config.h"
#include "device.h"
#include "engine_internal.h"
#include "store.h" /* the store's packing */
#include "tier_opts.h"
#include "zinf/engine.h"
#include "zinf/error.h"

struct plan_module {
	uint64_t elems, packed, dev_bytes, grad_bytes;
	uint32_t n_params;
	int32_t partner; /* out with this module (a tied head's embedding), or -1 */
};

/* Only what the formulas read, kept as the parameters are added (a module only grows,
 * so the largest of each size is kept as it goes). */
struct zinf_plan {
	struct plan_module *modules;
	uint32_t n_modules, cap_modules;
	uint64_t elems, param_bytes;
	uint64_t group[ENGINE_MAX_GROUPS]; /* elements per optimizer group (decay, dtype) */
	uint64_t total_dev, largest_dev, largest_packed, largest_grads;
};

static uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

int zinf_plan_create(struct zinf_plan **out)
{
	if (!out)
		return -EINVAL;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void zinf_plan_destroy(struct zinf_plan *p)
{
	if (!p)
		return;
	free(p->modules);
	free(p);
}

static int grow(void **v, uint32_t *cap, uint32_t n, size_t size)
{
	void *w;

	if (n < *cap)
		return 0;
	w = realloc(*v, (size_t)(*cap ? 2 * *cap : 64) * size);
	if (!w)
		return -ENOMEM;
	*v = w;
	*cap = *cap ? 2 * *cap : 64;
	return 0;
}

int zinf_plan_module_add(struct zinf_plan *p, uint32_t *module)
{
	if (!p || !module)
		return -EINVAL;
	if (grow((void **)&p->modules, &p->cap_modules, p->n_modules, sizeof(*p->modules)))
		return -ENOMEM;
	memset(&p->modules[p->n_modules], 0, sizeof(*p->modules));
	p->modules[p->n_modules].partner = -1;
	p->modules[p->n_modules].dev_bytes = zinf_store_buffer_bytes(0);
	p->total_dev += p->modules[p->n_modules].dev_bytes;
	if (p->modules[p->n_modules].dev_bytes > p->largest_dev)
		p->largest_dev = p->modules[p->n_modules].dev_bytes;
	*module = p->n_modules++;
	return 0;
}

int zinf_plan_param_add(struct zinf_plan *p, uint32_t module, enum zinf_dtype dtype, int ndim,
			const uint64_t *shape, unsigned flags)
{
	struct plan_module *m;
	uint64_t elems = 1;
	bool decay = ndim >= 2 && !(flags & ZINF_PARAM_NO_DECAY); /* as zinf_param_add */

	if (!p || module >= p->n_modules || ndim < 1 || ndim > 4 || !shape ||
	    (dtype != ZINF_DTYPE_F32 && dtype != ZINF_DTYPE_BF16 && dtype != ZINF_DTYPE_F16))
		return -EINVAL;
	for (int d = 0; d < ndim; d++) { /* as zinf_param_add: each 1 or more, product <= 2^48 */
		if (shape[d] == 0 || elems > ZINF_MAX_PARAM_ELEMS / shape[d])
			return -EINVAL;
		elems *= shape[d];
	}
	if (elems > ZINF_MAX_MODEL_ELEMS - p->elems) /* and 2^50 in all */
		return -EINVAL;
	p->elems += elems;
	p->param_bytes += elems * engine_dtype_bytes(dtype);
	p->group[3 * decay + (dtype - ZINF_DTYPE_F32)] += elems; /* as engine_group_elems */
	/* the store's packing; gradients fp32, each GRAD_ALIGN aligned (zinf_param_add) */
	m = &p->modules[module];
	m->elems += elems;
	m->n_params++;
	m->packed = zinf_store_pack_param(m->packed, elems * engine_dtype_bytes(dtype));
	p->total_dev -= m->dev_bytes;
	m->dev_bytes = zinf_store_buffer_bytes(m->packed);
	p->total_dev += m->dev_bytes;
	m->grad_bytes += round_up(elems * 4, GRAD_ALIGN);
	if (m->dev_bytes > p->largest_dev)
		p->largest_dev = m->dev_bytes;
	if (m->packed > p->largest_packed)
		p->largest_packed = m->packed;
	if (m->grad_bytes > p->largest_grads)
		p->largest_grads = m->grad_bytes;
	return 0;
}

int zinf_plan_modules_together(struct zinf_plan *p, uint32_t a, uint32_t b)
{
	if (!p || a >= p->n_modules || b >= p->n_modules || a == b)
		return -EINVAL;
	p->modules[a].partner = (int32_t)b;
	p->modules[b].partner = (int32_t)a;
	return 0;
}

/* ---- the optimizer state on NVMe (engine_nvme.c, optim_nvme_setup.c) --------------- */

struct nvme_figures {
	uint64_t staging, drive;
};

static void nvme_figures_of(const uint64_t g[ENGINE_MAX_GROUPS], uint64_t sub, unsigned max_slots,
			    uint64_t align, struct nvme_figures *f)
{
	memset(f, 0, sizeof(*f));
	for (int k = 0; k < ENGINE_MAX_GROUPS; k++) {
		uint64_t full, n_sub, extent, slots;
		if (!g[k])
			continue;
		full = sub < g[k] ? sub : g[k];
		n_sub = (g[k] + sub - 1) / sub;
		extent = 3 * round_up(full * 4, align);
		slots = n_sub < max_slots ? n_sub : max_slots;
		f->staging += slots * extent;
		f->drive += (n_sub + slots) * extent; /* a spare extent per staging buffer */
	}
}

/* The fp32 gradient accumulators: on NVMe or not (engine_grad.c's want_nvme), and their
 * drive bytes there. */
static bool grads_on_nvme(const struct zinf_config *cfg, const uint64_t g[ENGINE_MAX_GROUPS],
			  uint64_t ram)
{
	uint64_t total = 0, largest = 0, sub = cfg->v.zero.sub_group_size;

	if (cfg->v.zinf.offload_gradients != ZINF_GRADS_AUTO)
		return cfg->v.zinf.offload_gradients == ZINF_GRADS_NVME;
	for (int k = 0; k < ENGINE_MAX_GROUPS; k++) {
		uint64_t first = sub < g[k] ? sub : g[k];
		total += g[k];
		if (first > largest)
			largest = first;
	}
	return ram && total * 4 > ram / 4 && 7 * largest * 4 < total * 4;
}

static uint64_t grads_drive(const uint64_t g[ENGINE_MAX_GROUPS], uint64_t sub, uint64_t align)
{
	uint64_t total = 0;

	for (int k = 0; k < ENGINE_MAX_GROUPS; k++) {
		uint64_t full = sub < g[k] ? sub : g[k];
		if (!g[k])
			continue;
		total += g[k] / full * round_up(full * 4, align);
		if (g[k] % full)
			total += round_up(g[k] % full * 4, align);
	}
	return total;
}

/* The device budget the device gives: the host backend's heap is whole pages
 * (device_host.c). */
static uint64_t device_limit(const struct zinf_plan_machine *mc)
{
	return mc->host_device ? round_up(mc->device_bytes, 4096) : mc->device_bytes;
}

/* ---- the estimate --------------------------------------------------------------------- */

static unsigned max_slots(const struct zinf_config *cfg)
{
	return 1 + (unsigned)cfg->v.zero.offload_optimizer.pipeline_read +
	       (unsigned)cfg->v.zero.offload_optimizer.pipeline_write;
}

/* Where parameter homes on NVMe go: offload_param.max_in_cpu keeps in host memory the
 * modules that fit in what is left of it, first fit in registration order (store.c's
 * assign_homes). Zero unless the parameters' home is NVMe. */
struct param_split {
	uint64_t host;	       /* bytes of the modules kept in host memory */
	uint64_t nvme;	       /* bytes of the rest: the chunks staged from NVMe */
	uint64_t nvme_drive;   /* the same, each module rounded to the drive's alignment */
	uint64_t largest_nvme; /* the largest module of the rest */
};

static void param_split(const struct zinf_plan *p, const struct zinf_config *cfg, uint64_t align,
			struct param_split *s)
{
	uint64_t left = cfg->v.zero.offload_param.max_in_cpu;

	memset(s, 0, sizeof(*s));
	if (cfg->v.zero.offload_param.device != ZINF_OFFLOAD_NVME)
		return;
	for (uint32_t m = 0; m < p->n_modules; m++) {
		const struct plan_module *mod = &p->modules[m];
		if (mod->elems <= left) {
			left -= mod->elems;
			s->host += mod->dev_bytes;
			continue;
		}
		s->nvme += mod->dev_bytes;
		s->nvme_drive += round_up(mod->dev_bytes, align);
		if (mod->dev_bytes > s->largest_nvme)
			s->largest_nvme = mod->dev_bytes;
	}
}

static uint64_t plan_module_elems(const void *ctx, uint32_t m)
{
	return ((const struct zinf_plan *)ctx)->modules[m].elems;
}

/* The first module whose optimizer state is on the device, as finalize decides it
 * (engine_state_split; n_modules: none is). */
static uint32_t dev_first(const struct zinf_plan *p, const struct zinf_config *cfg)
{
	return engine_state_split(&cfg->v, p->n_modules, plan_module_elems, p);
}

/* The largest chunk of any module (zinf_store_largest_chunk): chunk_size, or the
 * largest module when every one is smaller (dev_bytes are whole pages already). */
static uint64_t largest_chunk(const struct zinf_plan *p, const struct zinf_config *cfg)
{
	return cfg->v.zinf.chunk_size < p->largest_dev ? cfg->v.zinf.chunk_size : p->largest_dev;
}

/* The pinned pool finalize makes for the modules (engine_pinned_need) with chunks bytes
 * of parameter chunks on NVMe (param_split's nvme) and the optimizer state's staging of
 * sub-groups. */
static uint64_t pinned_need(const struct zinf_plan *p, const struct zinf_config *cfg,
			    const struct zinf_plan_machine *mc, uint64_t chunks, uint64_t staging)
{
	uint64_t need;

	/* the parameter chunks staged from NVMe, at most the device's worth */
	if (chunks > device_limit(mc))
		chunks = device_limit(mc);
	need = chunks + largest_chunk(p, cfg) + staging;
	if (dev_first(p, cfg) > 0) /* the gradients' two stages, unless all stay on the device */
		need += 2 * p->largest_grads;
	return need + need / 8 + (4ull << 20);
}

/* The pool the engine makes: the limit, or with an "auto" limit the need up to it; in
 * whole pages (pinned.c). */
static uint64_t pool_of(const struct zinf_plan_machine *mc, uint64_t need)
{
	uint64_t size = mc->pinned_auto && need < mc->pinned_bytes ? need : mc->pinned_bytes;

	return round_up(size, (uint64_t)sysconf(_SC_PAGESIZE));
}

static void refuse(struct zinf_plan_need *out, enum zinf_plan_tier tier, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void refuse(struct zinf_plan_need *out, enum zinf_plan_tier tier, const char *fmt, ...)
{
	va_list ap;

	if (!out->fits)
		return; /* the first reason stays */
	out->fits = false;
	out->refused_tier = tier;
	va_start(ap, fmt);
	vsnprintf(out->why, sizeof(out->why), fmt, ap);
	va_end(ap);
}

static int device_figures(const struct zinf_plan *p, const struct zinf_config *cfg,
			  const struct zinf_plan_machine *mc, struct zinf_plan_need *out)
{
	bool homes = cfg->v.zero.offload_param.device == ZINF_OFFLOAD_NONE;
	uint64_t threshold = cfg->v.zero.stage3_param_persistence_threshold, persistent = 0;
	uint64_t peak = 0, limit = device_limit(mc);
	uint32_t first = dev_first(p, cfg);
	bool *kept = calloc(p->n_modules ? p->n_modules : 1, sizeof(*kept));
	char a[32], b[32];

	if (!kept)
		return -ENOMEM;
	for (uint32_t m = 0; m < p->n_modules; m++) {
		const struct plan_module *mod = &p->modules[m];
		/* as mark_persistent: small modules, up to a quarter of the budget */
		if (mod->elems && mod->elems <= threshold &&
		    persistent + mod->dev_bytes <= limit / 4) {
			kept[m] = true;
			persistent += mod->dev_bytes;
		}
	}
	/* as zinf_engine_check_room for each module (a tied pair together): what stays
	 * (homes or persistent modules, the runtime's buffers) + its parameters + its
	 * gradient buffers */
	out->device_base = mc->runtime_device_bytes + (homes ? p->total_dev : persistent);
	if (first < p->n_modules) { /* engine_dstate_bytes */
		uint32_t dev_params = 0;
		for (uint32_t m = first; m < p->n_modules; m++) {
			out->device_base += 4 * p->modules[m].grad_bytes;
			dev_params += p->modules[m].n_params;
		}
		out->device_base += engine_dparts_bytes(dev_params);
	}
	for (uint32_t m = 0; m < p->n_modules; m++) {
		const struct plan_module *mod = &p->modules[m];
		uint64_t need = mod->grad_bytes;
		if (!homes && !kept[m])
			need += mod->dev_bytes;
		if (mod->partner >= 0) {
			const struct plan_module *o = &p->modules[mod->partner];
			need += o->grad_bytes;
			if (!homes && !kept[mod->partner])
				need += o->dev_bytes;
		}
		if (need > peak)
			peak = need;
	}
	free(kept);
	out->device_bytes = out->device_base + peak;
	if (p->largest_dev > limit)
		refuse(out, ZINF_PLAN_DEVICE, "device: a module needs %s, more than all of %s",
		       zinf_format_bytes(p->largest_dev, a, sizeof(a)),
		       zinf_format_bytes(limit, b, sizeof(b)));
	if (out->device_bytes > limit)
		refuse(out, ZINF_PLAN_DEVICE, "device: %s needed, %s there",
		       zinf_format_bytes(out->device_bytes, a, sizeof(a)),
		       zinf_format_bytes(limit, b, sizeof(b)));
	return 0;
}

/* The direct-I/O alignment of the NVMe files: at least 4096, as the engine's. */
static uint64_t nvme_align(const struct zinf_plan_machine *mc)
{
	return mc->nvme_align > 4096 ? mc->nvme_align : 4096;
}

int zinf_plan_estimate(const struct zinf_plan *p, const struct zinf_config *cfg,
		       const struct zinf_plan_machine *mc, struct zinf_plan_need *out)
{
	const struct zinf_config_values *v;
	bool nvme_state, homes_cpu;
	uint64_t staging = 0, pool, need_left, chunk;
	uint32_t first;
	struct nvme_figures nf = {0};
	struct param_split split;
	char a[32], b[32], c[32];
	int rc;

	if (!p || !cfg || !mc || !out)
		return -EINVAL;
	v = &cfg->v;
	nvme_state = v->zero.offload_optimizer.device == ZINF_OFFLOAD_NVME;
	homes_cpu = v->zero.offload_param.device == ZINF_OFFLOAD_CPU;
	first = dev_first(p, cfg);
	memset(out, 0, sizeof(*out));
	out->fits = true;
	out->param_elems = p->elems;
	param_split(p, cfg, nvme_align(mc), &split);
	rc = device_figures(p, cfg, mc, out);
	if (rc)
		return rc;

	/* pinned: the pool an "auto" limit makes (up to the limit), or the limit itself */
	if (nvme_state) {
		nvme_figures_of(p->group, v->zero.sub_group_size, max_slots(cfg), nvme_align(mc),
				&nf);
		staging = nf.staging;
	}
	out->pinned_need = pinned_need(p, cfg, mc, split.nvme, staging);
	pool = pool_of(mc, out->pinned_need);
	out->pinned_bytes = pool;
	if (p->largest_grads > pool && first > 0)
		refuse(out, ZINF_PLAN_PINNED,
		       "pinned: the gradients of one module need %s, more than a pool of %s",
		       zinf_format_bytes(p->largest_grads, a, sizeof(a)),
		       zinf_format_bytes(pool, b, sizeof(b)));
	/* store.c's check_budgets: a chunk of a parameter home on NVMe */
	chunk = v->zinf.chunk_size < split.largest_nvme ? v->zinf.chunk_size : split.largest_nvme;
	if (chunk > pool)
		refuse(out, ZINF_PLAN_PINNED, "pinned: one chunk is more than a pool of %s",
		       zinf_format_bytes(pool, a, sizeof(a)));
	/* engine_nvme.c's staging_fits: the staging, and a chunk or a module's gradients
	 * beside it */
	need_left =
		largest_chunk(p, cfg) > p->largest_grads ? largest_chunk(p, cfg) : p->largest_grads;
	if (nvme_state && (staging > pool || pool - staging < need_left))
		refuse(out, ZINF_PLAN_PINNED,
		       "pinned: the optimizer's staging of sub_group_size %llu needs %s and %s "
		       "beside it, more than a pool of %s",
		       (unsigned long long)v->zero.sub_group_size,
		       zinf_format_bytes(staging, a, sizeof(a)),
		       zinf_format_bytes(need_left, b, sizeof(b)),
		       zinf_format_bytes(pool, c, sizeof(c)));

	/* host memory: what finalize checks (engine_check_host_memory), then all of it */
	if (homes_cpu)
		out->host_checked = p->param_bytes;
	out->host_checked += split.host; /* max_in_cpu's part of NVMe homes */
	if (nvme_state) {
		out->grads_on_nvme = grads_on_nvme(cfg, p->group, mc->host_bytes);
		if (!out->grads_on_nvme)
			out->host_checked += 4 * p->elems;
	} else {
		for (uint32_t m = 0; m < first; m++) /* not those whose state is on the device */
			out->host_checked += 16 * p->modules[m].elems;
	}
	/* beside it: the pool, the model runtime's host memory, a module's staging; homes
	 * there take whole pages */
	out->host_bytes = out->host_checked + pool + mc->runtime_host_bytes + p->largest_packed;
	if (homes_cpu)
		out->host_bytes += p->total_dev - p->param_bytes;
	if (nvme_state) /* the new 16-bit copies of a step's updated parameters */
		out->host_bytes += p->param_bytes;
	if (nvme_state && out->grads_on_nvme) /* accumulators of the sub-groups held */
		out->host_bytes +=
			7 * 4 *
			(v->zero.sub_group_size < p->elems ? v->zero.sub_group_size : p->elems);
	if (mc->host_device) /* the host backend's device heap is host memory */
		out->host_bytes += out->device_bytes;
	if (mc->host_bytes && out->host_checked > mc->host_bytes)
		refuse(out, ZINF_PLAN_HOST, "host: %s checked at start, %s there",
		       zinf_format_bytes(out->host_checked, a, sizeof(a)),
		       zinf_format_bytes(mc->host_bytes, b, sizeof(b)));
	if (mc->host_bytes && out->host_bytes > mc->host_bytes)
		refuse(out, ZINF_PLAN_HOST, "host: %s needed, %s there",
		       zinf_format_bytes(out->host_bytes, a, sizeof(a)),
		       zinf_format_bytes(mc->host_bytes, b, sizeof(b)));

	/* NVMe: parameter homes (whole chunks, IO-aligned), the optimizer state with its
	 * spares, the gradients there */
	out->nvme_bytes = split.nvme_drive;
	if (nvme_state) {
		out->nvme_bytes += nf.drive;
		if (out->grads_on_nvme)
			out->nvme_bytes +=
				grads_drive(p->group, v->zero.sub_group_size, nvme_align(mc));
	}
	if (out->nvme_bytes && mc->nvme_free_known && out->nvme_bytes > mc->nvme_free_bytes)
		refuse(out, ZINF_PLAN_NVME, "NVMe: %s needed, %s free",
		       zinf_format_bytes(out->nvme_bytes, a, sizeof(a)),
		       zinf_format_bytes(mc->nvme_free_bytes, b, sizeof(b)));
	return 0;
}

uint64_t zinf_plan_largest_sub_group(const struct zinf_plan *p, const struct zinf_config *cfg,
				     const struct zinf_plan_machine *mc)
{
	uint64_t lo = 0, hi, left;
	struct param_split split;

	if (!p || !cfg || !mc)
		return 0;
	hi = cfg->v.zero.sub_group_size;
	left = largest_chunk(p, cfg);
	if (p->largest_grads > left)
		left = p->largest_grads;
	param_split(p, cfg, nvme_align(mc), &split);
	/* the largest sub_group_size whose staging fits the pool with `left` beside it, as
	 * zinf_plan_estimate judges it: a binary search keeping "fits" at its lower end (0:
	 * none does) */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2, pool;
		struct nvme_figures nf;

		nvme_figures_of(p->group, mid, max_slots(cfg), nvme_align(mc), &nf);
		pool = pool_of(mc, pinned_need(p, cfg, mc, split.nvme, nf.staging));
		if (nf.staging <= pool && pool - nf.staging >= left)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

double zinf_plan_ratio_of(const struct zinf_plan *p, uint32_t k)
{
	struct zinf_config_values v;
	uint64_t total = 0, below = 0;
	double scale = 1;

	if (!p || k == 0 || k >= p->n_modules)
		return 0;
	for (uint32_t m = 0; m < p->n_modules; m++) {
		total += p->modules[m].elems;
		if (m < k)
			below += p->modules[m].elems;
	}
	memset(&v, 0, sizeof(v));
	v.zero.offload_optimizer.device = ZINF_OFFLOAD_CPU;
	/* the smallest ratio of d digits at or above the first k modules' share (or the
	 * next one, should the product round below it), checked with the engine's own split */
	for (int d = 1; d <= 9; d++) {
		double r;
		scale *= 10;
		r = ceil((double)below / (double)total * scale);
		for (int up = 0; up < 2; up++) {
			v.zero.offload_optimizer.ratio = (r + up) / scale;
			if (v.zero.offload_optimizer.ratio < 1 &&
			    engine_state_split(&v, p->n_modules, plan_module_elems, p) == k)
				return v.zero.offload_optimizer.ratio;
		}
	}
	return 0;
}

/* ---- this machine ---------------------------------------------------------------------- */

int zinf_plan_device_probe(const struct zinf_config *cfg, enum zinf_engine_device *kind,
			   uint64_t *limit, char *err, size_t errlen)
{
	struct zinf_device_opts o;
	struct zinf_device_stats st;
	struct zinf_device *dev;
	int rc;

	if (!err)
		errlen = 0;
	if (!cfg || !kind || !limit) {
		snprintf(err, errlen, "device probe: cfg, kind and limit are required");
		return -EINVAL;
	}
	zinf_config_device_opts(cfg, &o);
	rc = zinf_device_create(&o, &dev, err, errlen);
	if (rc)
		return rc;
	zinf_device_get_stats(dev, &st);
	*limit = st.limit;
	*kind = zinf_device_backend(dev) == ZINF_DEVICE_BACKEND_CUDA ? ZINF_ENGINE_DEVICE_CUDA
								     : ZINF_ENGINE_DEVICE_HOST;
	zinf_device_destroy(dev);
	return 0;
}

int zinf_plan_nvme_free(const struct zinf_config *cfg, uint64_t *free_bytes, char *err,
			size_t errlen)
{
	const char *paths[ZINF_IO_MAX_PATHS], *names[ZINF_IO_MAX_PATHS];
	uint64_t least = UINT64_MAX;
	int n;

	if (!err)
		errlen = 0;
	if (!cfg || !free_bytes) {
		snprintf(err, errlen, "NVMe free space: cfg and free_bytes are required");
		return -EINVAL;
	}
	n = zinf_config_nvme_paths(cfg, paths, names, ZINF_IO_MAX_PATHS);
	if (n <= 0) {
		snprintf(err, errlen, "no NVMe path in the config");
		return -ENOENT;
	}
	for (int i = 0; i < n; i++) {
		struct statvfs sv;
		uint64_t f;
		if (statvfs(paths[i], &sv) != 0) {
			int rc = -errno;
			snprintf(err, errlen, "%s: %s: %s", names[i], paths[i], strerror(errno));
			return rc;
		}
		f = (uint64_t)sv.f_bavail * sv.f_frsize;
		if (f < least)
			least = f;
	}
	/* the files are split evenly over the paths: the fullest one bounds them */
	*free_bytes = least * (uint64_t)n;
	return 0;
}

/*
 * CPU Adam / AdamW (include/zinf/optim.h): options, the per-step scalars, the scalar
 * reference loop, run-time choice of the loop by cpuid, and the thread pool (pool.h)
 * that splits one step across threads bound near the data (hwloc).
 */
#include <errno.h>
#include <float.h>
#include <hwloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cast.h"
#include "optim.h"
#include "pool.h"
#include "zinf/error.h"
#include "zinf/log.h"

/* The fewest elements a thread takes in a step (below twice this a step runs on the
 * calling thread alone): waking a thread for less costs more than it saves. */
#define ADAM_MIN_PARALLEL_ELEMS (1u << 16)
/* Thread slices start on multiples of this many elements, so no two threads write the
 * same cache line of any buffer (64 bytes = 32 bf16 elements). */
#define ADAM_SLICE_ALIGN_ELEMS 64u

struct zinf_adam {
	struct zinf_adam_opts opts;
	const struct zinf_adam_kernel *kernel;
	struct zinf_pool *pool; /* opts.threads - 1 workers, or another handle's */
	bool owns_pool;
	char last_error[256];
};

/* ---- options and per-step scalars --------------------------------------------------- */

void zinf_adam_opts_init(struct zinf_adam_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->type = ZINF_ADAMW;
	opts->beta1 = 0.9;
	opts->beta2 = 0.999;
	opts->eps = 1e-8;
	opts->weight_decay = 0.01;
	opts->bias_correction = true;
	opts->threads = 1;
	opts->numa_node = -1;
	opts->isa = ZINF_ADAM_ISA_AUTO;
}

void zinf_adam_args_init(struct zinf_adam_args *a, const struct zinf_adam_opts *opts,
			 const struct zinf_adam_shard *shard,
			 const struct zinf_adam_step_info *info)
{
	double b1 = opts->beta1, b2 = opts->beta2, lr = info->lr;
	double bc1 = 1.0, bc2 = 1.0;

	if (opts->bias_correction) {
		bc1 = 1.0 - pow(b1, (double)info->step);
		bc2 = 1.0 - pow(b2, (double)info->step);
	}
	memset(a, 0, sizeof(*a));
	a->p = shard->master;
	a->m = shard->exp_avg;
	a->v = shard->exp_avg_sq;
	a->g = shard->grad;
	a->out = shard->param_out;
	a->g_dtype = shard->grad_dtype;
	a->out_dtype = shard->param_out ? shard->param_dtype : ZINF_DTYPE_NONE;
	a->decoupled = opts->type == ZINF_ADAMW;
	a->l2 = opts->type == ZINF_ADAM && opts->weight_decay != 0.0;
	a->grad_scale = info->grad_scale;
	a->beta1 = (float)b1;
	a->beta2 = (float)b2;
	a->one_minus_beta1 = (float)(1.0 - b1);
	a->one_minus_beta2 = (float)(1.0 - b2);
	a->neg_step_size = (float)(-lr / bc1);
	a->rsqrt_bc2 = (float)(1.0 / sqrt(bc2));
	a->eps = (float)opts->eps;
	a->weight_decay = (float)opts->weight_decay;
	a->decay = a->decoupled ? (float)(1.0 - lr * opts->weight_decay) : 1.0f;
}

void zinf_adam_args_of(const struct zinf_adam *adam, const struct zinf_adam_shard *shard,
		       const struct zinf_adam_step_info *info, struct zinf_adam_args *a)
{
	zinf_adam_args_init(a, &adam->opts, shard, info);
}

/* ---- the scalar reference loop ------------------------------------------------------ */

static float load_grad(const struct zinf_adam_args *a, uint64_t i)
{
	switch (a->g_dtype) {
	case ZINF_DTYPE_BF16:
		return zinf_bf16_to_f32(((const uint16_t *)a->g)[i]);
	case ZINF_DTYPE_F16:
		return zinf_f16_to_f32(((const uint16_t *)a->g)[i]);
	default:
		return ((const float *)a->g)[i];
	}
}

static void store_param(const struct zinf_adam_args *a, uint64_t i, float p)
{
	if (a->out_dtype == ZINF_DTYPE_BF16)
		((uint16_t *)a->out)[i] = zinf_f32_to_bf16(p);
	else if (a->out_dtype == ZINF_DTYPE_F16)
		((uint16_t *)a->out)[i] = zinf_f32_to_f16(p);
	else if (a->out_dtype == ZINF_DTYPE_F32)
		((float *)a->out)[i] = p;
}

/* Written with explicit fmaf() and no a*b+c expressions, so that no compiler flag
 * (-ffp-contract, -march) can change a rounding. */
void zinf_adam_update_scalar(const struct zinf_adam_args *a, uint64_t begin, uint64_t end)
{
	for (uint64_t i = begin; i < end; i++) {
		float p = a->p[i], m = a->m[i], v = a->v[i];
		float g = load_grad(a, i) * a->grad_scale;
		float gs, d;

		if (a->l2)
			g = fmaf(a->weight_decay, p, g);
		m = fmaf(a->beta1, m, a->one_minus_beta1 * g);
		gs = a->one_minus_beta2 * g;
		v = fmaf(a->beta2, v, gs * g);
		d = fmaf(sqrtf(v), a->rsqrt_bc2, a->eps);
		if (a->decoupled)
			p = p * a->decay;
		p = fmaf(a->neg_step_size, m / d, p);
		a->p[i] = p;
		a->m[i] = m;
		a->v[i] = v;
		store_param(a, i, p);
	}
}

static bool scalar_supported(void)
{
	return true;
}

const struct zinf_adam_kernel zinf_adam_kernel_scalar = {
	.name = "scalar",
	.isa = ZINF_ADAM_ISA_SCALAR,
	.supported = scalar_supported,
	.update = zinf_adam_update_scalar,
};

const struct zinf_adam_kernel *zinf_adam_kernel_for(enum zinf_adam_isa isa)
{
	static const struct zinf_adam_kernel *const widest_first[] = {
		&zinf_adam_kernel_avx512, &zinf_adam_kernel_avx2, &zinf_adam_kernel_scalar};

	for (size_t i = 0; i < sizeof(widest_first) / sizeof(widest_first[0]); i++) {
		const struct zinf_adam_kernel *k = widest_first[i];

		if ((isa == ZINF_ADAM_ISA_AUTO || isa == k->isa) && k->supported())
			return k;
	}
	return NULL;
}

/* ---- errors ------------------------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static int adam_fail(struct zinf_adam *adam, int rc,
							   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(adam->last_error, sizeof(adam->last_error), fmt, ap);
	va_end(ap);
	zinf_error_one_line(adam->last_error);
	return rc;
}

const char *zinf_adam_last_error(const struct zinf_adam *adam)
{
	return adam ? adam->last_error : "";
}

const char *zinf_adam_isa_name(const struct zinf_adam *adam)
{
	return adam ? adam->kernel->name : "none";
}

/* ---- the worker pool ---------------------------------------------------------------- */

int zinf_adam_numa_nodes(void)
{
	hwloc_topology_t topo;
	int n = 0;

	if (hwloc_topology_init(&topo) < 0)
		return 0;
	if (hwloc_topology_load(topo) == 0)
		n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
	hwloc_topology_destroy(topo);
	return n > 0 ? n : 0;
}

/* Bind each worker to one core of NUMA node `node`, round robin. Binding is advice:
 * a failure is logged, not fatal. */
static void adam_bind_workers(struct zinf_adam *adam, int node)
{
	hwloc_topology_t topo;
	hwloc_obj_t numa;
	int n_cores;

	if (hwloc_topology_init(&topo) < 0)
		return;
	if (hwloc_topology_load(topo) < 0)
		goto out_topo;
	numa = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)node);
	if (!numa) {
		zinf_logf(ZINF_LOG_WARN, "adam: NUMA node %d not found; worker threads unbound",
			  node);
		goto out_topo;
	}
	n_cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, numa->cpuset, HWLOC_OBJ_CORE);
	for (unsigned i = 0; n_cores > 0 && i + 1 < zinf_pool_threads(adam->pool); i++) {
		hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(
			topo, numa->cpuset, HWLOC_OBJ_CORE, i % (unsigned)n_cores);

		if (core && hwloc_set_thread_cpubind(topo, zinf_pool_worker(adam->pool, i),
						     core->cpuset, 0) < 0)
			zinf_logf(ZINF_LOG_WARN,
				  "adam: cannot bind worker %u to core %u of node %d", i,
				  core->logical_index, node);
	}
out_topo:
	hwloc_topology_destroy(topo);
}

static int adam_check_opts(const struct zinf_adam_opts *o)
{
	const char *what = NULL;
	double value = 0;

	if (o->type != ZINF_ADAMW && o->type != ZINF_ADAM)
		what = "optimizer.type", value = (int)o->type;
	else if (!(o->beta1 >= 0.0 && o->beta1 < 1.0))
		what = "optimizer.params.betas[0]", value = o->beta1;
	else if (!(o->beta2 >= 0.0 && o->beta2 < 1.0))
		what = "optimizer.params.betas[1]", value = o->beta2;
	/* eps and weight_decay as the fp32 the kernels compute in: eps a normal float (1e-50
	 * rounded to 0 and divided by it), weight_decay below FLT_MAX (1e39 was inf) */
	else if (!(o->eps >= FLT_MIN && o->eps <= FLT_MAX))
		what = "optimizer.params.eps", value = o->eps;
	else if (!(o->weight_decay >= 0.0 && o->weight_decay <= FLT_MAX))
		what = "optimizer.params.weight_decay", value = o->weight_decay;
	else if (o->threads > 1024)
		what = "adam threads", value = o->threads;
	/* (a node past the machine's only warns: hwloc may not see it) */
	else if (o->numa_node < -1)
		what = "adam numa_node", value = o->numa_node;
	else if (o->isa < ZINF_ADAM_ISA_AUTO || o->isa > ZINF_ADAM_ISA_AVX512)
		what = "adam isa", value = (int)o->isa; /* (an enum: unsigned here) */
	if (!what)
		return 0;
	zinf_logf(ZINF_LOG_ERROR,
		  "adam: %s = %g is invalid (betas in [0, 1), eps a normal fp32 > 0, "
		  "weight_decay >= 0 and a finite fp32, threads <= 1024, numa_node >= -1)",
		  what, value);
	return -EINVAL;
}

/* A handle on with's threads (opts.threads and numa_node not read), or, with NULL, on a
 * pool of its own. */
static int adam_create(struct zinf_adam **out, const struct zinf_adam_opts *opts,
		       struct zinf_adam *with)
{
	static const char *const isa_names[] = {"auto", "scalar", "avx2", "avx512"};
	struct zinf_adam *adam;
	unsigned threads;
	int rc;

	if (!out || !opts) {
		if (out)
			*out = NULL;
		zinf_logf(ZINF_LOG_ERROR, "adam: %s is NULL", !out ? "out" : "opts");
		return -EINVAL;
	}
	*out = NULL;
	rc = adam_check_opts(opts);
	if (rc)
		return rc;
	adam = calloc(1, sizeof(*adam));
	if (!adam)
		return -ENOMEM;
	adam->opts = *opts;
	adam->kernel = zinf_adam_kernel_for(opts->isa);
	if (!adam->kernel) {
		zinf_logf(ZINF_LOG_ERROR, "adam: isa %s is not supported by this CPU",
			  isa_names[opts->isa]);
		rc = -ENOTSUP;
		goto out_free;
	}
	if (with) {
		adam->pool = with->pool;
		*out = adam;
		return 0;
	}
	adam->owns_pool = true;
	threads = opts->threads ? opts->threads : 1;
	rc = zinf_pool_create(threads, &adam->pool); /* a failure is logged */
	if (rc)
		goto out_free;
	if (opts->numa_node >= 0)
		adam_bind_workers(adam, opts->numa_node);
	*out = adam;
	return 0;

out_free:
	free(adam);
	return rc;
}

int zinf_adam_create(struct zinf_adam **out, const struct zinf_adam_opts *opts)
{
	return adam_create(out, opts, NULL);
}

int zinf_adam_create_sharing(struct zinf_adam **out, const struct zinf_adam_opts *opts,
			     struct zinf_adam *with)
{
	return adam_create(out, opts, with);
}

void zinf_adam_destroy(struct zinf_adam *adam)
{
	if (!adam)
		return;
	if (adam->owns_pool)
		zinf_pool_destroy(adam->pool);
	free(adam);
}

/* ---- the step ----------------------------------------------------------------------- */

static bool dtype_is_grad(enum zinf_dtype t)
{
	return t == ZINF_DTYPE_F32 || t == ZINF_DTYPE_BF16 || t == ZINF_DTYPE_F16;
}

int zinf_adam_check_step_info(const struct zinf_adam *adam, const struct zinf_adam_step_info *info,
			      char *msg, size_t len)
{
	struct zinf_adam_shard none = {0};
	struct zinf_adam_args a;

	if (info->step < 1)
		snprintf(msg, len, "adam step: step count is 0 (steps count from 1)");
	else if (!(info->lr >= 0.0 && info->lr <= FLT_MAX)) /* (fp32 in the kernels) */
		snprintf(msg, len, "adam step %llu: lr %g is not a value >= 0 and finite in fp32",
			 (unsigned long long)info->step, info->lr);
	else if (!(info->grad_scale > 0.0f && isfinite(info->grad_scale)))
		snprintf(msg, len, "adam step %llu: grad_scale %g is not a finite value > 0",
			 (unsigned long long)info->step, info->grad_scale);
	else {
		/* the factors the kernels use, in fp32: lr / bias correction, 1 - lr * decay */
		zinf_adam_args_init(&a, &adam->opts, &none, info);
		if (isfinite(a.neg_step_size) && isfinite(a.decay) && isfinite(a.rsqrt_bc2))
			return 0;
		snprintf(msg, len,
			 "adam step %llu: lr %g with weight_decay %g and betas (%g, %g) makes a "
			 "step size or decay factor past fp32",
			 (unsigned long long)info->step, info->lr, adam->opts.weight_decay,
			 adam->opts.beta1, adam->opts.beta2);
	}
	return -EINVAL;
}

static int adam_check_step(struct zinf_adam *adam, const struct zinf_adam_shard *s,
			   const struct zinf_adam_step_info *info)
{
	uint64_t n = s->n_elems;
	char why[160];

	if (zinf_adam_check_step_info(adam, info, why, sizeof(why)))
		return adam_fail(adam, -EINVAL, "%s", why);
	if (!dtype_is_grad(s->grad_dtype))
		return adam_fail(adam, -EINVAL,
				 "adam step %llu: shard grad_dtype %d is not F32, BF16 or F16",
				 (unsigned long long)info->step, (int)s->grad_dtype);
	if (s->param_out && s->param_dtype != ZINF_DTYPE_F32 && s->param_dtype != ZINF_DTYPE_BF16 &&
	    s->param_dtype != ZINF_DTYPE_F16)
		return adam_fail(adam, -EINVAL,
				 "adam step %llu: shard param_dtype %d is not F32, BF16 or F16",
				 (unsigned long long)info->step, (int)s->param_dtype);
	if (!s->param_out && s->param_dtype != ZINF_DTYPE_NONE)
		return adam_fail(adam, -EINVAL,
				 "adam step %llu: shard param_out is NULL but param_dtype is %d",
				 (unsigned long long)info->step, (int)s->param_dtype);
	if (n && (!s->master || !s->exp_avg || !s->exp_avg_sq || !s->grad))
		return adam_fail(adam, -EINVAL,
				 "adam step %llu: shard of %llu elements has a NULL %s buffer",
				 (unsigned long long)info->step, (unsigned long long)n,
				 !s->master	  ? "master"
				 : !s->exp_avg	  ? "exp_avg"
				 : !s->exp_avg_sq ? "exp_avg_sq"
						  : "grad");
	return 0;
}

int zinf_adam_step(struct zinf_adam *adam, const struct zinf_adam_shard *shard,
		   const struct zinf_adam_step_info *info)
{
	struct zinf_adam_args args;
	int rc;

	if (!adam)
		return -EINVAL;
	if (!shard || !info)
		return adam_fail(adam, -EINVAL, "adam step: %s is NULL (required)",
				 !shard ? "shard" : "info");
	rc = adam_check_step(adam, shard, info);
	if (rc)
		return rc;
	adam->last_error[0] = '\0';
	zinf_adam_args_init(&args, &adam->opts, shard, info);
	zinf_adam_run(adam, &args, shard->n_elems);
	return 0;
}

struct adam_loop {
	const struct zinf_adam_kernel *kernel;
	const struct zinf_adam_args *args;
};

static void adam_slice(void *ctx, uint64_t begin, uint64_t end)
{
	const struct adam_loop *l = ctx;

	l->kernel->update(l->args, begin, end);
}

void zinf_adam_run(struct zinf_adam *adam, const struct zinf_adam_args *a, uint64_t n)
{
	struct adam_loop l = {adam->kernel, a};

	zinf_pool_for(adam->pool, n, ADAM_MIN_PARALLEL_ELEMS, ADAM_SLICE_ALIGN_ELEMS, adam_slice,
		      &l);
}

struct zinf_pool *zinf_adam_pool(struct zinf_adam *adam)
{
	return adam ? adam->pool : NULL;
}

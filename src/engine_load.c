/*
 * Engine contents (include/zinf/engine.h): loading parameters (one at a time, or a whole
 * module with each chunk written once), saving them from the fp32 masters, and the dtype
 * conversions between what a checkpoint holds and what the engine stores. Optimizer
 * state on NVMe is streamed by engine_nvme_load.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cast.h"
#include "engine_internal.h"
#include "optim.h" /* zinf_f32_to_f16, zinf_f16_to_f32 */
#include "prefetch.h"
#include "zinf/error.h"

/* ---- contents ----------------------------------------------------------------------- */

static int check_param(struct zinf_engine *e, uint32_t param)
{
	if (!e->finalized)
		return engine_fail(e, ZINF_ESTATE, "param %u: used before finalize", param);
	if (param >= e->n_params)
		return engine_fail(e, -EINVAL, "param %u: no such parameter (%u registered)", param,
				   e->n_params);
	return 0;
}

void engine_convert(void *dst, enum zinf_dtype dt, const void *src, enum zinf_dtype st, uint64_t n)
{
	const uint16_t *s16 = src;
	const float *sf = src;
	uint16_t *d16 = dst;
	float *df = dst;

	if (dt == st) {
		memcpy(dst, src, n * engine_dtype_bytes(dt));
	} else if (dt == ZINF_DTYPE_F32) {
		for (uint64_t i = 0; i < n; i++)
			df[i] = st == ZINF_DTYPE_BF16 ? zinf_bf16_to_f32(s16[i])
						      : zinf_f16_to_f32(s16[i]);
	} else if (st == ZINF_DTYPE_F32) {
		for (uint64_t i = 0; i < n; i++)
			d16[i] = dt == ZINF_DTYPE_BF16 ? zinf_f32_to_bf16(sf[i])
						       : zinf_f32_to_f16(sf[i]);
	} else {
		for (uint64_t i = 0; i < n; i++) {
			float f = st == ZINF_DTYPE_BF16 ? zinf_bf16_to_f32(s16[i])
							: zinf_f16_to_f32(s16[i]);
			d16[i] = dt == ZINF_DTYPE_BF16 ? zinf_f32_to_bf16(f) : zinf_f32_to_f16(f);
		}
	}
}

static bool valid_dtype(enum zinf_dtype t)
{
	return t == ZINF_DTYPE_F32 || t == ZINF_DTYPE_BF16 || t == ZINF_DTYPE_F16;
}

/* Set elements [first, first + n) of p's optimizer state from src (n elements): fp32
 * master, and moments m and v (NULL: zeros). */
static int load_state(struct zinf_engine *e, struct eparam *p, uint64_t first, uint64_t n,
		      const void *src, enum zinf_dtype src_dtype, const float *m, const float *v)
{
	if (e->nvme_state)
		return engine_nvme_load(e, p, first, n, src, src_dtype, m, v);
	if (engine_on_dev(e, p->module))
		return engine_dstate_load(e, p, first, n, src, src_dtype, m, v);
	engine_convert(p->master + first, ZINF_DTYPE_F32, src, src_dtype, n);
	if (m) {
		memcpy(p->exp_avg + first, m, n * 4);
		memcpy(p->exp_avg_sq + first, v, n * 4);
	} else {
		memset(p->exp_avg + first, 0, n * 4);
		memset(p->exp_avg_sq + first, 0, n * 4);
	}
	return 0;
}

/* Elements [first, first + n) of a parameter inside it and not empty. */
static int check_range(struct zinf_engine *e, uint32_t param, uint64_t first, uint64_t n)
{
	uint64_t elems = e->params[param].elems;

	if (!n || first > elems || n > elems - first)
		return engine_fail(e, -EINVAL,
				   "param %u: elements [%" PRIu64 ", %" PRIu64 " + %" PRIu64
				   ") are not inside its %" PRIu64,
				   param, first, first, n, elems);
	return 0;
}

/* Range i of r checked: a parameter, elements inside it, a source in a known dtype, both
 * moments or neither, and the module of range 0. */
static int check_one_range(struct zinf_engine *e, const struct zinf_param_range *r, uint32_t i)
{
	uint32_t param = r[i].param;
	int rc = check_param(e, param);

	if (!rc)
		rc = check_range(e, param, r[i].first_elem, r[i].n_elems);
	if (rc)
		return rc;
	if (!r[i].src || !valid_dtype(r[i].src_dtype))
		return engine_fail(e, -EINVAL,
				   "param %u: source %p, dtype %d (expected f32, bf16 or f16)",
				   param, r[i].src, (int)r[i].src_dtype);
	if (!r[i].exp_avg != !r[i].exp_avg_sq)
		return engine_fail(
			e, -EINVAL, "param %u: exp_avg %p, exp_avg_sq %p (both moments or neither)",
			param, (const void *)r[i].exp_avg, (const void *)r[i].exp_avg_sq);
	if (e->params[param].module != e->params[r[0].param].module)
		return engine_fail(e, -EINVAL,
				   "range %u: param %u is in module %u, range 0's param %u in "
				   "module %u (one module a call)",
				   i, param, e->params[param].module, r[0].param,
				   e->params[r[0].param].module);
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const struct zinf_param_range *x = a, *y = b;

	if (x->param != y->param)
		return x->param < y->param ? -1 : 1;
	return x->first_elem < y->first_elem ? -1 : x->first_elem > y->first_elem;
}

/* No two ranges of r[0..n) share an element. */
static int check_no_overlap(struct zinf_engine *e, uint32_t n, const struct zinf_param_range *r)
{
	struct zinf_param_range *s;
	int rc = 0;

	if (n < 2)
		return 0;
	s = malloc((size_t)n * sizeof(*s));
	if (!s)
		return engine_fail(e, -ENOMEM, "cannot sort %u ranges", n);
	memcpy(s, r, (size_t)n * sizeof(*s));
	qsort(s, n, sizeof(*s), range_cmp);
	for (uint32_t i = 1; i < n && !rc; i++)
		if (s[i].param == s[i - 1].param &&
		    s[i - 1].first_elem + s[i - 1].n_elems > s[i].first_elem)
			rc = engine_fail(e, -EINVAL,
					 "param %u: ranges [%" PRIu64 " + %" PRIu64
					 ") and [%" PRIu64 " + %" PRIu64 ") overlap",
					 s[i].param, s[i - 1].first_elem, s[i - 1].n_elems,
					 s[i].first_elem, s[i].n_elems);
	free(s);
	return rc;
}

/* The copies of ranges r[0..n) in their parameters' dtypes, packed in staging (the fp32
 * ones first, so that every copy is aligned to its element size), written home in one
 * store call: each chunk once. Non-overlapping ranges of one module fit: staging holds
 * the largest module's copies. */
static int write_copies(struct zinf_engine *e, uint32_t n, const struct zinf_param_range *r)
{
	struct zinf_store_range *sr = malloc((size_t)n * sizeof(*sr));
	uint64_t at = 0;
	int rc;

	if (!sr)
		return engine_fail(e, -ENOMEM, "cannot allocate %u store ranges", n);
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < n; i++) {
			const struct eparam *p = &e->params[r[i].param];
			uint64_t esize = engine_dtype_bytes(p->dtype);
			char *copy = (char *)e->staging + at;
			if ((esize == 4) != (pass == 0))
				continue;
			engine_convert(copy, p->dtype, r[i].src, r[i].src_dtype, r[i].n_elems);
			sr[i] = (struct zinf_store_range){.param = p->store_id,
							  .first = r[i].first_elem * esize,
							  .len = r[i].n_elems * esize,
							  .src = copy};
			at += r[i].n_elems * esize;
		}
	rc = zinf_store_write_ranges(e->store, e->modules[e->params[r[0].param].module].store_id, n,
				     sr);
	free(sr);
	return rc ? engine_fail(e, rc, "%s", zinf_store_last_error(e->store)) : 0;
}

int zinf_param_load_ranges(struct zinf_engine *e, uint32_t n, const struct zinf_param_range *r)
{
	int rc = 0;

	if (!n || !r)
		return engine_fail(e, -EINVAL, "param load: %u ranges at %p (one or more)", n,
				   (const void *)r);
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = check_one_range(e, r, i);
	if (!rc)
		rc = check_no_overlap(e, n, r);
	if (!rc)
		rc = engine_check_not_held(e, "param load", e->params[r[0].param].module, 1, false,
					   -EBUSY);
	if (!rc)
		rc = engine_opt_drain(e);
	if (rc)
		return rc;
	if (e->prefetch)
		zinf_prefetch_drop(e->prefetch);
	/* The parameters' own copies first: a module in use is refused before any state
	 * changes. Their values are the fp32 masters', rounded. */
	rc = write_copies(e, n, r);
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = load_state(e, &e->params[r[i].param], r[i].first_elem, r[i].n_elems, r[i].src,
				r[i].src_dtype, r[i].exp_avg, r[i].exp_avg_sq);
	return rc;
}

int zinf_param_load(struct zinf_engine *e, uint32_t param, const void *src,
		    enum zinf_dtype src_dtype)
{
	struct zinf_param_range r = {.param = param, .src = src, .src_dtype = src_dtype};
	int rc = check_param(e, param);

	if (rc)
		return rc;
	r.n_elems = e->params[param].elems;
	return zinf_param_load_ranges(e, 1, &r);
}

int zinf_param_load_range(struct zinf_engine *e, uint32_t param, uint64_t first_elem,
			  uint64_t n_elems, const void *src, enum zinf_dtype src_dtype,
			  const float *exp_avg, const float *exp_avg_sq)
{
	struct zinf_param_range r = {.param = param,
				     .first_elem = first_elem,
				     .n_elems = n_elems,
				     .src = src,
				     .src_dtype = src_dtype,
				     .exp_avg = exp_avg,
				     .exp_avg_sq = exp_avg_sq};

	return zinf_param_load_ranges(e, 1, &r);
}

static int check_module_sources(struct zinf_engine *e, uint32_t module, uint32_t n_srcs,
				const void *const *srcs, const enum zinf_dtype *src_dtypes)
{
	const struct emodule *m = &e->modules[module];

	if (n_srcs != m->n_params)
		return engine_fail(e, -EINVAL,
				   "module %u (%s): %u sources for its %u parameters (expected one "
				   "per parameter, in registration order)",
				   module, m->name, n_srcs, m->n_params);
	if (n_srcs && (!srcs || !src_dtypes))
		return engine_fail(e, -EINVAL,
				   "module %u (%s): srcs %p, src_dtypes %p (both required)", module,
				   m->name, (const void *)srcs, (const void *)src_dtypes);
	for (uint32_t k = 0; k < n_srcs; k++) {
		if (!srcs[k])
			return engine_fail(e, -EINVAL,
					   "module %u (%s): source %u (param %u) is NULL", module,
					   m->name, k, m->first_param + k);
		if (!valid_dtype(src_dtypes[k]))
			return engine_fail(e, -EINVAL,
					   "module %u (%s): source %u (param %u): dtype %d "
					   "(expected f32, bf16 or f16)",
					   module, m->name, k, m->first_param + k,
					   (int)src_dtypes[k]);
	}
	return 0;
}

/* Both moments of every parameter, or none. */
static int check_module_moments(struct zinf_engine *e, uint32_t module, const float *const *exp_avg,
				const float *const *exp_avg_sq)
{
	const struct emodule *m = &e->modules[module];

	if (!exp_avg || !exp_avg_sq)
		return engine_fail(
			e, -EINVAL, "module %u (%s): exp_avg %p, exp_avg_sq %p (both required)",
			module, m->name, (const void *)exp_avg, (const void *)exp_avg_sq);
	for (uint32_t k = 0; k < m->n_params; k++)
		if (!exp_avg[k] || !exp_avg_sq[k])
			return engine_fail(e, -EINVAL,
					   "module %u (%s): moments of source %u (param %u): NULL",
					   module, m->name, k, m->first_param + k);
	return 0;
}

static int module_load(struct zinf_engine *e, uint32_t module, uint32_t n_srcs,
		       const void *const *srcs, const enum zinf_dtype *src_dtypes,
		       const float *const *exp_avg, const float *const *exp_avg_sq)
{
	const struct emodule *m;
	char *copy = e->staging;
	int rc = engine_check_module(e, module);

	if (!rc)
		rc = check_module_sources(e, module, n_srcs, srcs, src_dtypes);
	if (!rc && (exp_avg || exp_avg_sq))
		rc = check_module_moments(e, module, exp_avg, exp_avg_sq);
	if (rc)
		return rc;
	m = &e->modules[module];
	rc = engine_check_not_held(e, "module load", module, 1, false, -EBUSY);
	if (rc)
		return rc;
	rc = engine_opt_drain(e); /* a step's updates still running use staging and srcs */
	if (rc)
		return rc;
	if (e->prefetch)
		zinf_prefetch_drop(e->prefetch);
	/* The parameters' own copies, every chunk written once; a module in use is refused
	 * there, before any optimizer state changes. */
	for (uint32_t k = 0; k < m->n_params; k++) {
		const struct eparam *p = &e->params[m->first_param + k];
		if (p->dtype == src_dtypes[k]) {
			e->srcs[k] = srcs[k];
			continue;
		}
		engine_convert(copy, p->dtype, srcs[k], src_dtypes[k], p->elems);
		e->srcs[k] = copy;
		copy += p->elems * engine_dtype_bytes(p->dtype);
	}
	rc = zinf_store_module_write(e->store, m->store_id, e->srcs);
	if (rc)
		return engine_fail(e, rc, "%s", zinf_store_last_error(e->store));
	for (uint32_t k = 0; k < m->n_params; k++) {
		struct eparam *p = &e->params[m->first_param + k];
		rc = load_state(e, p, 0, p->elems, srcs[k], src_dtypes[k],
				exp_avg ? exp_avg[k] : NULL, exp_avg_sq ? exp_avg_sq[k] : NULL);
		if (rc)
			return rc;
	}
	engine_module_reloaded(e, module);
	return 0;
}

int zinf_module_load(struct zinf_engine *e, uint32_t module, uint32_t n_srcs,
		     const void *const *srcs, const enum zinf_dtype *src_dtypes)
{
	return module_load(e, module, n_srcs, srcs, src_dtypes, NULL, NULL);
}

int zinf_module_load_state(struct zinf_engine *e, uint32_t module, uint32_t n_srcs,
			   const float *const *master, const float *const *exp_avg,
			   const float *const *exp_avg_sq)
{
	enum zinf_dtype *f32;
	const void **srcs;
	int rc;

	if (!master || !exp_avg || !exp_avg_sq)
		return engine_fail(e, -EINVAL,
				   "module %u: master %p, exp_avg %p, exp_avg_sq %p (all required)",
				   module, (const void *)master, (const void *)exp_avg,
				   (const void *)exp_avg_sq);
	/* the module and the count first: the arrays below are read for n_srcs */
	rc = engine_check_module(e, module);
	if (!rc && n_srcs != e->modules[module].n_params)
		rc = check_module_sources(e, module, n_srcs, NULL, NULL);
	if (rc)
		return rc;
	f32 = malloc(((size_t)n_srcs + 1) * sizeof(*f32));
	srcs = malloc(((size_t)n_srcs + 1) * sizeof(*srcs));
	if (!f32 || !srcs) {
		rc = engine_fail(e, -ENOMEM, "module %u: out of memory for %u sources", module,
				 n_srcs);
		goto out;
	}
	for (uint32_t k = 0; k < n_srcs; k++) {
		f32[k] = ZINF_DTYPE_F32;
		srcs[k] = master[k];
	}
	rc = module_load(e, module, n_srcs, srcs, f32, exp_avg, exp_avg_sq);
out:
	free(f32);
	free(srcs);
	return rc;
}

int zinf_param_state_save(struct zinf_engine *e, uint32_t param, uint64_t first_elem,
			  uint64_t n_elems, float *master, float *exp_avg, float *exp_avg_sq)
{
	const struct eparam *p;
	int rc = check_param(e, param);

	if (rc)
		return rc;
	p = &e->params[param];
	if (!master || !exp_avg != !exp_avg_sq)
		return engine_fail(e, -EINVAL,
				   "param %u: master %p, exp_avg %p, exp_avg_sq %p (the master "
				   "required, both moments or neither)",
				   param, (void *)master, (void *)exp_avg, (void *)exp_avg_sq);
	rc = check_range(e, param, first_elem, n_elems);
	if (!rc)
		rc = engine_opt_drain(e);
	if (!rc)
		rc = engine_check_torn(e, "state save");
	if (rc)
		return rc;
	if (e->nvme_state)
		return engine_nvme_save(e, &e->params[param], first_elem, n_elems, master, exp_avg,
					exp_avg_sq);
	if (engine_on_dev(e, p->module))
		return engine_dstate_save(e, p, first_elem, n_elems, master, exp_avg, exp_avg_sq);
	memcpy(master, p->master + first_elem, n_elems * 4);
	if (exp_avg) {
		memcpy(exp_avg, p->exp_avg + first_elem, n_elems * 4);
		memcpy(exp_avg_sq, p->exp_avg_sq + first_elem, n_elems * 4);
	}
	return 0;
}

int zinf_param_save(struct zinf_engine *e, uint32_t param, void *dst, enum zinf_dtype dst_dtype)
{
	int rc = check_param(e, param);
	bool on_dev;

	if (rc)
		return rc;
	if (!dst)
		return engine_fail(e, -EINVAL, "param %u: dst is NULL (required)", param);
	if (!valid_dtype(dst_dtype))
		return engine_fail(e, -EINVAL,
				   "param %u: target dtype %d (expected f32, bf16 or f16)", param,
				   (int)dst_dtype);
	rc = engine_opt_drain(e);
	if (!rc)
		rc = engine_check_torn(e, "save");
	if (rc)
		return rc;
	on_dev = engine_on_dev(e, e->params[param].module);
	if (e->nvme_state || on_dev) { /* through staging in pieces (it holds at least half
					* of p) */
		struct eparam *p = &e->params[param];
		uint64_t piece = e->staging_bytes / sizeof(float);
		for (uint64_t first = 0; first < p->elems; first += piece) {
			uint64_t n = p->elems - first < piece ? p->elems - first : piece;
			rc = on_dev ? engine_dstate_save(e, p, first, n, e->staging, NULL, NULL)
				    : engine_nvme_save(e, p, first, n, e->staging, NULL, NULL);
			if (rc)
				return rc;
			engine_convert((char *)dst + first * engine_dtype_bytes(dst_dtype),
				       dst_dtype, e->staging, ZINF_DTYPE_F32, n);
		}
		return 0;
	}
	engine_convert(dst, dst_dtype, e->params[param].master, ZINF_DTYPE_F32,
		       e->params[param].elems);
	return 0;
}

uint64_t zinf_param_chunk_elems(const struct zinf_engine *e, uint32_t param, uint64_t first_elem,
				uint64_t *chunk)
{
	uint64_t esize;

	if (!e->finalized || param >= e->n_params || first_elem >= e->params[param].elems)
		return 0;
	esize = engine_dtype_bytes(e->params[param].dtype);
	return zinf_store_param_chunk_left(e->store, e->params[param].store_id, first_elem * esize,
					   chunk) /
	       esize;
}

uint64_t zinf_param_elems(const struct zinf_engine *e, uint32_t param)
{
	return param < e->n_params ? e->params[param].elems : 0;
}

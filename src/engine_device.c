/*
 * The engine's compute device as a model sees it: which kind it is (host or CUDA), its
 * CUDA ordinal, and device memory for the model's own activations, taken from the same
 * budget (zinf.device_memory_limit) as parameters and gradients through the store.
 */
#include <errno.h>
#include <stdlib.h>

#include "engine_internal.h"
#include "prefetch.h"
#include "tier_opts.h"
#include "zinf/error.h"

enum zinf_engine_device zinf_engine_device_kind(const struct zinf_engine *e)
{
	return zinf_device_backend(e->dev) == ZINF_DEVICE_BACKEND_CUDA ? ZINF_ENGINE_DEVICE_CUDA
								       : ZINF_ENGINE_DEVICE_HOST;
}

int zinf_engine_device_ordinal(const struct zinf_engine *e)
{
	struct zinf_device_opts dopts;

	if (zinf_engine_device_kind(e) != ZINF_ENGINE_DEVICE_CUDA)
		return -1;
	zinf_config_device_opts(e->cfg, &dopts);
	return dopts.cuda_device;
}

int zinf_engine_device_alloc(struct zinf_engine *e, uint64_t bytes, void **out)
{
	int rc;

	if (!out)
		return engine_fail(e, -EINVAL, "device memory for activations: out is NULL");
	*out = NULL;
	if (!e->finalized)
		return engine_fail(e, ZINF_ESTATE,
				   "device memory for activations: the engine is not finalized");
	if (bytes == 0)
		return engine_fail(e, -EINVAL, "device memory for activations: 0 bytes asked");
	/* Modules fetched ahead give way when the budget is short, then gradient buffers
	 * still being copied out in the background (as for zinf_module_grads). */
	rc = zinf_store_alloc_scratch(e->store, bytes, out);
	if (rc == ZINF_EBUDGET && e->prefetch && zinf_prefetch_drop(e->prefetch) > 0)
		rc = zinf_store_alloc_scratch(e->store, bytes, out);
	if (rc == ZINF_EBUDGET && e->grads_async) {
		int drc = engine_gq_drain(e);

		if (drc)
			return drc;
		rc = zinf_store_alloc_scratch(e->store, bytes, out);
	}
	if (rc)
		return engine_fail(e, rc, "device memory for activations (%llu bytes): %s",
				   (unsigned long long)bytes, zinf_store_last_error(e->store));
	if (e->n_model_blocks == e->cap_model_blocks) {
		uint32_t cap = e->cap_model_blocks ? 2 * e->cap_model_blocks : 16;
		void **v = cap > e->cap_model_blocks ? realloc(e->model_blocks, cap * sizeof(*v))
						     : NULL;

		if (!v) {
			zinf_store_free_scratch(e->store, *out);
			*out = NULL;
			return engine_fail(e, -ENOMEM,
					   "device memory for activations: out of host memory");
		}
		e->model_blocks = v;
		e->cap_model_blocks = cap;
	}
	e->model_blocks[e->n_model_blocks++] = *out;
	return 0;
}

int zinf_engine_check_room(struct zinf_engine *e, uint32_t n, const uint32_t *modules, bool grads)
{
	uint32_t store_ids[8];
	uint64_t base, params, grad_bytes = 0;
	struct zinf_device_stats ds;
	char names[600] = "", a[32], b[32], c[32], d[32], f[32];
	size_t len = 0;

	if (!e->finalized)
		return engine_fail(e, ZINF_ESTATE, "check the device budget: not finalized");
	if (n > 8)
		return engine_fail(e, -EINVAL, "check the device budget: %u modules (8 at most)",
				   n);
	if (n && !modules)
		return engine_fail(e, -EINVAL, "check the device budget: the module list is NULL");
	for (uint32_t i = 0; i < n; i++) {
		int rc = engine_check_module(e, modules[i]);
		if (rc)
			return rc;
		for (uint32_t k = 0; k < i; k++) /* (its gradients would count twice) */
			if (modules[k] == modules[i])
				return engine_fail(
					e, -EINVAL,
					"check the device budget: module %u listed twice",
					modules[i]);
		store_ids[i] = e->modules[modules[i]].store_id;
		grad_bytes += grads ? e->modules[modules[i]].grad_bytes : 0;
		len += (size_t)snprintf(names + len, len < sizeof(names) ? sizeof(names) - len : 0,
					"%s%s", i ? " with " : "", e->modules[modules[i]].name);
	}
	base = zinf_store_device_need(e->store, 0, NULL);
	params = zinf_store_device_need(e->store, n, store_ids) - base;
	zinf_device_get_stats(e->dev, &ds);
	if (base + params + grad_bytes <= ds.limit)
		return 0;
	return engine_fail(e, ZINF_EBUDGET,
			   "device budget: module %s needs %s for parameters and %s for "
			   "gradients, and %s stay on the device: %s in all, more than "
			   "zinf.device_memory_limit %s (raise it)",
			   names, zinf_format_bytes(params, a, sizeof(a)),
			   zinf_format_bytes(grad_bytes, b, sizeof(b)),
			   zinf_format_bytes(base, c, sizeof(c)),
			   zinf_format_bytes(base + params + grad_bytes, d, sizeof(d)),
			   zinf_format_bytes(ds.limit, f, sizeof(f)));
}

int zinf_engine_device_free(struct zinf_engine *e, void *ptr)
{
	uint32_t i = 0;
	int rc;

	if (!ptr)
		return 0;
	while (i < e->n_model_blocks && e->model_blocks[i] != ptr)
		i++;
	if (i == e->n_model_blocks) /* a gradient buffer the store holds too, say */
		return engine_fail(e, -EINVAL,
				   "device memory for activations: free of %p: not a block "
				   "zinf_engine_device_alloc gave (or one freed already)",
				   ptr);
	e->model_blocks[i] = e->model_blocks[--e->n_model_blocks];
	rc = zinf_store_free_scratch(e->store, ptr);
	if (rc)
		return engine_fail(e, rc, "device memory for activations: free of %p: %s", ptr,
				   rc == -EINVAL ? zinf_store_last_error(e->store)
						 : zinf_device_last_error(e->dev));
	return 0;
}

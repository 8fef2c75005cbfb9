/*
 * The engine's compute device as a model sees it: which kind it is (host or CUDA), its
 * CUDA ordinal, and device memory for the model's own activations, taken from the same
 * budget (zinf.device_memory_limit) as parameters and gradients through the store.
 */
#include <errno.h>

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

	*out = NULL;
	if (!e->finalized)
		return engine_fail(e, ZINF_ESTATE,
				   "device memory for activations: the engine is not finalized");
	if (bytes == 0)
		return engine_fail(e, -EINVAL, "device memory for activations: 0 bytes asked");
	/* Modules fetched ahead give way when the budget is short. */
	rc = zinf_store_alloc_scratch(e->store, bytes, out);
	if (rc == ZINF_EBUDGET && e->prefetch && zinf_prefetch_drop(e->prefetch) > 0)
		rc = zinf_store_alloc_scratch(e->store, bytes, out);
	if (rc)
		return engine_fail(e, rc, "device memory for activations (%llu bytes): %s",
				   (unsigned long long)bytes, zinf_store_last_error(e->store));
	return 0;
}

int zinf_engine_device_free(struct zinf_engine *e, void *ptr)
{
	int rc;

	if (!ptr)
		return 0;
	rc = zinf_store_free_scratch(e->store, ptr);
	if (rc)
		return engine_fail(e, rc, "device memory for activations: free of %p: %s", ptr,
				   zinf_device_last_error(e->dev));
	return 0;
}

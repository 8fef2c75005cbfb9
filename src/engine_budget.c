/*
 * What finalize checks before it lays anything out, and the sizes it decides: whether
 * the host-memory state fits the host, what the NVMe layout takes against the drives'
 * free space, the pinned pool an "auto" limit makes and whether every buffer a step waits
 * for fits it, and whether gradients may be copied in the background.
 */
#include "engine_internal.h"
#include "zinf/config.h" /* zinf_format_bytes, zinf_host_memory_bytes */
#include "zinf/error.h"

/* The largest module's gradient buffer. */
static uint64_t largest_grads(const struct zinf_engine *e)
{
	uint64_t largest = 0;

	for (uint32_t m = 0; m < e->n_modules; m++)
		if (e->modules[m].grad_bytes > largest)
			largest = e->modules[m].grad_bytes;
	return largest;
}

int engine_check_pinned(struct zinf_engine *e)
{
	uint64_t pool = zinf_pinned_size(e->pinned), need = largest_grads(e);
	char a[32], b[32];

	if (need > pool && e->dev_first > 0) /* none if all stay on the device */
		return engine_fail(
			e, ZINF_EBUDGET,
			"pinned budget: the gradients of one module need %s, more than the whole pool of %s (raise zinf.pinned_memory_limit)",
			zinf_format_bytes(need, a, sizeof(a)),
			zinf_format_bytes(pool, b, sizeof(b)));
	return 0;
}

/* Gradient copies in the background (engine_gradq.c, started) on a GPU whose budget is roomy: at
 * least GRADS_ASYNC_ROOM times the largest module's gradient buffer. A buffer being
 * copied keeps its device memory, and the next one then lands below it: in a tight
 * budget the space left would split in two when the first is freed, and a module that
 * fits with copies made at once would not (the review's 4-layer case at 1100 KiB). */
#define GRADS_ASYNC_ROOM 8

bool engine_grads_async_fits(struct zinf_engine *e)
{
	struct zinf_device_stats ds;

	if (!e->gq.started || zinf_device_backend(e->dev) != ZINF_DEVICE_BACKEND_CUDA)
		return false;
	zinf_device_get_stats(e->dev, &ds);
	return ds.limit / GRADS_ASYNC_ROOM >= largest_grads(e);
}

int engine_check_host_memory(struct zinf_engine *e)
{
	uint64_t ram = zinf_host_memory_bytes(), params = 0, elems = 0, grads;
	struct zinf_store_stats st;
	char a[32], b[32], c[32];

	zinf_store_get_stats(e->store, &st);
	if (e->cfg->v.zero.offload_param.device == ZINF_OFFLOAD_CPU)
		params = st.param_bytes;
	else /* offload_param.max_in_cpu's part of NVMe homes */
		params = zinf_store_host_split_bytes(e->store);
	if (e->nvme_state) {
		grads = engine_grad_host_bytes(e);
		if (!ram || params + grads <= ram)
			return 0;
		return engine_fail(
			e, ZINF_EBUDGET,
			"host memory: parameters homed there need %s and the fp32 gradient "
			"accumulators %s (4 bytes a parameter), more than this host's %s (%s)",
			zinf_format_bytes(params, a, sizeof(a)),
			zinf_format_bytes(grads, b, sizeof(b)),
			zinf_format_bytes(ram, c, sizeof(c)),
			grads ? "set zinf.offload_gradients to nvme; auto chooses it only when "
				"sub_group_size is under a seventh of the parameters"
			      : "offload the parameters to nvme: zero_optimization.offload_param");
	}
	for (uint32_t i = 0; i < e->n_params; i++) /* not those whose state is on the device */
		if (!engine_on_dev(e, e->params[i].module))
			elems += e->params[i].elems;
	if (!ram || params + 16 * elems <= ram)
		return 0;
	return engine_fail(e, ZINF_EBUDGET,
			   "host memory: parameters homed there need %s and the optimizer state "
			   "%s (16 bytes a parameter), more than this host's %s (offload them "
			   "to nvme: zero_optimization.offload_param / offload_optimizer.device)",
			   zinf_format_bytes(params, a, sizeof(a)),
			   zinf_format_bytes(16 * elems, b, sizeof(b)),
			   zinf_format_bytes(ram, c, sizeof(c)));
}

uint64_t engine_pinned_need(struct zinf_engine *e)
{
	struct zinf_device_stats ds;
	uint64_t chunks = zinf_store_chunk_bytes(e->store), need;

	zinf_device_get_stats(e->dev, &ds);
	if (chunks > ds.limit)
		chunks = ds.limit;
	need = chunks + zinf_store_largest_chunk(e->store);
	if (e->dev_first > 0) /* the gradients' two stages, unless all stay on the device */
		need += 2 * largest_grads(e);
	if (e->nvme_state)
		need += engine_nvme_staging_bytes(e);
	return need + need / 8 + (4ull << 20);
}

/* The drive bytes of what finalize lays out on NVMe, in three parts. */
static void nvme_drive_parts(struct zinf_engine *e, uint64_t *homes, uint64_t *state,
			     uint64_t *grads)
{
	*homes = *state = *grads = 0;
	if (!e->io)
		return;
	*homes = zinf_store_nvme_home_bytes(e->store);
	if (e->nvme_state) {
		*state = engine_nvme_state_drive_bytes(e);
		*grads = engine_grad_drive_bytes(e);
	}
}

uint64_t engine_nvme_drive_bytes(struct zinf_engine *e)
{
	uint64_t homes, state, grads;

	nvme_drive_parts(e, &homes, &state, &grads);
	return homes + state + grads;
}

int engine_check_nvme_space(struct zinf_engine *e)
{
	uint64_t homes, state, grads, largest = 0;
	char a[32], b[32], c[32];

	if (!e->io)
		return 0;
	nvme_drive_parts(e, &homes, &state, &grads);
	if (homes) { /* the largest chunk (chunk_size, or the largest module), aligned */
		uint64_t align = zinf_io_alignment(e->io);
		largest = (zinf_store_largest_chunk(e->store) + align - 1) / align * align;
	}
	if (state && engine_nvme_largest_extent(e) > largest)
		largest = engine_nvme_largest_extent(e);
	if (zinf_io_check_space(e->io, homes + state + grads, largest) == 0)
		return 0;
	return engine_fail(e, ZINF_EBUDGET,
			   "%s: parameter homes %s, optimizer state %s (with a spare extent per "
			   "staging buffer), gradients %s on NVMe (free space, add a drive to "
			   "zinf.nvme_paths, or keep less on NVMe)",
			   zinf_io_last_error(e->io), zinf_format_bytes(homes, a, sizeof(a)),
			   zinf_format_bytes(state, b, sizeof(b)),
			   zinf_format_bytes(grads, c, sizeof(c)));
}

/* Config -> tier options (see tier_opts.h). */
#include <string.h>

#include "config.h"
#include "tier_opts.h"
#include "zinf/error.h"

/* The keys a path can come from, for messages. */
static const char *const list_names[] = {
	"zinf.nvme_paths[0]",  "zinf.nvme_paths[1]",  "zinf.nvme_paths[2]",  "zinf.nvme_paths[3]",
	"zinf.nvme_paths[4]",  "zinf.nvme_paths[5]",  "zinf.nvme_paths[6]",  "zinf.nvme_paths[7]",
	"zinf.nvme_paths[8]",  "zinf.nvme_paths[9]",  "zinf.nvme_paths[10]", "zinf.nvme_paths[11]",
	"zinf.nvme_paths[12]", "zinf.nvme_paths[13]", "zinf.nvme_paths[14]", "zinf.nvme_paths[15]",
};
_Static_assert(sizeof(list_names) / sizeof(list_names[0]) == ZINF_IO_MAX_PATHS,
	       "a name for every path");

int zinf_config_nvme_paths(const struct zinf_config *cfg, const char **paths, const char **names,
			   int max)
{
	const struct zinf_config_values *v = &cfg->v;
	const char *cand[2], *cand_name[2];
	int n = 0, nc = 0;

	if (v->zinf.nvme_paths.n) {
		if (v->zinf.nvme_paths.n > max)
			return ZINF_ECONFIG;
		for (int i = 0; i < v->zinf.nvme_paths.n; i++) {
			paths[i] = v->zinf.nvme_paths.v[i];
			if (names)
				names[i] = i < ZINF_IO_MAX_PATHS ? list_names[i] : NULL;
		}
		return v->zinf.nvme_paths.n;
	}
	if (v->zero.offload_param.device == ZINF_OFFLOAD_NVME && v->zero.offload_param.nvme_path) {
		cand_name[nc] = "zero_optimization.offload_param.nvme_path";
		cand[nc++] = v->zero.offload_param.nvme_path;
	}
	if (v->zero.offload_optimizer.device == ZINF_OFFLOAD_NVME &&
	    v->zero.offload_optimizer.nvme_path) {
		cand_name[nc] = "zero_optimization.offload_optimizer.nvme_path";
		cand[nc++] = v->zero.offload_optimizer.nvme_path;
	}
	for (int i = 0; i < nc; i++) {
		bool dup = false;
		for (int j = 0; j < n; j++)
			dup |= zinf_config_same_path(paths[j], cand[i]);
		if (!dup && n < max) {
			if (names)
				names[n] = cand_name[i];
			paths[n++] = cand[i];
		}
	}
	return n;
}

int zinf_config_io_opts(const struct zinf_config *cfg, struct zinf_io_opts *out)
{
	const struct zinf_config_values *v = &cfg->v;
	int n;

	zinf_io_opts_init(out);
	out->block_size = v->aio.block_size;
	out->queue_depth = (uint32_t)v->aio.queue_depth;
	out->intra_op_parallelism = (uint32_t)v->aio.intra_op_parallelism;
	out->single_submit = v->aio.single_submit;
	out->overlap_events = v->aio.overlap_events;
	/* The config's enum names are in the I/O engine's order (auto, io_uring, libaio,
	 * psync; none, crc32c); a test pins that. */
	out->engine = (enum zinf_io_engine)v->zinf.io_engine;
	out->checksum = (enum zinf_io_checksum)v->zinf.checksum;
	out->remove_stale = v->zinf.remove_stale_run_dir;
	out->stripe_unit = v->aio.block_size;
	n = zinf_config_nvme_paths(cfg, out->nvme_paths, out->path_names, ZINF_IO_MAX_PATHS);
	if (n < 0)
		return n;
	/* nothing on NVMe: no path to open, no run directory to lock (a resident run beside
	 * an offloaded one on the same drives, a config that moved its offload to cpu) */
	if (v->zero.offload_param.device != ZINF_OFFLOAD_NVME &&
	    v->zero.offload_optimizer.device != ZINF_OFFLOAD_NVME)
		n = 0;
	out->n_paths = n;
	return 0;
}

void zinf_config_device_opts(const struct zinf_config *cfg, struct zinf_device_opts *out)
{
	int i = zinf_key_find("zinf.device_memory_limit");

	zinf_device_opts_init(out);
	out->backend = (enum zinf_device_backend)cfg->v.zinf.device;
	out->cuda_sync =
		(enum zinf_cuda_sync)cfg->v.zinf.cuda_sync; /* same order: a test pins it */
	out->memory_limit = cfg->is_auto[i] ? 0 : cfg->v.zinf.device_memory_limit;
}

void zinf_config_pinned_opts(const struct zinf_config *cfg, struct zinf_pinned_opts *out)
{
	int i = zinf_key_find("zinf.pinned_memory_limit");

	zinf_pinned_opts_init(out);
	out->size = cfg->is_auto[i] ? 0 : cfg->v.zinf.pinned_memory_limit;
}

void zinf_config_store_opts(const struct zinf_config *cfg, struct zinf_store_opts *out)
{
	static const enum zinf_tier home[] = {
		[ZINF_OFFLOAD_NONE] = ZINF_TIER_DEVICE,
		[ZINF_OFFLOAD_CPU] = ZINF_TIER_HOST,
		[ZINF_OFFLOAD_NVME] = ZINF_TIER_NVME,
	};

	zinf_store_opts_init(out);
	out->chunk_size = cfg->v.zinf.chunk_size;
	out->param_home = home[cfg->v.zero.offload_param.device];
	if (out->param_home == ZINF_TIER_NVME)
		out->host_elems = cfg->v.zero.offload_param.max_in_cpu;
	out->pin_host = cfg->v.zero.offload_param.pin_memory;
}

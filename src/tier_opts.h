/*
 * From the config to each tier's options: the aio and zinf blocks to the I/O engine's
 * options, zinf.device and device_memory_limit to the device's, pinned_memory_limit to
 * the pinned pool's, offload_param and chunk_size to the shard store's. The layers below
 * never see the config (io/ cannot: it knows no engine types); this is the one place
 * that translates it.
 */
#ifndef ZINF_SRC_TIER_OPTS_H
#define ZINF_SRC_TIER_OPTS_H

#include "device.h"
#include "pinned.h"
#include "store.h"
#include "zinf/config.h"
#include "zinf/io.h"

/* The NVMe directories of the config: zinf.nvme_paths when given, else the distinct
 * nvme_path values of offload_param and offload_optimizer whose device is nvme; with
 * names, the key each came from ("zinf.nvme_paths[1]"). Pointers stay valid as long as
 * cfg. Returns how many (0..ZINF_IO_MAX_PATHS), or ZINF_ECONFIG when there are more than
 * the I/O engine takes. */
int zinf_config_nvme_paths(const struct zinf_config *cfg, const char **paths, const char **names,
			   int max);

/* Fill each tier's options from cfg ("auto" sizes become 0, which each tier resolves
 * from the hardware). The io opts point into cfg; they have no path when neither
 * offload_param nor offload_optimizer is on nvme. Return 0 or ZINF_ECONFIG. */
int zinf_config_io_opts(const struct zinf_config *cfg, struct zinf_io_opts *out);
void zinf_config_device_opts(const struct zinf_config *cfg, struct zinf_device_opts *out);
void zinf_config_pinned_opts(const struct zinf_config *cfg, struct zinf_pinned_opts *out);
void zinf_config_store_opts(const struct zinf_config *cfg, struct zinf_store_opts *out);

#endif /* ZINF_SRC_TIER_OPTS_H */

/* The config reaches each tier's options: aio and zinf keys to the I/O engine (enum
 * values in the same order), NVMe paths from zinf.nvme_paths or the offload blocks
 * (deduplicated, however spelled), device and pinned limits ("auto" = 0, resolved by the tier), the CUDA
 * wait mode, and the parameter home tier and chunk size to the store. */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "test.h"
#include "tier_opts.h"
#include "zinf/zinf.h"

static struct zinf_config *load(const char *json)
{
	struct zinf_config *cfg;

	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_string(cfg, json, "map.json") == 0, "%s",
		zinf_config_last_error(cfg));
	return cfg;
}

int main(void)
{
	static const char *const engines[] = {"auto", "io_uring", "libaio", "psync"};
	struct zinf_io_opts io;
	struct zinf_device_opts dev;
	struct zinf_pinned_opts pin;
	struct zinf_store_opts st;
	struct zinf_config *cfg;

	zinf_log_set_level(ZINF_LOG_ERROR);
	cfg = load(
		"{\"aio\": {\"block_size\": \"4MiB\", \"queue_depth\": 32, \"intra_op_parallelism\": 3,"
		" \"single_submit\": true, \"overlap_events\": false},"
		" \"zero_optimization\": {\"stage\": 3,"
		"  \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/nvme/a\"},"
		"  \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/nvme/a\"}},"
		" \"zinf\": {\"checksum\": \"crc32c\", \"device_memory_limit\": \"64MiB\", \"chunk_size\": \"8MiB\","
		"  \"device\": \"host\"}}");
	T_CHECK_RC(zinf_config_io_opts(cfg, &io));
	T_CHECK(io.block_size == 4u << 20 && io.queue_depth == 32 && io.intra_op_parallelism == 3,
		"aio sizes");
	T_CHECK(io.single_submit && !io.overlap_events, "aio flags");
	T_CHECK(io.checksum == ZINF_IO_CHECKSUM_CRC32C && io.engine == ZINF_IO_ENGINE_AUTO,
		"engine, checksum");
	T_CHECK(io.n_paths == 1 && strcmp(io.nvme_paths[0], "/nvme/a") == 0,
		"one path, deduplicated");
	zinf_config_device_opts(cfg, &dev);
	T_CHECK(dev.backend == ZINF_DEVICE_BACKEND_HOST && dev.memory_limit == 64u << 20,
		"device opts");
	zinf_config_pinned_opts(cfg, &pin);
	T_CHECK(pin.size == 0, "pinned auto -> 0");
	zinf_config_store_opts(cfg, &st);
	T_CHECK(st.param_home == ZINF_TIER_NVME && st.chunk_size == 8u << 20, "store opts");
	zinf_config_destroy(cfg);

	cfg = load(
		"{\"zinf\": {\"nvme_paths\": [\"/n0\", \"/n1\", \"/n2\"], \"pinned_memory_limit\": \"1GiB\"},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"cpu\"},"
		"  \"offload_optimizer\": {\"device\": \"nvme\"}}}");
	T_CHECK_RC(zinf_config_io_opts(cfg, &io));
	T_CHECK(io.n_paths == 3 && strcmp(io.nvme_paths[2], "/n2") == 0,
		"zinf.nvme_paths stripe set");
	/* nothing on NVMe: no path is opened (nor locked, nor required to exist) */
	T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.offload_optimizer.device", "cpu"));
	T_CHECK_RC(zinf_config_io_opts(cfg, &io));
	T_CHECK(io.n_paths == 0, "zinf.nvme_paths with nothing on nvme: %d paths", io.n_paths);
	zinf_config_pinned_opts(cfg, &pin);
	T_CHECK(pin.size == 1u << 30, "pinned size");
	zinf_config_device_opts(cfg, &dev);
	T_CHECK(dev.memory_limit == 0 && dev.backend == ZINF_DEVICE_BACKEND_AUTO, "device auto");
	zinf_config_store_opts(cfg, &st);
	T_CHECK(st.param_home == ZINF_TIER_HOST, "cpu offload -> host home");
	zinf_config_destroy(cfg);

	/* One directory spelled two ways in the offload blocks is one path (the I/O layer
	 * would find its run directory locked by this same run), two directories two. */
	{
		static const char *const spellings[][2] = {
			{"/nvme/b", "/nvme/b/"}, {"map_dir", "map_link"}, {"map_dir", "./map_dir"}};
		char json[512];

		T_CHECK(mkdir("map_dir", 0755) == 0 || errno == EEXIST, "mkdir");
		unlink("map_link");
		T_CHECK(symlink("map_dir", "map_link") == 0, "symlink");
		for (int i = 0; i < 4; i++) {
			const char *p = i < 3 ? spellings[i][0] : "/nvme/c";
			const char *o = i < 3 ? spellings[i][1] : "/nvme/d";
			snprintf(
				json, sizeof(json),
				"{\"zero_optimization\": {\"stage\": 3,"
				" \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
				" \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}}}",
				p, o);
			cfg = load(json);
			T_CHECK_RC(zinf_config_io_opts(cfg, &io));
			T_CHECK(io.n_paths == (i < 3 ? 1 : 2) && strcmp(io.nvme_paths[0], p) == 0,
				"%s and %s: %d paths", p, o, io.n_paths);
			zinf_config_destroy(cfg);
		}
		unlink("map_link");
		rmdir("map_dir");
	}

	/* Every io_engine name maps to the engine of the same name. */
	for (int i = 0; i < 4; i++) {
		enum zinf_io_engine e;
		T_CHECK_RC(zinf_config_create(&cfg));
		T_CHECK_RC(zinf_config_set(cfg, "zinf.io_engine", engines[i]));
		T_CHECK_RC(zinf_config_io_opts(cfg, &io));
		T_CHECK(zinf_io_parse_engine(engines[i], &e) == 0 && io.engine == e, "io_engine %s",
			engines[i]);
		zinf_config_destroy(cfg);
	}
	/* Every cuda_sync name maps to the wait mode of the same name. */
	{
		static const char *const sync[] = {"auto", "spin", "yield", "blocking"};
		static const enum zinf_cuda_sync want[] = {ZINF_CUDA_SYNC_AUTO, ZINF_CUDA_SYNC_SPIN,
							   ZINF_CUDA_SYNC_YIELD,
							   ZINF_CUDA_SYNC_BLOCKING};
		for (int i = 0; i < 4; i++) {
			T_CHECK_RC(zinf_config_create(&cfg));
			T_CHECK_RC(zinf_config_set(cfg, "zinf.cuda_sync", sync[i]));
			zinf_config_device_opts(cfg, &dev);
			T_CHECK(dev.cuda_sync == want[i], "cuda_sync %s -> %d", sync[i],
				(int)dev.cuda_sync);
			zinf_config_destroy(cfg);
		}
	}
	return T_EXIT_PASS;
}

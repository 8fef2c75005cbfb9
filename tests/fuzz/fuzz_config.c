/* libFuzzer harness: DeepSpeed-style JSON config (zinf_config_load_string / set / resolve /
 * print / get).  Input: JSON text; optionally a NUL, then one flags byte, then
 * "key=value" lines applied with zinf_config_set before zinf_config_resolve ("@ORIGIN@key=value"
 * with zinf_config_set_from, as a flag such as --batch-size sets). */
#include "zinf/config.h"
#include "zinf/log.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	devnull = fopen("/dev/null", "w");
	zinf_log_set_level(ZINF_LOG_ERROR);
	return 0;
}

static const char *const keys[] = {"train_batch_size",
				   "train_micro_batch_size_per_gpu",
				   "gradient_accumulation_steps",
				   "zero_optimization.stage",
				   "zero_optimization.offload_param.device",
				   "zero_optimization.offload_param.nvme_path",
				   "zero_optimization.reduce_bucket_size",
				   "zero_optimization.stage3_prefetch_bucket_size",
				   "aio.block_size",
				   "optimizer.type",
				   "optimizer.params.lr",
				   "optimizer.params.betas",
				   "scheduler.type",
				   "scheduler.params.total_num_steps",
				   "fp16.enabled",
				   "bf16.enabled",
				   "zinf.nvme_paths",
				   "zinf.device_memory_limit",
				   "zinf.pinned_memory_limit",
				   "zinf.trace",
				   "nope",
				   "",
				   "zero_optimization",
				   "fp16.initial_scale_power",
				   "gradient_clipping"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);
	struct zinf_config *cfg;
	size_t jlen;
	uint8_t flags = 0;
	const char *sets = NULL;

	memcpy(buf, data, size);
	buf[size] = 0;
	jlen = strlen(buf);
	if (jlen < size) {
		flags = (uint8_t)buf[jlen + 1];
		sets = jlen + 2 <= size ? buf + jlen + 2 : "";
	}
	if (zinf_config_create(&cfg)) {
		free(buf);
		return 0;
	}
	int rc = zinf_config_load_string(cfg, buf, "fuzz.json");
	(void)zinf_config_last_error(cfg);
	if (rc == 0 || (flags & 0x80)) {
		/* --set overrides */
		if (sets) {
			char *s = strdup(sets), *save = NULL;
			for (char *line = strtok_r(s, "\n", &save); line;
			     line = strtok_r(NULL, "\n", &save)) {
				char *eq = strchr(line, '=');
				if (!eq)
					continue;
				*eq = 0;
				/* "@ORIGIN@KEY=VALUE": set by a flag (zinf_config_set_from) */
				char *at = line[0] == '@' ? strchr(line + 1, '@') : NULL;
				if (at) {
					*at = 0;
					zinf_config_set_from(cfg, at + 1, eq + 1, line + 1);
				} else {
					zinf_config_set(cfg, line, eq + 1);
				}
			}
			free(s);
		}
		static const uint64_t sizes[4] = {0, 4096, 1ull << 30, 80ull << 30};
		struct zinf_config_resolve_info info = {
			.world_size = flags & 3,
			.hidden_size = (flags >> 2) & 1 ? 4096 : 0,
			.total_steps = (flags >> 3) & 1 ? 1000 : 0,
			.device_free_bytes = sizes[(flags >> 4) & 3],
			.host_total_bytes = (flags >> 6) & 1 ? (64ull << 30) : 0,
			.require_all = (flags >> 5) & 1,
		};
		zinf_config_resolve(cfg, &info);
		zinf_config_print(cfg, devnull, false);
		zinf_config_print(cfg, devnull, true);
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			uint64_t u;
			double d;
			bool b;
			const char *str;
			enum zinf_config_source src;
			zinf_config_get_u64(cfg, keys[i], &u);
			zinf_config_get_double(cfg, keys[i], &d);
			zinf_config_get_bool(cfg, keys[i], &b);
			if (zinf_config_get_string(cfg, keys[i], &str) == 0 && str)
				(void)strlen(str);
			for (int k = 0; k < 3; k++)
				if (zinf_config_get_list(cfg, keys[i], k, &str) == 0 && str)
					(void)strlen(str);
			zinf_config_get_source(cfg, keys[i], &src);
		}
		for (int i = 0; i < zinf_config_warning_count(cfg); i++)
			(void)strlen(zinf_config_warning(cfg, i));
	}
	/* the size parser on the raw text too */
	if (jlen < 64) {
		uint64_t u;
		char fb[64];
		if (zinf_parse_bytes(buf, &u) == 0)
			zinf_format_bytes(u, fb, sizeof(fb));
	}
	zinf_config_destroy(cfg);
	free(buf);
	return 0;
}

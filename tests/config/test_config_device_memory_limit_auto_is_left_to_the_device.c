/* zinf.device_memory_limit "auto" (the default) resolves for the host device to a quarter
 * of RAM, to the device's free memory when the caller knows it, and otherwise (cuda, or
 * auto that may pick a GPU) stays "auto" for the device backend to resolve when it opens
 * (memory_limit 0 in the device options), even when every other "auto" must resolve; an
 * explicit value is kept as it is. Before, a cuda run with the default was refused. */
#include "config.h"
#include "test.h"
#include "tier_opts.h"
#include "zinf/zinf.h"

#define GiB (1ull << 30)

static struct zinf_config *resolved(const char *device, uint64_t device_free, const char *limit)
{
	struct zinf_config_resolve_info info = {.world_size = 1,
						.host_total_bytes = 64 * GiB,
						.device_free_bytes = device_free,
						.require_all = true};
	struct zinf_config *cfg;

	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK_RC(
		zinf_config_load_string(cfg, "{\"train_micro_batch_size_per_gpu\": 2}", "t.json"));
	T_CHECK_RC(zinf_config_set(cfg, "zinf.device", device));
	if (limit)
		T_CHECK_RC(zinf_config_set(cfg, "zinf.device_memory_limit", limit));
	T_CHECK(zinf_config_resolve(cfg, &info) == 0, "%s, free %llu: %s", device,
		(unsigned long long)device_free, zinf_config_last_error(cfg));
	return cfg;
}

/* The device options' memory_limit: 0 leaves it to the backend. */
static uint64_t limit_of(struct zinf_config *cfg)
{
	struct zinf_device_opts d;

	zinf_config_device_opts(cfg, &d);
	zinf_config_destroy(cfg);
	return d.memory_limit;
}

int main(void)
{
	uint64_t v;

	zinf_log_set_level(ZINF_LOG_ERROR);
	v = limit_of(resolved("cuda", 0, NULL));
	T_CHECK(v == 0, "cuda: left to the backend (%llu)", (unsigned long long)v);
	v = limit_of(resolved("auto", 0, NULL));
	T_CHECK(v == 0, "auto device: left to the backend (%llu)", (unsigned long long)v);
	v = limit_of(resolved("host", 0, NULL));
	T_CHECK(v == 16 * GiB, "host: a quarter of RAM (%llu)", (unsigned long long)v);
	v = limit_of(resolved("cuda", 40 * GiB, NULL));
	T_CHECK(v == 40 * GiB, "free memory given: %llu", (unsigned long long)v);
	v = limit_of(resolved("cuda", 0, "3GiB"));
	T_CHECK(v == 3 * GiB, "explicit: %llu", (unsigned long long)v);
	return 0;
}

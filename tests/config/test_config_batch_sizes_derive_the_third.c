/* Any two of train_batch_size, train_micro_batch_size_per_gpu and
 * gradient_accumulation_steps determine the third for the world size; an inconsistent
 * triple is refused with the arithmetic, and so are products past 2^64 (not taken
 * modulo 2^64); re-resolving for another world size recomputes what was derived. */
#include "config.h"
#include "test.h"
#include "zinf/zinf.h"

static struct zinf_config *load(const char *json, int world, int want_rc)
{
	struct zinf_config *cfg;
	struct zinf_config_resolve_info info = {.world_size = world};
	int rc;

	T_CHECK_RC(zinf_config_create(&cfg));
	rc = zinf_config_load_string(cfg, json, "b.json");
	if (!rc)
		rc = zinf_config_resolve(cfg, &info);
	T_CHECK(rc == want_rc, "%s (world %d): rc %d, want %d: %s", json, world, rc, want_rc,
		zinf_config_last_error(cfg));
	return cfg;
}

static void triple(struct zinf_config *cfg, uint64_t tbs, uint64_t mb, uint64_t gas)
{
	struct zinf_config_values *v = &cfg->v;

	T_CHECK(v->train_batch_size == tbs && v->train_micro_batch_size_per_gpu == mb &&
			v->gradient_accumulation_steps == gas,
		"got %llu/%llu/%llu, want %llu/%llu/%llu", (unsigned long long)v->train_batch_size,
		(unsigned long long)v->train_micro_batch_size_per_gpu,
		(unsigned long long)v->gradient_accumulation_steps, (unsigned long long)tbs,
		(unsigned long long)mb, (unsigned long long)gas);
}

int main(void)
{
	struct zinf_config *cfg;
	struct zinf_config_resolve_info info = {.world_size = 8};
	enum zinf_config_source src;

	cfg = load("{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 4}", 2, 0);
	triple(cfg, 64, 4, 8);
	T_CHECK(zinf_config_get_source(cfg, "gradient_accumulation_steps", &src) == 0 &&
			src == ZINF_SRC_DERIVED,
		"derived");
	T_CHECK_RC(zinf_config_resolve(cfg, &info)); /* world 8: recomputed, not stuck at 8 */
	triple(cfg, 64, 4, 2);
	zinf_config_destroy(cfg);

	cfg = load("{\"train_batch_size\": 64, \"gradient_accumulation_steps\": 4}", 4, 0);
	triple(cfg, 64, 4, 4);
	zinf_config_destroy(cfg);
	cfg = load("{\"train_micro_batch_size_per_gpu\": 3, \"gradient_accumulation_steps\": 5}", 2,
		   0);
	triple(cfg, 30, 3, 5);
	zinf_config_destroy(cfg);
	cfg = load("{\"train_batch_size\": 16}", 4, 0);
	triple(cfg, 16, 4, 1);
	zinf_config_destroy(cfg);
	cfg = load("{\"train_micro_batch_size_per_gpu\": 2}", 3, 0);
	triple(cfg, 6, 2, 1);
	zinf_config_destroy(cfg);
	/* All three given: consistent for 8 ranks, refused for 2 with the arithmetic. */
	cfg = load(
		"{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2}",
		8, 0);
	triple(cfg, 32, 2, 2);
	zinf_config_destroy(cfg);
	cfg = load(
		"{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2}",
		2, ZINF_ECONFIG);
	T_CHECK_STR(
		zinf_config_last_error(cfg),
		"b.json: train_batch_size: 32 != train_micro_batch_size_per_gpu 2 x gradient_accumulation_steps 2 x world size 2 = 8 (expected train_batch_size = micro batch x accumulation steps x world size; a world size of 8 would match)");
	zinf_config_destroy(cfg);
	cfg = load("{\"train_batch_size\": 30, \"train_micro_batch_size_per_gpu\": 5}", 4,
		   ZINF_ECONFIG);
	T_CHECK_STR(
		zinf_config_last_error(cfg),
		"b.json: train_batch_size: 30 is not divisible by train_micro_batch_size_per_gpu 5 x world size 4 (expected a multiple of 20)");
	zinf_config_destroy(cfg);
	cfg = load("{\"train_batch_size\": 10}", 4, ZINF_ECONFIG);
	zinf_config_destroy(cfg);
	/* products that wrap around 2^64 are refused, not taken modulo: 64 x (2^58 + 1)
	 * would be 64 */
	cfg = load(
		"{\"train_micro_batch_size_per_gpu\": 536838145, \"gradient_accumulation_steps\": "
		"536903681}",
		64, ZINF_ECONFIG);
	T_CHECK(strstr(zinf_config_last_error(cfg), "more than train_batch_size's maximum"), "%s",
		zinf_config_last_error(cfg));
	zinf_config_destroy(cfg);
	cfg = load("{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 536838145, "
		   "\"gradient_accumulation_steps\": 536903681}",
		   64, ZINF_ECONFIG);
	zinf_config_destroy(cfg);
	return T_EXIT_PASS;
}

/* A key given as JSON null is DeepSpeed's None: as if not given, its default applies
 * (source "default"), for scalars (a count, a bool, a byte size, a path, a string) and
 * objects alike, as DeepSpeed's documented examples write them
 * ("number_checkpoints": null), and so is --set KEY=null over a value the file gave
 * (a quoted "null" is a string; a section's null resets every key in it; a rule it then
 * breaks is named --set). An unknown key given as null is still refused, naming
 * it. */
#include "config.h"
#include "test.h"
#include "zinf/zinf.h"

static void want_default(struct zinf_config *cfg, const char *key)
{
	enum zinf_config_source src;

	T_CHECK(zinf_config_get_source(cfg, key, &src) == 0 && src == ZINF_SRC_DEFAULT,
		"%s: source %d, not default", key, (int)src);
}

int main(void)
{
	struct zinf_config *cfg;
	uint64_t u = 1;
	bool b = true;
	const char *s = "x";

	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK_RC(zinf_config_load_string(
		cfg,
		"{\"activation_checkpointing\": {\"number_checkpoints\": null, \"profile\": null},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": null,"
		"  \"offload_optimizer\": {\"device\": \"cpu\", \"nvme_path\": null},"
		"  \"sub_group_size\": null},"
		" \"zinf\": {\"trace\": null, \"chunk_size\": null}, \"fp16\": null}",
		"nulls.json"));
	T_CHECK(zinf_config_get_u64(cfg, "activation_checkpointing.number_checkpoints", &u) == 0 &&
			u == 0,
		"number_checkpoints: %llu", (unsigned long long)u);
	want_default(cfg, "activation_checkpointing.number_checkpoints");
	T_CHECK(zinf_config_get_bool(cfg, "activation_checkpointing.profile", &b) == 0 && !b,
		"profile: %d", b);
	want_default(cfg, "activation_checkpointing.profile");
	T_CHECK(zinf_config_get_u64(cfg, "zero_optimization.sub_group_size", &u) == 0 &&
			u == 1000000000,
		"sub_group_size: %llu", (unsigned long long)u);
	want_default(cfg, "zero_optimization.sub_group_size");
	want_default(cfg, "zero_optimization.offload_optimizer.nvme_path");
	want_default(cfg, "zinf.trace");
	want_default(cfg, "zinf.chunk_size");
	T_CHECK(zinf_config_get_string(cfg, "zero_optimization.offload_param.device", &s) == 0 &&
			!strcmp(s, "none"),
		"offload_param.device: %s", s);
	T_CHECK(zinf_config_get_u64(cfg, "zero_optimization.stage", &u) == 0 && u == 3,
		"the keys beside the nulls: stage %llu", (unsigned long long)u);
	zinf_config_destroy(cfg);

	/* --set KEY=null: the file's value gives way to the default */
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK_RC(zinf_config_load_string(
		cfg,
		"{\"fp16\": {\"enabled\": true}, \"zinf\": {\"trace\": \"t.json\","
		" \"chunk_size\": \"1MiB\"}, \"aio\": {\"thread_count\": 4}}",
		"set.json"));
	T_CHECK_RC(zinf_config_set(cfg, "fp16.enabled", "null"));
	T_CHECK_RC(zinf_config_set(cfg, "zinf.trace", "null"));
	T_CHECK_RC(zinf_config_set(cfg, "zinf.chunk_size", "null"));
	T_CHECK_RC(zinf_config_set(cfg, "aio.thread_count", "null")); /* an old name */
	T_CHECK(zinf_config_get_bool(cfg, "fp16.enabled", &b) == 0 && !b, "fp16.enabled: %d", b);
	want_default(cfg, "fp16.enabled");
	T_CHECK(zinf_config_get_string(cfg, "zinf.trace", &s) == 0 && s == NULL, "trace: %s", s);
	want_default(cfg, "zinf.trace");
	want_default(cfg, "zinf.chunk_size");
	T_CHECK(zinf_config_get_u64(cfg, "aio.intra_op_parallelism", &u) == 0 && u == 1,
		"intra_op_parallelism after its old name's null: %llu", (unsigned long long)u);
	want_default(cfg, "aio.intra_op_parallelism");
	T_CHECK_RC(zinf_config_set(cfg, "zinf.trace", "\"null\""));
	T_CHECK(zinf_config_get_string(cfg, "zinf.trace", &s) == 0 && s && !strcmp(s, "null"),
		"a quoted null is a path: %s", s ? s : "(none)");
	zinf_config_destroy(cfg);

	/* --set SECTION=null, as "offload_param": null in a file: every key in it back to
	 * its default; a rule then broken is named --set, not the file */
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK_RC(zinf_config_load_string(
		cfg,
		"{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 3,"
		" \"offload_param\": {\"device\": \"cpu\", \"buffer_count\": 5}}}",
		"sec.json"));
	T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.offload_param", "null"));
	T_CHECK(zinf_config_get_string(cfg, "zero_optimization.offload_param.device", &s) == 0 &&
			!strcmp(s, "none"),
		"offload_param.device after its section's null: %s", s);
	want_default(cfg, "zero_optimization.offload_param.device");
	zinf_config_destroy(cfg);
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK_RC(zinf_config_load_string(
		cfg,
		"{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 3,"
		" \"offload_param\": {\"device\": \"cpu\"}}}",
		"sec.json"));
	T_CHECK_RC(zinf_config_set(cfg, "zero_optimization.stage", "null"));
	T_CHECK(zinf_config_resolve(cfg, NULL) == ZINF_ECONFIG, "offload at stage 0 accepted");
	T_CHECK(strncmp(zinf_config_last_error(cfg), "--set: ", 7) == 0,
		"a rule broken by --set ...=null is named after the file: %s",
		zinf_config_last_error(cfg));
	zinf_config_destroy(cfg);

	/* a misspelt key is refused even as null */
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_string(
			cfg, "{\"activation_checkpointing\": {\"number_checkpoint\": null}}",
			"typo.json") == ZINF_ECONFIG,
		"a misspelt key given as null loaded");
	T_CHECK(strstr(zinf_config_last_error(cfg), "number_checkpoint") &&
			strstr(zinf_config_last_error(cfg), "did you mean"),
		"the error does not name the key: %s", zinf_config_last_error(cfg));
	zinf_config_destroy(cfg);
	return T_EXIT_PASS;
}

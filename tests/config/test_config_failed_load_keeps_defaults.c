/* A load that fails part-way (after setting earlier keys and gathering warnings) leaves
 * the handle exactly as fresh: every value default, no warnings, sources default. */
#include "config.h"
#include "test.h"
#include "zinf/zinf.h"

int main(void)
{
	struct zinf_config *cfg, *fresh;
	char a[1200], b[1200];

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK_RC(zinf_config_create(&fresh));
	T_CHECK(zinf_config_load_string(
			cfg,
			"{\"wall_clock_breakdown\": true, \"zinf\": {\"nvme_paths\": [\"/x\", \"/y\"], \"trace\": \"/tmp/t.json\"},"
			" \"zero_optimization\": {\"stage\": 3, \"sub_group_size\": 7, \"offload_parm\": {}}}",
			"partial.json") == ZINF_ECONFIG,
		"bad config accepted");
	T_CHECK(zinf_config_warning_count(cfg) == 0, "warnings kept");
	for (int i = 0; i < zinf_n_keys; i++) {
		if (zinf_keys[i].type == ZK_OBJECT || zinf_keys[i].type == ZK_IGNORED)
			continue;
		zinf_key_value_json(cfg, i, a, sizeof(a));
		zinf_key_value_json(fresh, i, b, sizeof(b));
		T_CHECK(strcmp(a, b) == 0, "%s: %s after a failed load, %s fresh",
			zinf_keys[i].path, a, b);
		T_CHECK(cfg->source[i] == ZINF_SRC_DEFAULT && !cfg->present[i], "%s: source",
			zinf_keys[i].path);
	}
	/* And the same handle then loads a good config. */
	T_CHECK_RC(zinf_config_load_string(cfg, "{\"zero_optimization\": {\"stage\": 2}}",
					   "good.json"));
	T_CHECK(cfg->v.zero.stage == 2 && zinf_config_last_error(cfg)[0] == 0, "reload");
	zinf_config_destroy(cfg);
	zinf_config_destroy(fresh);
	return T_EXIT_PASS;
}

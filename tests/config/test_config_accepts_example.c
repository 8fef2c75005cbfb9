/* A sample config from docs/examples (argv[1]) loads, resolves for 1 to 8 ranks where its
 * batch sizes allow, prints, and every key reads back through the getters. */
#include "config.h"
#include "test.h"
#include "zinf/zinf.h"

int main(int argc, char **argv)
{
	struct zinf_config *cfg;
	FILE *devnull = fopen("/dev/null", "w");
	int resolved = 0;

	T_CHECK(argc == 2 && devnull, "usage: %s CONFIG.json", argv[0]);
	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_file(cfg, argv[1]) == 0, "%s", zinf_config_last_error(cfg));
	for (int ws = 1; ws <= 8; ws *= 2) {
		struct zinf_config_resolve_info info = {.world_size = ws, .hidden_size = 4096};
		if (zinf_config_resolve(cfg, &info) == 0)
			resolved++;
	}
	T_CHECK(resolved > 0, "resolves for no world size in 1..8: %s",
		zinf_config_last_error(cfg));
	T_CHECK_RC(zinf_config_print(cfg, devnull, false));
	T_CHECK_RC(zinf_config_print(cfg, devnull, true));
	for (int i = 0; i < zinf_n_keys; i++) {
		enum zinf_config_source src;
		T_CHECK_RC(zinf_config_get_source(cfg, zinf_keys[i].path, &src));
	}
	zinf_config_destroy(cfg);
	fclose(devnull);
	return T_EXIT_PASS;
}

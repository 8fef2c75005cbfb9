/*
 * A config for a test that needs one but does not test configs: loaded from JSON text
 * and resolved for one rank, every other fact unknown.
 */
#ifndef ZINF_TESTS_CONFIG_FIXTURE_H
#define ZINF_TESTS_CONFIG_FIXTURE_H

#include "test.h"
#include "zinf/config.h"

/* json loaded (its messages name it name) and resolved (with require_all: every "auto"
 * must resolve); a failure fails the test with the config's line. */
static inline struct zinf_config *t_config(const char *json, const char *name, bool require_all)
{
	struct zinf_config_resolve_info info = {.world_size = 1, .require_all = require_all};
	struct zinf_config *cfg;

	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_string(cfg, json, name) == 0, "%s", zinf_config_last_error(cfg));
	T_CHECK(zinf_config_resolve(cfg, &info) == 0, "%s", zinf_config_last_error(cfg));
	return cfg;
}

#endif /* ZINF_TESTS_CONFIG_FIXTURE_H */

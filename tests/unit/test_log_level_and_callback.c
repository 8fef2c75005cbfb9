/* ZINF_LOG sets the level; messages above it are dropped; a callback receives whole
 * lines at their level; levels out of range are taken as the nearest one; NULL restores
 * stderr. */
#include <stdlib.h>

#include "test.h"
#include "zinf/log.h"

static int seen[4];
static char last[256];

static void sink(enum zinf_log_level level, const char *msg, void *user)
{
	seen[level]++;
	snprintf(last, sizeof(last), "%s", msg);
	T_CHECK(user == (void *)&seen, "user pointer passed through");
}

int main(void)
{
	enum zinf_log_level lv;

	setenv("ZINF_LOG", "info", 1);
	T_CHECK(zinf_log_get_level() == ZINF_LOG_INFO, "ZINF_LOG=info read on first use");
	zinf_log_set_callback(sink, &seen);
	zinf_logf(ZINF_LOG_DEBUG, "dropped %d", 1);
	zinf_logf(ZINF_LOG_INFO, "kept %d", 2);
	zinf_logf(ZINF_LOG_ERROR, "error %s", "three");
	T_CHECK(seen[ZINF_LOG_DEBUG] == 0, "debug dropped at info level");
	T_CHECK(seen[ZINF_LOG_INFO] == 1 && seen[ZINF_LOG_ERROR] == 1, "info and error kept");
	T_CHECK_STR(last, "error three");
	zinf_log_set_level(ZINF_LOG_ERROR);
	zinf_logf(ZINF_LOG_WARN, "dropped");
	T_CHECK(seen[ZINF_LOG_WARN] == 0, "warn dropped at error level");
	T_CHECK(zinf_log_parse_level("debug", &lv) == 0 && lv == ZINF_LOG_DEBUG, "parse debug");
	T_CHECK(zinf_log_parse_level("verbose", &lv) < 0, "unknown level refused");
	zinf_log_set_level((enum zinf_log_level)99);
	T_CHECK(zinf_log_get_level() == ZINF_LOG_DEBUG, "level 99 taken as debug");
	zinf_log_set_level((enum zinf_log_level) - 5);
	T_CHECK(zinf_log_get_level() == ZINF_LOG_ERROR, "level -5 taken as error");
	zinf_logf((enum zinf_log_level) - 3, "below error");
	zinf_logf((enum zinf_log_level)42, "above debug");
	T_CHECK(seen[ZINF_LOG_ERROR] == 2 && !strcmp(last, "below error"),
		"an out-of-range message level: %d errors, last '%s'", seen[ZINF_LOG_ERROR], last);
	zinf_log_set_callback(NULL, NULL);
	return T_EXIT_PASS;
}

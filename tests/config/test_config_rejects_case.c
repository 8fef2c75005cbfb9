/* A bad config (argv[1]) is refused with exactly the one-line message in the sibling
 * .expect file, prefixed by the file's path; the file is left untouched and the handle
 * keeps its defaults. */
#include "config.h"
#include "test.h"
#include "zinf/zinf.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	T_CHECK(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	T_CHECK(buf && fread(buf, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path);
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	struct zinf_config *cfg;
	char expect_path[4096], want[2048];
	char *before, *after, *expect, *nl;
	int rc;

	T_CHECK(argc == 2, "usage: %s BAD.json", argv[0]);
	snprintf(expect_path, sizeof(expect_path), "%.*s.expect", (int)(strlen(argv[1]) - 5),
		 argv[1]);
	expect = slurp(expect_path);
	nl = strchr(expect, '\n');
	if (nl)
		*nl = 0;
	snprintf(want, sizeof(want), "%s: %s", argv[1], expect);
	before = slurp(argv[1]);

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK_RC(zinf_config_create(&cfg));
	rc = zinf_config_load_file(cfg, argv[1]);
	T_CHECK(rc == ZINF_ECONFIG || rc == ZINF_EJSON, "rc %d (%s)", rc, zinf_strerror(rc));
	T_CHECK_STR(zinf_config_last_error(cfg), want);
	T_CHECK(!strchr(zinf_config_last_error(cfg), '\n'), "message is one line");
	T_CHECK(cfg->v.zero.stage == 0 && cfg->v.aio.queue_depth == 8,
		"defaults kept after a failed load");
	T_CHECK(zinf_config_warning_count(cfg) == 0, "no warnings kept from a failed load");
	after = slurp(argv[1]);
	T_CHECK(strcmp(before, after) == 0, "the config file was changed");
	zinf_config_destroy(cfg);
	free(before);
	free(after);
	free(expect);
	return T_EXIT_PASS;
}

/* A program embedding the library may set a locale whose decimal point is a comma (the
 * CLI sets none). The library's numbers as text stay in the C locale's form all the same:
 * zinf_format_double writes "0.5", zinf_strtod and zinf_parse_bytes read "1.5" and
 * "1.5GiB", the config's default betas are [0.9, 0.999] and its JSON print parses; a
 * training run writes a --log-json whose losses read back as the steps' exact losses and
 * a trace (zinf.trace) that parses as JSON, saves its state, and a resume from it goes on
 * to the losses of an uninterrupted run in the C locale, bit for bit. The comma locale is
 * de_DE.UTF-8, made with localedef into the scratch directory when the system has none
 * (skipped, 77, when neither works). */
#include <cjson/cJSON.h>
#include <locale.h>

#include "train_fixture.h"
#include "zinf/config.h"

/* LC_NUMERIC with a decimal comma, or false. */
static bool comma_locale(const char *root)
{
	char cmd[1024], dir[256];

	if (!setlocale(LC_NUMERIC, "de_DE.UTF-8")) {
		snprintf(dir, sizeof(dir), "%s/locales", root);
		snprintf(cmd, sizeof(cmd),
			 "mkdir -p '%s' && localedef -i de_DE -f UTF-8 '%s/de_DE.UTF-8' >/dev/null "
			 "2>&1",
			 dir, dir);
		if (system(cmd) != 0 || setenv("LOCPATH", dir, 1) != 0 ||
		    !setlocale(LC_NUMERIC, "de_DE.UTF-8"))
			return false;
	}
	return !strcmp(localeconv()->decimal_point, ",");
}

/* The whole file, parsed as JSON, or NULL. */
static cJSON *parse_file(const char *path)
{
	char *text;
	size_t len;
	cJSON *j;

	tf_read_all(path, &text, &len);
	j = cJSON_Parse(text);
	free(text);
	return j;
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses whole, first, rest;
	struct zinf_config *cfg;
	char buf[64], log[256], trace[256], save[256], set_trace[300], *end, *text, line[4096];
	const char *sets[2] = {set_trace, NULL};
	uint64_t bytes = 0;
	size_t len;
	FILE *f;
	int n = 0;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "nvme", "nvme", true);
	/* the reference, in the C locale */
	tf_opts(&d, &o, 5, &whole);
	tf_run(&o, &res);
	if (!comma_locale(d.root)) {
		tf_cleanup(&d);
		printf("skip: no locale with a decimal comma (de_DE.UTF-8; localedef failed)\n");
		return T_EXIT_SKIP;
	}
	snprintf(buf, sizeof(buf), "%.1f", 0.5);
	T_CHECK_STR(buf, "0,5"); /* the locale is in force */

	T_CHECK_STR(zinf_format_double(0.5, buf, sizeof(buf)), "0.5");
	T_CHECK(zinf_strtod("1.5", &end) == 1.5 && !*end, "zinf_strtod(\"1.5\") stops at '%s'",
		end);
	T_CHECK(zinf_parse_bytes("1.5GiB", &bytes) == 0 && bytes == 1610612736ull,
		"1.5GiB read as %llu", (unsigned long long)bytes);
	T_CHECK_RC(zinf_config_create(&cfg));
	f = open_memstream(&text, &len);
	T_CHECK(f && zinf_config_print(cfg, f, true) == 0 && fclose(f) == 0, "config print");
	T_CHECK(strstr(text, "[0.9, 0.999]") != NULL, "default betas not [0.9, 0.999]:\n%s", text);
	{
		cJSON *j = cJSON_Parse(text);
		T_CHECK(j != NULL, "the config's JSON print does not parse:\n%s", text);
		cJSON_Delete(j);
	}
	free(text);
	zinf_config_destroy(cfg);

	/* steps 1-3 with a log, a trace and the state saved; then a resume to step 5 */
	snprintf(log, sizeof(log), "%s/log.jsonl", d.root);
	snprintf(trace, sizeof(trace), "%s/trace.json", d.root);
	snprintf(save, sizeof(save), "%s/save", d.root);
	snprintf(set_trace, sizeof(set_trace), "zinf.trace=%s", trace);
	tf_opts(&d, &o, 3, &first);
	o.log_json_path = log;
	o.config_sets = sets;
	o.n_config_sets = 1;
	o.save_dir = save;
	o.save_state = true;
	tf_run(&o, &res);
	f = fopen(log, "r");
	T_CHECK(f != NULL, "open %s", log);
	while (fgets(line, sizeof(line), f)) {
		cJSON *j = cJSON_Parse(line);
		const cJSON *loss = cJSON_GetObjectItemCaseSensitive(j, "loss");
		T_CHECK(j && cJSON_IsNumber(loss) && n < first.n &&
				loss->valuedouble == first.loss[n],
			"log line %d does not parse or its loss is not step %d's (%.17g): %s",
			n + 1, n + 1, n < first.n ? first.loss[n] : 0.0, line);
		cJSON_Delete(j);
		n++;
	}
	fclose(f);
	T_CHECK(n == 3, "%d log lines", n);
	{
		cJSON *j = parse_file(trace);
		T_CHECK(j != NULL, "%s does not parse as JSON", trace);
		cJSON_Delete(j);
	}
	tf_opts(&d, &o, 5, &rest);
	o.init_config = NULL;
	o.resume_dir = save;
	tf_run(&o, &res);
	T_CHECK(rest.n == 2, "the resume ran %d steps", rest.n);
	for (int i = 0; i < 5; i++) {
		double got = i < 3 ? first.loss[i] : rest.loss[i - 3];
		T_CHECK(got == whole.loss[i], "step %d: loss %.17g, %.17g in the C locale", i + 1,
			got, whole.loss[i]);
	}
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

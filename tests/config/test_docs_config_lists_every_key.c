/* docs/config.md documents every key of the schema, and each row of its key table is
 * exactly what `zinf help config` prints today (type, default, accepted values,
 * meaning), so the reference cannot fall behind the code. argv[1]: docs/config.md. */
#include "config.h"
#include "test.h"
#include "zinf/zinf.h"

int main(int argc, char **argv)
{
	FILE *f;
	char *doc;
	long n;
	int missing = 0;

	T_CHECK(argc == 2, "usage: %s docs/config.md", argv[0]);
	f = fopen(argv[1], "rb");
	T_CHECK(f, "cannot open %s", argv[1]);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	doc = calloc(1, (size_t)n + 1);
	T_CHECK(doc && fread(doc, 1, (size_t)n, f) == (size_t)n, "read");
	fclose(f);
	for (int i = 0; i < zinf_n_keys; i++) {
		char needle[300];
		snprintf(needle, sizeof(needle), "| `%s` |", zinf_keys[i].path);
		if (!strstr(doc, needle)) {
			fprintf(stderr, "docs/config.md lacks a row for %s\n", zinf_keys[i].path);
			missing++;
		}
	}
	T_CHECK(missing == 0, "%d keys undocumented", missing);
	{
		char *ref = NULL, *line, *save = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&ref, &len);
		T_CHECK(m && zinf_config_print_reference(m) == 0, "reference");
		fclose(m);
		for (line = strtok_r(ref, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			if (!strstr(doc, line)) {
				fprintf(stderr,
					"docs/config.md row differs from 'zinf help config':\n  %s\n",
					line);
				missing++;
			}
		}
		T_CHECK(missing == 0,
			"%d rows out of date: regenerate the table with 'zinf help config'",
			missing);
		free(ref);
	}
	free(doc);
	return T_EXIT_PASS;
}

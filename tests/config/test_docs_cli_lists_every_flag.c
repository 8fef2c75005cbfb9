/* docs/cli.md mentions every flag each subcommand's --help prints, so the CLI reference
 * cannot fall behind the code. argv: zinf-binary docs/cli.md. */
#include <ctype.h>

#include "test.h"

static char *read_all(FILE *f)
{
	size_t cap = 1 << 16, n = 0, k;
	char *buf = malloc(cap + 1);

	T_CHECK(buf, "memory");
	while ((k = fread(buf + n, 1, cap - n, f)) > 0) {
		n += k;
		if (n == cap) {
			buf = realloc(buf, 2 * cap + 1);
			T_CHECK(buf, "memory");
			cap *= 2;
		}
	}
	buf[n] = 0;
	return buf;
}

int main(int argc, char **argv)
{
	static const char *const cmds[] = {"check",    "train",	     "version",
					   "bench io", "bench adam", "bench train"};
	FILE *f;
	char *doc, cmd[4096];
	int missing = 0, flags = 0;

	T_CHECK(argc == 3, "usage: %s ZINF docs/cli.md", argv[0]);
	f = fopen(argv[2], "rb");
	T_CHECK(f, "cannot open %s", argv[2]);
	doc = read_all(f);
	fclose(f);
	for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++) {
		char *help, *p;
		snprintf(cmd, sizeof(cmd), "%s %s --help", argv[1], cmds[c]);
		f = popen(cmd, "r");
		T_CHECK(f, "cannot run %s", cmd);
		help = read_all(f);
		T_CHECK(pclose(f) == 0 && *help, "%s failed", cmd);
		for (p = strstr(help, "--"); p; p = strstr(p + 2, "--")) {
			char flag[64];
			size_t n = 2;
			while (n < sizeof(flag) - 1 &&
			       (isalnum((unsigned char)p[n]) || p[n] == '-'))
				n++;
			if (n == 2 || (p > help && (isalnum((unsigned char)p[-1]) || p[-1] == '-')))
				continue;
			snprintf(flag, sizeof(flag), "%.*s", (int)n, p);
			flags++;
			if (!strstr(doc, flag)) {
				fprintf(stderr, "docs/cli.md does not mention %s of 'zinf %s'\n",
					flag, cmds[c]);
				missing++;
			}
		}
		free(help);
	}
	T_CHECK(flags > 30, "only %d flags found in the --help texts", flags);
	T_CHECK(missing == 0, "%d flags undocumented", missing);
	free(doc);
	return T_EXIT_PASS;
}

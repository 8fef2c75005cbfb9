/* The zinf CLI runs with OMP_WAIT_POLICY=passive unless the user chose how OpenMP waits:
 * with neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT set it re-executes itself with passive
 * ('zinf version' prints the policy the process runs with); a policy the user set (active
 * or passive) is kept, and so is libgomp's default when GOMP_SPINCOUNT is set. argv[1]:
 * the zinf CLI. */
#include "cli_util.h"

/* The 'OpenMP wait policy' of 'zinf version' run with env (a prefix for the shell), with
 * neither variable inherited. */
static void policy(const char *cli, const char *env, char *line, size_t len)
{
	char prefix[256];

	snprintf(prefix, sizeof(prefix), "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT %s", env);
	t_version_line(cli, prefix, "OpenMP wait policy ", line, len);
	printf("%s: %s\n", env[0] ? env : "(nothing set)", line);
}

int main(int argc, char **argv)
{
	char line[256];

	T_CHECK(argc == 2, "usage: %s ZINF_CLI", argv[0]);
	policy(argv[1], "", line, sizeof(line));
	T_CHECK(!strcmp(line, "passive"), "nothing set: the CLI runs with '%s', not passive", line);
	policy(argv[1], "OMP_WAIT_POLICY=active", line, sizeof(line));
	T_CHECK(!strcmp(line, "active"), "the user's active became '%s'", line);
	policy(argv[1], "OMP_WAIT_POLICY=PASSIVE", line, sizeof(line));
	T_CHECK(!strcmp(line, "PASSIVE"), "the user's PASSIVE became '%s'", line);
	policy(argv[1], "GOMP_SPINCOUNT=1000", line, sizeof(line));
	T_CHECK(strstr(line, "libgomp's default") && strstr(line, "GOMP_SPINCOUNT=1000"),
		"with the user's GOMP_SPINCOUNT: '%s'", line);
	return T_EXIT_PASS;
}

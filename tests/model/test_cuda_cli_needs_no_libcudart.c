/*
 * A CUDA build's CLI (argv[1]) links the CUDA runtime statically, as nvcc links it: the
 * dynamic loader lists no libcudart among the libraries it loads (it lists libc, so the
 * listing worked), and `zinf version` runs. A machine without the toolkit then runs it on
 * the host backend.
 */
#include "cli_util.h"

int main(int argc, char **argv)
{
	char cmd[4200], out[16384];
	int rc;

	T_CHECK(argc == 2, "usage: %s ZINF_BINARY", argv[0]);
	/* (what ldd prints, without ldd: the loader lists the objects and exits) */
	snprintf(cmd, sizeof(cmd), "LD_TRACE_LOADED_OBJECTS=1 '%s' 2>&1", argv[1]);
	rc = t_run(cmd, out, sizeof(out));
	T_CHECK(rc == 0 && strstr(out, "libc.so"), "the loader's listing failed (exit %d): %s", rc,
		out);
	T_CHECK(!strstr(out, "libcudart"), "the CLI loads a shared CUDA runtime:\n%s", out);
	snprintf(cmd, sizeof(cmd), "'%s' version 2>&1", argv[1]);
	rc = t_run(cmd, out, sizeof(out));
	T_CHECK(rc == 0 && strstr(out, "zinf"), "zinf version: exit %d: %s", rc, out);
	return T_EXIT_PASS;
}

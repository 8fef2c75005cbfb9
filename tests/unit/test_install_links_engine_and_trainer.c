/* The installed package works from outside the project: `cmake --install` of this build
 * into a fresh prefix, then a program (tests/unit/consumer) configured with
 * find_package(zinf) and linked with zinf::model and zinf::zinf trains 2 steps of the demo
 * model through <zinf/train.h> and prints its losses; the same program built with
 * `pkg-config --cflags --libs zinf-model` alone does too, and one using the engine alone
 * links with `pkg-config zinf` (the static library's dependencies come with it, and the
 * .pc files find a prefix other than the configured one). The tokenizer script is
 * installed as bin/zinf-tokenize-hf and runs from there. The installed libraries define
 * no strong global symbol but the API's (zinf_*: none of engine_*, llama_*, ... to clash
 * with a program's), and a C++ program using what the kernels' C++ objects instantiate
 * too links with them and runs (when a C++ compiler is here). The package names libaio,
 * not
 * this machine's file; with a dependency missing (pkg-config finds nothing),
 * find_package(zinf QUIET) lets the project go on and says which, and REQUIRED stops
 * naming it. argv: cmake, this build's
 * directory, the consumer's sources, the C compiler, the demo model and DeepSpeed
 * configs, the install's libdir. */
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

static char dir[] = "/var/tmp/zinf-install-XXXXXX";

/* The prefix and the consumer's build go, pass or fail (a failed check exits). */
static void remove_dir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

static void sh(const char *what, const char *cmd)
{
	char full[4096], log[256];

	snprintf(log, sizeof(log), "%s/log.txt", dir);
	snprintf(full, sizeof(full), "(%s) >'%s' 2>&1", cmd, log);
	if (system(full) != 0) {
		snprintf(full, sizeof(full), "cat '%s' >&2", log);
		T_CHECK(system(full) >= 0, "cat");
		T_CHECK(0, "%s failed: %s", what, cmd);
	}
}

int main(int argc, char **argv)
{
	char cmd[4096], path[300], out[512] = "";
	FILE *f;

	T_CHECK(argc == 8, "usage: %s CMAKE BUILD_DIR CONSUMER_DIR CC MODEL.json DS.json LIBDIR",
		argv[0]);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	atexit(remove_dir);
	snprintf(cmd, sizeof(cmd), "'%s' --install '%s' --prefix '%s/prefix'", argv[1], argv[2],
		 dir);
	sh("install", cmd);
	snprintf(cmd, sizeof(cmd),
		 "test -x '%s/prefix/bin/zinf-tokenize-hf' && { ! command -v python3 >/dev/null || "
		 "'%s/prefix/bin/zinf-tokenize-hf' --help | grep -q 'usage: zinf-tokenize-hf'; }",
		 dir, dir);
	sh("the installed tokenizer script", cmd);
	snprintf(
		cmd, sizeof(cmd),
		"cd '%s/prefix/%s' && nm -g --defined-only libzinf.a libzinf_model.a >'%s/syms' && "
		"grep -q ' T zinf_engine_create$' '%s/syms' && "
		"grep -q ' T zinf_train_run$' '%s/syms' && "
		"! awk 'NF == 3 && $2 ~ /^[TDBRGS]$/ && $3 !~ /^zinf_/' '%s/syms' | grep .",
		dir, argv[7], dir, dir, dir, dir);
	sh("the installed libraries define the API's symbols alone", cmd);
	snprintf(
		cmd, sizeof(cmd),
		"! command -v c++ >/dev/null || { export PKG_CONFIG_PATH='%s/prefix/%s/pkgconfig' && "
		"c++ '%s/cxx_consumer.cc' -o '%s/cxx_consumer' $(pkg-config --cflags --libs zinf) "
		"&& '%s/cxx_consumer' | grep -qx 'caught 3 .*'; }",
		dir, argv[7], argv[3], dir, dir);
	sh("a C++ program links with the installed engine, throws and catches", cmd);
	snprintf(cmd, sizeof(cmd),
		 "! grep -l 'libaio[.]' '%s/prefix/%s/cmake/zinf/'zinfTargets*.cmake", dir,
		 argv[7]);
	sh("the package names libaio, not a file of this machine", cmd);
	snprintf(cmd, sizeof(cmd),
		 "'%s' -S '%s/optional' -B '%s/opt' -DCMAKE_PREFIX_PATH='%s/prefix' "
		 "-DCMAKE_C_COMPILER='%s' | grep -x -- '-- zinf: found'",
		 argv[1], argv[3], dir, dir, argv[4]);
	sh("find_package(zinf QUIET) finds the install", cmd);
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s/nopc' && rm -rf '%s/opt' && "
		 "PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR='%s/nopc' '%s' -S '%s/optional' -B '%s/opt' "
		 "-DCMAKE_PREFIX_PATH='%s/prefix' -DCMAKE_C_COMPILER='%s' | "
		 "grep -x -- '-- zinf: not found: zinf needs liburing .*'",
		 dir, dir, dir, argv[1], argv[3], dir, dir, argv[4]);
	sh("find_package(zinf QUIET) without liburing goes on and names it", cmd);
	snprintf(cmd, sizeof(cmd),
		 "PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR='%s/nopc' '%s' -S '%s' -B '%s/req' "
		 "-DCMAKE_PREFIX_PATH='%s/prefix' -DCMAKE_C_COMPILER='%s' >'%s/req.txt' 2>&1; "
		 "test $? -ne 0 && grep -q 'zinf needs liburing' '%s/req.txt'",
		 dir, argv[1], argv[3], dir, dir, argv[4], dir, dir);
	sh("find_package(zinf REQUIRED) without liburing stops and names it", cmd);
	snprintf(cmd, sizeof(cmd),
		 "'%s' -S '%s' -B '%s/b' -DCMAKE_PREFIX_PATH='%s/prefix' -DCMAKE_C_COMPILER='%s' "
		 "-DCMAKE_BUILD_TYPE=Release",
		 argv[1], argv[3], dir, dir, argv[4]);
	sh("configure the consumer", cmd);
	snprintf(cmd, sizeof(cmd), "'%s' --build '%s/b'", argv[1], dir);
	sh("build the consumer", cmd);

	snprintf(path, sizeof(path), "%s/text.txt", dir);
	f = fopen(path, "w");
	T_CHECK(f, "%s", path);
	for (int i = 0; i < 4000; i++)
		fprintf(f, "line %d of a text the consumer trains on.\n", i);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cd '%s' && '%s/b/consumer' '%s' '%s' '%s' 2>&1", dir, dir,
		 argv[5], argv[6], path);
	sh("train through the installed library", cmd);
	snprintf(path, sizeof(path), "%s/log.txt", dir);
	f = fopen(path, "r");
	T_CHECK(f && fgets(out, sizeof(out), f), "the consumer printed nothing");
	fclose(f);
	T_CHECK(strncmp(out, "trained: loss ", 14) == 0, "consumer: %s", out);
	fprintf(stderr, "%s", out);

	/* pkg-config: the engine alone, then the trainer, each built with only what
	 * `pkg-config --cflags --libs` says (the prefix is not the configured one) */
	snprintf(
		cmd, sizeof(cmd),
		"export PKG_CONFIG_PATH='%s/prefix/%s/pkgconfig' && "
		"'%s' '%s/engine_only.c' -o '%s/engine_only' $(pkg-config --cflags --libs zinf) && "
		"'%s/engine_only' '%s'",
		dir, argv[7], argv[4], argv[3], dir, dir, dir);
	sh("build and run a program linked with pkg-config zinf", cmd);
	snprintf(cmd, sizeof(cmd),
		 "export PKG_CONFIG_PATH='%s/prefix/%s/pkgconfig' && "
		 "'%s' '%s/main.c' -o '%s/pc_consumer' $(pkg-config --cflags --libs zinf-model) && "
		 "cd '%s' && '%s/pc_consumer' '%s' '%s' '%s/text.txt'",
		 dir, argv[7], argv[4], argv[3], dir, dir, dir, argv[5], argv[6], dir);
	sh("build and run the trainer linked with pkg-config zinf-model", cmd);
	return T_EXIT_PASS;
}

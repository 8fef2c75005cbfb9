/*
 * Every function in the zinf binary that writes the low 16 YMM/ZMM registers executes
 * vzeroupper (on its way out). Leaving the upper halves dirty makes every legacy-SSE
 * instruction that runs next on the thread pay a penalty: after the gradient norm's
 * AVX-512 loop did, OpenBLAS' SSE kernels and libm on the trainer's thread ran 3x slower
 * whenever the optimizer step (which cleared the state) ran on another thread.
 * argv[1]: the zinf binary (which links the whole library). Skips without objdump.
 */
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

int main(int argc, char **argv)
{
	char cmd[1024], line[4096], fn[512] = "", bad[4096] = "";
	bool uses = false, clears = false;
	int n_funcs = 0, n_simd = 0, n_bad = 0;
	regex_t low_reg;
	FILE *f;

	T_CHECK(argc == 2, "usage: %s ZINF_BINARY", argv[0]);
	if (system("objdump --version >/dev/null 2>&1") != 0)
		T_SKIP("objdump is not installed");
	T_CHECK(regcomp(&low_reg, "%[yz]mm([0-9]|1[0-5])[^0-9]", REG_EXTENDED) == 0, "regcomp");
	snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn '%s'", argv[1]);
	f = popen(cmd, "r");
	T_CHECK(f, "popen %s", cmd);
	for (;;) {
		bool eof = !fgets(line, sizeof(line), f);
		char *lt = eof ? NULL : strstr(line, ">:");
		if (eof || (lt && strchr(line, '<'))) { /* a new function starts */
			if (uses) {
				n_simd++;
				if (!clears && n_bad++ < 8) {
					strncat(bad, " ", sizeof(bad) - strlen(bad) - 1);
					strncat(bad, fn, sizeof(bad) - strlen(bad) - 1);
				}
			}
			if (eof)
				break;
			*lt = '\0';
			snprintf(fn, sizeof(fn), "%s", strchr(line, '<') + 1);
			uses = clears = false;
			n_funcs++;
			continue;
		}
		if (regexec(&low_reg, line, 0, NULL, 0) == 0)
			uses = true;
		if (strstr(line, "vzeroupper"))
			clears = true;
	}
	T_CHECK(pclose(f) == 0, "%s failed", cmd);
	regfree(&low_reg);
	T_CHECK(n_funcs > 100, "objdump listed only %d functions", n_funcs);
	T_CHECK(n_simd > 0, "no function uses ymm/zmm: is this the right binary?");
	T_CHECK(n_bad == 0, "%d of %d SIMD functions never execute vzeroupper:%s", n_bad, n_simd,
		bad);
	return T_EXIT_PASS;
}

/* A token file too large to scan before step 1 (over 64 MiB) is scanned beside the
 * steps: a token out of the vocabulary at its very end, which no batch of the run
 * reaches, still stops zinf train long before its last step, with exit 2 and one line
 * naming the token and its index. argv: the zinf binary. */
#include "cli_util.h"
#include "train_fixture.h"

#define N_TOKENS (34ull << 20) /* uint16: 68 MiB of tokens */

static void write_tokens(const char *path)
{
	static uint16_t buf[1 << 16];
	int32_t header[256] = {20240520, 1};
	FILE *f = fopen(path, "wb");

	T_CHECK(f, "write %s", path);
	header[2] = (int32_t)N_TOKENS;
	T_CHECK(fwrite(header, sizeof(header), 1, f) == 1, "%s: header", path);
	for (size_t i = 0; i < sizeof(buf) / sizeof(buf[0]); i++)
		buf[i] = (uint16_t)(i * 7 % 256);
	for (uint64_t n = 0; n < N_TOKENS; n += sizeof(buf) / sizeof(buf[0])) {
		if (n + sizeof(buf) / sizeof(buf[0]) == N_TOKENS)
			buf[sizeof(buf) / sizeof(buf[0]) - 1] = 300; /* the last token */
		T_CHECK(fwrite(buf, sizeof(buf), 1, f) == 1, "%s: tokens", path);
	}
	T_CHECK(fclose(f) == 0, "%s: close", path);
}

int main(int argc, char **argv)
{
	char tokens[200], cmd[2048], out[4096], want[128];
	struct tf_dir d;
	int rc;

	T_CHECK(argc == 2, "usage: %s ZINF_BINARY", argv[0]);
	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(tokens, sizeof(tokens), "%s/tokens.bin", d.root);
	write_tokens(tokens);
	/* 5000 steps would take a while and read about 320k tokens: the scan, at disk
	 * speed, finds the last of 34M long before */
	snprintf(cmd, sizeof(cmd),
		 "'%s' train --init '%s' --config '%s' --seq-len 16 --data '%s' --steps 5000 "
		 "2>&1 >/dev/null </dev/null",
		 argv[1], d.model, d.ds, tokens);
	rc = t_run(cmd, out, sizeof(out));
	snprintf(want, sizeof(want), "token 300 at index %llu is >= vocab_size 256",
		 (unsigned long long)(N_TOKENS - 1));
	T_CHECK(rc == 2, "exited %d, want 2: %s", rc, out);
	T_CHECK(strstr(out, want) && strchr(out, '\n') == out + strlen(out) - 1,
		"said '%s', want one line with '%s'", out, want);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

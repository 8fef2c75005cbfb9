/* libFuzzer harness: token files (llm.c format and plain text). The input is written to a
 * file in a scratch directory and opened in both formats; tokens are read with wrapping, a batch
 * is read through the window rule, and the whole-file scan is compared with a full read.
 * Parameters (vocab size, batch, seq_len, shuffle, seed) come from input bytes 12..23,
 * which the llm.c format leaves unused. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "tokens.h"
#include "zinf/error.h"
#include "zinf/log.h"

static char path[128];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	zinf_log_set_level(ZINF_LOG_ERROR);
	fuzz_scratch();
	snprintf(path, sizeof(path), "%s/tokens.bin", fuzz_dir);
	return 0;
}

static void one(enum zinf_token_format fmt, const uint8_t *p)
{
	struct zinf_token_file *tf;
	uint64_t vocab = (uint64_t)(p[0] | p[1] << 8 | p[2] << 16); /* 0 = no limit */
	uint64_t batch = 1 + p[3] % 4, T = 1 + p[4] % 16, mb = p[5] | p[6] << 8;
	bool shuffle = p[7] & 1;
	uint64_t seed = (uint64_t)p[8] | (uint64_t)p[9] << 8 | (uint64_t)p[10] << 56;
	uint64_t begin = (uint64_t)p[11] * 0x0101010101ull;

	if (zinf_token_file_create(&tf))
		return;
	if (zinf_token_file_open(tf, path, fmt) == 0) {
		uint64_t n = zinf_token_file_count(tf);
		int32_t buf[64];
		int rc;

		if (n == 0)
			abort();
		zinf_token_file_read(tf, begin, 64, vocab, buf);
		/* the scan and a read of the whole file agree */
		int32_t *all = n <= (1u << 20) ? malloc(n * 4) : NULL;
		if (all && vocab) {
			int rc_read = zinf_token_file_read(tf, 0, n, vocab, all);
			struct zinf_token_scan *s = NULL;
			char err[512];
			if (zinf_token_scan_start(tf, vocab, &s) == 0) {
				zinf_token_scan_wait(s);
				if (!zinf_token_scan_done(s))
					abort();
				int rc_scan = zinf_token_scan_check(s, err, sizeof(err));
				if ((rc_scan == ZINF_EFORMAT) != (rc_read == ZINF_EFORMAT)) {
					fprintf(stderr, "scan %d, read %d: %s / %s\n", rc_scan,
						rc_read, err, zinf_token_file_last_error(tf));
					abort();
				}
				zinf_token_scan_stop(s);
			}
		}
		free(all);
		struct zinf_token_windows w;
		char err[256];
		if (zinf_token_windows_init(&w, n, batch, T, shuffle, seed, err, sizeof(err)) ==
		    0) {
			int32_t in[4 * 16], tg[4 * 16];
			for (uint64_t r = 0; r < batch; r++)
				if (zinf_token_windows_start(&w, mb, r) >= n)
					abort();
			rc = zinf_token_file_read_batch(tf, &w, mb, vocab, in, tg);
			(void)rc;
			/* the permutation is a bijection on small n */
			if (n <= 64 && shuffle) {
				uint8_t seen[64] = {0};
				for (uint64_t i = 0; i < n; i++) {
					uint64_t k = zinf_token_perm(seed, mb, n, i);
					if (k >= n || seen[k]++)
						abort();
				}
			}
		}
	}
	zinf_token_file_destroy(tf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t p[12] = {0};
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		abort();
	if (size && write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	if (size >= 24)
		memcpy(p, data + 12, 12);
	one(ZINF_TOKEN_FORMAT_LLMC, p);
	one(ZINF_TOKEN_FORMAT_TEXT, p);
	return 0;
}

/* libFuzzer harness: token files (llm.c format and plain text). The input is written to a
 * file in a scratch directory and opened in both formats; tokens are read with wrapping, a batch
 * is read through the window rule, and the whole-file scan is compared with a full read.
 * Parameters (vocab size, batch, seq_len, shuffle, seed) come from input bytes 12..23,
 * which the llm.c format leaves unused. The input is also cut into up to three text
 * shards (at points from those bytes), which read through their pattern exactly as the
 * whole file does. */
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

static char path[128], shard_dir[160];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	zinf_log_set_level(ZINF_LOG_ERROR);
	fuzz_scratch();
	snprintf(path, sizeof(path), "%s/tokens.bin", fuzz_dir);
	snprintf(shard_dir, sizeof(shard_dir), "%s/shards", fuzz_dir);
	if (mkdir(shard_dir, 0700) != 0)
		abort();
	return 0;
}

static void write_file(const char *name, const uint8_t *data, size_t size)
{
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	close(fd);
}

/* The input as text in up to three shards: the same tokens, reads and batches as the
 * whole file (text: every byte a token, so any cut is a valid pair of files). */
static void shards_agree(const uint8_t *data, size_t size, const uint8_t *p)
{
	struct zinf_token_file *whole, *parts;
	char name[200];
	size_t cut[4] = {0, 0, 0, size};
	int n = 1;

	if (size < 2)
		return;
	cut[1] = 1 + p[11] % (size - 1);
	cut[2] = size;
	n = 2;
	if (size - cut[1] >= 2) {
		cut[2] = cut[1] + 1 + p[10] % (size - cut[1] - 1);
		n = 3;
	}
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "%s/s_%d.txt", shard_dir, i);
		unlink(name);
		if (i < n)
			write_file(name, data + cut[i], (i + 1 < n ? cut[i + 1] : size) - cut[i]);
	}
	snprintf(name, sizeof(name), "%s/s_?.txt", shard_dir);
	if (zinf_token_file_create(&whole) || zinf_token_file_create(&parts))
		abort();
	if (zinf_token_file_open(whole, path, ZINF_TOKEN_FORMAT_TEXT) ||
	    zinf_token_file_open(parts, name, ZINF_TOKEN_FORMAT_TEXT) ||
	    zinf_token_file_count(parts) != size || zinf_token_file_shards(parts) != (size_t)n) {
		fprintf(stderr, "shards: %s\n", zinf_token_file_last_error(parts));
		abort();
	}
	for (int k = 0; k < 4; k++) {
		uint64_t begin = (uint64_t)p[k] * 131 + (uint64_t)p[4 + k] * size;
		int32_t a[40], b[40];

		if (zinf_token_file_read(whole, begin, 40, 0, a) ||
		    zinf_token_file_read(parts, begin, 40, 0, b) || memcmp(a, b, sizeof(a)))
			abort();
	}
	{
		struct zinf_token_windows w;
		uint64_t T = 1 + p[4] % 16;
		int32_t in_a[3 * 16], tg_a[3 * 16], in_b[3 * 16], tg_b[3 * 16];
		char err[256];

		if (zinf_token_windows_init(&w, size, 3, T, p[7] & 1, p[8], err, sizeof(err)) == 0)
			for (uint64_t mb = 0; mb < 4; mb++) {
				if (zinf_token_file_read_batch(whole, &w, mb, 0, in_a, tg_a) ||
				    zinf_token_file_read_batch(parts, &w, mb, 0, in_b, tg_b) ||
				    memcmp(in_a, in_b, 3 * T * 4) || memcmp(tg_a, tg_b, 3 * T * 4))
					abort();
			}
	}
	zinf_token_file_destroy(whole);
	zinf_token_file_destroy(parts);
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
	write_file(path, data, size);
	if (size >= 24)
		memcpy(p, data + 12, 12);
	one(ZINF_TOKEN_FORMAT_LLMC, p);
	one(ZINF_TOKEN_FORMAT_TEXT, p);
	shards_agree(data, size, p);
	return 0;
}

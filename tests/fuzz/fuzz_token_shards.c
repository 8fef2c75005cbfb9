/* libFuzzer harness: llm.c token files in shards (zinf_token_file_open of a glob
 * pattern): each shard's header, one token width for all, no file twice, and reads,
 * batches and the vocabulary scan across shard boundaries. fuzz_tokens reads one llm.c
 * file, and text shards only.
 * Input: 8 parameter bytes, then the shards, separated by "SHRD" (at most 5). A shard
 * whose first byte has bit 7 set is written raw (the rest of it); otherwise the harness
 * writes the 1024-byte header before the rest: bits 0-1 pick magic and version (uint16,
 * uint32, uint16 magic with uint32's version, uint32 magic with uint16's), bits 2-6 minus
 * 16 are added to the count the rest's size gives. Parameter bytes: [0] flags (bit 0: a
 * hard link to shard 0 is matched too; bit 1: shuffle), [1..2] vocabulary (0: none),
 * [3] T, [4] B, [5] micro-batch and seed, [6..7] a read's first token. Each shard
 * opened alone must agree with the whole: the count is their sum, and the tokens their
 * concatenation. */
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

#define SEP "SHRD"
#define MAX_SHARDS 5
#define MAX_ALL (1u << 16)

static char shard_dir[160];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	zinf_log_set_level(ZINF_LOG_ERROR);
	fuzz_scratch();
	snprintf(shard_dir, sizeof(shard_dir), "%s/shards", fuzz_dir);
	if (mkdir(shard_dir, 0700) != 0)
		abort();
	return 0;
}

static void shard_path(char *out, size_t len, int k)
{
	snprintf(out, len, "%s/tok_%d.bin", shard_dir, k);
}

/* Shard k from its segment of the input (see the top). */
static void write_shard(int k, const uint8_t *p, size_t n)
{
	static const int32_t mv[4][2] = {{ZINF_TOKENS_MAGIC_U16, ZINF_TOKENS_VERSION_U16},
					 {ZINF_TOKENS_MAGIC_U32, ZINF_TOKENS_VERSION_U32},
					 {ZINF_TOKENS_MAGIC_U16, ZINF_TOKENS_VERSION_U32},
					 {ZINF_TOKENS_MAGIC_U32, ZINF_TOKENS_VERSION_U16}};
	char path[256];
	int fd;

	shard_path(path, sizeof(path), k);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		abort();
	if (n && !(p[0] & 0x80)) {
		int32_t h[ZINF_TOKENS_HEADER_INTS] = {0};
		int kind = p[0] & 3, width = kind == 1 || kind == 3 ? 4 : 2;

		h[0] = mv[kind][0];
		h[1] = mv[kind][1];
		h[2] = (int32_t)((n - 1) / (size_t)width) + (int32_t)((p[0] >> 2) & 31) - 16;
		if (write(fd, h, sizeof(h)) != (ssize_t)sizeof(h))
			abort();
	}
	if (n > 1 && write(fd, p + 1, n - 1) != (ssize_t)(n - 1))
		abort();
	close(fd);
}

/* The tokens of shard k opened alone, appended at all[*have] (up to MAX_ALL; *big set when
 * one is above INT32_MAX, which every read refuses); -1 when it does not open. */
static int one_shard(int k, int32_t *all, uint64_t *have, int *width, bool *big)
{
	struct zinf_token_file *tf;
	char path[256];
	int rc;

	shard_path(path, sizeof(path), k);
	if (zinf_token_file_create(&tf))
		abort();
	rc = zinf_token_file_open(tf, path, ZINF_TOKEN_FORMAT_LLMC);
	if (rc == 0) {
		uint64_t n = zinf_token_file_count(tf);
		*width = zinf_token_file_token_bytes(tf);
		if (*have + n > MAX_ALL)
			*big = true; /* (not compared) */
		else if (zinf_token_file_read(tf, 0, n, 0, all + *have))
			*big = true;
		*have += n;
	}
	zinf_token_file_destroy(tf);
	return rc ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t prm[8] = {0};
	const uint8_t *p, *end = data + size;
	int n_shards = 0, widths[MAX_SHARDS], all_open = 1, same_width = 1;
	char path[256], pattern[256];
	static int32_t all[MAX_ALL];
	uint64_t have = 0;
	bool big = false;
	struct zinf_token_file *tf;

	if (size < sizeof(prm))
		return 0;
	memcpy(prm, data, sizeof(prm));
	for (p = data + sizeof(prm); n_shards < MAX_SHARDS;) {
		const uint8_t *s = memmem(p, (size_t)(end - p), SEP, strlen(SEP));
		const uint8_t *stop = s ? s : end;

		write_shard(n_shards++, p, (size_t)(stop - p));
		if (!s)
			break;
		p = s + strlen(SEP);
	}
	for (int k = n_shards; k <= MAX_SHARDS; k++) { /* an earlier input's */
		shard_path(path, sizeof(path), k);
		unlink(path);
	}
	if (prm[0] & 1) { /* one file under two names: refused */
		char first[256];
		shard_path(first, sizeof(first), 0);
		shard_path(path, sizeof(path), MAX_SHARDS);
		if (link(first, path))
			abort();
	}
	for (int k = 0; k < n_shards; k++) {
		all_open &= one_shard(k, all, &have, &widths[k], &big) == 0;
		if (all_open && widths[k] != widths[0])
			same_width = 0;
	}
	snprintf(pattern, sizeof(pattern), "%s/tok_*.bin", shard_dir);
	if (zinf_token_file_create(&tf))
		abort();
	int rc = zinf_token_file_open(tf, pattern, ZINF_TOKEN_FORMAT_LLMC);
	bool expect = all_open && same_width && !(prm[0] & 1);
	if ((rc == 0) != expect) {
		fprintf(stderr, "open %d (%s), each shard alone %s, one width %d, link %d\n", rc,
			zinf_token_file_last_error(tf), all_open ? "opens" : "does not open",
			same_width, prm[0] & 1);
		abort();
	}
	if (rc == 0 && !big) {
		uint64_t n = zinf_token_file_count(tf);
		uint64_t vocab = (uint64_t)prm[1] | (uint64_t)prm[2] << 8;
		int32_t buf[64];

		if (n != have || zinf_token_file_shards(tf) != (size_t)n_shards ||
		    zinf_token_file_token_bytes(tf) != widths[0]) {
			fprintf(stderr, "count %llu, shards alone %llu\n", (unsigned long long)n,
				(unsigned long long)have);
			abort();
		}
		/* a read across the boundaries, wrapping, is the concatenation's */
		uint64_t begin = (uint64_t)prm[6] | (uint64_t)prm[7] << 8;
		if (zinf_token_file_read(tf, begin, 64, 0, buf))
			abort();
		for (uint64_t i = 0; i < 64; i++)
			if (buf[i] != all[(begin + i) % n]) {
				fprintf(stderr, "token %llu differs\n",
					(unsigned long long)(begin + i));
				abort();
			}
		/* a token out of the vocabulary: the read and the scan agree */
		if (vocab) {
			bool out = false;
			for (uint64_t i = 0; i < n; i++)
				out |= (uint64_t)(uint32_t)all[i] >= vocab;
			static int32_t again[MAX_ALL];
			int rc_read = zinf_token_file_read(tf, 0, n, vocab, again);
			if ((rc_read == ZINF_EFORMAT) != out)
				abort();
			struct zinf_token_scan *s = NULL;
			char err[512];
			if (zinf_token_scan_start(tf, vocab, &s) == 0) {
				zinf_token_scan_wait(s);
				int rc_scan = s ? zinf_token_scan_check(s, err, sizeof(err)) : 0;
				if ((rc_scan == ZINF_EFORMAT) != out) {
					fprintf(stderr, "scan %d, token out %d\n", rc_scan, out);
					abort();
				}
				zinf_token_scan_stop(s);
			}
		}
		/* a batch: each row's window of the concatenation */
		struct zinf_token_windows w;
		uint64_t T = 1 + prm[3] % 16, B = 1 + prm[4] % 4, mb = prm[5];
		char err[256];
		if (zinf_token_windows_init(&w, n, B, T, prm[0] & 2, prm[5], err, sizeof(err)) ==
		    0) {
			int32_t in[4 * 16], tg[4 * 16];
			if (zinf_token_file_read_batch(tf, &w, mb, 0, in, tg))
				abort();
			for (uint64_t r = 0; r < B; r++) {
				uint64_t s = zinf_token_windows_start(&w, mb, r);
				for (uint64_t t = 0; t < T; t++)
					if (in[r * T + t] != all[(s + t) % n] ||
					    tg[r * T + t] != all[(s + t + 1) % n])
						abort();
			}
		}
	}
	zinf_token_file_destroy(tf);
	return 0;
}

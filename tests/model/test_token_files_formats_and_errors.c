/*
 * Token files: llm.c's uint16 (magic 20240520 v1) and uint32 (magic 20240801 v7) files
 * and plain text read as bytes give back their tokens, reads wrap at the end; a wrong
 * magic, a version that does not match the magic, a count that does not match the file
 * size, a truncated header, a non-positive count, an empty text and a token past the
 * vocabulary each fail with one line naming the file.
 */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "tokens.h"
#include "zinf/error.h"

static char *dir, *path;

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

/* Write a token file: header fields, then n tokens of width bytes (value k*7 % mod). */
static void write_tokens(int32_t magic, int32_t version, int32_t count, uint64_t n, int width,
			 uint32_t mod)
{
	int32_t h[ZINF_TOKENS_HEADER_INTS] = {0};
	FILE *f = fopen(path, "wb");

	h[0] = magic;
	h[1] = version;
	h[2] = count;
	T_CHECK(f && fwrite(h, 4, ZINF_TOKENS_HEADER_INTS, f) == ZINF_TOKENS_HEADER_INTS,
		"write header");
	for (uint64_t k = 0; k < n; k++) {
		uint32_t v = (uint32_t)((k * 7) % mod);
		uint16_t v16 = (uint16_t)v;

		T_CHECK(fwrite(width == 2 ? (void *)&v16 : (void *)&v, (size_t)width, 1, f) == 1,
			"write");
	}
	T_CHECK(fclose(f) == 0, "close");
}

static void expect_open_fail(enum zinf_token_format fmt, int code, const char *needle)
{
	struct zinf_token_file *tf;
	int rc;

	T_CHECK_RC(zinf_token_file_create(&tf));
	rc = zinf_token_file_open(tf, path, fmt);
	T_CHECK(rc == code, "open returned %d (%s), expected %d", rc,
		zinf_token_file_last_error(tf), code);
	T_CHECK(strstr(zinf_token_file_last_error(tf), path) &&
			strstr(zinf_token_file_last_error(tf), needle),
		"message: %s (want the path and '%s')", zinf_token_file_last_error(tf), needle);
	zinf_token_file_destroy(tf);
}

/* Scan tf against vocab to its end: its check's result, and the message in err (none
 * runs where no token of the file's width can be out: 0). */
static int scan_all(struct zinf_token_file *tf, uint64_t vocab, char *err, size_t errlen)
{
	struct zinf_token_scan *s;
	int rc;

	T_CHECK_RC(zinf_token_scan_start(tf, vocab, &s));
	while (!zinf_token_scan_done(s))
		usleep(1000);
	*err = 0;
	rc = zinf_token_scan_check(s, err, errlen);
	zinf_token_scan_stop(s);
	return rc;
}

static void check_reads(enum zinf_token_format fmt, uint64_t n, uint32_t mod, int width)
{
	char err[512];
	struct zinf_token_file *tf;
	int32_t buf[64];

	T_CHECK_RC(zinf_token_file_create(&tf));
	T_CHECK(zinf_token_file_open(tf, path, fmt) == 0, "open: %s",
		zinf_token_file_last_error(tf));
	T_CHECK(zinf_token_file_count(tf) == n, "count %llu, expected %llu",
		(unsigned long long)zinf_token_file_count(tf), (unsigned long long)n);
	T_CHECK(zinf_token_file_token_bytes(tf) == width, "token bytes");
	T_CHECK_RC(zinf_token_file_read(tf, 5, 10, 0, buf));
	for (int k = 0; k < 10; k++)
		T_CHECK(buf[k] == (int32_t)(((5 + k) * 7) % mod), "token %d = %d", 5 + k, buf[k]);
	/* Wrapping: the last 3 tokens, then the first 4. */
	T_CHECK_RC(zinf_token_file_read(tf, n - 3, 7, 0, buf));
	for (int k = 0; k < 7; k++) {
		uint64_t idx = (n - 3 + (uint64_t)k) % n;

		T_CHECK(buf[k] == (int32_t)((idx * 7) % mod), "wrapped token %d", k);
	}
	/* Reads start modulo N too. */
	T_CHECK_RC(zinf_token_file_read(tf, 3 * n + 2, 1, 0, buf));
	T_CHECK(buf[0] == (int32_t)((2 * 7) % mod), "begin modulo N");
	/* A vocabulary bound names the first token past it. */
	T_CHECK(zinf_token_file_read(tf, 0, 20, 50, buf) == ZINF_EFORMAT, "vocab bound ignored");
	T_CHECK(strstr(zinf_token_file_last_error(tf), ">= vocab_size 50"), "msg: %s",
		zinf_token_file_last_error(tf));
	/* The whole-file scan: nothing under the file's own bound, the first token past
	 * a lower one (8 * 7 = 56 >= 50) */
	T_CHECK(scan_all(tf, mod, err, sizeof(err)) == 0, "a clean file: %s", err);
	T_CHECK(scan_all(tf, 50, err, sizeof(err)) == ZINF_EFORMAT &&
			strstr(err, "token 56 at index 8 is >= vocab_size 50") && strstr(err, path),
		"scan: %s", err);
	zinf_token_file_destroy(tf);
}

int main(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	T_CHECK(asprintf(&dir, "%s/zinf_tok_XXXXXX", base) > 0 && mkdtemp(dir), "mkdtemp");
	T_CHECK(asprintf(&path, "%s/tokens.bin", dir) > 0, "asprintf");

	write_tokens(ZINF_TOKENS_MAGIC_U16, 1, 1000, 1000, 2, 65536);
	check_reads(ZINF_TOKEN_FORMAT_LLMC, 1000, 65536, 2);
	write_tokens(ZINF_TOKENS_MAGIC_U32, 7, 777, 777, 4, 200003);
	check_reads(ZINF_TOKEN_FORMAT_LLMC, 777, 200003, 4);

	/* A scan past its first block (2^20 tokens): one token out at 1.2M; none of a text
	 * file's bytes can be out of a vocabulary of 256 (no scan runs); stopped at once. */
	{
		uint64_t n = 1500000, bad = 1200000;
		uint16_t *t = calloc(n, sizeof(*t));
		int32_t h[ZINF_TOKENS_HEADER_INTS] = {ZINF_TOKENS_MAGIC_U16, 1, (int32_t)n};
		struct zinf_token_file *tf;
		struct zinf_token_scan *s;
		char err[512];
		FILE *f = fopen(path, "wb");

		T_CHECK(t && f, "alloc");
		for (uint64_t k = 0; k < n; k++)
			t[k] = (uint16_t)(k % 1000);
		t[bad] = 4000;
		T_CHECK(fwrite(h, 4, ZINF_TOKENS_HEADER_INTS, f) == ZINF_TOKENS_HEADER_INTS &&
				fwrite(t, 2, n, f) == n && fclose(f) == 0,
			"write");
		free(t);
		T_CHECK_RC(zinf_token_file_create(&tf));
		T_CHECK_RC(zinf_token_file_open(tf, path, ZINF_TOKEN_FORMAT_LLMC));
		T_CHECK(scan_all(tf, 1000, err, sizeof(err)) == ZINF_EFORMAT &&
				strstr(err, "token 4000 at index 1200000 is >= vocab_size 1000"),
			"scan: %s", err);
		T_CHECK(scan_all(tf, 4001, err, sizeof(err)) == 0, "scan: %s", err);
		T_CHECK_RC(zinf_token_scan_start(tf, 65536, &s));
		T_CHECK(s == NULL, "a scan of 16-bit tokens under a vocabulary of 65536");
		T_CHECK_RC(zinf_token_scan_start(tf, 1000, &s));
		zinf_token_scan_stop(s); /* stopped before or after its finding: no leak */
		zinf_token_file_destroy(tf);
	}

	/* Text: every byte a token, including 0 and 255. */
	{
		FILE *f = fopen(path, "wb");
		struct zinf_token_file *tf;
		int32_t buf[1100];

		for (int k = 0; k < 1100; k++)
			fputc(k % 256, f);
		fclose(f);
		T_CHECK_RC(zinf_token_file_create(&tf));
		T_CHECK_RC(zinf_token_file_open(tf, path, ZINF_TOKEN_FORMAT_TEXT));
		T_CHECK(zinf_token_file_count(tf) == 1100 && zinf_token_file_token_bytes(tf) == 1,
			"text");
		T_CHECK_RC(zinf_token_file_read(tf, 0, 1100, 256, buf));
		for (int k = 0; k < 1100; k++)
			T_CHECK(buf[k] == k % 256, "byte %d", k);
		T_CHECK(zinf_token_file_open(tf, path, ZINF_TOKEN_FORMAT_TEXT) == ZINF_ESTATE,
			"reopen");
		zinf_token_file_destroy(tf);
		/* The same bytes as an llm.c file: wrong magic, with a hint. */
		expect_open_fail(ZINF_TOKEN_FORMAT_LLMC, ZINF_EFORMAT, "is not a token file's");
	}

	write_tokens(12345, 1, 10, 10, 2, 100);
	expect_open_fail(ZINF_TOKEN_FORMAT_LLMC, ZINF_EFORMAT,
			 "header magic 12345 is not a token file's (expected 20240520");
	write_tokens(ZINF_TOKENS_MAGIC_U16, 7, 10, 10, 2, 100);
	expect_open_fail(ZINF_TOKEN_FORMAT_LLMC, ZINF_EFORMAT,
			 "version 7 does not match magic 20240520 (expected version 1)");
	write_tokens(ZINF_TOKENS_MAGIC_U32, 1, 10, 10, 4, 100);
	expect_open_fail(ZINF_TOKEN_FORMAT_LLMC, ZINF_EFORMAT, "(expected version 7)");
	write_tokens(ZINF_TOKENS_MAGIC_U16, 1, 11, 10, 2, 100);
	expect_open_fail(ZINF_TOKEN_FORMAT_LLMC, ZINF_EFORMAT,
			 "file is 1044 bytes but its header's 11 tokens of 2 bytes need 1046");
	write_tokens(ZINF_TOKENS_MAGIC_U32, 7, 9, 10, 4, 100);
	expect_open_fail(ZINF_TOKEN_FORMAT_LLMC, ZINF_EFORMAT, "need 1060");
	write_tokens(ZINF_TOKENS_MAGIC_U16, 1, -4, 0, 2, 100);
	expect_open_fail(ZINF_TOKEN_FORMAT_LLMC, ZINF_EFORMAT, "token count -4");
	write_tokens(ZINF_TOKENS_MAGIC_U16, 1, 0, 0, 2, 100);
	expect_open_fail(ZINF_TOKEN_FORMAT_LLMC, ZINF_EFORMAT, "token count 0");
	/* Truncated: header cut short. */
	{
		FILE *f = fopen(path, "wb");
		int32_t h[10] = {ZINF_TOKENS_MAGIC_U16, 1, 5};

		fwrite(h, 4, 10, f);
		fclose(f);
		expect_open_fail(ZINF_TOKEN_FORMAT_LLMC, ZINF_EFORMAT,
				 "file is 40 bytes, shorter than the 1024-byte token file header");
		f = fopen(path, "wb");
		fclose(f);
		expect_open_fail(ZINF_TOKEN_FORMAT_TEXT, ZINF_EFORMAT, "text file is empty");
	}
	/* uint32 tokens above INT32_MAX are refused even without a vocabulary bound. */
	{
		struct zinf_token_file *tf;
		int32_t buf[4];

		write_tokens(ZINF_TOKENS_MAGIC_U32, 7, 4, 0, 4, 1);
		FILE *f = fopen(path, "ab");
		uint32_t big[4] = {1, 2, 0x80000000u, 3};

		fwrite(big, 4, 4, f);
		fclose(f);
		T_CHECK_RC(zinf_token_file_create(&tf));
		T_CHECK_RC(zinf_token_file_open(tf, path, ZINF_TOKEN_FORMAT_LLMC));
		T_CHECK(zinf_token_file_read(tf, 0, 4, 0, buf) == ZINF_EFORMAT,
			"huge token accepted");
		T_CHECK(strstr(zinf_token_file_last_error(tf),
			       "token 2147483648 at index 2 is above 2^31 - 1"),
			"msg: %s", zinf_token_file_last_error(tf));
		zinf_token_file_destroy(tf);
	}
	{
		char *missing = NULL;

		T_CHECK(asprintf(&missing, "%s/none.bin", dir) > 0, "asprintf");
		free(path);
		path = missing;
		expect_open_fail(ZINF_TOKEN_FORMAT_LLMC, -ENOENT, "cannot open");
	}
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(dir);
	free(path);
	return T_EXIT_PASS;
}

/*
 * Token shards: the files a glob pattern names are one stream of tokens, in byte order of
 * their names: counts add up, reads and batches (sequential and shuffled) cross shard
 * boundaries exactly as in the one file that is their concatenation, and more shards
 * than the soft limit on open files read fine. A token past the vocabulary (read or
 * found by the scan) names its shard and its index there and in the data; a shard
 * replaced or grown after the open (read or scanned), shards of two token widths, a bad
 * shard, a directory among the matches, one file matched twice through a link and a
 * pattern matching nothing each fail on one line naming the file. A
 * file whose name holds a glob character is that file.
 */
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "tokens.h"
#include "zinf/error.h"

static char dir[256];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

/* A token file at dir/name: n tokens of width bytes, token j = (first + j) % 997. */
static void write_shard(const char *name, uint64_t first, uint64_t n, int width)
{
	int32_t h[ZINF_TOKENS_HEADER_INTS] = {0};
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	h[0] = width == 2 ? ZINF_TOKENS_MAGIC_U16 : ZINF_TOKENS_MAGIC_U32;
	h[1] = width == 2 ? ZINF_TOKENS_VERSION_U16 : ZINF_TOKENS_VERSION_U32;
	h[2] = (int32_t)n;
	T_CHECK(f && fwrite(h, 4, ZINF_TOKENS_HEADER_INTS, f) == ZINF_TOKENS_HEADER_INTS,
		"write %s", path);
	for (uint64_t j = 0; j < n; j++) {
		uint32_t v = (uint32_t)((first + j) % 997);
		uint16_t v16 = (uint16_t)v;

		T_CHECK(fwrite(width == 2 ? (void *)&v16 : (void *)&v, (size_t)width, 1, f) == 1,
			"write %s", path);
	}
	T_CHECK(fclose(f) == 0, "close %s", path);
}

static struct zinf_token_file *open_ok(const char *spec, enum zinf_token_format fmt)
{
	struct zinf_token_file *tf;
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, spec);
	T_CHECK_RC(zinf_token_file_create(&tf));
	T_CHECK(zinf_token_file_open(tf, path, fmt) == 0, "open %s: %s", path,
		zinf_token_file_last_error(tf));
	return tf;
}

/* Opening spec fails with code and one line holding each of the needles. */
static void expect_open_fail(const char *spec, int code, const char *n1, const char *n2)
{
	struct zinf_token_file *tf;
	char path[512];
	const char *msg;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, spec);
	T_CHECK_RC(zinf_token_file_create(&tf));
	rc = zinf_token_file_open(tf, path, ZINF_TOKEN_FORMAT_LLMC);
	msg = zinf_token_file_last_error(tf);
	T_CHECK(rc == code, "%s: rc %d (%s), want %d", spec, rc, msg, code);
	T_CHECK(strstr(msg, n1) && (!n2 || strstr(msg, n2)) && !strchr(msg, '\n'),
		"%s: message '%s' lacks '%s' / '%s'", spec, msg, n1, n2 ? n2 : "");
	T_CHECK(zinf_token_file_shards(tf) == 0, "a failed open keeps no shard");
	zinf_token_file_destroy(tf);
}

static void check_stream(void)
{
	struct zinf_token_file *tf, *whole;
	struct zinf_token_windows w;
	static int32_t got[751];
	int32_t in_a[3 * 16], tg_a[3 * 16], in_b[3 * 16], tg_b[3 * 16];
	char err[256];

	/* written out of order: the order is the names' */
	write_shard("s/train_002.bin", 301, 450, 2);
	write_shard("s/train_000.bin", 0, 300, 2);
	write_shard("s/train_001.bin", 300, 1, 2);
	write_shard("whole.bin", 0, 751, 2);
	tf = open_ok("s/train_*.bin", ZINF_TOKEN_FORMAT_LLMC);
	whole = open_ok("whole.bin", ZINF_TOKEN_FORMAT_LLMC);
	T_CHECK(zinf_token_file_count(tf) == 751 && zinf_token_file_shards(tf) == 3 &&
			zinf_token_file_token_bytes(tf) == 2,
		"count %llu shards %zu", (unsigned long long)zinf_token_file_count(tf),
		zinf_token_file_shards(tf));
	T_CHECK(strstr(zinf_token_file_shard_path(tf, 0), "train_000") &&
			strstr(zinf_token_file_shard_path(tf, 1), "train_001") &&
			strstr(zinf_token_file_shard_path(tf, 2), "train_002") &&
			!zinf_token_file_shard_path(tf, 3),
		"shard order");
	T_CHECK_RC(zinf_token_file_read(tf, 0, 751, 0, got));
	for (int k = 0; k < 751; k++)
		T_CHECK(got[k] == k, "token %d reads %d", k, got[k]);
	/* across both boundaries, wrapping, and the one-token shard alone */
	T_CHECK_RC(zinf_token_file_read(tf, 295, 10, 0, got));
	for (int k = 0; k < 10; k++)
		T_CHECK(got[k] == 295 + k, "across the boundaries: %d", got[k]);
	T_CHECK_RC(zinf_token_file_read(tf, 745, 12, 0, got));
	for (int k = 0; k < 12; k++)
		T_CHECK(got[k] == (745 + k) % 751, "wrapping: %d", got[k]);
	T_CHECK_RC(zinf_token_file_read(tf, 3 * 751 + 300, 1, 0, got));
	T_CHECK(got[0] == 300, "the one-token shard");
	/* batches: the same as from the concatenation, sequential and shuffled */
	for (int shuffle = 0; shuffle < 2; shuffle++) {
		T_CHECK_RC(zinf_token_windows_init(&w, 751, 3, 16, shuffle, 7, err, sizeof(err)));
		for (uint64_t i = 0; i < 100; i++) {
			T_CHECK_RC(zinf_token_file_read_batch(tf, &w, i, 997, in_a, tg_a));
			T_CHECK_RC(zinf_token_file_read_batch(whole, &w, i, 997, in_b, tg_b));
			T_CHECK(!memcmp(in_a, in_b, sizeof(in_a)) &&
					!memcmp(tg_a, tg_b, sizeof(tg_a)),
				"micro-batch %llu (shuffle %d) differs from the one file's",
				(unsigned long long)i, shuffle);
		}
	}
	/* a token past the vocabulary: its shard, its index there and in the data */
	T_CHECK(zinf_token_file_read(tf, 440, 20, 451, got) == ZINF_EFORMAT, "vocab bound");
	T_CHECK(strstr(zinf_token_file_last_error(tf),
		       "train_002.bin: token 451 at index 150 (451 of the data) is >= vocab_size 451"),
		"read: %s", zinf_token_file_last_error(tf));
	{
		struct zinf_token_scan *s;

		T_CHECK_RC(zinf_token_scan_start(tf, 400, &s));
		zinf_token_scan_wait(s);
		T_CHECK(zinf_token_scan_check(s, err, sizeof(err)) == ZINF_EFORMAT &&
				strstr(err, "train_002.bin: token 400 at index 99 (400 of the "
					    "data) is >= vocab_size 400 (found by the scan of the "
					    "whole data)"),
			"scan: %s", err);
		zinf_token_scan_stop(s);
		T_CHECK_RC(zinf_token_scan_start(tf, 997, &s));
		zinf_token_scan_wait(s);
		T_CHECK(zinf_token_scan_check(s, err, sizeof(err)) == 0, "clean scan: %s", err);
		zinf_token_scan_stop(s);
	}
	/* a shard replaced after the open (same tokens, another file) is refused */
	T_CHECK_RC(zinf_token_file_read(tf, 0, 1, 0, got)); /* (descriptor on shard 0) */
	write_shard("s/new.tmp", 301, 450, 2);
	{
		char from[512], to[512];

		snprintf(from, sizeof(from), "%s/s/new.tmp", dir);
		snprintf(to, sizeof(to), "%s/s/train_002.bin", dir);
		T_CHECK(rename(from, to) == 0, "rename");
	}
	T_CHECK(zinf_token_file_read(tf, 500, 1, 0, got) == ZINF_EFORMAT &&
			strstr(zinf_token_file_last_error(tf),
			       "train_002.bin: changed since the run opened it"),
		"replaced shard: %s", zinf_token_file_last_error(tf));
	T_CHECK_RC(zinf_token_file_read(tf, 10, 5, 0, got)); /* the others still read */
	T_CHECK(got[0] == 10, "shard 0 after the refusal");
	{ /* and so does the scan */
		struct zinf_token_scan *s;

		T_CHECK_RC(zinf_token_scan_start(tf, 997, &s));
		zinf_token_scan_wait(s);
		T_CHECK(zinf_token_scan_check(s, err, sizeof(err)) == -EIO &&
				strstr(err, "train_002.bin: scan: changed since the run opened it"),
			"scan of a replaced shard: %s", err);
		zinf_token_scan_stop(s);
	}
	zinf_token_file_destroy(tf);
	zinf_token_file_destroy(whole);

	/* a shard grown in place (same file, another size) is refused too */
	tf = open_ok("s/train_*.bin", ZINF_TOKEN_FORMAT_LLMC);
	T_CHECK_RC(zinf_token_file_read(tf, 0, 1, 0, got));
	{
		char path[512];
		FILE *f;

		snprintf(path, sizeof(path), "%s/s/train_001.bin", dir);
		f = fopen(path, "ab");
		T_CHECK(f && fputs("xy", f) >= 0 && fclose(f) == 0, "append to %s", path);
	}
	T_CHECK(zinf_token_file_read(tf, 300, 1, 0, got) == ZINF_EFORMAT &&
			strstr(zinf_token_file_last_error(tf),
			       "train_001.bin: changed since the run opened it"),
		"grown shard: %s", zinf_token_file_last_error(tf));
	zinf_token_file_destroy(tf);
}

static void check_text_and_names(void)
{
	struct zinf_token_file *tf;
	int32_t got[5];
	FILE *f;
	char path[512];

	mkdir(strcat(strcpy(path, dir), "/t"), 0755);
	f = fopen(strcat(strcpy(path, dir), "/t/b.txt"), "w");
	T_CHECK(f && fputs("cde", f) >= 0 && fclose(f) == 0, "write b.txt");
	f = fopen(strcat(strcpy(path, dir), "/t/a.txt"), "w");
	T_CHECK(f && fputs("ab", f) >= 0 && fclose(f) == 0, "write a.txt");
	tf = open_ok("t/*.txt", ZINF_TOKEN_FORMAT_TEXT);
	T_CHECK(zinf_token_file_count(tf) == 5 && zinf_token_file_token_bytes(tf) == 1,
		"text shards: %llu", (unsigned long long)zinf_token_file_count(tf));
	T_CHECK_RC(zinf_token_file_read(tf, 0, 5, 256, got));
	T_CHECK(got[0] == 'a' && got[1] == 'b' && got[2] == 'c' && got[4] == 'e', "text order");
	zinf_token_file_destroy(tf);

	/* a name that exists is that file, glob characters and all */
	write_shard("odd[1].bin", 0, 5, 2);
	write_shard("odd1.bin", 0, 9, 2);
	tf = open_ok("odd[1].bin", ZINF_TOKEN_FORMAT_LLMC);
	T_CHECK(zinf_token_file_count(tf) == 5 && zinf_token_file_shards(tf) == 1,
		"literal name: %llu tokens", (unsigned long long)zinf_token_file_count(tf));
	zinf_token_file_destroy(tf);
	tf = open_ok("odd?.bin", ZINF_TOKEN_FORMAT_LLMC);
	T_CHECK(zinf_token_file_count(tf) == 9, "pattern");
	zinf_token_file_destroy(tf);

	/* one file matched twice, through a link */
	write_shard("l/a.bin", 0, 10, 2);
	T_CHECK(symlink("a.bin", strcat(strcpy(path, dir), "/l/b.bin")) == 0, "symlink");
	expect_open_fail("l/*.bin", -EINVAL, "l/b.bin: is the file", "l/a.bin too (a link)");

	expect_open_fail("none_*.bin", -ENOENT, "none_*.bin: no file matches this pattern", NULL);
	write_shard("m/a.bin", 0, 10, 2);
	write_shard("m/b.bin", 0, 10, 4);
	expect_open_fail("m/*.bin", ZINF_EFORMAT, "m/b.bin: holds uint32 tokens, but",
			 "m/a.bin holds uint16");
	write_shard("b/x_0.bin", 0, 10, 2);
	write_shard("b/x_1.bin", 0, 10, 2);
	T_CHECK(truncate(strcat(strcpy(path, dir), "/b/x_1.bin"), 1030) == 0, "truncate");
	write_shard("b/x_2.bin", 0, 10, 2);
	expect_open_fail("b/x_*.bin", ZINF_EFORMAT, "b/x_1.bin: file is 1030 bytes", "truncated");
	mkdir(strcat(strcpy(path, dir), "/b/x_3.bin"), 0755);
	T_CHECK(truncate(strcat(strcpy(path, dir), "/b/x_1.bin"), 1044) == 0, "mend");
	expect_open_fail("b/x_*.bin", -EINVAL, "b/x_3.bin: not a regular file", NULL);
}

/* 100 shards under a soft limit of 32 open files. */
static void check_many_shards(void)
{
	struct zinf_token_file *tf;
	struct rlimit saved, low;
	static int32_t got[200];
	char name[64];

	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "many/%03d.bin", i);
		write_shard(name, 2 * (uint64_t)i, 2, 2);
	}
	T_CHECK(getrlimit(RLIMIT_NOFILE, &saved) == 0, "getrlimit");
	low = saved;
	low.rlim_cur = 32;
	T_CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
	tf = open_ok("many/*.bin", ZINF_TOKEN_FORMAT_LLMC);
	T_CHECK(zinf_token_file_count(tf) == 200 && zinf_token_file_shards(tf) == 100, "count");
	for (int round = 0; round < 2; round++) {
		T_CHECK_RC(zinf_token_file_read(tf, 0, 200, 0, got));
		for (int k = 0; k < 200; k++)
			T_CHECK(got[k] == k, "token %d reads %d", k, got[k]);
	}
	{ /* the scan too: a clean one, then one that finds token 150 in shard 75 */
		struct zinf_token_scan *s;
		char err[256];

		T_CHECK_RC(zinf_token_scan_start(tf, 997, &s));
		zinf_token_scan_wait(s);
		T_CHECK(zinf_token_scan_check(s, err, sizeof(err)) == 0, "scan: %s", err);
		zinf_token_scan_stop(s);
		T_CHECK_RC(zinf_token_scan_start(tf, 150, &s));
		zinf_token_scan_wait(s);
		T_CHECK(zinf_token_scan_check(s, err, sizeof(err)) == ZINF_EFORMAT &&
				strstr(err, "many/075.bin: token 150 at index 0 (150 of the data)"),
			"scan: %s", err);
		zinf_token_scan_stop(s);
	}
	zinf_token_file_destroy(tf);
	T_CHECK(setrlimit(RLIMIT_NOFILE, &saved) == 0, "setrlimit back");
}

int main(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	const char *subs[] = {"s", "m", "b", "l", "many"};
	char p[512];

	snprintf(dir, sizeof(dir), "%s/zinf_shards_XXXXXX", base);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, subs[i]);
		T_CHECK(mkdir(p, 0755) == 0, "mkdir %s", p);
	}
	check_stream();
	check_text_and_names();
	check_many_shards();
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	return T_EXIT_PASS;
}

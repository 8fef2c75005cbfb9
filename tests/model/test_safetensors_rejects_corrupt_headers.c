/*
 * The safetensors reader refuses every malformed file with a one-line error naming the
 * file (and the tensor where there is one) and never crashes or reads outside the file:
 * every prefix of a valid file, random byte flips in its header, and hand-made headers
 * with a huge length, offsets past the data, overlapping or reversed offsets, an unknown
 * dtype, a shape that does not match the byte size, duplicate names and bad JSON.
 * A flipped header that still parses must describe tensors that read back in bounds.
 */
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"
#include "test.h"
#include "zinf/error.h"

static char *dir, *path;

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

/* Rewrite the file in place: no O_TRUNC, which makes ext4 flush on every close. */
static void write_bytes(const void *b, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);

	T_CHECK(fd >= 0, "open %s", path);
	T_CHECK(pwrite(fd, b, n, 0) == (ssize_t)n && ftruncate(fd, (off_t)n) == 0, "write %s",
		path);
	close(fd);
}

/* A file whose header is text (length field = hlen) followed by data_len bytes. */
static void write_file(const char *text, uint64_t hlen, size_t data_len)
{
	size_t n = strlen(text);
	unsigned char *b = calloc(1, 8 + n + data_len);

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(hlen >> (8 * i));
	memcpy(b + 8, text, n);
	write_bytes(b, 8 + n + data_len);
	free(b);
}

/* Open must fail with code and a message holding path and every needle. */
static void expect_fail(int code, const char *what, const char *needle1, const char *needle2)
{
	struct zinf_st_reader *r;
	int rc;

	T_CHECK_RC(zinf_st_reader_create(&r));
	rc = zinf_st_reader_open(r, path);
	T_CHECK(rc == code, "%s: open returned %d (%s), expected %d", what, rc,
		zinf_st_reader_last_error(r), code);
	T_CHECK(strstr(zinf_st_reader_last_error(r), path), "%s: message lacks the path: %s", what,
		zinf_st_reader_last_error(r));
	T_CHECK(!strchr(zinf_st_reader_last_error(r), '\n'), "%s: message is not one line", what);
	T_CHECK(!needle1 || strstr(zinf_st_reader_last_error(r), needle1),
		"%s: message lacks '%s': %s", what, needle1, zinf_st_reader_last_error(r));
	T_CHECK(!needle2 || strstr(zinf_st_reader_last_error(r), needle2),
		"%s: message lacks '%s': %s", what, needle2, zinf_st_reader_last_error(r));
	T_CHECK(zinf_st_reader_count(r) == 0, "%s: tensors left after a failed open", what);
	zinf_st_reader_destroy(r);
}

/* A tensor of a dtype zinf does not read (I64, as position_ids) is listed beside the
 * others, which read; reading it is refused on one line naming the file, the tensor and
 * the dtype. */
static void check_other_dtype(void)
{
	const char text[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
			    "\"position_ids\":{\"dtype\":\"I64\",\"shape\":[1,2],"
			    "\"data_offsets\":[8,24]}}";
	const struct zinf_st_tensor_info *t;
	struct zinf_st_reader *r;
	float buf[4];

	write_file(text, strlen(text), 24);
	T_CHECK_RC(zinf_st_reader_create(&r));
	T_CHECK(zinf_st_reader_open(r, path) == 0, "an I64 tensor refused the file: %s",
		zinf_st_reader_last_error(r));
	t = zinf_st_reader_find(r, "w");
	T_CHECK(t && zinf_st_reader_read(r, t, buf, ZINF_ST_F32) == 0, "the F32 tensor: %s",
		zinf_st_reader_last_error(r));
	t = zinf_st_reader_find(r, "position_ids");
	T_CHECK(t && t->dtype == ZINF_ST_OTHER && strcmp(t->dtype_text, "I64") == 0 &&
			t->nbytes == 16,
		"the I64 tensor is not listed as one");
	T_CHECK(zinf_st_reader_read(r, t, buf, ZINF_ST_F32) == ZINF_EFORMAT, "an I64 tensor read");
	T_CHECK(strstr(zinf_st_reader_last_error(r), path) &&
			strstr(zinf_st_reader_last_error(r),
			       "tensor position_ids: dtype \"I64\" is not supported"),
		"message: %s", zinf_st_reader_last_error(r));
	zinf_st_reader_destroy(r);
}

static void expect_header_fail(const char *text, size_t data_len, const char *what, const char *n1,
			       const char *n2)
{
	write_file(text, strlen(text), data_len);
	expect_fail(ZINF_EFORMAT, what, n1, n2);
}

/* Open; when it succeeds, every tensor must read in bounds. Returns 1 if it opened. */
static int open_and_read_all(void)
{
	static float buf[4096];
	struct zinf_st_reader *r;
	int ok;

	T_CHECK_RC(zinf_st_reader_create(&r));
	ok = zinf_st_reader_open(r, path) == 0;
	if (!ok) {
		T_CHECK(zinf_st_reader_last_error(r)[0] &&
				strstr(zinf_st_reader_last_error(r), path),
			"failure without a message naming the file: %s",
			zinf_st_reader_last_error(r));
	}
	for (int i = 0; ok && i < zinf_st_reader_count(r); i++) {
		const struct zinf_st_tensor_info *t = zinf_st_reader_tensor(r, i);

		T_CHECK(t->n_elems <= 4096, "tensor grew to %llu elements",
			(unsigned long long)t->n_elems);
		if (t->dtype == ZINF_ST_OTHER) /* (I16 for F16, say): listed, not read */
			T_CHECK(zinf_st_reader_read(r, t, buf, ZINF_ST_F32) == ZINF_EFORMAT &&
					strstr(zinf_st_reader_last_error(r), "is not supported"),
				"read %s of dtype %s: %s", t->name, t->dtype_text,
				zinf_st_reader_last_error(r));
		else
			T_CHECK(zinf_st_reader_read(r, t, buf, t->dtype) == 0, "read %s: %s",
				t->name, zinf_st_reader_last_error(r));
	}
	zinf_st_reader_destroy(r);
	return ok;
}

static unsigned char *valid_file(size_t *len)
{
	uint64_t s1[2] = {3, 4}, s2[1] = {5}, s3[3] = {2, 2, 2};
	float x[12];
	struct zinf_st_writer *w;
	unsigned char *b;
	char *p = NULL;
	FILE *f;

	for (int i = 0; i < 12; i++)
		x[i] = (float)i - 2.5f;
	T_CHECK_RC(zinf_st_writer_create(&w, dir, NULL));
	T_CHECK(zinf_st_writer_add(w, "model.layers.3.mlp.up_proj.weight", ZINF_ST_BF16, 2, s1) ==
			0,
		"add");
	T_CHECK(zinf_st_writer_add(w, "model.norm.weight", ZINF_ST_F32, 1, s2) == 1, "add");
	T_CHECK(zinf_st_writer_add(w, "x", ZINF_ST_F16, 3, s3) == 2, "add");
	T_CHECK_RC(zinf_st_writer_write(w, 0, 0, 12, x, ZINF_ST_F32));
	T_CHECK_RC(zinf_st_writer_write(w, 1, 0, 5, x, ZINF_ST_F32));
	T_CHECK_RC(zinf_st_writer_write(w, 2, 0, 8, x, ZINF_ST_F32));
	T_CHECK_RC(zinf_st_writer_finish(w));
	zinf_st_writer_destroy(w);
	T_CHECK(asprintf(&p, "%s/model.safetensors", dir) > 0, "asprintf");
	f = fopen(p, "rb");
	T_CHECK(f, "open %s", p);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc(*len);
	T_CHECK(fread(b, 1, *len, f) == *len, "read");
	fclose(f);
	unlink(p);
	free(p);
	return b;
}

int main(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	uint64_t rng = 0x9e3779b97f4a7c15ull, hlen = 0;
	unsigned char *good, *b;
	size_t len;
	int opened = 0;

	T_CHECK(asprintf(&dir, "%s/zinf_stbad_XXXXXX", base) > 0 && mkdtemp(dir), "mkdtemp");
	T_CHECK(asprintf(&path, "%s/bad.safetensors", dir) > 0, "asprintf");
	good = valid_file(&len);
	for (int i = 7; i >= 0; i--)
		hlen = (hlen << 8) | good[i];

	/* The valid file opens. */
	write_bytes(good, len);
	T_CHECK(open_and_read_all() == 1, "the valid file does not open");

	/* Every proper prefix fails cleanly. */
	for (size_t n = 0; n < len; n++) {
		write_bytes(good, n);
		T_CHECK(open_and_read_all() == 0, "prefix of %zu/%zu bytes opened", n, len);
	}

	/* Random byte flips in the length and header: clean failure, or a file that reads. */
	b = malloc(len);
	for (int i = 0; i < 3000; i++) {
		int flips = 1 + (int)(rng % 3);

		memcpy(b, good, len);
		for (int k = 0; k < flips; k++) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			b[rng % (8 + hlen)] ^= (unsigned char)(1u << ((rng >> 32) % 8));
		}
		write_bytes(b, len);
		opened += open_and_read_all();
	}
	free(b);
	fprintf(stderr, "byte flips: %d of 3000 still valid\n", opened);

	/* Hand-made headers, each with the message it must give. */
	write_file("{}", UINT64_MAX, 0);
	expect_fail(ZINF_EFORMAT, "huge length", "header length", "limit");
	write_file("{}", (100ull << 20) + 1, 0);
	expect_fail(ZINF_EFORMAT, "length over 100 MiB", "limit", NULL);
	write_file("{}  ", 1000, 0);
	expect_fail(ZINF_EFORMAT, "length past the file", "past the end", NULL);
	write_file("", 0, 0);
	expect_fail(ZINF_EFORMAT, "empty header", "too short", NULL);
	expect_header_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
			   "offsets past the data", "tensor a", "past the data buffer");
	expect_header_fail(
		"{\"model.layers.3.mlp.up_proj.weight\":{\"dtype\":\"F32\",\"shape\":[0],"
		"\"data_offsets\":[100,90]}}",
		200, "reversed", "tensor model.layers.3.mlp.up_proj.weight",
		"data_offsets [100, 90] are reversed (expected begin <= end)");
	expect_header_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
			   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
			   12, "overlap", "overlap tensor", NULL);
	expect_header_fail("{\"a\":{\"dtype\":\"i64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
			   "unknown dtype", "tensor a", "\"i64\" is not a safetensors dtype");
	expect_header_fail("{\"a\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
			   "another dtype's size", "tensor a", "needs 2 x 8");
	check_other_dtype();
	expect_header_fail("{\"a\":{\"dtype\":\"BF16\",\"shape\":[3,2],\"data_offsets\":[0,10]}}",
			   10, "shape/size mismatch", "tensor a", "hold 10 bytes");
	expect_header_fail("{\"a\":{\"dtype\":\"F16\",\"shape\":[4294967296,4294967296,4294967296],"
			   "\"data_offsets\":[0,0]}}",
			   0, "shape overflow", "tensor a", "overflows");
	expect_header_fail("{\"a\":{\"dtype\":\"F16\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0,
			   "negative dim", "tensor a", "shape[0]");
	expect_header_fail("{\"a\":{\"dtype\":\"F16\",\"shape\":[1.5],\"data_offsets\":[0,3]}}", 3,
			   "fractional dim", "shape[0]", NULL);
	expect_header_fail("{\"a\":{\"dtype\":\"F16\",\"shape\":[1,1,1,1,1,1,1,1,1],"
			   "\"data_offsets\":[0,2]}}",
			   2, "too many dims", "9 dimensions", NULL);
	expect_header_fail("{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]},"
			   "\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[2,4]}}",
			   4, "duplicate", "appears twice", NULL);
	expect_header_fail("{\"a\":{\"shape\":[1],\"data_offsets\":[0,2]}}", 2, "no dtype",
			   "missing \"dtype\"", NULL);
	expect_header_fail("{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0]}}", 2,
			   "one offset", "data_offsets is not", NULL);
	expect_header_fail("{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2],"
			   "\"extra\":1}}",
			   2, "extra key", "unexpected", NULL);
	expect_header_fail("{\"a\":[1,2]}", 0, "entry not an object", "tensor a", NULL);
	expect_header_fail("{\"__metadata__\":{\"format\":7}}", 0, "metadata value", "__metadata__",
			   NULL);
	expect_header_fail("{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}", 2,
			   "unterminated JSON", "not valid JSON", NULL);
	expect_header_fail("{}xx", 0, "trailing bytes", "after its JSON object", NULL);
	/* a raw newline inside a name: the format's own readers (serde_json, Python's json)
	 * refuse it */
	expect_header_fail("{\"a\nb\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}}", 2,
			   "raw newline in a name",
			   "control character 0x0a inside a string at byte 11", NULL);
	expect_header_fail("[1]", 0, "not an object", "start with '{'", NULL);
	/* a NUL inside a string: cJSON would cut the name there ("a") */
	for (int k = 0; k < 2; k++) {
		static const char in_name[] = "{\"a\0b\":{\"dtype\":\"F16\",\"shape\":[1],"
					      "\"data_offsets\":[0,2]}}";
		static const char in_meta[] = "{\"__metadata__\":{\"x\":\"y\0\"},\"a\":{\"dtype\":"
					      "\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}}";
		const char *t = k ? in_meta : in_name;
		size_t tl = (k ? sizeof(in_meta) : sizeof(in_name)) - 1;
		unsigned char nb[8 + sizeof(in_meta) + 2] = {0};

		nb[0] = (unsigned char)tl;
		memcpy(nb + 8, t, tl);
		write_bytes(nb, 8 + tl + 2);
		expect_fail(ZINF_EFORMAT, k ? "NUL in a metadata value" : "NUL in a name",
			    "control character 0x00 inside a string", NULL);
	}
	{ /* a NUL inside the header's length */
		static const char t[] =
			"{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}}\0  ";
		unsigned char nb[8 + sizeof(t) + 2] = {0};

		nb[0] = (unsigned char)(sizeof(t) - 1);
		memcpy(nb + 8, t, sizeof(t) - 1);
		write_bytes(nb, 8 + sizeof(t) - 1 + 2);
		expect_fail(ZINF_EFORMAT, "header with NUL", "after its JSON object", NULL);
	}
	/* Space padding after the object is valid (the format pads headers this way). */
	{
		const char *t =
			"{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}}      ";

		write_file(t, strlen(t), 2);
	}
	T_CHECK(open_and_read_all() == 1, "space-padded header refused");
	/* Holes between tensors are tolerated; trailing data after the last tensor too. */
	expect_header_fail("{\"a\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[0,4]}}", 4,
			   "scalar with 4 bytes", "hold 4 bytes", NULL);

	/* A file that shrinks after open gives a short-read error, not garbage. */
	{
		struct zinf_st_reader *r;
		float x[12];

		write_bytes(good, len);
		T_CHECK_RC(zinf_st_reader_create(&r));
		T_CHECK_RC(zinf_st_reader_open(r, path));
		T_CHECK(truncate(path, (off_t)(len - 10)) == 0, "truncate");
		T_CHECK(zinf_st_reader_read(r, zinf_st_reader_find(r, "x"), x, ZINF_ST_F32) ==
				ZINF_EFORMAT,
			"read of a shrunk file");
		T_CHECK(strstr(zinf_st_reader_last_error(r), "short read"), "msg: %s",
			zinf_st_reader_last_error(r));
		zinf_st_reader_destroy(r);
	}
	free(good);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(dir);
	free(path);
	return T_EXIT_PASS;
}

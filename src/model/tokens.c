/*
 * Token files (llm.c format, or bytes of plain text; one file or the shards a glob
 * pattern names, read as one stream) and the window rule that turns a
 * micro-batch index into token windows, sequential or in a seeded permutation
 * (see tokens.h and docs/formats.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokens.h"
#include "zinf/error.h"
#include "zinf/log.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token files are little-endian");

/* One file of the data; the data is its shards' tokens in order. */
struct token_shard {
	char *path;
	uint64_t data_begin; /* byte offset of its token 0 */
	uint64_t n_tokens;
	uint64_t first; /* index of its token 0 in the data */
	/* the file as opened first: a reopen must find the same one */
	dev_t dev;
	ino_t ino;
	uint64_t size;
	struct timespec mtime;
};

/* st is the file sh was when the data was opened: the same inode, size and modification
 * time (a shard replaced, grown, cut or written since is not read). */
static bool same_file(const struct token_shard *sh, const struct stat *st)
{
	return st->st_dev == sh->dev && st->st_ino == sh->ino &&
	       (uint64_t)st->st_size == sh->size && st->st_mtim.tv_sec == sh->mtime.tv_sec &&
	       st->st_mtim.tv_nsec == sh->mtime.tv_nsec;
}

struct zinf_token_file {
	char *path; /* as given: a file or a pattern */
	struct token_shard *shards;
	size_t n_shards;
	int fd;	    /* open on shards[cur], or -1 */
	size_t cur; /* (one descriptor at a time: data sets of thousands of shards exist) */
	enum zinf_token_format format;
	int token_bytes;
	uint64_t n_tokens;
	char last_error[512];
};

__attribute__((format(printf, 4, 0))) static int
fail_at(struct zinf_token_file *tf, const char *path, int code, const char *fmt, va_list ap)
{
	char msg[400];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	snprintf(tf->last_error, sizeof(tf->last_error), "%s: %s", path ? path : "tokens", msg);
	zinf_logf(ZINF_LOG_DEBUG, "%s", tf->last_error);
	return code;
}

__attribute__((format(printf, 3, 4))) static int tf_fail(struct zinf_token_file *tf, int code,
							 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	code = fail_at(tf, tf->path, code, fmt, ap);
	va_end(ap);
	return code;
}

/* A failure in one shard: the message names that file. */
__attribute__((format(printf, 4, 5))) static int
shard_fail(struct zinf_token_file *tf, const struct token_shard *sh, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	code = fail_at(tf, sh->path, code, fmt, ap);
	va_end(ap);
	return code;
}

int zinf_token_file_create(struct zinf_token_file **out)
{
	struct zinf_token_file *tf = calloc(1, sizeof(*tf));

	*out = NULL;
	if (!tf)
		return -ENOMEM;
	tf->fd = -1;
	*out = tf;
	return 0;
}

static void close_all(struct zinf_token_file *tf)
{
	if (tf->fd >= 0)
		close(tf->fd);
	tf->fd = -1;
	for (size_t i = 0; i < tf->n_shards; i++)
		free(tf->shards[i].path);
	free(tf->shards);
	tf->shards = NULL;
	tf->n_shards = 0;
	tf->n_tokens = 0;
	free(tf->path);
	tf->path = NULL;
}

void zinf_token_file_destroy(struct zinf_token_file *tf)
{
	if (!tf)
		return;
	close_all(tf);
	free(tf);
}

const char *zinf_token_file_last_error(const struct zinf_token_file *tf)
{
	return tf ? tf->last_error : "";
}

uint64_t zinf_token_file_count(const struct zinf_token_file *tf)
{
	return tf->n_tokens;
}

int zinf_token_file_token_bytes(const struct zinf_token_file *tf)
{
	return tf->token_bytes;
}

size_t zinf_token_file_shards(const struct zinf_token_file *tf)
{
	return tf->n_shards;
}

const char *zinf_token_file_shard_path(const struct zinf_token_file *tf, size_t i)
{
	return i < tf->n_shards ? tf->shards[i].path : NULL;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void zinf_token_paths_free(char **paths, size_t n)
{
	for (size_t i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
}

bool zinf_token_spec_is_pattern(const char *spec)
{
	struct stat st;

	return strpbrk(spec, "*?[") && stat(spec, &st) != 0;
}

int zinf_token_paths(const char *spec, char ***out, size_t *n_out, char *err, size_t errlen)
{
	glob_t g;
	char **paths;
	int rc;

	*out = NULL;
	*n_out = 0;
	if (!zinf_token_spec_is_pattern(spec)) {
		paths = calloc(1, sizeof(*paths));
		if (!paths || !(paths[0] = strdup(spec))) {
			free(paths);
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		*out = paths;
		*n_out = 1;
		return 0;
	}
	rc = glob(spec, GLOB_NOSORT, NULL, &g);
	if (rc)
		globfree(&g); /* (nothing to keep) */
	if (rc == GLOB_NOMATCH) {
		snprintf(err, errlen,
			 "no file matches this pattern (expected a token file, or a glob pattern "
			 "naming its shards)");
		return -ENOENT;
	}
	if (rc) {
		snprintf(err, errlen, "%s",
			 rc == GLOB_NOSPACE ? "out of memory"
					    : "a directory of the pattern cannot be read");
		return rc == GLOB_NOSPACE ? -ENOMEM : -EIO;
	}
	paths = calloc(g.gl_pathc, sizeof(*paths));
	for (size_t i = 0; paths && i < g.gl_pathc; i++)
		if (!(paths[i] = strdup(g.gl_pathv[i]))) {
			zinf_token_paths_free(paths, i);
			paths = NULL;
		}
	if (!paths) {
		globfree(&g);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*n_out = g.gl_pathc;
	globfree(&g);
	/* byte order, whatever the locale: the data's order must not depend on it */
	qsort(paths, *n_out, sizeof(*paths), cmp_path);
	*out = paths;
	return 0;
}

static int pread_full(int fd, void *buf, uint64_t len, uint64_t off)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = pread(fd, p, len > (1u << 30) ? (1u << 30) : (size_t)len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return ZINF_EFORMAT;
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* The header of an llm.c token file: its token width into *width, its count into sh. */
static int open_llmc(struct zinf_token_file *tf, struct token_shard *sh, int fd, int *width)
{
	int32_t h[ZINF_TOKENS_HEADER_INTS];
	uint64_t need;
	int rc;

	if (sh->size < ZINF_TOKENS_HEADER_BYTES)
		return shard_fail(tf, sh, ZINF_EFORMAT,
				  "file is %llu bytes, shorter than the %d-byte token file header",
				  (unsigned long long)sh->size, ZINF_TOKENS_HEADER_BYTES);
	rc = pread_full(fd, h, sizeof(h), 0);
	if (rc < 0)
		return shard_fail(tf, sh, rc, "reading the header: %s", zinf_strerror(rc));
	if (h[0] == ZINF_TOKENS_MAGIC_U16 && h[1] == ZINF_TOKENS_VERSION_U16)
		*width = 2;
	else if (h[0] == ZINF_TOKENS_MAGIC_U32 && h[1] == ZINF_TOKENS_VERSION_U32)
		*width = 4;
	else if (h[0] == ZINF_TOKENS_MAGIC_U16 || h[0] == ZINF_TOKENS_MAGIC_U32)
		return shard_fail(tf, sh, ZINF_EFORMAT,
				  "header version %d does not match magic %d (expected version %d)",
				  h[1], h[0],
				  h[0] == ZINF_TOKENS_MAGIC_U16 ? ZINF_TOKENS_VERSION_U16
								: ZINF_TOKENS_VERSION_U32);
	else
		return shard_fail(
			tf, sh, ZINF_EFORMAT,
			"header magic %d is not a token file's (expected %d for uint16 or %d for uint32 tokens; use the text format for plain text)",
			h[0], ZINF_TOKENS_MAGIC_U16, ZINF_TOKENS_MAGIC_U32);
	if (h[2] <= 0)
		return shard_fail(tf, sh, ZINF_EFORMAT,
				  "header token count %d (expected a positive count)", h[2]);
	sh->n_tokens = (uint64_t)h[2];
	sh->data_begin = ZINF_TOKENS_HEADER_BYTES;
	need = ZINF_TOKENS_HEADER_BYTES + sh->n_tokens * (uint64_t)*width;
	if (sh->size != need)
		return shard_fail(
			tf, sh, ZINF_EFORMAT,
			"file is %llu bytes but its header's %llu tokens of %d bytes need %llu (truncated or wrong count)",
			(unsigned long long)sh->size, (unsigned long long)sh->n_tokens, *width,
			(unsigned long long)need);
	return 0;
}

static const char *width_name(int width)
{
	return width == 1 ? "byte" : width == 2 ? "uint16" : "uint32";
}

/* Open shard i, check it and note what it holds; its descriptor becomes tf's. */
static int open_shard(struct zinf_token_file *tf, size_t i)
{
	struct token_shard *sh = &tf->shards[i];
	struct stat st;
	int fd, width = 1, rc = 0;

	fd = open(sh->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: refused below */
	if (fd < 0)
		return shard_fail(tf, sh, -errno, "cannot open: %s", strerror(errno));
	if (tf->fd >= 0)
		close(tf->fd);
	tf->fd = fd;
	tf->cur = i;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return shard_fail(tf, sh, -EINVAL, "not a regular file");
	sh->dev = st.st_dev;
	sh->ino = st.st_ino;
	sh->size = (uint64_t)st.st_size;
	sh->mtime = st.st_mtim;
	if (tf->format == ZINF_TOKEN_FORMAT_LLMC) {
		rc = open_llmc(tf, sh, fd, &width);
	} else {
		sh->data_begin = 0;
		sh->n_tokens = sh->size;
		if (sh->n_tokens == 0)
			rc = shard_fail(tf, sh, ZINF_EFORMAT,
					"text file is empty (expected bytes)");
	}
	if (rc)
		return rc;
	if (i > 0 && width != tf->token_bytes)
		return shard_fail(tf, sh, ZINF_EFORMAT,
				  "holds %s tokens, but %s holds %s (the shards of one data set "
				  "share one token width)",
				  width_name(width), tf->shards[0].path,
				  width_name(tf->token_bytes));
	tf->token_bytes = width;
	sh->first = tf->n_tokens;
	tf->n_tokens += sh->n_tokens;
	return 0;
}

static int cmp_identity(const void *a, const void *b)
{
	const struct token_shard *x = *(const struct token_shard *const *)a;
	const struct token_shard *y = *(const struct token_shard *const *)b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* One file matched twice (through a link) would be read twice: refused, naming both. */
static int refuse_twice(struct zinf_token_file *tf)
{
	const struct token_shard **by_id;
	int rc = 0;

	if (tf->n_shards < 2)
		return 0;
	by_id = malloc(tf->n_shards * sizeof(*by_id));
	if (!by_id)
		return tf_fail(tf, -ENOMEM, "out of memory for %zu shards", tf->n_shards);
	for (size_t i = 0; i < tf->n_shards; i++)
		by_id[i] = &tf->shards[i];
	qsort(by_id, tf->n_shards, sizeof(*by_id), cmp_identity);
	for (size_t i = 1; i < tf->n_shards && !rc; i++)
		if (!cmp_identity(&by_id[i - 1], &by_id[i])) {
			const struct token_shard *a =
				by_id[i - 1] < by_id[i] ? by_id[i - 1] : by_id[i];
			const struct token_shard *b = a == by_id[i] ? by_id[i - 1] : by_id[i];

			rc = shard_fail(
				tf, b, -EINVAL,
				"is the file %s too (a link): its tokens would be read twice",
				a->path);
		}
	free(by_id);
	return rc;
}

int zinf_token_file_open(struct zinf_token_file *tf, const char *path, enum zinf_token_format fmt)
{
	char **paths = NULL, why[200];
	size_t n = 0;
	int rc = 0;

	if (!tf || !path)
		return -EINVAL;
	if (tf->fd >= 0 || tf->path)
		return tf_fail(tf, ZINF_ESTATE, "this handle already has a file open");
	tf->path = strdup(path);
	if (!tf->path)
		return -ENOMEM;
	tf->last_error[0] = '\0';
	tf->format = fmt;
	tf->token_bytes = 0;
	if (fmt != ZINF_TOKEN_FORMAT_LLMC && fmt != ZINF_TOKEN_FORMAT_TEXT) {
		rc = tf_fail(tf, -EINVAL, "unknown token format %d", (int)fmt);
		goto out_fail;
	}
	rc = zinf_token_paths(path, &paths, &n, why, sizeof(why));
	if (rc) {
		rc = tf_fail(tf, rc, "%s", why);
		goto out_fail;
	}
	tf->shards = calloc(n, sizeof(*tf->shards));
	if (!tf->shards) {
		zinf_token_paths_free(paths, n);
		rc = tf_fail(tf, -ENOMEM, "out of memory for %zu shards", n);
		goto out_fail;
	}
	for (size_t i = 0; i < n; i++)
		tf->shards[i].path = paths[i]; /* (the shards own them now) */
	free(paths);
	tf->n_shards = n;
	for (size_t i = 0; i < n && !rc; i++)
		rc = open_shard(tf, i);
	if (rc == 0)
		rc = refuse_twice(tf);
	if (rc == 0)
		return 0;
out_fail:
	close_all(tf);
	return rc;
}

/* A descriptor on sh again (fd when one is at hand, else opened by its path), checked to
 * be the file the data was opened on: the descriptor, or -errno (the open failed) or
 * ZINF_EFORMAT (it changed since; fd closed), with why in why. */
static int reopen_shard(const struct token_shard *sh, int fd, char *why, size_t len)
{
	struct stat st;
	int rc;

	if (fd < 0)
		fd = open(sh->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, len, "cannot open again: %s", strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !same_file(sh, &st)) {
		close(fd);
		snprintf(why, len, "changed since the run opened it (replaced or written)");
		return ZINF_EFORMAT;
	}
	return fd;
}

/* tf's descriptor on shard i: the file opened first, reopened when another shard was
 * read since (refused if it was replaced or changed size meanwhile). */
static int shard_fd(struct zinf_token_file *tf, size_t i)
{
	const struct token_shard *sh = &tf->shards[i];
	char why[160];
	int fd;

	if (tf->fd >= 0 && tf->cur == i)
		return tf->fd;
	if (tf->fd >= 0)
		close(tf->fd);
	tf->fd = -1;
	fd = reopen_shard(sh, -1, why, sizeof(why));
	if (fd < 0)
		return shard_fail(tf, sh, fd, "%s", why);
	tf->fd = fd;
	tf->cur = i;
	return fd;
}

/* The shard holding token index pos (< N): the last whose first token is <= pos. */
static size_t shard_of(const struct zinf_token_file *tf, uint64_t pos)
{
	size_t lo = 0, hi = tf->n_shards;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (tf->shards[mid].first <= pos)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* "index K" of a token, with its index in the data when that is not K. */
static void index_words(const struct token_shard *sh, uint64_t k, char *out, size_t len)
{
	if (sh->first == 0)
		snprintf(out, len, "index %llu", (unsigned long long)k);
	else
		snprintf(out, len, "index %llu (%llu of the data)", (unsigned long long)k,
			 (unsigned long long)(sh->first + k));
}

/* Read n tokens from index k of shard i (k + n within it) into out, widened in place to
 * int32. */
static int read_run(struct zinf_token_file *tf, size_t i, uint64_t k, uint64_t n,
		    uint64_t vocab_size, int32_t *out)
{
	const struct token_shard *sh = &tf->shards[i];
	uint64_t off = sh->data_begin + k * (uint64_t)tf->token_bytes;
	int fd = shard_fd(tf, i), rc;
	char where[80];

	if (fd < 0)
		return fd;
	rc = pread_full(fd, out, n * (uint64_t)tf->token_bytes, off);
	if (rc == ZINF_EFORMAT)
		return shard_fail(tf, sh, rc,
				  "short read at offset %llu (file shrank since it was opened?)",
				  (unsigned long long)off);
	if (rc < 0)
		return shard_fail(tf, sh, rc, "read at offset %llu: %s", (unsigned long long)off,
				  zinf_strerror(rc));
	/* Widen from the end so no narrow value is overwritten before it is read. */
	for (uint64_t j = n; j-- > 0;) {
		if (tf->token_bytes == 1)
			out[j] = ((const uint8_t *)out)[j];
		else if (tf->token_bytes == 2)
			out[j] = ((const uint16_t *)out)[j];
	}
	for (uint64_t j = 0; j < n; j++) { /* the first bad token is the one named */
		uint32_t v = (uint32_t)out[j];

		if ((!vocab_size || v < vocab_size) && v <= INT32_MAX)
			continue;
		index_words(sh, k + j, where, sizeof(where));
		if (vocab_size && v >= vocab_size)
			return shard_fail(tf, sh, ZINF_EFORMAT,
					  "token %u at %s is >= vocab_size %llu", v, where,
					  (unsigned long long)vocab_size);
		return shard_fail(tf, sh, ZINF_EFORMAT,
				  "token %u at %s is above 2^31 - 1 (the most a token may be)", v,
				  where);
	}
	return 0;
}

int zinf_token_file_read(struct zinf_token_file *tf, uint64_t begin, uint64_t n,
			 uint64_t vocab_size, int32_t *out)
{
	uint64_t pos;

	if (!tf || !tf->n_shards || (n && !out))
		return tf ? tf_fail(tf, -EINVAL, "read: no open file or no buffer") : -EINVAL;
	pos = begin % tf->n_tokens;
	while (n > 0) {
		size_t i = shard_of(tf, pos);
		const struct token_shard *sh = &tf->shards[i];
		uint64_t k = pos - sh->first, left = sh->n_tokens - k, take = left < n ? left : n;
		int rc = read_run(tf, i, k, take, vocab_size, out);

		if (rc < 0)
			return rc;
		out += take;
		n -= take;
		pos = (pos + take) % tf->n_tokens; /* the next shard, or the start */
	}
	return 0;
}

/* ---- the window rule ---------------------------------------------------------------------- */

int zinf_token_windows_init(struct zinf_token_windows *w, uint64_t n_tokens, uint64_t batch,
			    uint64_t seq_len, bool shuffle, uint64_t seed, char *err,
			    size_t err_bytes)
{
	memset(w, 0, sizeof(*w));
	if (batch == 0 || seq_len == 0 || n_tokens < seq_len + 1 || seq_len == UINT64_MAX) {
		if (err_bytes)
			snprintf(
				err, err_bytes,
				"windows: %llu tokens, batch %llu, seq_len %llu (expected batch >= 1, seq_len >= 1 and at least seq_len + 1 tokens)",
				(unsigned long long)n_tokens, (unsigned long long)batch,
				(unsigned long long)seq_len);
		return -EINVAL;
	}
	w->n_tokens = n_tokens;
	w->batch = batch;
	w->seq_len = seq_len;
	w->shuffle = shuffle;
	w->seed = seed;
	w->per_epoch = n_tokens / seq_len + (n_tokens % seq_len != 0);
	if (err_bytes)
		err[0] = '\0';
	return 0;
}

static uint64_t splitmix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define TOKEN_PERM_ROUNDS 6

uint64_t zinf_token_perm(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t index)
{
	uint64_t key = splitmix64(seed ^ splitmix64(epoch ^ 0x5851f42d4c957f2dull));
	int bits = n > 1 ? 64 - __builtin_clzll(n - 1) : 1;
	int half = (bits + 1) / 2; /* the domain is 4^half >= n */
	uint64_t mask = half == 32 ? 0xffffffffull : (1ull << half) - 1;
	uint64_t x = index;

	if (n <= 1 || index >= n)
		return index;
	do { /* cycle walking: stays a bijection of [0, n) */
		uint64_t left = x >> half, right = x & mask;

		for (int round = 0; round < TOKEN_PERM_ROUNDS; round++) {
			uint64_t f =
				splitmix64(key + (uint64_t)round * 0xd1b54a32d192ed03ull + right);
			uint64_t next = left ^ (f & mask);

			left = right;
			right = next;
		}
		x = (left << half) | right;
	} while (x >= n);
	return x;
}

uint64_t zinf_token_windows_start(const struct zinf_token_windows *w, uint64_t micro_batch,
				  uint64_t row)
{
	unsigned __int128 win = (unsigned __int128)micro_batch * w->batch + row;

	if (w->shuffle) {
		uint64_t epoch = (uint64_t)(win / w->per_epoch);
		uint64_t pos = (uint64_t)(win % w->per_epoch);
		uint64_t k = zinf_token_perm(w->seed, epoch, w->per_epoch, pos);

		return (uint64_t)(((unsigned __int128)k * w->seq_len) % w->n_tokens);
	}
	return (uint64_t)((win * w->seq_len) % w->n_tokens);
}

int zinf_token_file_read_batch(struct zinf_token_file *tf, const struct zinf_token_windows *w,
			       uint64_t micro_batch, uint64_t vocab_size, int32_t *inputs,
			       int32_t *targets)
{
	uint64_t T;

	if (!tf || !w || !inputs || !targets)
		return tf ? tf_fail(tf, -EINVAL, "read_batch: NULL argument") : -EINVAL;
	if (w->n_tokens != tf->n_tokens)
		return tf_fail(tf, -EINVAL,
			       "read_batch: windows were set up for %llu tokens, the data has %llu",
			       (unsigned long long)w->n_tokens, (unsigned long long)tf->n_tokens);
	T = w->seq_len;
	for (uint64_t r = 0; r < w->batch; r++) {
		uint64_t s = zinf_token_windows_start(w, micro_batch, r);
		int32_t *in = inputs + r * T, *tg = targets + r * T;
		int rc = zinf_token_file_read(tf, s, T, vocab_size, in);

		if (rc == 0)
			rc = zinf_token_file_read(tf, s + T, 1, vocab_size, tg + T - 1);
		if (rc < 0)
			return rc;
		memcpy(tg, in + 1, (T - 1) * sizeof(*tg));
	}
	return 0;
}

/* ---- the whole data against the vocabulary, beside training ---------------------------- */

#define SCAN_BLOCK_TOKENS (1u << 20)

struct zinf_token_scan {
	const struct zinf_token_file *tf;
	uint64_t vocab;
	pthread_t thread;
	int stop; /* atomic: the owner asks the scan to end */
	int done; /* atomic: the fields below are final; set under mu, cv broadcast */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int rc;	      /* 0 clean, ZINF_EFORMAT found, < 0 a read failed */
	size_t shard; /* where: the shard, and the index in it */
	/* a duplicate of the reader's descriptor and its shard, taken at the start (a single
	 * file is scanned through the file the run opened, whatever its name names now) */
	int held_fd;
	size_t held_shard;
	uint64_t index;
	uint32_t token;
	char why[160];
};

/* Scan shard i on a descriptor of the scan's own (tf's is the reader's). */
static void scan_shard(struct zinf_token_scan *s, size_t i, void *buf)
{
	const struct token_shard *sh = &s->tf->shards[i];
	uint64_t tb = (uint64_t)s->tf->token_bytes;
	int fd = s->held_shard == i ? s->held_fd : -1;

	s->shard = i;
	if (fd >= 0)
		s->held_fd = -1; /* (taken: closed below) */
	fd = reopen_shard(sh, fd, s->why, sizeof(s->why));
	if (fd < 0) { /* (ZINF_EFORMAT is a finding here: a changed file is -EIO) */
		s->rc = fd == ZINF_EFORMAT ? -EIO : fd;
		return;
	}
	for (uint64_t pos = 0;
	     pos < sh->n_tokens && !s->rc && !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE);) {
		uint64_t k = sh->n_tokens - pos < SCAN_BLOCK_TOKENS ? sh->n_tokens - pos
								    : SCAN_BLOCK_TOKENS;
		int rc = pread_full(fd, buf, k * tb, sh->data_begin + pos * tb);

		if (rc) { /* (a short read is -EIO here: ZINF_EFORMAT means a finding) */
			s->rc = rc == ZINF_EFORMAT ? -EIO : rc;
			snprintf(s->why, sizeof(s->why), "read at offset %llu: %s",
				 (unsigned long long)(sh->data_begin + pos * tb),
				 rc == ZINF_EFORMAT ? "short (the file shrank?)"
						    : zinf_strerror(rc));
		}
		for (uint64_t j = 0; j < k && !s->rc; j++) {
			uint32_t v = tb == 1   ? ((const uint8_t *)buf)[j]
				     : tb == 2 ? ((const uint16_t *)buf)[j]
					       : ((const uint32_t *)buf)[j];
			if (v > INT32_MAX || v >= s->vocab) {
				s->rc = ZINF_EFORMAT;
				s->index = pos + j;
				s->token = v;
			}
		}
		pos += k;
	}
	close(fd);
}

static void *scan_main(void *arg)
{
	struct zinf_token_scan *s = arg;
	void *buf = malloc(SCAN_BLOCK_TOKENS * (uint64_t)s->tf->token_bytes);

	if (!buf) {
		s->rc = -ENOMEM;
		snprintf(s->why, sizeof(s->why), "out of memory");
	}
	for (size_t i = 0;
	     buf && i < s->tf->n_shards && !s->rc && !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE);
	     i++)
		scan_shard(s, i, buf);
	free(buf);
	if (s->held_fd >= 0) /* (stopped before its shard) */
		close(s->held_fd);
	s->held_fd = -1;
	pthread_mutex_lock(&s->mu);
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int zinf_token_scan_start(const struct zinf_token_file *tf, uint64_t vocab_size,
			  struct zinf_token_scan **out)
{
	struct zinf_token_scan *s;
	int rc;

	*out = NULL;
	if (!tf || !tf->n_shards)
		return -EINVAL;
	if (tf->token_bytes < 4 && vocab_size >= (1ull << (8 * tf->token_bytes)))
		return 0; /* no token of this width can be out */
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->tf = tf;
	s->vocab = vocab_size;
	s->shard = SIZE_MAX;
	s->held_fd = tf->fd >= 0 ? fcntl(tf->fd, F_DUPFD_CLOEXEC, 0) : -1;
	s->held_shard = tf->cur;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	rc = pthread_create(&s->thread, NULL, scan_main, s);
	if (rc) {
		if (s->held_fd >= 0)
			close(s->held_fd);
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return -rc;
	}
	*out = s;
	return 0;
}

bool zinf_token_scan_done(struct zinf_token_scan *s)
{
	return !s || __atomic_load_n(&s->done, __ATOMIC_ACQUIRE);
}

void zinf_token_scan_wait(struct zinf_token_scan *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	while (!__atomic_load_n(&s->done, __ATOMIC_ACQUIRE))
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

int zinf_token_scan_check(struct zinf_token_scan *s, char *err, size_t errlen)
{
	const struct token_shard *sh;
	char where[80];

	if (!zinf_token_scan_done(s) || !s || !s->rc)
		return 0;
	sh = s->shard < s->tf->n_shards ? &s->tf->shards[s->shard] : NULL;
	if (!sh) /* (failed before its first shard: out of memory) */
		snprintf(err, errlen, "%s: scan: %s", s->tf->path, s->why);
	else if (s->rc == ZINF_EFORMAT) {
		index_words(sh, s->index, where, sizeof(where));
		snprintf(err, errlen,
			 "%s: token %u at %s is >= vocab_size %llu (found by the scan of the "
			 "whole %s)",
			 sh->path, s->token, where,
			 (unsigned long long)(s->vocab < INT32_MAX ? s->vocab : INT32_MAX),
			 s->tf->n_shards > 1 ? "data" : "file");
	} else
		snprintf(err, errlen, "%s: scan: %s", sh->path, s->why);
	return s->rc;
}

void zinf_token_scan_stop(struct zinf_token_scan *s)
{
	if (!s)
		return;
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
	pthread_join(s->thread, NULL);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

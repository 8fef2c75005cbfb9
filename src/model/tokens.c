/*
 * Token files (llm.c format, or bytes of plain text) and the window rule that turns a
 * micro-batch index into token windows, sequential or in a seeded permutation
 * (see tokens.h and docs/formats.md).
 */
#include <errno.h>
#include <fcntl.h>
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

struct zinf_token_file {
	char *path;
	int fd;
	enum zinf_token_format format;
	int token_bytes;
	uint64_t data_begin; /* byte offset of token 0 */
	uint64_t n_tokens;
	char last_error[512];
};

__attribute__((format(printf, 3, 4))) static int tf_fail(struct zinf_token_file *tf, int code,
							 const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(tf->last_error, sizeof(tf->last_error), "%s: %s", tf->path ? tf->path : "tokens",
		 msg);
	zinf_logf(ZINF_LOG_DEBUG, "%s", tf->last_error);
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

void zinf_token_file_destroy(struct zinf_token_file *tf)
{
	if (!tf)
		return;
	if (tf->fd >= 0)
		close(tf->fd);
	free(tf->path);
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

static int open_llmc(struct zinf_token_file *tf, uint64_t size)
{
	int32_t h[ZINF_TOKENS_HEADER_INTS];
	uint64_t need;
	int rc;

	if (size < ZINF_TOKENS_HEADER_BYTES)
		return tf_fail(tf, ZINF_EFORMAT,
			       "file is %llu bytes, shorter than the %d-byte token file header",
			       (unsigned long long)size, ZINF_TOKENS_HEADER_BYTES);
	rc = pread_full(tf->fd, h, sizeof(h), 0);
	if (rc < 0)
		return tf_fail(tf, rc, "reading the header: %s", zinf_strerror(rc));
	if (h[0] == ZINF_TOKENS_MAGIC_U16 && h[1] == ZINF_TOKENS_VERSION_U16)
		tf->token_bytes = 2;
	else if (h[0] == ZINF_TOKENS_MAGIC_U32 && h[1] == ZINF_TOKENS_VERSION_U32)
		tf->token_bytes = 4;
	else if (h[0] == ZINF_TOKENS_MAGIC_U16 || h[0] == ZINF_TOKENS_MAGIC_U32)
		return tf_fail(tf, ZINF_EFORMAT,
			       "header version %d does not match magic %d (expected version %d)",
			       h[1], h[0],
			       h[0] == ZINF_TOKENS_MAGIC_U16 ? ZINF_TOKENS_VERSION_U16
							     : ZINF_TOKENS_VERSION_U32);
	else
		return tf_fail(
			tf, ZINF_EFORMAT,
			"header magic %d is not a token file's (expected %d for uint16 or %d for uint32 tokens; use the text format for plain text)",
			h[0], ZINF_TOKENS_MAGIC_U16, ZINF_TOKENS_MAGIC_U32);
	if (h[2] <= 0)
		return tf_fail(tf, ZINF_EFORMAT,
			       "header token count %d (expected a positive count)", h[2]);
	tf->n_tokens = (uint64_t)h[2];
	tf->data_begin = ZINF_TOKENS_HEADER_BYTES;
	need = ZINF_TOKENS_HEADER_BYTES + tf->n_tokens * (uint64_t)tf->token_bytes;
	if (size != need)
		return tf_fail(
			tf, ZINF_EFORMAT,
			"file is %llu bytes but its header's %llu tokens of %d bytes need %llu (truncated or wrong count)",
			(unsigned long long)size, (unsigned long long)tf->n_tokens, tf->token_bytes,
			(unsigned long long)need);
	return 0;
}

int zinf_token_file_open(struct zinf_token_file *tf, const char *path, enum zinf_token_format fmt)
{
	struct stat st;
	int rc = 0;

	if (!tf || !path)
		return -EINVAL;
	if (tf->fd >= 0 || tf->path)
		return tf_fail(tf, ZINF_ESTATE, "this handle already has a file open");
	tf->path = strdup(path);
	if (!tf->path)
		return -ENOMEM;
	tf->last_error[0] = '\0';
	tf->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: refused below */
	if (tf->fd < 0) {
		rc = tf_fail(tf, -errno, "cannot open: %s", strerror(errno));
		goto out_fail;
	}
	if (fstat(tf->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = tf_fail(tf, -EINVAL, "not a regular file");
		goto out_fail;
	}
	tf->format = fmt;
	if (fmt == ZINF_TOKEN_FORMAT_LLMC) {
		rc = open_llmc(tf, (uint64_t)st.st_size);
	} else if (fmt == ZINF_TOKEN_FORMAT_TEXT) {
		tf->token_bytes = 1;
		tf->data_begin = 0;
		tf->n_tokens = (uint64_t)st.st_size;
		if (tf->n_tokens == 0)
			rc = tf_fail(tf, ZINF_EFORMAT, "text file is empty (expected bytes)");
	} else {
		rc = tf_fail(tf, -EINVAL, "unknown token format %d", (int)fmt);
	}
	if (rc == 0)
		return 0;
out_fail:
	if (tf->fd >= 0)
		close(tf->fd);
	tf->fd = -1;
	free(tf->path);
	tf->path = NULL;
	tf->n_tokens = 0;
	return rc;
}

/* Read n tokens at index pos (pos + n <= N) into out, widened in place to int32. */
static int read_run(struct zinf_token_file *tf, uint64_t pos, uint64_t n, uint64_t vocab_size,
		    int32_t *out)
{
	uint64_t off = tf->data_begin + pos * (uint64_t)tf->token_bytes;
	int rc = pread_full(tf->fd, out, n * (uint64_t)tf->token_bytes, off);

	if (rc == ZINF_EFORMAT)
		return tf_fail(tf, rc,
			       "short read at offset %llu (file shrank since it was opened?)",
			       (unsigned long long)off);
	if (rc < 0)
		return tf_fail(tf, rc, "read at offset %llu: %s", (unsigned long long)off,
			       zinf_strerror(rc));
	/* Widen from the end so no narrow value is overwritten before it is read. */
	for (uint64_t k = n; k-- > 0;) {
		uint32_t v;

		if (tf->token_bytes == 1)
			v = ((const uint8_t *)out)[k];
		else if (tf->token_bytes == 2)
			v = ((const uint16_t *)out)[k];
		else
			v = ((const uint32_t *)out)[k];
		out[k] = (int32_t)v;
		if (vocab_size && v >= vocab_size)
			return tf_fail(
				tf, ZINF_EFORMAT, "token %u at index %llu is >= vocab_size %llu", v,
				(unsigned long long)(pos + k), (unsigned long long)vocab_size);
		if (v > INT32_MAX)
			return tf_fail(tf, ZINF_EFORMAT,
				       "token %u at index %llu is above 2^31 - 1 (the most a token "
				       "may be)",
				       v, (unsigned long long)(pos + k));
	}
	return 0;
}

int zinf_token_file_read(struct zinf_token_file *tf, uint64_t begin, uint64_t n,
			 uint64_t vocab_size, int32_t *out)
{
	uint64_t pos;

	if (!tf || tf->fd < 0 || (n && !out))
		return tf ? tf_fail(tf, -EINVAL, "read: no open file or no buffer") : -EINVAL;
	pos = begin % tf->n_tokens;
	while (n > 0) {
		uint64_t k = tf->n_tokens - pos < n ? tf->n_tokens - pos : n;
		int rc = read_run(tf, pos, k, vocab_size, out);

		if (rc < 0)
			return rc;
		out += k;
		n -= k;
		pos = 0; /* wrap to the start */
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
			       "read_batch: windows were set up for %llu tokens, the file has %llu",
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

/* ---- the whole file against the vocabulary, beside training ---------------------------- */

#define SCAN_BLOCK_TOKENS (1u << 20)

struct zinf_token_scan {
	const struct zinf_token_file *tf;
	uint64_t vocab;
	pthread_t thread;
	int stop; /* atomic: the owner asks the scan to end */
	int done; /* atomic: the fields below are final; set under mu, cv broadcast */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int rc; /* 0 clean, ZINF_EFORMAT found, < 0 a read failed */
	uint64_t index;
	uint32_t token;
	char why[160];
};

static void *scan_main(void *arg)
{
	struct zinf_token_scan *s = arg;
	const struct zinf_token_file *tf = s->tf;
	uint64_t tb = (uint64_t)tf->token_bytes;
	void *buf = malloc(SCAN_BLOCK_TOKENS * tb);

	if (!buf)
		s->rc = -ENOMEM;
	for (uint64_t pos = 0;
	     buf && pos < tf->n_tokens && !s->rc && !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE);) {
		uint64_t k = tf->n_tokens - pos < SCAN_BLOCK_TOKENS ? tf->n_tokens - pos
								    : SCAN_BLOCK_TOKENS;
		int rc = pread_full(tf->fd, buf, k * tb, tf->data_begin + pos * tb);

		if (rc) { /* (a short read is -EIO here: ZINF_EFORMAT means a finding) */
			s->rc = rc == ZINF_EFORMAT ? -EIO : rc;
			snprintf(s->why, sizeof(s->why), "read at offset %llu: %s",
				 (unsigned long long)(tf->data_begin + pos * tb),
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
	free(buf);
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
	if (!tf || tf->fd < 0)
		return -EINVAL;
	if (tf->token_bytes < 4 && vocab_size >= (1ull << (8 * tf->token_bytes)))
		return 0; /* no token of this width can be out */
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->tf = tf;
	s->vocab = vocab_size;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	rc = pthread_create(&s->thread, NULL, scan_main, s);
	if (rc) {
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
	if (!zinf_token_scan_done(s) || !s || !s->rc)
		return 0;
	if (s->rc == ZINF_EFORMAT)
		snprintf(err, errlen,
			 "%s: token %u at index %llu is >= vocab_size %llu (found by the scan of "
			 "the whole file)",
			 s->tf->path, s->token, (unsigned long long)s->index,
			 (unsigned long long)(s->vocab < INT32_MAX ? s->vocab : INT32_MAX));
	else
		snprintf(err, errlen, "%s: scan: %s", s->tf->path, s->why);
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

/*
 * Training data: token files and the rule that maps (micro-batch, row) to a window.
 *
 * Files: llm.c's token format (a header of 256 little-endian int32: [0] magic, [1]
 * version, [2] token count; magic 20240520 version 1 holds uint16 tokens, magic 20240801
 * version 7 uint32 tokens; the file is exactly 1024 + count x token bytes), or plain text
 * read as bytes (one token per byte, 0..255, for byte-level models). Tokens are read on
 * demand with pread: a file of any size costs no memory. The data may be one file or
 * shards: the files a glob pattern names, in byte order of their names, read as one
 * stream of tokens (their concatenation; a window may span two shards). One descriptor
 * is open at a time, so the number of shards is not bounded by the limit on open files;
 * a read may move it to another shard, so a handle has one reader at a time (beside
 * which a scan may run).
 *
 * Windows (docs/formats.md): with N tokens, sequence length T and B rows per
 * micro-batch, row r of micro-batch i (i counts from 0 over the whole run) is window
 * w = i*B + r. Without shuffling it takes tokens [w*T, w*T + T + 1), every index taken
 * modulo N (wrapping at the end); inputs are the first T, targets the last T. With
 * shuffling the same windows are visited per epoch in a seeded order: an epoch is
 * W = ceil(N / T) windows (window k starts at token k*T, wrapping like above), and window
 * w reads window k = zinf_token_perm(seed, w / W, W, w % W).
 */
#ifndef ZINF_MODEL_TOKENS_H
#define ZINF_MODEL_TOKENS_H

#include <stdbool.h>
#include <stdint.h>

#define ZINF_TOKENS_MAGIC_U16 20240520
#define ZINF_TOKENS_VERSION_U16 1
#define ZINF_TOKENS_MAGIC_U32 20240801
#define ZINF_TOKENS_VERSION_U32 7
#define ZINF_TOKENS_HEADER_INTS 256
#define ZINF_TOKENS_HEADER_BYTES (ZINF_TOKENS_HEADER_INTS * 4)

enum zinf_token_format {
	ZINF_TOKEN_FORMAT_LLMC = 0, /* llm.c header; uint16 or uint32 per the header */
	ZINF_TOKEN_FORMAT_TEXT = 1, /* raw bytes, one token each */
};

struct zinf_token_file;

/* Create an unopened handle. Returns 0 or -ENOMEM. Free with zinf_token_file_destroy(). */
int zinf_token_file_create(struct zinf_token_file **out);
/* Close and free tf. NULL is a no-op. */
void zinf_token_file_destroy(struct zinf_token_file *tf);

/* The files spec names (zinf_token_paths below), opened as fmt and checked: each one's
 * header magic and version, its count against its size, at least one token, one token
 * width for all, and no file twice (a link). Returns 0, ZINF_EFORMAT or -errno (-ENOENT: a pattern that
 * matches nothing); the message ("PATH: what is wrong (what was expected)", PATH the
 * shard at fault) is in zinf_token_file_last_error(). One open per handle. */
int zinf_token_file_open(struct zinf_token_file *tf, const char *spec, enum zinf_token_format fmt);

/* Tokens of the whole data (every shard). */
uint64_t zinf_token_file_count(const struct zinf_token_file *tf);
/* 1 (text), 2 (uint16) or 4 (uint32). */
int zinf_token_file_token_bytes(const struct zinf_token_file *tf);
/* The shards in their order (1 for a single file), and shard i's path (NULL past them). */
size_t zinf_token_file_shards(const struct zinf_token_file *tf);
const char *zinf_token_file_shard_path(const struct zinf_token_file *tf, size_t i);

/* The files of a data spec: spec itself when a file by that name exists or it holds no
 * glob character (* ? [), else the paths glob(3) matches, sorted by byte order (whatever
 * the locale; no ~ or brace expansion). Returns 0 with *paths (free with zinf_token_paths_free) and *n >= 1, or
 * -ENOENT (nothing matches), -ENOMEM, -EIO with why in err (without the spec). */
int zinf_token_paths(const char *spec, char ***paths, size_t *n, char *err, size_t errlen);
/* spec is a pattern by that rule: it holds a glob character and no file has its name. */
bool zinf_token_spec_is_pattern(const char *spec);
void zinf_token_paths_free(char **paths, size_t n);

/* Read n tokens starting at index begin of the data, indices taken modulo the count
 * (wrapping), into out. When vocab_size is not 0, a token >= vocab_size is an error
 * naming its shard and index. Returns 0, ZINF_EFORMAT (bad token, or a shard that shrank
 * or was replaced since the open), -errno. Allocates nothing. */
int zinf_token_file_read(struct zinf_token_file *tf, uint64_t begin, uint64_t n,
			 uint64_t vocab_size, int32_t *out);

/* One line: the last error ("" if none). */
const char *zinf_token_file_last_error(const struct zinf_token_file *tf);

/* ---- the window rule ---------------------------------------------------------------------- */

struct zinf_token_windows {
	uint64_t n_tokens; /* N */
	uint64_t batch;	   /* B rows per micro-batch */
	uint64_t seq_len;  /* T */
	bool shuffle;
	uint64_t seed;
	uint64_t per_epoch; /* W = ceil(N / T): windows of one shuffled epoch */
};

/* Set up the rule. Needs B >= 1, T >= 1 and N >= T + 1 (a window never repeats a token).
 * Returns 0 or -EINVAL with a one-line reason in err (err_bytes, may be 0). */
int zinf_token_windows_init(struct zinf_token_windows *w, uint64_t n_tokens, uint64_t batch,
			    uint64_t seq_len, bool shuffle, uint64_t seed, char *err,
			    size_t err_bytes);

/* First token index (in [0, N)) of row r of micro-batch i. */
uint64_t zinf_token_windows_start(const struct zinf_token_windows *w, uint64_t micro_batch,
				  uint64_t row);

/* The seeded permutation of [0, n): index -> its image. A bijection for every (seed,
 * epoch, n >= 1), computed without tables (a keyed Feistel network over the smallest
 * power of four >= n, with cycle walking; docs/formats.md), so a machine with any word
 * size or thread count gets the same order. */
uint64_t zinf_token_perm(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t index);

/* Fill micro-batch i: inputs and targets are B x T int32 (row-major), row r from
 * zinf_token_windows_start(w, i, r). vocab_size as in zinf_token_file_read. Allocates nothing. */
int zinf_token_file_read_batch(struct zinf_token_file *tf, const struct zinf_token_windows *w,
			       uint64_t micro_batch, uint64_t vocab_size, int32_t *inputs,
			       int32_t *targets);

/* ---- the whole data against the vocabulary, beside training ---------------------------- */

/* A batch's tokens are checked as they are read, so a token outside the vocabulary deep
 * in a large file would stop a run only when (hours later) its batch comes. A scan reads
 * every shard on a thread of its own meanwhile (descriptors of its own; nothing of tf is
 * written, so zinf_token_file_read may run beside it), and the trainer asks it between
 * steps. */
struct zinf_token_scan;

/* Start scanning tf for a token >= vocab_size (or beyond INT32_MAX). *out is NULL, and
 * nothing runs, when no token of the file's width can be out (text's bytes under a
 * vocabulary of 256 or more). Returns 0, -ENOMEM or a thread error. */
int zinf_token_scan_start(const struct zinf_token_file *tf, uint64_t vocab_size,
			  struct zinf_token_scan **out);
/* 0 while nothing is found (running, or done); ZINF_EFORMAT with the first such token
 * and its index in err, or the negative code of a failed read with why. s NULL: 0. */
int zinf_token_scan_check(struct zinf_token_scan *s, char *err, size_t errlen);
/* Whether the scan has read the whole file or stopped at its finding. */
bool zinf_token_scan_done(struct zinf_token_scan *s);
/* Until it is done. */
void zinf_token_scan_wait(struct zinf_token_scan *s);
/* Stop it where it is, join the thread and free. NULL: nothing. */
void zinf_token_scan_stop(struct zinf_token_scan *s);

#endif /* ZINF_MODEL_TOKENS_H */

/*
 * zinf train --resume: read a checkpoint's zinf_state.json (its seal first), check every
 * field and every file it lists, check the resumed run against it, and load the
 * optimizer state module by module into the engine. The format: train_state.c and
 * docs/formats.md.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "hf_config.h"
#include "safetensors.h"
#include "train_state_internal.h"
#include "zinf/config.h" /* zinf_json_raw_control, zinf_strtod */
#include "zinf/crc32c.h"
#include "zinf/error.h"

/* Exactly 8 hex digits (a CRC32C as the state writes it). */
static bool parse_hex8(const char *text, uint32_t *out)
{
	uint32_t v = 0;

	if (strlen(text) != 8)
		return false;
	for (int i = 0; i < 8; i++) {
		char c = text[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return false;
		v = v << 4 | (uint32_t)d;
	}
	*out = v;
	return true;
}

/* Decimal digits only, within 64 bits. */
static bool parse_u64(const char *text, uint64_t *out)
{
	char *end;

	if (!*text || strlen(text) > 20 || strspn(text, "0123456789") != strlen(text))
		return false;
	errno = 0;
	*out = strtoull(text, &end, 10);
	return errno == 0 && !*end;
}

/* A whole string that strtod reads in the C locale (as zinf_format_double writes). */
static bool parse_double(const char *text, double *out)
{
	char *end;

	if (!*text || strlen(text) > 32 || isspace((unsigned char)text[0]))
		return false;
	errno = 0;
	*out = zinf_strtod(text, &end);
	return errno == 0 && !*end;
}

/* ---- reading and checking ----------------------------------------------------------------- */

struct reading {
	const char *path;	/* of zinf_state.json, for messages */
	struct train_state *st; /* being read (train_state_read), else NULL */
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 3, 4))) static int bad(struct reading *rd, int code, const char *fmt,
						     ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(rd->err, rd->errlen, "%s: %s", rd->path, what);
	return code;
}

/* A whole number in [lo, hi] at key of o (dotted into parent for messages). */
static int get_int(struct reading *rd, const cJSON *o, const char *parent, const char *key,
		   double lo, double hi, double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
	    v->valuedouble > hi)
		return bad(rd, ZINF_EFORMAT,
			   "%s%s%s: missing or not a whole number in [%.0f, %.0f]", parent,
			   *parent ? "." : "", key, lo, hi);
	*out = v->valuedouble;
	return 0;
}

#define MAX_U53 9007199254740992.0

/* The optimizer's progress, consistent with the step: every trainer step is one optimizer
 * step or one skipped, and with fp16 one loss scaler update (none without). */
static int read_progress(struct reading *rd, const cJSON *root, bool fp16, uint64_t step,
			 struct zinf_engine_progress *p)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
	const cJSON *scale = cJSON_GetObjectItemCaseSensitive(o, "loss_scale");
	double v[5] = {0}; /* gcc -O2 cannot see get_int fills each when it returns 0 */
	int rc;

	if (!cJSON_IsObject(o))
		return bad(rd, ZINF_EFORMAT, "optimizer: missing or not an object");
	rc = get_int(rd, o, "optimizer", "optimizer_steps", 0, MAX_U53, &v[0]);
	if (!rc)
		rc = get_int(rd, o, "optimizer", "skipped_steps", 0, MAX_U53, &v[1]);
	if (!rc)
		rc = get_int(rd, o, "optimizer", "scaler_iteration", 0, MAX_U53, &v[2]);
	if (!rc)
		rc = get_int(rd, o, "optimizer", "scaler_last_overflow_iter", -1, MAX_U53, &v[3]);
	if (!rc)
		rc = get_int(rd, o, "optimizer", "scaler_hysteresis_left", 0, 4294967295.0, &v[4]);
	if (rc)
		return rc;
	if (!cJSON_IsString(scale) || !parse_double(scale->valuestring, &p->loss_scale) ||
	    !(p->loss_scale > 0) || isinf(p->loss_scale))
		return bad(rd, ZINF_EFORMAT,
			   "optimizer.loss_scale: missing or not a number > 0 in a string");
	p->steps = (uint64_t)v[0];
	p->skipped = (uint64_t)v[1];
	p->scaler_iteration = (uint64_t)v[2];
	p->scaler_last_overflow_iter = (int64_t)v[3];
	p->scaler_hysteresis_left = (uint32_t)v[4];
	if (p->steps + p->skipped != step)
		return bad(rd, ZINF_EFORMAT,
			   "optimizer: %" PRIu64 " steps and %" PRIu64
			   " skipped do not add up to step %" PRIu64,
			   p->steps, p->skipped, step);
	if (p->scaler_iteration != (fp16 ? step : 0))
		return bad(rd, ZINF_EFORMAT,
			   "optimizer.scaler_iteration: %" PRIu64 " (expected %" PRIu64 " %s)",
			   p->scaler_iteration, fp16 ? step : 0,
			   fp16 ? "with fp16: one update a step" : "without fp16");
	return 0;
}

static int read_data(struct reading *rd, const cJSON *root, struct train_state *st)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "data");
	const cJSON *shuffle = cJSON_GetObjectItemCaseSensitive(o, "shuffle");
	const cJSON *sample = cJSON_GetObjectItemCaseSensitive(o, "sample_crc32c");
	const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed");
	double v[2] = {0};
	int rc;

	if (!cJSON_IsObject(o))
		return bad(rd, ZINF_EFORMAT, "data: missing or not an object");
	rc = get_int(rd, o, "data", "tokens", 0, MAX_U53, &v[0]);
	if (!rc)
		rc = get_int(rd, o, "data", "seq_len", 1, MAX_U53, &v[1]);
	if (rc)
		return rc;
	if (!cJSON_IsString(seed) || !parse_u64(seed->valuestring, &st->seed))
		return bad(rd, ZINF_EFORMAT,
			   "data.seed: missing or not a whole number in a string");
	if (!cJSON_IsBool(shuffle))
		return bad(rd, ZINF_EFORMAT, "data.shuffle: missing or not true/false");
	if (!cJSON_IsString(sample) || !parse_hex8(sample->valuestring, &st->data_crc))
		return bad(rd, ZINF_EFORMAT, "data.sample_crc32c: missing or not 8 hex digits");
	st->data_tokens = (uint64_t)v[0];
	st->seq_len = (uint64_t)v[1];
	st->shuffle = cJSON_IsTrue(shuffle);
	return 0;
}

static bool plain_name(const char *name)
{
	if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		if (*c == '/' || *c < 0x20 || *c == 0x7f)
			return false;
	return true;
}

/* A file of the optimizer state's safetensors, not its index: optimizer*.safetensors
 * (optimizer.safetensors or optimizer-0000K-of-0000N.safetensors as zinf writes them; any
 * other such name is refused anyway, the list having to be the files the resume reads). */
static bool optimizer_shard(const char *name)
{
	size_t n = strlen(name), tail = strlen(".safetensors");

	return !strncmp(name, "optimizer", 9) && n > tail &&
	       !strcmp(name + n - tail, ".safetensors");
}

/* Entry i of files: a plain file name in dir whose size is the listed one, and its
 * CRC32C, except an optimizer state shard's: that is taken from what the load reads
 * (check_read_files), so a resume reads the state once. */
static int check_file(struct reading *rd, const char *dir, const cJSON *f, int i)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
	const cJSON *crc = cJSON_GetObjectItemCaseSensitive(f, "crc32c");
	char path[4200], ebuf[512], parent[32];
	uint32_t want_crc, got_crc;
	uint64_t size;
	double bytes = 0;
	bool deferred;
	int rc;

	if (!cJSON_IsString(name) || !plain_name(name->valuestring))
		return bad(rd, ZINF_EFORMAT, "files[%d].name: missing or not a file name", i);
	snprintf(parent, sizeof(parent), "files[%d]", i);
	rc = get_int(rd, f, parent, "bytes", 0, MAX_U53, &bytes);
	if (rc)
		return rc;
	if (!cJSON_IsString(crc) || !parse_hex8(crc->valuestring, &want_crc))
		return bad(rd, ZINF_EFORMAT, "files[%d].crc32c: missing or not 8 hex digits", i);
	snprintf(path, sizeof(path), "%s/%s", dir, name->valuestring);
	deferred = optimizer_shard(name->valuestring);
	rc = train_state_file_crc(path, &size, deferred ? NULL : &got_crc, ebuf, sizeof(ebuf));
	if (rc)
		return bad(rd, rc, "%s", ebuf);
	if (size != (uint64_t)bytes)
		return bad(rd, ZINF_EFORMAT,
			   "%s: %" PRIu64 " bytes, the state lists %.0f (changed or truncated)",
			   name->valuestring, size, bytes);
	if (deferred) /* its CRC32C: from what train_state_load reads */
		return train_file_sums_push(&rd->st->deferred, name->valuestring, size, want_crc)
			       ? bad(rd, -ENOMEM, "out of memory")
			       : 0;
	if (got_crc != want_crc)
		return bad(rd, ZINF_EFORMAT,
			   "%s: CRC32C %08" PRIx32 ", the state lists %08" PRIx32
			   " (the file is damaged)",
			   name->valuestring, got_crc, want_crc);
	return 0;
}

/* Every file listed exists with its size and CRC32C, and the list is exactly the files a
 * resume reads (config.json, the model's and the optimizer state's safetensors), each
 * once. */
static int check_files(struct reading *rd, const char *dir, const cJSON *root)
{
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files"), *f, *want;
	char ebuf[512];
	cJSON *expected;
	int i = 0, rc = 0;

	if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) > STATE_MAX_FILES)
		return bad(rd, ZINF_EFORMAT, "files: missing or not an array of at most %d",
			   STATE_MAX_FILES);
	cJSON_ArrayForEach(f, files)
	{
		rc = check_file(rd, dir, f, i++);
		if (rc)
			return rc;
	}
	expected = train_state_checkpoint_files(dir, &rc, ebuf, sizeof(ebuf));
	if (!expected)
		return bad(rd, rc, "%s", ebuf);
	cJSON_ArrayForEach(want, expected)
	{
		int listed = 0;
		cJSON_ArrayForEach(f, files)
		{
			const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
			listed += !strcmp(name->valuestring, want->valuestring);
		}
		if (listed != 1) {
			rc = bad(rd, ZINF_EFORMAT, "files: %s is listed %d times (expected once)",
				 want->valuestring, listed);
			break;
		}
	}
	if (!rc && cJSON_GetArraySize(files) != cJSON_GetArraySize(expected))
		rc = bad(
			rd, ZINF_EFORMAT,
			"files: %d listed, the checkpoint has %d (config.json, the model's and the "
			"optimizer state's safetensors)",
			cJSON_GetArraySize(files), cJSON_GetArraySize(expected));
	cJSON_Delete(expected);
	return rc;
}

/* The manifest's seal (see MANIFEST_CRC_TAG) matches its bytes. */
static int check_seal(struct reading *rd, const char *text, size_t len)
{
	const char *tag = NULL, *at = text;
	size_t tag_len = sizeof(MANIFEST_CRC_TAG) - 1;
	char hex[9];
	uint32_t want, got;

	while ((at = memmem(at, len - (size_t)(at - text), MANIFEST_CRC_TAG, tag_len))) {
		tag = at; /* the last one */
		at += tag_len;
	}
	if (!tag)
		return bad(rd, ZINF_EFORMAT, "manifest_crc32c: missing (the file is not complete)");
	at = tag + tag_len;
	if (text + len - at < 11 || memcmp(at + 8, "\"\n}", 3) ||
	    (text + len - at != 11 && (text + len - at != 12 || at[11] != '\n')))
		return bad(rd, ZINF_EFORMAT,
			   "manifest_crc32c: not the last member as zinf writes it (changed)");
	memcpy(hex, at, 8);
	hex[8] = 0;
	if (!parse_hex8(hex, &want))
		return bad(rd, ZINF_EFORMAT, "manifest_crc32c: not 8 hex digits");
	got = train_state_manifest_crc(text, (size_t)(tag - text));
	if (got != want)
		return bad(rd, ZINF_EFORMAT,
			   "manifest_crc32c: %08" PRIx32 " listed, the contents give %08" PRIx32
			   " (the file was changed or damaged)",
			   want, got);
	return 0;
}

/* Read the manifest (a regular file, never waited on), check its seal and parse it. */
static int read_json(struct reading *rd, cJSON **out)
{
	int fd = open(rd->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), rc = 0;
	char *text = NULL, dup[256];
	const char *raw;
	struct stat st;
	size_t got = 0;
	ssize_t n;

	*out = NULL;
	if (fd < 0) {
		rc = -errno;
		snprintf(rd->err, rd->errlen,
			 "%s: %s (--resume needs a checkpoint saved with --save-state)", rd->path,
			 zinf_strerror(rc));
		return rc;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		rc = bad(rd, ZINF_EFORMAT, "not a regular file");
		goto out;
	}
	if (st.st_size > STATE_MAX_JSON_BYTES) {
		rc = bad(rd, ZINF_EFORMAT, "%lld bytes: larger than %u", (long long)st.st_size,
			 STATE_MAX_JSON_BYTES);
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		rc = bad(rd, -ENOMEM, "out of memory");
		goto out;
	}
	while (got < (size_t)st.st_size && (n = read(fd, text + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)n;
	if (got != (size_t)st.st_size) {
		rc = bad(rd, -EIO, "cannot read");
		goto out;
	}
	text[got] = 0;
	rc = check_seal(rd, text, got);
	if (rc)
		goto out;
	if (strlen(text) != got) {
		rc = bad(rd, ZINF_EJSON, "NUL byte at byte %zu (expected JSON text)", strlen(text));
		goto out;
	}
	/* the whole file is the object (the seal its last member): nothing after it */
	*out = cJSON_ParseWithOpts(text, NULL, 1);
	if (!*out) {
		rc = bad(rd, ZINF_EJSON, "not valid JSON");
		goto out;
	}
	raw = zinf_json_raw_control(text, got);
	if (raw) {
		rc = bad(rd, ZINF_EJSON,
			 "not valid JSON: a control character 0x%02x inside a string at byte %zu "
			 "(expected it escaped)",
			 (unsigned char)*raw, (size_t)(raw - text));
		cJSON_Delete(*out);
		*out = NULL;
		goto out;
	}
	rc = zinf_json_duplicate_key(*out, dup, sizeof(dup));
	if (rc) {
		rc = rc < 0 ? bad(rd, rc, "out of memory")
			    : bad(rd, ZINF_EFORMAT, "%s: appears twice (expected each key once)",
				  dup);
		cJSON_Delete(*out);
		*out = NULL;
	}
out:
	free(text);
	close(fd);
	return rc;
}

int train_state_read(const char *dir, struct train_state *st, char *err, size_t errlen)
{
	char path[4200];
	struct reading rd = {.path = path, .st = st, .err = err, .errlen = errlen};
	const cJSON *fmt, *numerics, *device;
	cJSON *root;
	double v = 0;
	int rc;

	memset(st, 0, sizeof(*st));
	snprintf(path, sizeof(path), "%s/%s", dir, TRAIN_STATE_FILE);
	rc = read_json(&rd, &root);
	if (rc)
		return rc;
	fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
	if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, STATE_FORMAT) != 0) {
		rc = bad(&rd, ZINF_EFORMAT, "format: missing or not \"%s\"", STATE_FORMAT);
		goto out;
	}
	rc = get_int(&rd, root, "", "version", 1, STATE_VERSION, &v);
	if (!rc)
		rc = get_int(&rd, root, "", "world_size", 1, 1, &v);
	if (!rc)
		rc = get_int(&rd, root, "", "step", 1, MAX_U53, &v);
	if (rc)
		goto out;
	st->step = (uint64_t)v;
	device = cJSON_GetObjectItemCaseSensitive(root, "device");
	if (!cJSON_IsString(device) ||
	    (strcmp(device->valuestring, "host") && strcmp(device->valuestring, "cuda"))) {
		rc = bad(&rd, ZINF_EFORMAT, "device: missing or not \"host\" or \"cuda\"");
		goto out;
	}
	snprintf(st->device, sizeof(st->device), "%s", device->valuestring);
	numerics = cJSON_GetObjectItemCaseSensitive(root, "numerics");
	if (!cJSON_IsObject(numerics)) {
		rc = bad(&rd, ZINF_EFORMAT, "numerics: missing or not an object");
		goto out;
	}
	rc = read_progress(&rd, root,
			   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(numerics, "fp16.enabled")),
			   st->step, &st->progress);
	if (!rc)
		rc = read_data(&rd, root, st);
	if (rc)
		goto out;
	st->numerics = cJSON_Duplicate(numerics, true);
	if (!st->numerics) {
		rc = bad(&rd, -ENOMEM, "out of memory");
		goto out;
	}
	rc = check_files(&rd, dir, root);
out:
	cJSON_Delete(root);
	if (rc)
		train_state_free(st);
	return rc;
}

int train_state_check(const struct train_state *ck, const struct train_state *now, const char *dir,
		      char *err, size_t errlen)
{
	char path[4200];
	struct reading rd = {.path = path, .err = err, .errlen = errlen};
	const cJSON *it;

	snprintf(path, sizeof(path), "%s/%s", dir, TRAIN_STATE_FILE);
	if (ck->seq_len != now->seq_len)
		return bad(&rd, ZINF_ECONFIG,
			   "saved with --seq-len %" PRIu64 ", resumed with %" PRIu64, ck->seq_len,
			   now->seq_len);
	if (ck->seed != now->seed)
		return bad(&rd, ZINF_ECONFIG,
			   "saved with --seed %" PRIu64 ", resumed with %" PRIu64, ck->seed,
			   now->seed);
	if (ck->shuffle != now->shuffle)
		return bad(&rd, ZINF_ECONFIG, "saved with --shuffle %s, resumed with %s",
			   ck->shuffle ? "seeded" : "none", now->shuffle ? "seeded" : "none");
	if (ck->data_tokens != now->data_tokens || ck->data_crc != now->data_crc)
		return bad(&rd, ZINF_ECONFIG,
			   "saved with training data of %" PRIu64
			   " tokens (sample CRC32C %08" PRIx32 "), resumed with %" PRIu64
			   " (%08" PRIx32 "): not the same data",
			   ck->data_tokens, ck->data_crc, now->data_tokens, now->data_crc);
	/* every key of either side, the same value on both */
	for (int side = 0; side < 2; side++) {
		const cJSON *a = side ? now->numerics : ck->numerics;
		const cJSON *b = side ? ck->numerics : now->numerics;
		cJSON_ArrayForEach(it, a)
		{
			const cJSON *o = cJSON_GetObjectItemCaseSensitive(b, it->string);
			const cJSON *was = side ? o : it, *is = side ? it : o;
			char *w, *n;
			int rc;

			if (o && cJSON_Compare(it, o, true))
				continue;
			w = was ? cJSON_PrintUnformatted(was) : NULL;
			n = is ? cJSON_PrintUnformatted(is) : NULL;
			rc = bad(
				&rd, ZINF_ECONFIG,
				"config key %s: %s when saved, %s now (a resume continues the same "
				"run: start a new one from the weights with --model instead)",
				it->string, w ? w : "unset", n ? n : "unset");
			free(w);
			free(n);
			return rc;
		}
	}
	return 0;
}

int train_state_check_device(const struct train_state *ck, struct zinf_engine *e, const char *dir,
			     char *err, size_t errlen)
{
	char path[4200];
	struct reading rd = {.path = path, .err = err, .errlen = errlen};
	const char *now = train_state_device_name(zinf_engine_device_kind(e));

	snprintf(path, sizeof(path), "%s/%s", dir, TRAIN_STATE_FILE);
	if (strcmp(ck->device, now))
		return bad(&rd, ZINF_ECONFIG,
			   "saved on the %s device, resumed on %s (the runtimes compute different "
			   "bits: start a new run from the weights with --model instead)",
			   ck->device, now);
	return 0;
}

/* ---- loading ---------------------------------------------------------------------------------- */

static int open_optimizer(const char *dir, struct zinf_st_reader **out, char *err, size_t errlen)
{
	char entry[96], path[4200];
	int rc = zinf_st_reader_create(out);

	if (rc) {
		snprintf(err, errlen, "%s: out of memory", dir);
		return rc;
	}
	train_state_entry_name(dir, "optimizer", entry, sizeof(entry));
	snprintf(path, sizeof(path), "%s/%s", dir, entry);
	rc = zinf_st_reader_open(*out, path);
	if (rc)
		snprintf(err, errlen, "%s", zinf_st_reader_last_error(*out));
	return rc;
}

/* The optimizer state's files against the sizes and CRC32C the manifest lists for them
 * (deferred by check_file), from what the load read: only what it did not read (the
 * headers) is read now. */
static int check_read_files(struct zinf_st_reader *r, const struct train_state *st, const char *dir,
			    char *err, size_t errlen)
{
	int checked = 0;

	for (int f = 0; f < zinf_st_reader_file_count(r); f++) {
		const char *path = zinf_st_reader_file_path(r, f), *slash = strrchr(path, '/');
		const char *name = slash ? slash + 1 : path;
		const struct train_file_sum *want = train_file_sums_find(&st->deferred, name);
		uint64_t size;
		uint32_t crc;
		int rc;

		if (!want)
			continue;
		rc = zinf_st_reader_file_crc(r, f, &size, &crc);
		if (rc) {
			snprintf(err, errlen, "%s", zinf_st_reader_last_error(r));
			return rc;
		}
		if (size != want->bytes) {
			snprintf(err, errlen,
				 "%s/%s: %s: %" PRIu64 " bytes, the state lists %" PRIu64
				 " (changed or truncated)",
				 dir, TRAIN_STATE_FILE, name, size, want->bytes);
			return ZINF_EFORMAT;
		}
		if (crc != want->crc) {
			snprintf(err, errlen,
				 "%s/%s: %s: CRC32C %08" PRIx32 ", the state lists %08" PRIx32
				 " (the file is damaged)",
				 dir, TRAIN_STATE_FILE, name, crc, want->crc);
			return ZINF_EFORMAT;
		}
		checked++;
	}
	if (checked != st->deferred.n) {
		snprintf(err, errlen, "%s/%s: %d optimizer state files listed, %d read", dir,
			 TRAIN_STATE_FILE, st->deferred.n, checked);
		return ZINF_EFORMAT;
	}
	return 0;
}

/* A module's master, exp_avg and exp_avg_sq tensors in the optimizer state, for
 * fill_state. */
struct state_fill {
	struct zinf_st_reader *r;
	const struct zinf_st_tensor_info *t[ZINF_LLAMA_MAX_PARAMS][3];
};

static int fill_state(void *user, int s, uint64_t first, uint64_t n, void *src, float *m, float *v,
		      char *err, size_t errlen)
{
	struct state_fill *f = user;
	void *dst[3] = {src, m, v};
	int rc = 0;

	for (int k = 0; k < 3 && !rc; k++) {
		rc = zinf_st_reader_read_elems(f->r, f->t[s][k], first, n, dst[k], ZINF_ST_F32);
		if (rc)
			snprintf(err, errlen, "%s", zinf_st_reader_last_error(f->r));
	}
	return rc;
}

int train_state_load(struct train_model *tm, struct zinf_engine *e, const char *dir,
		     const struct train_state *st, char *err, size_t errlen)
{
	struct train_load_batch b = {0};
	struct state_fill f = {0};
	struct zinf_st_reader *r = NULL;
	enum zinf_dtype f32[ZINF_LLAMA_MAX_PARAMS];
	char name[256], why[1024];
	bool opened = false, checked = false;
	int rc, n_parts = 0;

	rc = open_optimizer(dir, &r, err, errlen);
	if (rc)
		goto out;
	opened = true;
	f.r = r;
	for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++)
		f32[s] = ZINF_DTYPE_F32;
	for (int mod = 0; mod < tm->L + 2; mod++)
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++)
			n_parts += tm->param[mod][s] == TRAIN_NO_PARAM ? 0 : 3;
	if (zinf_st_reader_count(r) != n_parts) {
		snprintf(err, errlen, "%s: %d tensors, expected %d (3 per parameter of the model)",
			 zinf_st_reader_path(r), zinf_st_reader_count(r), n_parts);
		rc = ZINF_EFORMAT;
		goto out;
	}
	for (int mod = 0; mod < tm->L + 2 && !rc; mod++) {
		const struct zinf_st_tensor_info *(*t)[3] = f.t;
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
			struct zinf_llama_param_info info;
			if (!train_model_slot(tm, mod, s, &info))
				continue;
			for (int k = 0; k < 3; k++) {
				snprintf(name, sizeof(name), "%s.%s", info.name,
					 train_state_part_name(k));
				t[s][k] = zinf_st_reader_find(r, name);
				if (!t[s][k] || t[s][k]->n_elems != info.elems ||
				    t[s][k]->dtype != ZINF_ST_F32) {
					snprintf(err, errlen,
						 "%s: tensor %s: %s (expected F32, %llu elements)",
						 zinf_st_reader_path(r), name,
						 t[s][k] ? "wrong dtype or size" : "missing",
						 (unsigned long long)info.elems);
					rc = ZINF_EFORMAT;
					goto out;
				}
			}
		}
		rc = train_load_module(tm, e, mod, f32, true, fill_state, &f, &b, err, errlen);
	}
	if (!rc) {
		checked = true;
		rc = check_read_files(r, st, dir, err, errlen);
	}
	if (!rc) {
		rc = zinf_engine_progress_set(e, &st->progress);
		if (rc)
			snprintf(err, errlen, "%s/%s: %s", dir, TRAIN_STATE_FILE,
				 zinf_last_error(e));
	}
out:
	/* A damaged file can read as a malformed one (a flipped byte in a tensor's name:
	 * "missing"): when its CRC32C says it is damaged, say that instead. */
	if (rc == ZINF_EFORMAT && opened && !checked &&
	    check_read_files(r, st, dir, why, sizeof(why)) == ZINF_EFORMAT)
		snprintf(err, errlen, "%s", why);
	zinf_st_reader_destroy(r);
	train_load_batch_free(&b);
	return rc;
}

/*
 * The training state's files: the list of files a checkpoint's resume reads (config.json,
 * the model's and the optimizer state's safetensors, as the reader finds them), their
 * sizes and CRC32C (those a save wrote kept as it wrote them), the data file's sample
 * CRC and the manifest's seal.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "safetensors.h"
#include "tokens.h"
#include "train_state_internal.h"
#include "zinf/crc32c.h"
#include "zinf/error.h"

/* Size and CRC32C of a whole file, read in 1 MiB pieces (with crc NULL: only its size,
 * nothing read). */
int train_state_file_crc(const char *path, uint64_t *size, uint32_t *crc, char *err, size_t errlen)
{
	enum { PIECE = 1u << 20 };
	char *buf = crc ? malloc(PIECE) : NULL;
	/* O_NONBLOCK: a FIFO named in a manifest must not hang the run */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), rc = 0;
	struct stat st;
	ssize_t n;

	*size = 0;
	if (crc)
		*crc = 0;
	if (fd < 0 || (crc && !buf)) {
		rc = fd < 0 ? -errno : -ENOMEM;
		snprintf(err, errlen, "%s: %s", path, zinf_strerror(rc));
		goto out;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		rc = ZINF_EFORMAT;
		snprintf(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	if (!crc) {
		*size = (uint64_t)st.st_size;
		goto out;
	}
	while ((n = read(fd, buf, PIECE)) > 0) {
		*crc = zinf_crc32c(*crc, buf, (size_t)n);
		*size += (uint64_t)n;
	}
	if (n < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: read: %s", path, zinf_strerror(rc));
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

/* ---- what a save wrote ------------------------------------------------------------------- */

int train_file_sums_push(struct train_file_sums *fs, const char *name, uint64_t bytes, uint32_t crc)
{
	if (fs->n == fs->cap) {
		int cap = fs->cap ? 2 * fs->cap : 8;
		struct train_file_sum *v = realloc(fs->v, (size_t)cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		fs->v = v;
		fs->cap = cap;
	}
	fs->v[fs->n].name = strdup(name);
	if (!fs->v[fs->n].name)
		return -ENOMEM;
	fs->v[fs->n].bytes = bytes;
	fs->v[fs->n].crc = crc;
	fs->n++;
	return 0;
}

int train_file_sums_add(struct train_file_sums *fs, const struct zinf_st_writer *w)
{
	const char *name;
	uint64_t bytes;
	uint32_t crc;
	int rc = 0;

	for (int i = 0; !rc && (name = zinf_st_writer_file(w, i, &bytes, &crc)); i++)
		rc = train_file_sums_push(fs, name, bytes, crc);
	return rc;
}

const struct train_file_sum *train_file_sums_find(const struct train_file_sums *fs,
						  const char *name)
{
	for (int i = 0; fs && i < fs->n; i++)
		if (!strcmp(fs->v[i].name, name))
			return &fs->v[i];
	return NULL;
}

void train_file_sums_free(struct train_file_sums *fs)
{
	for (int i = 0; i < fs->n; i++)
		free(fs->v[i].name);
	free(fs->v);
	memset(fs, 0, sizeof(*fs));
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* PREFIX.safetensors.index.json when dir has it, else PREFIX.safetensors. */
void train_state_entry_name(const char *dir, const char *prefix, char *buf, size_t len)
{
	char path[4200];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s.safetensors.index.json", dir, prefix);
	snprintf(buf, len, "%s.safetensors%s", prefix, stat(path, &st) == 0 ? ".index.json" : "");
}

/* The files of the safetensors checkpoint dir/PREFIX.safetensors(.index.json): the entry
 * and, for an index, the shards it names, appended to names (strings). */
static int list_safetensors(cJSON *names, const char *dir, const char *prefix, char *err,
			    size_t errlen)
{
	struct zinf_st_reader *r = NULL;
	char entry[96], path[4200];
	int rc = zinf_st_reader_create(&r);

	train_state_entry_name(dir, prefix, entry, sizeof(entry));
	snprintf(path, sizeof(path), "%s/%s", dir, entry);
	if (!rc)
		rc = zinf_st_reader_open(r, path);
	if (rc) {
		snprintf(err, errlen, "%s", r ? zinf_st_reader_last_error(r) : "out of memory");
		goto out;
	}
	if (strstr(entry, ".json") && !cJSON_AddItemToArray(names, cJSON_CreateString(entry)))
		rc = -ENOMEM;
	for (int i = 0; !rc && i < zinf_st_reader_file_count(r); i++)
		if (!cJSON_AddItemToArray(
			    names, cJSON_CreateString(base_name(zinf_st_reader_file_path(r, i)))))
			rc = -ENOMEM;
	if (rc == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory for the file list", dir);
out:
	zinf_st_reader_destroy(r);
	return rc;
}

/* Every file of dir's checkpoint a resume reads: config.json, the model's and the
 * optimizer state's safetensors. A new array of names, or NULL with *code and err set. */
cJSON *train_state_checkpoint_files(const char *dir, int *code, char *err, size_t errlen)
{
	cJSON *names = cJSON_CreateArray();
	int rc = names && cJSON_AddItemToArray(names, cJSON_CreateString("config.json")) ? 0
											 : -ENOMEM;

	if (rc)
		snprintf(err, errlen, "%s: out of memory for the file list", dir);
	if (!rc)
		rc = list_safetensors(names, dir, "model", err, errlen);
	if (!rc)
		rc = list_safetensors(names, dir, "optimizer", err, errlen);
	*code = rc;
	if (rc) {
		cJSON_Delete(names);
		return NULL;
	}
	return names;
}

const char *train_state_device_name(enum zinf_engine_device kind)
{
	return kind == ZINF_ENGINE_DEVICE_CUDA ? "cuda" : "host";
}

/* crc extended by the size of the file at path and its first and last sample bytes (the
 * bytes both hold twice, when the file is shorter than two samples; a file of sample
 * bytes or fewer once). */
static int sample_crc(const char *path, uint64_t sample, uint32_t *crc, char *buf, char *err,
		      size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	struct stat st;
	uint64_t size;
	uint8_t le[8];
	ssize_t n;

	if (fd < 0 || fstat(fd, &st)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, zinf_strerror(rc));
		goto out;
	}
	size = (uint64_t)st.st_size;
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(size >> (8 * i));
	*crc = zinf_crc32c(*crc, le, sizeof(le));
	for (int part = 0; part < 2 && !rc; part++) {
		uint64_t off = part ? (size > sample ? size - sample : 0) : 0;
		if (part && size <= sample)
			break;
		n = pread(fd, buf, sample, (off_t)off);
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: read: %s", path, zinf_strerror(rc));
			break;
		}
		*crc = zinf_crc32c(*crc, buf, (size_t)n);
	}
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

int train_state_data_crc(const struct zinf_token_file *tf, uint32_t *out, char *err, size_t errlen)
{
	size_t n = zinf_token_file_shards(tf);
	/* a file's first and last MiB; a shard's 64 KiB (a thousand shards: 125 MiB read) */
	uint64_t sample = n > 1 ? 64u << 10 : 1u << 20;
	char *buf = malloc(sample);
	uint32_t crc = 0;
	int rc = 0;

	if (!buf) {
		snprintf(err, errlen, "%s: out of memory", zinf_token_file_shard_path(tf, 0));
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && !rc; i++)
		rc = sample_crc(zinf_token_file_shard_path(tf, i), sample, &crc, buf, err, errlen);
	*out = crc;
	free(buf);
	return rc;
}

uint32_t train_state_manifest_crc(const char *body, size_t len)
{
	return zinf_crc32c(zinf_crc32c(0, body, len), "\n}", 2);
}

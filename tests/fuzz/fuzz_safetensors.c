/* libFuzzer harness: safetensors reader. The input is written to a file in a scratch directory
 * and opened with zinf_st_reader_open; every tensor is then read (whole, in pieces and
 * converted) and each file's CRC32C from the reader is compared with one taken directly.
 * Input "IDX\n<index json>\n--SHARD--\n<shard 0>\n--SHARD--\n<shard 1>..." opens an index
 * (model.safetensors.index.json) with shards shard-0.safetensors, shard-1.safetensors, ... */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fuzz_util.h"
#include "safetensors.h"
#include "zinf/crc32c.h"
#include "zinf/log.h"

#define SEP "\n--SHARD--\n"
#define MAX_SHARDS 4

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	zinf_log_set_level(ZINF_LOG_ERROR);
	fuzz_scratch();
	return 0;
}

static void put(const char *name, const uint8_t *p, size_t n)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", fuzz_dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		abort();
	if (n && write(fd, p, n) != (ssize_t)n)
		abort();
	close(fd);
}

static uint32_t crc_of(const char *path, uint64_t *size)
{
	uint8_t buf[65536];
	uint32_t c = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY);

	*size = 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		c = zinf_crc32c(c, buf, (size_t)n);
		*size += (uint64_t)n;
	}
	close(fd);
	return c;
}

static void *memfind(const uint8_t *h, size_t hn, const char *n)
{
	return memmem(h, hn, n, strlen(n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zinf_st_reader *r;
	char entry[256];
	bool index = size >= 4 && memcmp(data, "IDX\n", 4) == 0;
	size_t index_len = 0;

	if (index) {
		const uint8_t *p = data + 4, *end = data + size;
		int k = -1;
		for (;;) {
			const uint8_t *s = memfind(p, (size_t)(end - p), SEP);
			const uint8_t *stop = s ? s : end;
			char name[64];
			if (k < 0)
				snprintf(name, sizeof(name), "model.safetensors.index.json");
			else
				snprintf(name, sizeof(name), "shard-%d.safetensors", k);
			put(name, p, (size_t)(stop - p));
			if (k < 0)
				index_len = (size_t)(stop - p);
			k++;
			if (!s || k >= MAX_SHARDS)
				break;
			p = s + strlen(SEP);
		}
		for (; k < MAX_SHARDS; k++) { /* stale shards of an earlier input */
			char path[256];
			snprintf(path, sizeof(path), "%s/shard-%d.safetensors", fuzz_dir, k);
			unlink(path);
		}
		snprintf(entry, sizeof(entry), "%s/model.safetensors.index.json", fuzz_dir);
	} else {
		put("model.safetensors", data, size);
		snprintf(entry, sizeof(entry), "%s/model.safetensors", fuzz_dir);
	}
	if (zinf_st_reader_create(&r))
		return 0;
	if (zinf_st_reader_open(r, entry) == 0) {
		int n = zinf_st_reader_count(r);
		if (index && !fuzz_one_json_object(data + 4, index_len)) {
			fprintf(stderr, "an index that is not one JSON object opened\n");
			abort();
		}
		for (int i = 1; i < n; i++) /* names are unique (the header's rule) */
			for (int j = 0; j < i; j++)
				if (!strcmp(zinf_st_reader_tensor(r, i)->name,
					    zinf_st_reader_tensor(r, j)->name)) {
					fprintf(stderr, "tensor %s opened twice\n",
						zinf_st_reader_tensor(r, i)->name);
					abort();
				}
		for (int i = 0; i < n; i++) {
			const struct zinf_st_tensor_info *t = zinf_st_reader_tensor(r, i);
			const struct zinf_st_tensor_info *f = zinf_st_reader_find(r, t->name);
			if (!f || strcmp(f->name, t->name) != 0) {
				fprintf(stderr, "find(%s) does not find it\n", t->name);
				abort();
			}
			if (t->nbytes > (1u << 22))
				continue;
			float *dst = malloc(t->n_elems * 4 + 4);
			/* alternate: whole tensor in its own dtype or converted, or pieces */
			switch (i % 3) {
			case 0:
				zinf_st_reader_read(r, t, dst, t->dtype);
				break;
			case 1:
				zinf_st_reader_read(r, t, dst, ZINF_ST_F32);
				break;
			case 2:
				if (t->n_elems > 1) {
					zinf_st_reader_read_elems(r, t, 1, t->n_elems - 1, dst,
								  ZINF_ST_BF16);
					zinf_st_reader_read_elems(r, t, 0, 1, dst, ZINF_ST_F16);
				}
				break;
			}
			/* out of range must be refused */
			if (zinf_st_reader_read_elems(r, t, t->n_elems, 1, dst, ZINF_ST_F32) == 0) {
				fprintf(stderr, "read past the end accepted\n");
				abort();
			}
			free(dst);
		}
		for (int f = 0; f < zinf_st_reader_file_count(r); f++) {
			uint64_t sz, sz2;
			uint32_t crc, crc2;
			if (zinf_st_reader_file_crc(r, f, &sz, &crc) == 0) {
				crc2 = crc_of(zinf_st_reader_file_path(r, f), &sz2);
				if (sz != sz2 || crc != crc2) {
					fprintf(stderr, "file_crc %08x/%llu, direct %08x/%llu\n",
						crc, (unsigned long long)sz, crc2,
						(unsigned long long)sz2);
					abort();
				}
			}
		}
	}
	zinf_st_reader_destroy(r);
	return 0;
}

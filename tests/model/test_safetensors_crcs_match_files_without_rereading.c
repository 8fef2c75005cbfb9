/*
 * The safetensors writer reports, for every file it wrote (each shard, then the index
 * when sharded), the size and CRC32C of the file on disk, without reading it back: with
 * tensors of mixed dtypes (laid out wider first, so the file order is not the
 * declaration order), pieces converted from another dtype, tensors written in reverse
 * declaration order, empty tensors, one file and several shards. Nothing is reported
 * before the finish, and nothing past the last file.
 *
 * The reader gives each file's CRC32C after reads that covered every tensor, some, or
 * none, whole or in pieces, in order or not, converted or not: always the file's, the
 * same whatever was read before.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "test.h"
#include "zinf/crc32c.h"

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* Size and CRC32C of dir/name, read. */
static void file_crc(const char *dir, const char *name, uint64_t *bytes, uint32_t *crc)
{
	char path[1024], buf[1 << 16];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	T_CHECK(f, "%s: cannot open", path);
	*bytes = 0;
	*crc = 0;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		*crc = zinf_crc32c(*crc, buf, n);
		*bytes += n;
	}
	fclose(f);
}

/* Read the checkpoint in dir as how says (0 nothing, 1 every tensor whole, 2 every other
 * tensor in pieces of 100 elements converted to bf16, 3 every tensor's second half and
 * then its whole), then check every file's CRC32C from the reader against the file. */
static void check_reader(const char *dir, int how)
{
	struct zinf_st_reader *r;
	float *dst = malloc(65536 * sizeof(float));
	uint64_t bytes, got_bytes;
	uint32_t crc, got_crc;

	T_CHECK(dst && zinf_st_reader_create(&r) == 0, "reader");
	T_CHECK(zinf_st_reader_open(r, dir) == 0, "open %s: %s", dir, zinf_st_reader_last_error(r));
	for (int i = 0; i < zinf_st_reader_count(r); i++) {
		const struct zinf_st_tensor_info *t = zinf_st_reader_tensor(r, i);
		if (how == 1 || (how == 3 && t->n_elems > 1)) {
			if (how == 3)
				T_CHECK(zinf_st_reader_read_elems(r, t, t->n_elems / 2,
								  t->n_elems - t->n_elems / 2, dst,
								  ZINF_ST_F32) == 0,
					"read half %s", t->name);
			T_CHECK(zinf_st_reader_read(r, t, dst, ZINF_ST_F32) == 0, "read %s: %s",
				t->name, zinf_st_reader_last_error(r));
		}
		if (how == 2 && i % 2 == 0)
			for (uint64_t at = 0; at < t->n_elems; at += 100) {
				uint64_t n = t->n_elems - at < 100 ? t->n_elems - at : 100;
				T_CHECK(zinf_st_reader_read_elems(r, t, at, n, dst, ZINF_ST_BF16) ==
						0,
					"read %s at %llu", t->name, (unsigned long long)at);
			}
	}
	for (int f = 0; f < zinf_st_reader_file_count(r); f++) {
		const char *path = zinf_st_reader_file_path(r, f), *base = strrchr(path, '/');
		T_CHECK(zinf_st_reader_file_crc(r, f, &bytes, &crc) == 0, "file_crc %s: %s", path,
			zinf_st_reader_last_error(r));
		file_crc(dir, base + 1, &got_bytes, &got_crc);
		T_CHECK(bytes == got_bytes && crc == got_crc,
			"reader, reads %d: %s: %llu bytes crc %08x, the file has %llu bytes crc %08x",
			how, base + 1, (unsigned long long)bytes, crc,
			(unsigned long long)got_bytes, got_crc);
	}
	T_CHECK(zinf_st_reader_file_crc(r, zinf_st_reader_file_count(r), &bytes, &crc) == -EINVAL,
		"a checksum of a file past the last");
	zinf_st_reader_destroy(r);
	free(dst);
}

static void write_case(uint64_t max_shard_bytes, int want_files)
{
	enum { N_T = 7 };
	static const enum zinf_st_dtype dt[N_T] = {ZINF_ST_BF16, ZINF_ST_F32,  ZINF_ST_F16,
						   ZINF_ST_F32,	 ZINF_ST_BF16, ZINF_ST_F32,
						   ZINF_ST_F16};
	static const uint64_t elems[N_T] = {1000, 333, 0, 4097, 3, 65536, 777};
	struct zinf_st_writer_opts wo;
	struct zinf_st_writer *w;
	char dir[] = "/tmp/zinf_st_crc_XXXXXX", name[32];
	float *src = malloc(65536 * sizeof(float));
	uint64_t bytes, got_bytes;
	uint32_t crc, got_crc;
	int i;

	T_CHECK(src && mkdtemp(dir), "setup");
	for (i = 0; i < 65536; i++)
		src[i] = (float)i * 0.37f - 100.0f;
	zinf_st_writer_opts_init(&wo);
	wo.max_shard_bytes = max_shard_bytes;
	T_CHECK(zinf_st_writer_create(&w, dir, &wo) == 0, "create");
	for (i = 0; i < N_T; i++) {
		uint64_t shape[1] = {elems[i]};
		snprintf(name, sizeof(name), "t%d", i);
		T_CHECK(zinf_st_writer_add(w, name, dt[i], 1, shape) == i, "add %s: %s", name,
			zinf_st_writer_last_error(w));
	}
	for (i = N_T - 1; i >= 0; i--) /* from f32 sources, in pieces of 1000 */
		for (uint64_t at = 0; at < elems[i]; at += 1000) {
			uint64_t n = elems[i] - at < 1000 ? elems[i] - at : 1000;
			T_CHECK(zinf_st_writer_write(w, i, at, n, src + at, ZINF_ST_F32) == 0,
				"write t%d: %s", i, zinf_st_writer_last_error(w));
		}
	T_CHECK(!zinf_st_writer_file(w, 0, &bytes, &crc), "a file reported before the finish");
	T_CHECK(zinf_st_writer_finish(w) == 0, "finish: %s", zinf_st_writer_last_error(w));
	for (i = 0;; i++) {
		const char *f = zinf_st_writer_file(w, i, &bytes, &crc);
		if (!f)
			break;
		file_crc(dir, f, &got_bytes, &got_crc);
		printf("%s: %llu bytes, crc %08x (read: %llu, %08x)\n", f,
		       (unsigned long long)bytes, crc, (unsigned long long)got_bytes, got_crc);
		T_CHECK(bytes == got_bytes && crc == got_crc,
			"%s: reported %llu bytes crc %08x, the file has %llu bytes crc %08x", f,
			(unsigned long long)bytes, crc, (unsigned long long)got_bytes, got_crc);
	}
	T_CHECK(i == want_files, "%d files reported, expected %d (%d shards)", i, want_files,
		zinf_st_writer_shard_count(w));
	T_CHECK(!zinf_st_writer_file(w, -1, &bytes, &crc), "a file reported at -1");
	zinf_st_writer_destroy(w);
	for (int how = 0; how < 4; how++)
		check_reader(dir, how);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(src);
}

int main(void)
{
	write_case(0, 1);	 /* one file (the default: no sharding at this size) */
	write_case(100000, 4);	 /* shards of ~100 kB, and the index */
	write_case(4096 * 4, 6); /* five shards (t5 alone in one), and the index */
	return T_EXIT_PASS;
}

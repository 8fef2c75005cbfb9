/*
 * The extent allocator: extents never overlap, are aligned, stay inside their files,
 * reuse freed space (no new files), and a striped extent puts consecutive stripe units
 * on consecutive paths; small extents rotate over the paths.
 */
#include "io_test_util.h"

#define N 64

static void check_no_overlap(struct zinf_io *io, const uint32_t *ids, int n)
{
	for (int a = 0; a < n; a++) {
		struct io_extent *ea = io_extent_get(io, ids[a]);

		T_CHECK(ea != NULL, "extent %u missing", ids[a]);
		for (int pa = 0; pa < ea->n_parts; pa++) {
			const struct io_part *x = &ea->part[pa];

			T_CHECK(x->off % io->align == 0 && x->len % io->align == 0,
				"extent %u part %d not aligned", ids[a], pa);
			T_CHECK(x->off + x->len <= io->files[x->file].size,
				"extent %u part %d past its file", ids[a], pa);
			for (int b = a + 1; b < n; b++) {
				struct io_extent *eb = io_extent_get(io, ids[b]);

				for (int pb = 0; pb < eb->n_parts; pb++) {
					const struct io_part *y = &eb->part[pb];

					T_CHECK(x->file != y->file || x->off + x->len <= y->off ||
							y->off + y->len <= x->off,
						"extents %u and %u overlap", ids[a], ids[b]);
				}
			}
		}
	}
}

int main(void)
{
	char *d0 = t_mkdtemp("/var/tmp"), *d1 = t_mkdtemp("/var/tmp"), *d2 = t_mkdtemp("/var/tmp");
	struct zinf_io_opts o;
	struct zinf_io *io;
	uint32_t ids[N], big, files_before;
	uint64_t S = 64 * 1024;

	T_CHECK(d0 && d1 && d2, "scratch directories");
	zinf_io_opts_init(&o);
	o.block_size = S;
	o.file_size = 1 << 20;
	o.nvme_paths[0] = d0;
	o.nvme_paths[1] = d1;
	o.nvme_paths[2] = d2;
	o.n_paths = 3;
	o.engine = ZINF_IO_ENGINE_PSYNC;
	T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	srand(3);
	for (int i = 0; i < N; i++)
		T_CHECK_RC(zinf_io_extent_alloc(io, 1 + (uint64_t)rand() % (300 * 1024), &ids[i]));
	check_no_overlap(io, ids, N);
	/* free every other one and allocate again: no new files */
	files_before = io->n_files;
	for (int i = 0; i < N; i += 2)
		T_CHECK_RC(zinf_io_extent_free(io, ids[i]));
	for (int i = 0; i < N; i += 2)
		T_CHECK_RC(zinf_io_extent_alloc(io, 1 + (uint64_t)rand() % (100 * 1024), &ids[i]));
	check_no_overlap(io, ids, N);
	T_CHECK(io->n_files == files_before, "reallocation made files: %u -> %u", files_before,
		io->n_files);
	/* free everything: the free lists coalesce back to whole files */
	for (int i = 0; i < N; i++)
		T_CHECK_RC(zinf_io_extent_free(io, ids[i]));
	for (uint32_t f = 0; f < io->n_files; f++)
		T_CHECK(io->files[f].n_free == 1 && io->files[f].free[0].len == io->files[f].size,
			"file %u not coalesced: %d ranges", f, io->files[f].n_free);

	/* striping: unit u of a large extent is on path (first + u) % 3, contiguous there */
	T_CHECK_RC(zinf_io_extent_alloc(io, 10 * S + 4096, &big));
	struct io_extent *e = io_extent_get(io, big);

	T_CHECK(e->n_parts == 3, "striped over %d parts", e->n_parts);
	int first = io->files[e->part[0].file].path;

	for (uint64_t u = 0; u < 11; u++) {
		const char *path;
		uint64_t off;

		T_CHECK_RC(zinf_io_extent_locate(io, big, u * S + 100, &path, &off));
		T_CHECK(strstr(path, o.nvme_paths[(first + u) % 3]) == path,
			"unit %llu on %s, expected path %llu", (unsigned long long)u, path,
			(unsigned long long)((first + u) % 3));
		T_CHECK(off == e->part[u % 3].off + (u / 3) * S + 100, "unit %llu offset %llu",
			(unsigned long long)u, (unsigned long long)off);
	}
	/* small extents rotate their first path */
	{
		uint32_t a, b;

		T_CHECK_RC(zinf_io_extent_alloc(io, 4096, &a));
		T_CHECK_RC(zinf_io_extent_alloc(io, 4096, &b));
		T_CHECK(io->files[io_extent_get(io, a)->part[0].file].path !=
				io->files[io_extent_get(io, b)->part[0].file].path,
			"two small extents on the same path");
	}
	zinf_io_destroy(io);
	T_CHECK(rmdir(d0) == 0 && rmdir(d1) == 0 && rmdir(d2) == 0, "files left after destroy");
	free(d0);
	free(d1);
	free(d2);
	return 0;
}

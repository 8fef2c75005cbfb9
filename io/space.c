/*
 * Space manager: large preallocated data files in each path's run directory (run_dir.c),
 * an extent allocator inside them, and the striping map from extent offsets to files.
 *
 * Invariants: every managed file's free list is sorted and coalesced; every extent part
 * lies inside one file, starts and ends on the handle's alignment; part i of an extent
 * holds stripe units i, i + n_parts, i + 2 n_parts, ... back to back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "io_internal.h"
#include "zinf/config.h" /* zinf_format_bytes */
#include "zinf/error.h"
#include "zinf/log.h"

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* ---- opening files ---------------------------------------------------------------- */

/* Open fd (O_RDWR | extra) on name, trying O_DIRECT first when want_direct; a
 * filesystem that refuses it (EINVAL) gets a buffered fd and *direct = false. */
int io_open_maybe_direct(const char *name, int extra, mode_t mode, bool want_direct, bool *direct)
{
	int fd, err = 0;

	*direct = false;
	if (want_direct) {
		if (io_fault_take(IO_FAULT_NO_DIRECT, 0, &err, NULL)) {
			fd = -1;
			errno = EINVAL;
			/* still create the file so a buffered open finds it */
			if (extra & O_CREAT) {
				int tmp = open(name, O_RDWR | extra, mode);

				if (tmp < 0)
					return -errno;
				close(tmp);
				extra &= ~(O_CREAT | O_EXCL);
			}
		} else {
			fd = open(name, O_RDWR | O_DIRECT | O_CLOEXEC | extra, mode);
		}
		if (fd >= 0) {
			*direct = true;
			return fd;
		}
		if (errno != EINVAL)
			return -errno;
	}
	fd = open(name, O_RDWR | O_CLOEXEC | extra, mode);
	return fd >= 0 ? fd : -errno;
}

/* The direct-I/O alignment a file needs: at least 4096. */
uint64_t io_file_alignment(int fd)
{
	struct statx stx;
	uint64_t align = 4096;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN)) {
		if (stx.stx_dio_mem_align > align)
			align = stx.stx_dio_mem_align;
		if (stx.stx_dio_offset_align > align)
			align = stx.stx_dio_offset_align;
	}
	return align;
}

/* Two paths that are one directory, or one inside another's run directory, would lock
 * the same run directory twice or write into another's (whose teardown then leaves it
 * behind): refused before any is made. Paths that do not resolve are left to
 * io_run_dir_open to report. */
static int paths_apart(struct zinf_io *io)
{
	const char *run = io->opts.run_dir_name;
	char *real[ZINF_IO_MAX_PATHS] = {0};
	int rc = 0;

	for (int i = 0; i < io->n_paths; i++)
		real[i] = realpath(io->paths[i].dir, NULL);
	for (int i = 0; i < io->n_paths && !rc; i++) {
		for (int j = 0; j < io->n_paths && !rc; j++) {
			const char *rest; /* real[i] past real[j] and a slash */

			if (i == j || !real[i] || !real[j])
				continue;
			if (j < i && strcmp(real[i], real[j]) == 0) {
				io_set_error(
					io,
					"%s %s: the directory of %s %s (expected each drive once)",
					io->paths[i].name, io->paths[i].dir, io->paths[j].name,
					io->paths[j].dir);
				rc = -EINVAL;
				continue;
			}
			if (strncmp(real[i], real[j], strlen(real[j])) != 0 ||
			    real[i][strlen(real[j])] != '/')
				continue;
			rest = real[i] + strlen(real[j]) + 1;
			if (strncmp(rest, run, strlen(run)) == 0 &&
			    (rest[strlen(run)] == '/' || !rest[strlen(run)])) {
				io_set_error(
					io,
					"%s %s: inside the run directory %s/%s of %s (expected a directory of its own)",
					io->paths[i].name, io->paths[i].dir, io->paths[j].dir, run,
					io->paths[j].name);
				rc = -EINVAL;
			}
		}
	}
	for (int i = 0; i < io->n_paths; i++)
		free(real[i]);
	return rc;
}

int io_space_init(struct zinf_io *io)
{
	int rc = paths_apart(io);

	if (rc)
		return rc;
	for (int i = 0; i < io->n_paths && !rc; i++)
		rc = io_run_dir_open(io, &io->paths[i]);
	return rc;
}

void io_space_fini(struct zinf_io *io, bool remove)
{
	for (uint32_t i = 0; i < io->n_files; i++) {
		struct io_file *f = &io->files[i];

		if (f->fd >= 0)
			close(f->fd);
		if (remove && f->path < io->n_paths)
			unlink(f->name);
		free(f->name);
		free(f->free);
	}
	io->n_files = 0;
	for (int i = 0; i < io->n_paths; i++)
		io_run_dir_close(&io->paths[i], remove);
	for (int c = 0; c < IO_EXTENT_CHUNKS; c++) {
		free(io->extents[c]);
		io->extents[c] = NULL;
	}
}

/* ---- files ----------------------------------------------------------------------- */

/* Append an open fd to the file table and tell the lanes. Caller holds space_lock. */
static int file_add(struct zinf_io *io, int fd, char *name, uint64_t size, int path, bool direct,
		    uint32_t *idx)
{
	struct io_file *f;
	uint32_t at = io->n_files;

	/* an external file's slot its extent's free closed (path external, no fd): a data
	 * file takes it too, so that a table once full of external files serves again */
	for (uint32_t i = 0; i < io->n_files && at == io->n_files; i++)
		if (io->files[i].path == io->n_paths && io->files[i].fd < 0)
			at = i;
	if (at >= IO_MAX_FILES) {
		io_set_error(io, "%s: too many files open in one handle (%d)", name, IO_MAX_FILES);
		return -EMFILE;
	}
	f = &io->files[at];
	memset(f, 0, sizeof(*f));
	f->fd = fd;
	f->name = name;
	f->size = size;
	f->path = path;
	f->direct = direct;
	*idx = at;
	for (int l = 0; l < io->n_lanes; l++) {
		if (io->ops->file_added)
			io->ops->file_added(&io->lanes[l], at, fd);
	}
	if (at == io->n_files)
		__atomic_store_n(&io->n_files, io->n_files + 1, __ATOMIC_RELEASE);
	return 0;
}

/* Close an external file (zinf_io_extent_open_file) and free its slot for the next:
 * its extent is freed, or was never made. */
static void external_close(struct zinf_io *io, uint32_t idx)
{
	struct io_file *f = &io->files[idx];

	for (int l = 0; l < io->n_lanes; l++) {
		if (io->ops->file_added)
			io->ops->file_added(&io->lanes[l], idx, -1); /* (unregistered) */
	}
	close(f->fd);
	f->fd = -1;
	free(f->name);
	f->name = NULL;
}

static int free_insert(struct io_file *f, int at, uint64_t off, uint64_t len)
{
	if (f->n_free == f->cap_free) {
		int cap = f->cap_free ? 2 * f->cap_free : 16;
		struct io_range *n = realloc(f->free, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		f->free = n;
		f->cap_free = cap;
	}
	memmove(&f->free[at + 1], &f->free[at], (f->n_free - at) * sizeof(*f->free));
	f->free[at] = (struct io_range){off, len};
	f->n_free++;
	return 0;
}

/* fallocate [off, off + len) of fd; 0, or -1 with errno. The fault hook
 * (IO_FAULT_NOSPACE) pretends the file system has short_bytes free. */
static int preallocate(int fd, uint64_t off, uint64_t len)
{
	uint64_t free_bytes;

	if (io_fault_take(IO_FAULT_NOSPACE, 0, NULL, &free_bytes) && len > free_bytes) {
		errno = ENOSPC;
		return -1;
	}
	return fallocate(fd, 0, (off_t)off, (off_t)len);
}

/* Create data.N on path p of at least need bytes, preallocated. Holds space_lock. */
static int file_create(struct zinf_io *io, int p, uint64_t need, uint32_t *idx)
{
	struct io_path *path = &io->paths[p];
	uint64_t size = need > io->opts.file_size ? need : io->opts.file_size;
	char *name = NULL;
	bool direct;
	int fd, rc;

	if (asprintf(&name, "%s/data.%d", path->run_dir, path->n_files) < 0)
		return -ENOMEM;
	fd = io_open_maybe_direct(name, O_CREAT | O_EXCL, 0600, io->opts.direct && path->direct,
				  &direct);
	if (fd < 0) {
		rc = fd;
		io_set_error(io, "nvme path %s: cannot create %s: %s", path->dir, name,
			     strerror(-rc));
		goto out_free;
	}
	path->n_files++;
	for (;;) {
		rc = preallocate(fd, 0, size);
		if (rc == 0 || (errno != ENOSPC && errno != EFBIG) || size == need)
			break;
		/* Less free space than size (a small or nearly full file system), or a
		 * file-size limit below it (ulimit -f): half as much, down to the extent
		 * alone, after dropping what the failed call took; so the files stay few (at
		 * most IO_MAX_FILES) and the space is used. */
		if (ftruncate(fd, 0) != 0)
			break;
		size = (size / 2 + io->align - 1) / io->align * io->align;
		if (size < need)
			size = need;
	}
	if (rc != 0) {
		rc = -errno;
		io_set_error(io, "nvme path %s: cannot preallocate %llu bytes for %s: %s",
			     path->dir, (unsigned long long)size, name, strerror(-rc));
		goto out_close;
	}
	rc = file_add(io, fd, name, size, p, direct, idx);
	if (rc)
		goto out_close;
	path->last_file = (int)*idx; /* (a reused slot need not be the highest) */
	rc = free_insert(&io->files[*idx], 0, 0, size);
	return rc;
out_close:
	close(fd);
	unlink(name);
out_free:
	free(name);
	return rc;
}

/* First fit in file f; returns 0 and the offset, or -ENOSPC. */
static int file_take(struct io_file *f, uint64_t len, uint64_t *off)
{
	for (int i = 0; i < f->n_free; i++) {
		if (f->free[i].len < len)
			continue;
		*off = f->free[i].off;
		f->free[i].off += len;
		f->free[i].len -= len;
		if (f->free[i].len == 0) {
			memmove(&f->free[i], &f->free[i + 1],
				(f->n_free - i - 1) * sizeof(*f->free));
			f->n_free--;
		}
		return 0;
	}
	return -ENOSPC;
}

static int file_give(struct io_file *f, uint64_t off, uint64_t len)
{
	int i = 0;

	while (i < f->n_free && f->free[i].off < off)
		i++;
	if (i > 0 && f->free[i - 1].off + f->free[i - 1].len == off) {
		f->free[i - 1].len += len;
		if (i < f->n_free && off + len == f->free[i].off) {
			f->free[i - 1].len += f->free[i].len;
			memmove(&f->free[i], &f->free[i + 1],
				(f->n_free - i - 1) * sizeof(*f->free));
			f->n_free--;
		}
		return 0;
	}
	if (i < f->n_free && off + len == f->free[i].off) {
		f->free[i].off = off;
		f->free[i].len += len;
		return 0;
	}
	return free_insert(f, i, off, len);
}

/* An extent part of len bytes fits no free range of path p's files: when the last file
 * ends in a free tail, grow that file by what the tail lacks, so that no tail is left
 * behind for good when the next file is made (under space pressure a file is made no
 * larger than what fits, and the tail would be space the run needs). 0 with *idx, or a
 * negative code: -ENOSPC with no tail to grow from (a new file is then made instead). */
static int file_grow(struct zinf_io *io, int p, uint64_t len, uint32_t *idx)
{
	struct io_file *f = NULL;
	uint64_t tail = 0, add;
	int rc;

	if (io->paths[p].last_file >= 0) {
		*idx = (uint32_t)io->paths[p].last_file;
		f = &io->files[*idx];
	}
	if (f && f->n_free && f->free[f->n_free - 1].off + f->free[f->n_free - 1].len == f->size)
		tail = f->free[f->n_free - 1].len;
	if (!tail)
		return -ENOSPC;
	add = round_up(len - tail, io->align);
	if (preallocate(f->fd, f->size, add) != 0) {
		rc = -errno;
		if (ftruncate(f->fd, (off_t)f->size) != 0) /* drop what the call took */
			zinf_logf(ZINF_LOG_WARN, "zinf io: %s: cannot truncate to %llu bytes: %s",
				  f->name, (unsigned long long)f->size, strerror(errno));
		return rc;
	}
	rc = file_give(f, f->size, add);
	if (rc)
		return rc;
	f->size += add;
	return 0;
}

/* Take len bytes on path p: in an existing file, else in the last one grown (from its
 * free tail), else in a new one. Holds space_lock. */
static int path_take(struct zinf_io *io, int p, uint64_t len, struct io_part *part)
{
	uint32_t idx = 0;
	int rc;

	for (uint32_t i = 0; i < io->n_files; i++) {
		if (io->files[i].path == p && file_take(&io->files[i], len, &part->off) == 0) {
			part->file = i;
			part->len = len;
			return 0;
		}
	}
	rc = file_grow(io, p, len, &idx);
	if (rc)
		rc = file_create(io, p, len, &idx);
	if (rc)
		return rc;
	rc = file_take(&io->files[idx], len, &part->off);
	if (rc)
		return rc;
	part->file = idx;
	part->len = len;
	return 0;
}

/* ---- extents --------------------------------------------------------------------- */

struct io_extent *io_extent_get(struct zinf_io *io, uint32_t id)
{
	struct io_extent *chunk;

	if (id >= (uint32_t)IO_EXTENT_CHUNK * IO_EXTENT_CHUNKS)
		return NULL;
	chunk = __atomic_load_n(&io->extents[id / IO_EXTENT_CHUNK], __ATOMIC_ACQUIRE);
	if (!chunk || !chunk[id % IO_EXTENT_CHUNK].used)
		return NULL;
	return &chunk[id % IO_EXTENT_CHUNK];
}

/* A free extent slot; holds space_lock. */
static int extent_slot(struct zinf_io *io, uint32_t *id, struct io_extent **out)
{
	/* ids below free_hint are all in use, so sequential allocation stays O(1) */
	for (uint32_t i = io->free_hint; i < io->n_extents; i++) {
		struct io_extent *e = &io->extents[i / IO_EXTENT_CHUNK][i % IO_EXTENT_CHUNK];

		if (!e->used) {
			io->free_hint = i;
			*id = i;
			*out = e;
			return 0;
		}
	}
	io->free_hint = io->n_extents;
	if (io->n_extents >= (uint32_t)IO_EXTENT_CHUNK * IO_EXTENT_CHUNKS)
		return -ENOSPC;
	uint32_t c = io->n_extents / IO_EXTENT_CHUNK;

	if (!io->extents[c]) {
		struct io_extent *chunk = calloc(IO_EXTENT_CHUNK, sizeof(*chunk));

		if (!chunk)
			return -ENOMEM;
		__atomic_store_n(&io->extents[c], chunk, __ATOMIC_RELEASE);
	}
	*id = io->n_extents++;
	*out = &io->extents[c][*id % IO_EXTENT_CHUNK];
	return 0;
}

static void extent_release_parts(struct zinf_io *io, struct io_extent *e)
{
	for (int i = 0; i < e->n_parts; i++) {
		struct io_file *f = &io->files[e->part[i].file];

		if (f->path < io->n_paths) {
			file_give(f, e->part[i].off, e->part[i].len);
			__atomic_sub_fetch(&io->stats.space_bytes, e->part[i].len,
					   __ATOMIC_RELAXED);
		}
	}
	e->n_parts = 0;
}

/* An extent of len bytes (a multiple of the alignment) is dealt round-robin to paths in
 * stripe units: its number of parts, one per path up to a part a unit. */
static int parts_of(const struct zinf_io *io, uint64_t len)
{
	uint64_t units = (len + io->opts.stripe_unit - 1) / io->opts.stripe_unit;

	return units < (uint64_t)io->n_paths ? (int)units : io->n_paths;
}

/* The bytes part i of such an extent takes. */
static uint64_t part_bytes(const struct zinf_io *io, uint64_t len, int i)
{
	uint64_t S = io->opts.stripe_unit, units = (len + S - 1) / S;
	uint64_t n_parts = (uint64_t)parts_of(io, len);
	uint64_t mine = (units - (uint64_t)i + n_parts - 1) / n_parts; /* units of part i */
	uint64_t last_u = (uint64_t)i + (mine - 1) * n_parts;
	uint64_t last_len = len - last_u * S < S ? len - last_u * S : S;

	if (n_parts == 1)
		return len;
	return round_up((mine - 1) * S + last_len, io->align);
}

uint64_t zinf_io_extent_footprint(const struct zinf_io *io, uint64_t len)
{
	uint64_t total = 0;
	int n_parts;

	if (!io || len == 0 || len > (1ull << 62) || io->n_paths == 0)
		return 0;
	len = round_up(len, io->align);
	n_parts = parts_of(io, len);
	for (int i = 0; i < n_parts; i++)
		total += part_bytes(io, len, i);
	return total;
}

int zinf_io_extent_alloc(struct zinf_io *io, uint64_t len, uint32_t *id)
{
	struct io_extent *e;
	int rc, n_parts, first;

	if (len == 0 || len > (1ull << 62)) {
		io_set_error(io, "extent alloc: invalid length %llu (expected 1 B to 4 EiB)",
			     (unsigned long long)len);
		return -EINVAL;
	}
	if (!id) {
		io_set_error(io, "extent alloc: id is NULL (required)");
		return -EINVAL;
	}
	if (io->n_paths == 0) {
		io_set_error(io, "extent alloc of %llu bytes: no nvme_paths configured",
			     (unsigned long long)len);
		return -EINVAL;
	}
	len = round_up(len, io->align);
	n_parts = parts_of(io, len);
	pthread_mutex_lock(&io->space_lock);
	rc = extent_slot(io, id, &e);
	if (rc) {
		io_set_error(io, "extent alloc of %llu bytes: %s", (unsigned long long)len,
			     strerror(-rc));
		goto out_unlock;
	}
	memset(e, 0, sizeof(*e));
	e->len = len;
	first = io->next_path;
	io->next_path = (io->next_path + 1) % io->n_paths;
	for (int i = 0; i < n_parts; i++) {
		/* its own path; where that is full, another (paths on different file systems
		 * fill unevenly: the space check sees each path's even share) */
		rc = -ENOSPC;
		for (int k = 0; k < io->n_paths && rc == -ENOSPC; k++)
			rc = path_take(io, (first + i + k) % io->n_paths, part_bytes(io, len, i),
				       &e->part[i]);
		if (rc) {
			extent_release_parts(io, e);
			goto out_unlock;
		}
		__atomic_add_fetch(&io->stats.space_bytes, e->part[i].len, __ATOMIC_RELAXED);
		e->n_parts = i + 1;
	}
	e->used = true;
out_unlock:
	pthread_mutex_unlock(&io->space_lock);
	return rc;
}

int zinf_io_extent_free(struct zinf_io *io, uint32_t id)
{
	struct io_extent *e;
	int rc = 0;

	pthread_mutex_lock(&io->space_lock);
	e = io_extent_get(io, id);
	if (!e) {
		io_set_error(io, "extent free: unknown extent %u", id);
		rc = -EINVAL;
	} else if (__atomic_load_n(&e->inflight, __ATOMIC_ACQUIRE) != 0) {
		io_set_error(io, "extent free: extent %u has requests in flight", id);
		rc = ZINF_ESTATE;
	} else {
		if (e->n_parts == 1 && io->files[e->part[0].file].path == io->n_paths)
			external_close(io, e->part[0].file);
		extent_release_parts(io, e);
		e->used = false;
		if (id < io->free_hint)
			io->free_hint = id;
	}
	pthread_mutex_unlock(&io->space_lock);
	return rc;
}

int zinf_io_extent_open_file(struct zinf_io *io, const char *path, uint64_t len, bool create,
			     uint32_t *id)
{
	struct io_extent *e;
	struct stat st;
	uint32_t idx;
	bool direct;
	char *name;
	int fd, rc;

	if (!path || len == 0 || !id) {
		io_set_error(io,
			     "extent open file: %s with length %llu%s (expected a path, a length > "
			     "0 and an id)",
			     path ? path : "(null)", (unsigned long long)len,
			     id ? "" : ", id NULL");
		return -EINVAL;
	}
	name = strdup(path);
	if (!name) {
		io_set_error(io, "extent open file %s: out of memory", path);
		return -ENOMEM;
	}
	fd = io_open_maybe_direct(path, create ? O_CREAT : 0, 0600, io->opts.direct, &direct);
	if (fd >= 0 && direct && io_file_alignment(fd) > io->align) {
		/* The handle's alignment is fixed at create: requests in flight and the bounce
		 * buffers rely on it. A file that wants more is read and written buffered. */
		zinf_logf(ZINF_LOG_WARN,
			  "zinf io: %s wants O_DIRECT I/O aligned to %llu bytes, more than the "
			  "handle's %llu; using buffered I/O there",
			  path, (unsigned long long)io_file_alignment(fd),
			  (unsigned long long)io->align);
		close(fd);
		fd = io_open_maybe_direct(path, 0, 0600, false, &direct);
	}
	if (fd < 0) {
		rc = fd;
		io_set_error(io, "extent open file %s: %s", path, strerror(-rc));
		goto out_free;
	}
	if (io->opts.direct && !direct && !io->warned_direct) {
		zinf_logf(ZINF_LOG_WARN,
			  "zinf io: %s refuses O_DIRECT (tmpfs?); using buffered I/O there", path);
		io->warned_direct = true;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		io_set_error(io, "extent open file %s: cannot stat: %s", path, strerror(-rc));
		goto out_close;
	}
	if ((uint64_t)st.st_size < len) {
		if (!create) {
			rc = -EINVAL;
			io_set_error(io, "extent open file %s: holds %lld bytes, %llu needed", path,
				     (long long)st.st_size, (unsigned long long)len);
			goto out_close;
		}
		if (fallocate(fd, 0, 0, (off_t)len) != 0) {
			rc = -errno;
			io_set_error(io, "extent open file %s: cannot preallocate %llu bytes: %s",
				     path, (unsigned long long)len, strerror(-rc));
			goto out_close;
		}
	}
	pthread_mutex_lock(&io->space_lock);
	rc = file_add(io, fd, name, len, io->n_paths, direct, &idx);
	if (rc) { /* the table is full (file_add said so): fd and name are still ours */
		pthread_mutex_unlock(&io->space_lock);
		goto out_close;
	}
	rc = extent_slot(io, id, &e);
	if (rc == 0) {
		memset(e, 0, sizeof(*e));
		e->len = len;
		e->n_parts = 1;
		e->part[0] = (struct io_part){.file = idx, .off = 0, .len = len};
		e->used = true;
	} else {
		external_close(io, idx); /* fd and name with it */
	}
	pthread_mutex_unlock(&io->space_lock);
	if (rc)
		io_set_error(io, "extent open file %s: %s", path, strerror(-rc));
	return rc; /* on success name belongs to the file table */
out_close:
	close(fd);
out_free:
	free(name);
	return rc;
}

uint64_t zinf_io_extent_len(struct zinf_io *io, uint32_t id)
{
	struct io_extent *e = io_extent_get(io, id);

	return e ? e->len : 0;
}

void io_extent_map(const struct zinf_io *io, const struct io_extent *ext, uint64_t off,
		   uint32_t *file, uint64_t *file_off, uint64_t *max_len)
{
	uint64_t S = io->opts.stripe_unit, u;
	int p;

	if (ext->n_parts == 1) {
		*file = ext->part[0].file;
		*file_off = ext->part[0].off + off;
		*max_len = ext->len - off;
		return;
	}
	u = off / S;
	p = (int)(u % (uint64_t)ext->n_parts);
	*file = ext->part[p].file;
	*file_off = ext->part[p].off + (u / ext->n_parts) * S + off % S;
	*max_len = S - off % S;
}

int zinf_io_extent_locate(struct zinf_io *io, uint32_t id, uint64_t off, const char **path,
			  uint64_t *file_off)
{
	struct io_extent *e = io_extent_get(io, id);
	uint64_t max_len;
	uint32_t file;

	if (!e || off >= e->len)
		return -EINVAL;
	io_extent_map(io, e, off, &file, file_off, &max_len);
	*path = io->files[file].name;
	return 0;
}

int zinf_io_check_space(struct zinf_io *io, uint64_t bytes, uint64_t largest)
{
	int n = io->n_paths;
	uint64_t margin;

	if (bytes > (1ull << 62) || largest > (1ull << 62)) { /* (as an extent's length) */
		io_set_error(io,
			     "check space: %llu bytes, the largest extent %llu (expected at most "
			     "4 EiB each)",
			     (unsigned long long)bytes, (unsigned long long)largest);
		return -EINVAL;
	}
	/* With several paths, a part that fits neither its own path's leftover nor another's
	 * fails although the leftovers add up to it: each path also holds the largest part
	 * (part 0 of the largest extent), and then every part finds room somewhere. */
	margin = n > 1 && largest ? part_bytes(io, round_up(largest, io->align), 0) : 0;

	for (int p = 0; p < n; p++) {
		struct statvfs fs;
		struct stat st, other;
		uint64_t share = 0, free_b, pretend = 0;
		char a[32], b[32], c[32], where[64] = "there";
		int on_fs = 0;
		bool counted = false;

		/* (0 blocks: a file system that does not say, such as an unbounded tmpfs) */
		if (stat(io->paths[p].run_dir, &st) || statvfs(io->paths[p].run_dir, &fs) ||
		    fs.f_blocks == 0)
			continue;
		/* the paths on this file system (once: at the first of them) */
		for (int q = 0; q < n && !counted; q++) {
			if (stat(io->paths[q].run_dir, &other) || other.st_dev != st.st_dev)
				continue;
			counted = q < p;
			on_fs++;
			uint64_t mine = bytes / (uint64_t)n +
					(uint64_t)(q < (int)(bytes % (uint64_t)n)) + margin;

			share = share + mine < share ? UINT64_MAX : share + mine; /* (saturated) */
		}
		/* f_bavail, also for root (whose fallocate may take the reserved blocks): file
		 * systems whose free blocks overstate what can be written (quotas, thin
		 * volumes) are common, and there the check can only be a necessary one */
		free_b = (uint64_t)fs.f_bavail * fs.f_frsize;
		if (!counted && io_fault_take(IO_FAULT_NOSPACE, 0, NULL, &pretend))
			free_b = pretend; /* the test hook's small file system */
		if (counted || share <= free_b)
			continue;
		if (on_fs > 1)
			snprintf(where, sizeof(where), "on its file system (%d of the paths)",
				 on_fs);
		zinf_format_bytes(share, a, sizeof(a));
		zinf_format_bytes(free_b, c, sizeof(c));
		if (strcmp(a, c) == 0) { /* rounded alike: the exact bytes */
			snprintf(a, sizeof(a), "%llu B", (unsigned long long)share);
			snprintf(c, sizeof(c), "%llu B", (unsigned long long)free_b);
		}
		io_set_error(io,
			     "nvme path %s: the run needs at least %s %s (a share of %s striped "
			     "over %d path%s%s), %s free",
			     io->paths[p].dir, a, where, zinf_format_bytes(bytes, b, sizeof(b)), n,
			     n == 1 ? "" : "s", margin ? ", and room for the largest part" : "", c);
		return -ENOSPC;
	}
	return 0;
}

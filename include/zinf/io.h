/*
 * zinf I/O: asynchronous reads and writes of host buffers to extents on NVMe.
 *
 * A handle owns a per-run directory on each NVMe path holding a few large, preallocated
 * files; extents are carved out of them by an allocator (tensors never get a file each)
 * and striped across paths. Requests name (extent, offset, length, buffer); they are
 * split into block_size pieces and run on intra_op_parallelism lanes (one ring and one
 * worker thread each) with up to queue_depth pieces in flight per lane, through one of
 * three backends: io_uring, libaio or a pread/pwrite thread pool. See docs/io.md.
 *
 * Ownership: the caller owns every struct zinf_io_req and its buffer until the request
 * completes. Threading: zinf_io_submit, zinf_io_poll, zinf_io_wait, zinf_io_drain and the
 * extent and stats calls may be called from any thread concurrently; create, destroy,
 * register_buffer and unregister_buffer must not race with any other call on the handle.
 * Completion callbacks run on a lane's worker thread. Error messages are per thread
 * (zinf_io_last_error).
 */
#ifndef ZINF_IO_H
#define ZINF_IO_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZINF_IO_MAX_PATHS 16
#define ZINF_IO_MAX_QUEUE_DEPTH 4096	   /* aio.queue_depth */
#define ZINF_IO_MAX_PARALLELISM 256	   /* aio.intra_op_parallelism */
#define ZINF_IO_MIN_FILE_SIZE (1ull << 20) /* zinf_io_opts.file_size's bounds: 1 MiB */
#define ZINF_IO_MAX_FILE_SIZE (1ull << 44) /* to 16 TiB, ext4's largest file */

enum zinf_io_engine {
	ZINF_IO_ENGINE_AUTO = 0, /* io_uring, else libaio, else psync; logs the choice */
	ZINF_IO_ENGINE_IO_URING,
	ZINF_IO_ENGINE_LIBAIO,
	ZINF_IO_ENGINE_PSYNC,
};

enum zinf_io_checksum {
	ZINF_IO_CHECKSUM_NONE = 0,
	ZINF_IO_CHECKSUM_CRC32C, /* CRC32C per extent, recorded on write, verified on read */
};

/* What the `aio` and `zinf` config blocks say. Fill with zinf_io_opts_init() first. */
struct zinf_io_opts {
	/* aio block (DeepSpeed names and defaults) */
	uint64_t block_size;	       /* piece size of one I/O; 1 MiB */
	uint32_t queue_depth;	       /* pieces in flight per lane; 8 */
	uint32_t intra_op_parallelism; /* lanes (rings + worker threads); 1 */
	bool single_submit;	       /* one submit call per piece, not per batch; false */
	bool overlap_events;	       /* refill a lane as pieces complete; false waits */
				       /* for the whole batch before the next; true */
	/* zinf block */
	enum zinf_io_engine engine;		   /* auto */
	enum zinf_io_checksum checksum;		   /* none */
	const char *nvme_paths[ZINF_IO_MAX_PATHS]; /* directories; strings copied */
	/* what messages call each path (the config key that gave it); NULL: nvme_paths[i];
	 * strings copied */
	const char *path_names[ZINF_IO_MAX_PATHS];
	int n_paths;		  /* 0: only external files (bench) */
	const char *run_dir_name; /* per-run directory under each path; "zinf-run" */
	bool direct;		  /* O_DIRECT; true. tmpfs falls back with one warning */
	bool bounce;		  /* copy unaligned buffers through aligned bounce buffers */
				  /* instead of failing; false */
	uint64_t file_size;	  /* preallocation unit per file, 1 MiB to 16 TiB; 1 GiB */
	uint64_t stripe_unit;	  /* bytes per path before moving to the next; block_size */
	bool sqpoll;		  /* io_uring SQPOLL thread; false */
	bool remove_stale;	  /* remove a stale run directory of a crashed run; false */
};

/* Fill opts with the defaults above. */
void zinf_io_opts_init(struct zinf_io_opts *opts);

struct zinf_io;

/* Create a handle: checks opts, creates each path's run directory (0700) and picks the
 * backend. A run directory left by a crashed run is an error (-EEXIST) unless
 * remove_stale; one in use by a live process is -EBUSY. Returns 0 or a negative code;
 * on error *out is NULL (when out is not NULL: NULL opts or out is -EINVAL) and, when err
 * is not NULL, the message is copied there. */
int zinf_io_create(const struct zinf_io_opts *opts, struct zinf_io **out, char *err,
		   uint64_t err_len);
/* Drain, close and remove the run directories and their files. NULL is a no-op. */
void zinf_io_destroy(struct zinf_io *io);

/* The calling thread's last error on io, as one line (what, path, offset, length): the
 * message of this thread's last failed call, when that call was on io ("" otherwise).
 * Other threads' failures never change it. A request failed on a lane hands its
 * message to the thread that collects it (zinf_io_rw; zinf_io_poll and zinf_io_wait: the
 * last failed one returned); a callback reads req->error instead. Valid until this
 * thread's next failed call on any handle. */
const char *zinf_io_last_error(struct zinf_io *io);
/* Name of the backend in use: "io_uring", "libaio" or "psync" ("none" for NULL). */
const char *zinf_io_engine_name(const struct zinf_io *io);
/* Whether the files opened so far all do O_DIRECT: false when opts.direct is false or a
 * file refused it (tmpfs) and runs buffered. */
bool zinf_io_direct(const struct zinf_io *io);
/* Required alignment (bytes) of buffers, offsets and lengths when O_DIRECT is on. */
uint64_t zinf_io_alignment(const struct zinf_io *io);
/* The checksum the handle keeps (opts.checksum): with crc32c, whole-extent reads are
 * verified and partial ones are not. */
enum zinf_io_checksum zinf_io_checksum_kind(const struct zinf_io *io);
/* Parse "auto", "io_uring", "libaio", "psync". Returns 0 or -EINVAL (also for NULL text
 * or out). */
int zinf_io_parse_engine(const char *text, enum zinf_io_engine *out);

/* ---- extents ------------------------------------------------------------------- */

/* Allocate an extent of len bytes (rounded up to the alignment) striped over the paths.
 * Files grow by file_size (fallocate'd) as needed, or by the extent alone where a whole
 * file_size does not fit the file system; ENOSPC names the path. */
int zinf_io_extent_alloc(struct zinf_io *io, uint64_t len, uint32_t *id);
/* Return an extent's space (an external file's: the file is closed, and its place in the
 * handle's table of 1024 files serves the next). No request may be in flight on it. */
int zinf_io_extent_free(struct zinf_io *io, uint32_t id);
/* An extent backed by a whole existing or new file outside the run directories
 * (benchmarks, raw files). With create, the file is created (0600) and preallocated to
 * len; otherwise it must hold at least len bytes. The file is kept on destroy. A handle
 * holds 1024 files at once, its own data files included (-EMFILE past that). */
int zinf_io_extent_open_file(struct zinf_io *io, const char *path, uint64_t len, bool create,
			     uint32_t *id);
/* Length of an extent as allocated, or 0 for an unknown id. */
uint64_t zinf_io_extent_len(struct zinf_io *io, uint32_t id);
/* The drive bytes zinf_io_extent_alloc(io, len) would take: len rounded up to the
 * alignment, plus the padding of each path's part when it is striped (0 for a length
 * extent_alloc refuses). Sum it over a layout to know its size before allocating it. */
uint64_t zinf_io_extent_footprint(const struct zinf_io *io, uint64_t len);
/* Whether the nvme paths' file systems have room for bytes more (a sum of footprints,
 * the largest extent of them `largest` bytes), striped over the paths (each path its
 * share, with several paths plus the largest extent's largest part; paths on one file
 * system add up): checked before a run lays out its homes, so that a run too big for
 * the drives is refused at once rather than filling them to the last byte first. What
 * passes is laid out whole (a part whose own path is full goes to another). 0, or
 * -ENOSPC with the path, the share and the free bytes in the last error (-EINVAL for
 * bytes or largest above 4 EiB). A file system whose free space cannot be read is not
 * checked. */
int zinf_io_check_space(struct zinf_io *io, uint64_t bytes, uint64_t largest);

/* ---- pinned buffer registration (io_uring fixed buffers) ------------------------ */

/* Register [base, base+len) so pieces inside it use fixed-buffer reads and writes.
 * One region at a time. Both calls first wait for the requests in flight to end (as
 * zinf_io_drain; no other thread may submit meanwhile); from a completion callback they
 * are refused with ZINF_ESTATE. A backend
 * without fixed buffers accepts and ignores it. Returns 0 or a negative code (the handle
 * stays usable). Never free a region whose unregister failed: the kernel may still use
 * its pages. */
int zinf_io_register_buffer(struct zinf_io *io, void *base, uint64_t len);
int zinf_io_unregister_buffer(struct zinf_io *io);

/* ---- requests ------------------------------------------------------------------ */

enum zinf_io_op {
	ZINF_IO_READ = 0,
	ZINF_IO_WRITE = 1,
};

struct zinf_io_req;
/* Called on a worker thread when req completes (req->status is final). Must be short,
 * thread-safe, and must not wait on the handle. */
typedef void (*zinf_io_done_fn)(struct zinf_io_req *req);

struct zinf_io_req {
	/* in: set by the caller before zinf_io_submit */
	enum zinf_io_op op;
	uint32_t extent;
	uint64_t offset; /* byte offset inside the extent */
	uint64_t len;
	void *buf;
	zinf_io_done_fn done; /* NULL: the request is returned by zinf_io_poll/_wait */
	void *user;
	/* out: 0, or the first error of any piece (with the message in error) */
	int status;
	char error[192];
	/* private to io/: do not touch while the request is in flight */
	struct zinf_io_req *next_;
	uint64_t next_piece_off_; /* next byte to hand to a lane */
	uint64_t left_bytes_;	  /* bytes not yet complete */
	int state_;
};

/* Queue n requests. Checks each (extent, range, alignment, reuse) first: on a bad
 * request nothing is queued, -EINVAL is returned and the reason (address and required
 * alignment, or range and extent length) is in zinf_io_last_error and in that request's
 * error; ZINF_ESTATE for a request still in flight, listed twice in the batch, or
 * completed but not yet returned by zinf_io_poll / zinf_io_wait (one with a callback may
 * be resubmitted from its callback), the reason in zinf_io_last_error alone: such a
 * request keeps its own status and error. Never blocks on I/O. */
int zinf_io_submit(struct zinf_io *io, struct zinf_io_req **reqs, int n);
/* Move up to max completed requests (those without a callback) into done[].
 * Returns the count (0 when none, or max is 0), or -EINVAL for max < 0 or a NULL done
 * (as zinf_io_wait). Never blocks. */
int zinf_io_poll(struct zinf_io *io, struct zinf_io_req **done, int max);
/* Like poll but waits until at least min are complete or timeout_ms passes
 * (-1: no limit, so with fewer than min in flight it waits for another thread's
 * submits; below -1: -EINVAL). Returns the count, or -ETIMEDOUT with none. */
int zinf_io_wait(struct zinf_io *io, struct zinf_io_req **done, int min, int max, int timeout_ms);
/* Wait until no request is in flight (completed ones stay queued for poll). */
int zinf_io_drain(struct zinf_io *io);
/* Synchronous helper: submit one request and wait for it. Returns its status. */
int zinf_io_rw(struct zinf_io *io, enum zinf_io_op op, uint32_t extent, uint64_t offset, void *buf,
	       uint64_t len);

/* ---- counters ------------------------------------------------------------------ */

struct zinf_io_path_stats {
	uint64_t read_bytes, write_bytes; /* completed piece bytes */
	uint64_t read_ops, write_ops;	  /* pieces (I/O operations) */
};

struct zinf_io_stats {
	uint64_t read_reqs, write_reqs;	  /* completed requests */
	uint64_t read_bytes, write_bytes; /* completed request bytes */
	uint64_t errors;		  /* requests completed with an error */
	uint64_t retries;		  /* continued short I/O, EINTR/EAGAIN resubmits */
	uint64_t busy_ns;		  /* sum over lanes of time with a piece in flight */
	uint64_t space_bytes;		  /* drive bytes the run directories' live extents hold */
	int n_paths;			  /* entries in path[]; external files are last */
	struct zinf_io_path_stats path[ZINF_IO_MAX_PATHS + 1];
};

/* Copy the counters (atomically per field). out NULL: nothing; io NULL: zeros. */
void zinf_io_get_stats(struct zinf_io *io, struct zinf_io_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_IO_H */

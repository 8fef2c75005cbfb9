/*
 * Internals of the I/O layer shared by io.c, space.c, the backends and white-box tests:
 * the handle, its lanes and slots, files and extents, the backend ops table and the
 * test-only fault hook.
 */
#ifndef ZINF_IO_INTERNAL_H
#define ZINF_IO_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "zinf/io.h"

#define IO_MAX_FILES 1024	      /* files per handle (managed + external) */
#define IO_EXTENT_CHUNK 1024	      /* extents per table chunk; chunks never move */
#define IO_EXTENT_CHUNKS 4096	      /* so up to 4M extents */
#define IO_FIXED_BUF_MAX (1ull << 30) /* io_uring limits one fixed buffer to 1 GiB */

/* ---- space: files and extents --------------------------------------------------- */

struct io_range {
	uint64_t off, len;
};

struct io_file {
	int fd;
	char *name;	       /* full path, for messages */
	uint64_t size;	       /* bytes preallocated */
	int path;	       /* index into io->paths, or io->n_paths for an external file */
	bool direct;	       /* opened with O_DIRECT */
	struct io_range *free; /* sorted, coalesced free ranges (managed files) */
	int n_free, cap_free;
};

struct io_path {
	char *dir;     /* the nvme path as given */
	char name[96]; /* what messages call it: opts.path_names[i], or nvme_paths[i] */
	char *run_dir; /* dir/run_dir_name */
	int lock_fd;   /* flock'd while the run lives; -1 when not created */
	bool direct;   /* O_DIRECT accepted here */
	int n_files;   /* data files created so far (names data.0, data.1, ...) */
	int last_file; /* the newest one's index in io->files (it grows), or -1 */
};

struct io_part {
	uint32_t file;
	uint64_t off; /* byte offset in the file */
	uint64_t len; /* bytes allocated */
};

struct io_extent {
	bool used;
	uint64_t len; /* bytes usable (rounded up to the alignment) */
	int n_parts;  /* paths the extent is striped over */
	struct io_part part[ZINF_IO_MAX_PATHS];
	uint32_t crc; /* CRC32C of the whole extent when crc_valid */
	bool crc_valid;
	int inflight; /* requests in flight on it (atomic) */
};

/* ---- lanes: one ring and one worker thread each ---------------------------------- */

struct io_slot {
	struct zinf_io_req *req;
	uint32_t file;
	uint64_t file_off;  /* current offset in the file (advances on short I/O) */
	char *buf;	    /* current buffer position */
	uint64_t len;	    /* bytes left to transfer */
	uint64_t piece_len; /* bytes of the request this piece covers */
	uint64_t piece_off; /* offset of the piece inside the extent */
	char *user_buf;	    /* the caller's buffer when bounced */
	char *bounce;	    /* this slot's aligned bounce buffer, or NULL */
	bool bounced;
	/* a bounced write to an external file that ends inside its last block: the end to
	 * cut the file back to after the write (0: none) */
	uint64_t cut_to;
	int buf_index;	      /* io_uring fixed buffer index, or -1 */
	int res;	      /* completion result set by the backend */
	bool first_try;	      /* for the short-count fault */
	struct io_slot *next; /* free list / psync queues */
};

struct io_lane {
	struct zinf_io *io;
	int idx;
	pthread_t thread;
	bool thread_started;
	void *be; /* backend state */
	struct io_slot *slots;
	struct io_slot *free_slots;
	int inflight;
	uint64_t busy_since_ns;
	uint64_t busy_ns; /* atomic */
	bool reap_failed; /* logged once */
	int want_work;	  /* atomic: blocked in reap with free slots; submit wakes it */
};

struct io_backend_ops {
	const char *name;
	/* Set up lane->be for queue_depth pieces. Fills err on failure. */
	int (*lane_init)(struct io_lane *lane, char *err, uint64_t err_len);
	void (*lane_fini)(struct io_lane *lane);
	/* A file was opened at index idx (registered files). Optional. */
	int (*file_added)(struct io_lane *lane, uint32_t idx, int fd);
	/* Fixed buffers (chunks of at most IO_FIXED_BUF_MAX). Optional. */
	int (*buffer_register)(struct io_lane *lane, void *base, uint64_t len);
	void (*buffer_unregister)(struct io_lane *lane);
	/* Queue one slot's I/O; submit flushes the queued ones to the kernel. */
	int (*queue)(struct io_lane *lane, struct io_slot *slot);
	int (*submit)(struct io_lane *lane);
	/* Fill done[] with completed slots (slot->res set); wait for at least one when
	 * wait. Returns the count or a negative error of the wait itself. */
	int (*reap)(struct io_lane *lane, struct io_slot **done, int max, bool wait);
	/* Make a reap that is waiting return (new work queued). Any thread. */
	void (*wake)(struct io_lane *lane);
};

extern const struct io_backend_ops io_uring_ops;
extern const struct io_backend_ops io_libaio_ops;
extern const struct io_backend_ops io_psync_ops;

/* ---- the handle ------------------------------------------------------------------ */

struct zinf_io {
	struct zinf_io_opts opts; /* nvme_paths point into paths[].dir */
	const struct io_backend_ops *ops;
	uint64_t align;
	uint64_t err_serial; /* tags this handle's messages (thread_error.h) */

	struct io_path paths[ZINF_IO_MAX_PATHS];
	int n_paths;
	int next_path; /* rotates the first path of new extents */

	pthread_mutex_t space_lock; /* files, extents, allocator */
	struct io_file files[IO_MAX_FILES];
	uint32_t n_files;
	struct io_extent *extents[IO_EXTENT_CHUNKS];
	uint32_t n_extents; /* ids handed out so far (ids are reused after free) */
	uint32_t free_hint; /* every id below it is in use */

	/* request queue, shared by lanes */
	pthread_mutex_t q_lock;
	pthread_cond_t q_cond;
	struct zinf_io_req *q_head, *q_tail;
	bool stopping;

	/* completed requests and in-flight count */
	pthread_mutex_t done_lock;
	pthread_cond_t done_cond;  /* a request was queued for poll/wait, or a sync one ended */
	pthread_cond_t drain_cond; /* inflight_reqs reached 0 */
	struct zinf_io_req *done_head, *done_tail;
	uint64_t inflight_reqs;

	struct io_lane *lanes;
	int n_lanes;

	void *reg_base; /* registered fixed-buffer region */
	uint64_t reg_len;

	bool warned_direct; /* a file refused O_DIRECT (and runs buffered): said once */

	/* counters (atomic adds) */
	struct zinf_io_stats stats;
};

/* Record a formatted message as the calling thread's last error on io (see
 * zinf_io_last_error) and log it at debug level. Only for failures of the caller's own
 * call: a lane's failures go to the request (req->error), never to the lane's thread. */
void io_set_error(struct zinf_io *io, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Make a failed request's message (already logged) the calling thread's last error on
 * io: zinf_io_rw, zinf_io_poll and zinf_io_wait hand it to the thread that collects it. */
void io_take_error(struct zinf_io *io, const char *msg);
uint64_t io_now_ns(void);
struct io_extent *io_extent_get(struct zinf_io *io, uint32_t id);

/* space.c */
int io_space_init(struct zinf_io *io);
void io_space_fini(struct zinf_io *io, bool remove);
/* run_dir.c: take path p's run directory (check the path, lock, empty a stale one, probe
 * O_DIRECT and raise io->align); close it, with remove emptying and removing it. */
int io_run_dir_open(struct zinf_io *io, struct io_path *p);
void io_run_dir_close(struct io_path *p, bool remove);
/* Open fd (O_RDWR | extra) on name, trying O_DIRECT first when want_direct; a
 * filesystem that refuses it (EINVAL) gets a buffered fd and *direct = false. */
int io_open_maybe_direct(const char *name, int extra, mode_t mode, bool want_direct, bool *direct);
/* The direct-I/O alignment a file needs: at least 4096. */
uint64_t io_file_alignment(int fd);
/* Map extent offset off to (file, file offset); *max_len is the contiguous run there. */
void io_extent_map(const struct zinf_io *io, const struct io_extent *ext, uint64_t off,
		   uint32_t *file, uint64_t *file_off, uint64_t *max_len);

/* ---- test-only fault hook (process-wide) ---------------------------------------- */

enum io_fault_kind {
	IO_FAULT_NONE = 0,
	IO_FAULT_ERRNO,	    /* the next count pieces fail with -err, without doing I/O */
	IO_FAULT_SHORT,	    /* the next count pieces transfer at most short_bytes on */
			    /* their first try (0: end of file) */
	IO_FAULT_NO_DIRECT, /* the next count O_DIRECT opens fail with EINVAL (tmpfs) */
	IO_FAULT_ENGINE,    /* the next count backend setups fail with -err (seccomp) */
	IO_FAULT_NOSPACE,   /* the next count preallocations fail with ENOSPC when larger */
			    /* than short_bytes, and space checks see short_bytes free */
			    /* (one count per path): a file system with that much free */
	IO_FAULT_LOCK_GONE, /* the next count run-directory locks find their lock file */
			    /* removed right after the flock (an ending run's destroy) */
};

/* Arm the hook for pieces of op_mask (1 << ZINF_IO_READ | 1 << ZINF_IO_WRITE). */
void zinf_io_fault_set(enum io_fault_kind kind, int count, int err, uint64_t short_bytes,
		       unsigned op_mask);
void zinf_io_fault_clear(void);
/* After zinf_io_fault_set: let the next n matching pieces through first. */
void zinf_io_fault_pass(int n);
/* Used by the layer: consume one armed fault of kind for op; returns true if it fires
 * and fills err / short_bytes. */
bool io_fault_take(enum io_fault_kind kind, int op, int *err, uint64_t *short_bytes);

/* White-box: where extent byte off lives (for tests that corrupt a file). */
int zinf_io_extent_locate(struct zinf_io *io, uint32_t id, uint64_t off, const char **path,
			  uint64_t *file_off);

/* ---- shared by io.c and io_request.c ----------------------------------------- */

/* Where a request is in its life; private to the layer (zinf_io_req.state_). */
enum req_state {
	REQ_IDLE = 0,
	REQ_QUEUED,  /* in flight */
	REQ_DONE,    /* completed (a callback's request: its callback ran or runs) */
	REQ_COLLECT, /* completed, waiting in the done list for poll/wait */
};

/* A lane's worker thread (io_request.c), started by zinf_io_create. */
void *io_lane_main(void *arg);

#endif /* ZINF_IO_INTERNAL_H */

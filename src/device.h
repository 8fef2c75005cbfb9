/*
 * Device backends: one ops table for the memory tier nearest compute.
 *
 * A device owns a heap of "device memory" carved out of one allocation made at create
 * (one cudaMalloc on CUDA, one host mapping on the host backend) and capped by a hard
 * budget, plus streams (ordered queues of async work, concurrent with each other) and
 * events (markers recorded into a stream that other streams or the host can wait for).
 * The semantics are CUDA's on both backends, so the engine's scheduling code is the same:
 *
 *   - work queued on one stream runs in order; work on different streams may overlap;
 *   - zinf_event_record captures the work queued on the stream so far; query/synchronize
 *     and zinf_stream_wait_event refer to the most recent record at the time of the call;
 *     an event never recorded counts as complete;
 *   - zinf_device_free must only be called once the work that uses the memory has
 *     completed (the caller holds an event for it); memory is reused at once.
 *
 * Backends: "cuda" (src/device_cuda.c, real GPU), "host" (src/device_host.c: the heap is
 * host memory, streams run on copy threads). "auto" picks cuda when a GPU is visible.
 *
 * Errors: functions return 0 or a negative code (include/zinf/error.h): ZINF_EBUDGET
 * when the heap cannot hold an allocation, ZINF_EDEVICE for a CUDA failure, -EINVAL for
 * bad arguments (a pointer that is not device memory, a stream of another device). The
 * one-line message with the numbers is in zinf_device_last_error().
 *
 * Threading: every function is thread-safe, except that a stream or event must not be
 * destroyed while another thread uses it, and the device must outlive its streams and
 * events. Error messages are per thread: zinf_device_last_error() returns the calling
 * thread's own last error, whatever other threads' calls fail meanwhile.
 */
#ifndef ZINF_SRC_DEVICE_H
#define ZINF_SRC_DEVICE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"

struct zinf_adam_args; /* src/optim.h */

/* Same order as the config's "zinf.device" values (auto, cuda, host). */
enum zinf_device_backend {
	ZINF_DEVICE_BACKEND_AUTO = 0,
	ZINF_DEVICE_BACKEND_CUDA = 1,
	ZINF_DEVICE_BACKEND_HOST = 2,
};

/* CUDA: how a host thread waits for the GPU (cudaSetDeviceFlags); zinf.cuda_sync. */
enum zinf_cuda_sync {
	ZINF_CUDA_SYNC_AUTO = 0, /* CUDA's heuristic: spin unless contexts outnumber CPUs */
	ZINF_CUDA_SYNC_SPIN = 1,
	ZINF_CUDA_SYNC_YIELD = 2,
	ZINF_CUDA_SYNC_BLOCKING = 3, /* sleep on a primitive: frees the core */
};

enum zinf_copy_dir {
	ZINF_COPY_H2D = 0, /* host (pinned) -> device */
	ZINF_COPY_D2H = 1, /* device -> host (pinned) */
	ZINF_COPY_D2D = 2, /* device -> device */
	ZINF_COPY_DIRS = 3,
};

struct zinf_device_opts {
	enum zinf_device_backend backend; /* default AUTO */
	/* Device heap budget in bytes. 0 = auto: on CUDA the free GPU memory at create
	 * minus memory_reserve; on the host backend a quarter of physical memory. */
	uint64_t memory_limit;
	/* CUDA, auto limit only: bytes left outside the heap for the CUDA context, cuBLAS
	 * workspaces and kernels. Default 1 GiB. */
	uint64_t memory_reserve;
	int cuda_device;	       /* CUDA ordinal, default 0 */
	enum zinf_cuda_sync cuda_sync; /* CUDA: how the host waits; default AUTO */
	unsigned copy_threads;	       /* host: threads that run streams; 0 = min(4, CPUs), >= 1 */
	uint32_t max_allocs;	       /* live heap allocations at most; default 65536 */
	uint32_t stream_depth;	       /* host: ops queued per stream before enqueue waits; 1024 */
};

/* Bytes and busy time per copy direction: counted when a copy completes (host: time
 * spent in memcpy on a copy thread; CUDA: elapsed time between events around it). */
struct zinf_copy_stats {
	uint64_t bytes;
	uint64_t ns;
	uint64_t count;
};

struct zinf_device_stats {
	uint64_t limit;		 /* heap budget, bytes */
	uint64_t used;		 /* bytes allocated now */
	uint64_t largest_free;	 /* the largest free extent (less than limit - used: split) */
	uint64_t peak;		 /* highest used since create */
	uint64_t live_allocs;	 /* allocations now */
	uint64_t alloc_failures; /* allocations refused with ZINF_EBUDGET */
	struct zinf_copy_stats copy[ZINF_COPY_DIRS];
	uint64_t memset_bytes;
};

struct zinf_device;
struct zinf_stream;
struct zinf_event;

/* ---- lifecycle ----------------------------------------------------------------------- */

void zinf_device_opts_init(struct zinf_device_opts *opts);
/* Open the backend opts->backend asks for (auto: cuda when zinf_device_cuda_count() > 0,
 * else host; the choice is logged at info). *out is owned by the caller. On failure
 * returns a negative code and writes a one-line reason to err (errlen bytes). */
int zinf_device_create(const struct zinf_device_opts *opts, struct zinf_device **out, char *err,
		       size_t errlen);
/* Wait for all queued work, free the heap, streams and events still alive (each is
 * logged as a leak). NULL is a no-op. */
void zinf_device_destroy(struct zinf_device *dev);

enum zinf_device_backend zinf_device_backend(const struct zinf_device *dev);
/* "host (4 copy threads)", "cuda:0 NVIDIA H200", ... */
const char *zinf_device_name(const struct zinf_device *dev);
/* The calling thread's last error on dev, as one line: the message of this thread's last
 * failed call, when that call was on dev ("" otherwise). */
const char *zinf_device_last_error(struct zinf_device *dev);
/* "auto", "cuda", "host"; parse returns 0 or -EINVAL. */
const char *zinf_device_backend_name(enum zinf_device_backend b);
int zinf_device_backend_parse(const char *text, enum zinf_device_backend *out);
const char *zinf_copy_dir_name(enum zinf_copy_dir dir); /* "h2d", "d2h", "d2d" */

/* ---- memory -------------------------------------------------------------------------- */

/* Allocate bytes of device memory, aligned to 256 bytes. Never waits: returns
 * ZINF_EBUDGET with "device budget: need 64 MiB, 10 MiB free of 256 MiB" (or the
 * largest free extent when the heap is fragmented) when it does not fit. */
int zinf_device_alloc(struct zinf_device *dev, uint64_t bytes, void **out);
/* Same, from the top of the heap (zinf_arena_alloc_high): for short-lived buffers, so
 * they do not split the space the modules are packed into from the bottom. */
int zinf_device_alloc_high(struct zinf_device *dev, uint64_t bytes, void **out);
/* Free ptr (from zinf_device_alloc; NULL is a no-op). -EINVAL if it is not one. The
 * host backend also refuses (ZINF_ESTATE, naming the op) while queued work still uses
 * the allocation, which turns a use-after-free race into an error in CI. */
int zinf_device_free(struct zinf_device *dev, void *ptr);
/* Whether [ptr, ptr + len) lies inside one live device allocation. */
bool zinf_device_owns(struct zinf_device *dev, const void *ptr, uint64_t len);
/* Lock host memory for DMA: cudaHostRegister on CUDA, mlock on the host backend. */
int zinf_device_host_register(struct zinf_device *dev, void *ptr, uint64_t len);
int zinf_device_host_unregister(struct zinf_device *dev, void *ptr, uint64_t len);
/* Whether host_register pins for DMA (CUDA) rather than mlock (host). */
bool zinf_device_registers_dma(const struct zinf_device *dev);
/* PCI bus id of the GPU ("0000:3b:00.0") for NUMA placement; -ENOTSUP on host. */
int zinf_device_pci_bus_id(struct zinf_device *dev, char *buf, size_t len);

/* ---- streams and events ---------------------------------------------------------------- */

int zinf_stream_create(struct zinf_device *dev, struct zinf_stream **out);
/* Wait for the stream's work, then free it. NULL is a no-op. */
void zinf_stream_destroy(struct zinf_stream *s);
int zinf_stream_synchronize(struct zinf_stream *s);
/* Work queued on s after this call starts only once e's latest record has completed. */
int zinf_stream_wait_event(struct zinf_stream *s, struct zinf_event *e);
/* The backend's own stream (cudaStream_t on CUDA, for kernel launches); NULL on host. */
void *zinf_stream_native(struct zinf_stream *s);

int zinf_event_create(struct zinf_device *dev, struct zinf_event **out);
/* Free e; records still pending complete first (asynchronously). NULL is a no-op. */
void zinf_event_destroy(struct zinf_event *e);
int zinf_event_record(struct zinf_event *e, struct zinf_stream *s);
/* 0 when e's latest record has completed (or e was never recorded), -EAGAIN if not. */
int zinf_event_query(struct zinf_event *e);
int zinf_event_synchronize(struct zinf_event *e);

/* ---- async work ------------------------------------------------------------------------ */

/* Copy len bytes on stream s. H2D: dst is device memory, src is not; D2H the reverse;
 * D2D both are. Pointers are checked against the heap: -EINVAL with the address and
 * direction otherwise. len 0 is a no-op. The caller keeps both buffers alive and
 * untouched until the copy completes (record an event after it). */
int zinf_device_memcpy_async(struct zinf_stream *s, void *dst, const void *src, uint64_t len,
			     enum zinf_copy_dir dir);
/* Set len bytes of device memory at dst to (unsigned char)value on stream s. */
int zinf_device_memset_async(struct zinf_stream *s, void *dst, int value, uint64_t len);
/* Wait until all work on all streams of dev has completed. */
int zinf_device_synchronize(struct zinf_device *dev);

/* ---- compute on device memory (the optimizer state on the device) ---------------------- */

/* Device memory for the partial sums of one sum of zinf_device_sumsq_f32(_many). */
#define ZINF_DEVICE_SUMSQ_BYTES 2048u

/* dst[i] += src[i] for i < n, fp32 device memory, in order on stream s (the host
 * backend runs it on the calling thread once s has run what was queued before). */
int zinf_device_add_f32(struct zinf_stream *s, float *dst, const float *src, uint64_t n);
/* *out = the sum of the squares of src[0..n) (fp32 device memory) in double, after the
 * work queued on s; returns when it is known. parts: ZINF_DEVICE_SUMSQ_BYTES of device
 * memory for the partial sums. The host backend's is zinf_grad_sumsq's, to the bit; the
 * GPU's agrees to rounding (its order of summation is its own), and is the same bits from
 * run to run. */
int zinf_device_sumsq_f32(struct zinf_stream *s, const float *src, uint64_t n, void *parts,
			  double *out);
/* out[i] = the sum of squares of src[i][0..n[i]) for i < count, each the bits
 * zinf_device_sumsq_f32 gives it, with one wait for them all (a GPU: count kernels, one
 * copy of their partial sums, one synchronization). parts: count x ZINF_DEVICE_SUMSQ_BYTES
 * of device memory. */
int zinf_device_sumsq_f32_many(struct zinf_stream *s, uint32_t count, const float *const *src,
			       const uint64_t *n, void *parts, double *out);
/* One Adam/AdamW update (src/optim.h) of a's buffers, all device memory, on stream s:
 * bit-identical to the CPU loop (kernels/adamw.cu). */
int zinf_device_adam_update(struct zinf_stream *s, const struct zinf_adam_args *a, uint64_t n);

/* A snapshot of the heap and copy counters. */
void zinf_device_get_stats(struct zinf_device *dev, struct zinf_device_stats *out);

/* ---- backend interface (device_host.c, device_cuda.c; not for callers) ----------------- */

struct zinf_device_ops {
	const char *name;
	bool dma_register; /* host_register pins for DMA (cudaHostRegister) */
	/* Free everything of the backend, heap included (common parts go after). */
	void (*destroy)(struct zinf_device *dev);
	int (*stream_create)(struct zinf_device *dev, struct zinf_stream **out);
	void (*stream_destroy)(struct zinf_stream *s);
	int (*stream_synchronize)(struct zinf_stream *s);
	int (*stream_wait_event)(struct zinf_stream *s, struct zinf_event *e);
	void *(*stream_native)(struct zinf_stream *s);
	int (*event_create)(struct zinf_device *dev, struct zinf_event **out);
	void (*event_destroy)(struct zinf_event *e);
	int (*event_record)(struct zinf_event *e, struct zinf_stream *s);
	int (*event_query)(struct zinf_event *e);
	int (*event_synchronize)(struct zinf_event *e);
	int (*memcpy_async)(struct zinf_stream *s, void *dst, const void *src, uint64_t len,
			    enum zinf_copy_dir dir);
	int (*memset_async)(struct zinf_stream *s, void *dst, int value, uint64_t len);
	/* the compute on device memory below, arguments checked */
	int (*add_f32)(struct zinf_stream *s, float *dst, const float *src, uint64_t n);
	int (*sumsq_f32_many)(struct zinf_stream *s, uint32_t count, const float *const *src,
			      const uint64_t *n, void *parts, double *out);
	int (*adam_update)(struct zinf_stream *s, const struct zinf_adam_args *a, uint64_t n);
	int (*synchronize)(struct zinf_device *dev);
	int (*host_register)(struct zinf_device *dev, void *ptr, uint64_t len);
	int (*host_unregister)(struct zinf_device *dev, void *ptr, uint64_t len);
	int (*pci_bus_id)(struct zinf_device *dev, char *buf, size_t len);
	/* Fold finished copies' timings into the counters (CUDA); may be NULL. */
	void (*collect_stats)(struct zinf_device *dev);
	/* Whether queued, unfinished work touches [ptr, ptr + len): 0, or ZINF_ESTATE
	 * with the error set. May be NULL (CUDA cannot tell cheaply). */
	int (*check_idle)(struct zinf_device *dev, const void *ptr, uint64_t len);
};

/* The part every backend embeds first in its own device struct. */
struct zinf_device {
	const struct zinf_device_ops *ops;
	enum zinf_device_backend backend;
	char name[128];
	void *heap_base;	/* (heap_size) bytes, device memory */
	uint64_t heap_size;	/* bytes: the budget */
	struct zinf_arena heap; /* sub-allocates heap_base */
	uint64_t alloc_failures;
	struct zinf_copy_stats copy[ZINF_COPY_DIRS]; /* updated with atomics */
	uint64_t memset_bytes;
	uint64_t err_serial; /* tags this device's messages (io/thread_error.h) */
	/* ZINF_DEVICE_POISON=1: every allocation is filled with 0xff bytes (NaN in every
	 * float format) on this stream before it is handed out, so that a read of memory
	 * nobody wrote shows up in results instead of stale, plausible data */
	struct zinf_stream *poison;
	pthread_mutex_t poison_lock;
};

struct zinf_stream {
	struct zinf_device *dev;
};

struct zinf_event {
	struct zinf_device *dev;
};

/* Backend constructors: fill a device (ops, name, heap) or return a negative code and
 * a one-line reason in err. */
int zinf_device_host_open(const struct zinf_device_opts *opts, struct zinf_device **out, char *err,
			  size_t errlen);
int zinf_device_cuda_open(const struct zinf_device_opts *opts, struct zinf_device **out, char *err,
			  size_t errlen);
/* GPUs visible to this process; 0 when none, or when zinf was built without CUDA. */
int zinf_device_cuda_count(void);
/* The same; when it is 0 although a CUDA driver is installed (one too old for the
 * runtime zinf was built with, a GPU it cannot use), why (len bytes) gets the reason on
 * one line, "cudaGetDeviceCount: ERROR (CUDA driver X.Y, runtime X.Y)"; else "". */
int zinf_device_cuda_probe(char *why, size_t len);

/* For backends: set up / tear down the common part once heap_base is mapped. */
int zinf_device_init_common(struct zinf_device *dev, const struct zinf_device_ops *ops,
			    enum zinf_device_backend backend, void *heap_base, uint64_t heap_size,
			    uint32_t max_allocs);
void zinf_device_fini_common(struct zinf_device *dev);
/* Record an error message as the calling thread's last error on dev; return code. */
int zinf_device_set_error(struct zinf_device *dev, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Count one finished copy (thread-safe, lock-free). */
void zinf_device_account_copy(struct zinf_device *dev, enum zinf_copy_dir dir, uint64_t bytes,
			      uint64_t ns);
uint64_t zinf_device_now_ns(void);

#endif /* ZINF_SRC_DEVICE_H */

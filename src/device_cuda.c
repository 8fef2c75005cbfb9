/*
 * CUDA device backend: streams, events and copies are the CUDA runtime's own.
 *
 * Device memory is one cudaMalloc of the whole budget made at open (never managed
 * memory), sub-allocated by the common heap: the budget holds by construction, and
 * nothing is allocated from CUDA on the hot path. Every CUDA error is translated at this
 * boundary into a zinf code plus a message naming the call and its source line, and the
 * thread's (non-sticky) CUDA error is cleared so it cannot leak into a later call.
 *
 * Copy timing: each stream keeps a ring of event pairs placed around its copies; a pair
 * whose end has completed is folded into the copy counters (bytes, elapsed time) when
 * stats are read or the ring wraps, so timing costs two event records per copy and no
 * host synchronisation unless 128 timed copies are outstanding on one stream.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adamw_cuda.h"
#include "device.h"
#include "grad_cuda.h"
#include "optim.h"
#include "zinf/config.h"
#include "zinf/error.h"
#include "zinf/log.h"

#define TIMING_SLOTS 128
#define HEAP_ROUND (2ull << 20)

struct cuda_timing {
	cudaEvent_t start, end;
	enum zinf_copy_dir dir;
	uint64_t bytes;
};

struct cuda_stream {
	struct zinf_stream base;
	cudaStream_t s;
	pthread_mutex_t lock; /* the timing ring */
	struct cuda_timing slot[TIMING_SLOTS];
	uint32_t head, count;
	/* host memory the sums of squares' partial sums come back to (sumsq_f32_many),
	 * grown to the largest batch; the stream's user is one thread at a time */
	double *parts_host;
	uint32_t parts_cap; /* sums it holds */
	struct cuda_stream *next_all;
};

struct cuda_event {
	struct zinf_event base;
	cudaEvent_t e;
	struct cuda_event *next_all;
};

struct cuda_device {
	struct zinf_device base;
	int ordinal;
	/* cudaEventBlockingSync with zinf.cuda_sync blocking: the device flag makes stream and
	 * device waits sleep, but an event wait (cudaEventSynchronize) spins unless its event
	 * was made with this flag */
	unsigned event_flags;
	pthread_mutex_t lock; /* the lists below */
	struct cuda_stream *streams;
	struct cuda_event *events;
};

static struct cuda_device *to_cd(struct zinf_device *d)
{
	return (struct cuda_device *)d;
}

static const char *file_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Translate err from the call named what at file:line; clear the thread's error. */
static int cuda_fail(struct zinf_device *dev, cudaError_t err, const char *what, const char *file,
		     int line)
{
	int rc = err == cudaErrorMemoryAllocation ? -ENOMEM : ZINF_EDEVICE;

	(void)cudaGetLastError();
	return zinf_device_set_error(dev, rc, "%s failed at %s:%d on %s: %s (%s)", what,
				     file_name(file), line, dev->name, cudaGetErrorString(err),
				     cudaGetErrorName(err));
}

/* CU(dev, cudaCall, (args)): 0, or the translated error. */
#define CU(dev, fn, args)                                                                          \
	({                                                                                         \
		cudaError_t cu_err_ = fn args;                                                     \
		cu_err_ == cudaSuccess ? 0 : cuda_fail((dev), cu_err_, #fn, __FILE__, __LINE__);   \
	})

static int set_device(struct zinf_device *dev)
{
	return CU(dev, cudaSetDevice, (to_cd(dev)->ordinal));
}

int zinf_device_cuda_probe(char *why, size_t len)
{
	int n = 0, driver = 0, runtime = 0;
	cudaError_t err = cudaGetDeviceCount(&n);

	if (len)
		why[0] = '\0';
	if (err == cudaSuccess)
		return n;
	(void)cudaGetLastError();
	/* No driver at all is a machine without GPUs. One that is installed and still finds
	 * none (too old for this runtime, a GPU it cannot use) is worth saying. */
	if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
		(void)cudaGetLastError();
		return 0;
	}
	(void)cudaRuntimeGetVersion(&runtime);
	if (len)
		snprintf(why, len, "cudaGetDeviceCount: %s (CUDA driver %d.%d, runtime %d.%d)",
			 cudaGetErrorString(err), driver / 1000, driver % 1000 / 10, runtime / 1000,
			 runtime % 1000 / 10);
	return 0;
}

int zinf_device_cuda_count(void)
{
	return zinf_device_cuda_probe(NULL, 0);
}

/* ---- copy timing ----------------------------------------------------------------------- */

/* Fold completed timing pairs of cs into the counters; with wait, at least the oldest.
 * cs->lock held. */
static void harvest(struct zinf_device *dev, struct cuda_stream *cs, bool wait_oldest)
{
	while (cs->count) {
		struct cuda_timing *t = &cs->slot[cs->head];
		cudaError_t q = wait_oldest ? cudaEventSynchronize(t->end) : cudaEventQuery(t->end);
		float ms = 0;

		if (q == cudaErrorNotReady) {
			(void)cudaGetLastError();
			break;
		}
		if (q == cudaSuccess && cudaEventElapsedTime(&ms, t->start, t->end) == cudaSuccess)
			zinf_device_account_copy(dev, t->dir, t->bytes, (uint64_t)(ms * 1e6));
		else
			(void)cudaGetLastError(); /* the copy's own error surfaces on sync */
		cs->head = (cs->head + 1) % TIMING_SLOTS;
		cs->count--;
		wait_oldest = false;
	}
}

static void cuda_collect_stats(struct zinf_device *dev)
{
	struct cuda_device *cd = to_cd(dev);

	if (set_device(dev)) /* any thread: one whose current device is another GPU too */
		return;
	pthread_mutex_lock(&cd->lock);
	for (struct cuda_stream *cs = cd->streams; cs; cs = cs->next_all) {
		pthread_mutex_lock(&cs->lock);
		harvest(dev, cs, false);
		pthread_mutex_unlock(&cs->lock);
	}
	pthread_mutex_unlock(&cd->lock);
}

/* ---- streams --------------------------------------------------------------------------- */

static void stream_free(struct zinf_device *dev, struct cuda_stream *cs, int nslots)
{
	for (int i = 0; i < nslots; i++) {
		cudaEventDestroy(cs->slot[i].start);
		cudaEventDestroy(cs->slot[i].end);
	}
	if (cs->s)
		cudaStreamDestroy(cs->s);
	(void)cudaGetLastError();
	pthread_mutex_destroy(&cs->lock);
	free(cs->parts_host);
	free(cs);
}

static int cuda_stream_create(struct zinf_device *dev, struct zinf_stream **out)
{
	struct cuda_device *cd = to_cd(dev);
	struct cuda_stream *cs = calloc(1, sizeof(*cs));
	int rc, i;

	if (!cs)
		return zinf_device_set_error(dev, -ENOMEM, "stream create: out of host memory");
	pthread_mutex_init(&cs->lock, NULL);
	cs->base.dev = dev;
	rc = set_device(dev);
	if (!rc)
		rc = CU(dev, cudaStreamCreateWithFlags, (&cs->s, cudaStreamNonBlocking));
	for (i = 0; !rc && i < TIMING_SLOTS; i++) {
		rc = CU(dev, cudaEventCreateWithFlags, (&cs->slot[i].start, cd->event_flags));
		if (rc)
			break;
		rc = CU(dev, cudaEventCreateWithFlags, (&cs->slot[i].end, cd->event_flags));
		if (rc) {
			cudaEventDestroy(cs->slot[i].start);
			break;
		}
	}
	if (rc) {
		stream_free(dev, cs, i);
		return rc;
	}
	pthread_mutex_lock(&cd->lock);
	cs->next_all = cd->streams;
	cd->streams = cs;
	pthread_mutex_unlock(&cd->lock);
	*out = &cs->base;
	return 0;
}

static int cuda_stream_synchronize(struct zinf_stream *zs)
{
	struct cuda_stream *cs = (struct cuda_stream *)zs;
	int rc = set_device(zs->dev);

	if (!rc)
		rc = CU(zs->dev, cudaStreamSynchronize, (cs->s));

	pthread_mutex_lock(&cs->lock);
	harvest(zs->dev, cs, false);
	pthread_mutex_unlock(&cs->lock);
	return rc;
}

static void cuda_stream_destroy(struct zinf_stream *zs)
{
	struct cuda_device *cd = to_cd(zs->dev);
	struct cuda_stream *cs = (struct cuda_stream *)zs, **pp;

	cuda_stream_synchronize(zs);
	pthread_mutex_lock(&cd->lock);
	for (pp = &cd->streams; *pp != cs; pp = &(*pp)->next_all)
		;
	*pp = cs->next_all;
	pthread_mutex_unlock(&cd->lock);
	stream_free(zs->dev, cs, TIMING_SLOTS);
}

static int cuda_stream_wait_event(struct zinf_stream *zs, struct zinf_event *ze)
{
	int rc = set_device(zs->dev);

	return rc ? rc
		  : CU(zs->dev, cudaStreamWaitEvent,
		       (((struct cuda_stream *)zs)->s, ((struct cuda_event *)ze)->e, 0));
}

static void *cuda_stream_native(struct zinf_stream *zs)
{
	return ((struct cuda_stream *)zs)->s;
}

/* ---- events ---------------------------------------------------------------------------- */

static int cuda_event_create(struct zinf_device *dev, struct zinf_event **out)
{
	struct cuda_device *cd = to_cd(dev);
	struct cuda_event *ce = calloc(1, sizeof(*ce));
	int rc;

	if (!ce)
		return zinf_device_set_error(dev, -ENOMEM, "event create: out of host memory");
	ce->base.dev = dev;
	rc = set_device(dev);
	if (!rc)
		rc = CU(dev, cudaEventCreateWithFlags,
			(&ce->e, cudaEventDisableTiming | cd->event_flags));
	if (rc) {
		free(ce);
		return rc;
	}
	pthread_mutex_lock(&cd->lock);
	ce->next_all = cd->events;
	cd->events = ce;
	pthread_mutex_unlock(&cd->lock);
	*out = &ce->base;
	return 0;
}

static void cuda_event_destroy(struct zinf_event *ze)
{
	struct cuda_device *cd = to_cd(ze->dev);
	struct cuda_event *ce = (struct cuda_event *)ze, **pp;

	pthread_mutex_lock(&cd->lock);
	for (pp = &cd->events; *pp != ce; pp = &(*pp)->next_all)
		;
	*pp = ce->next_all;
	pthread_mutex_unlock(&cd->lock);
	/* CUDA releases a pending event's resources once its record completes. */
	cudaEventDestroy(ce->e);
	(void)cudaGetLastError();
	free(ce);
}

static int cuda_event_record(struct zinf_event *ze, struct zinf_stream *zs)
{
	int rc = set_device(ze->dev); /* as for copies: the caller may be any thread */

	return rc ? rc
		  : CU(ze->dev, cudaEventRecord,
		       (((struct cuda_event *)ze)->e, ((struct cuda_stream *)zs)->s));
}

static int cuda_event_query(struct zinf_event *ze)
{
	int rc = set_device(ze->dev); /* any thread, as in cuda_event_synchronize */
	cudaError_t err;

	if (rc)
		return rc;
	err = cudaEventQuery(((struct cuda_event *)ze)->e);

	if (err == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return -EAGAIN;
	}
	return err == cudaSuccess ? 0
				  : cuda_fail(ze->dev, err, "cudaEventQuery", __FILE__, __LINE__);
}

static int cuda_event_synchronize(struct zinf_event *ze)
{
	/* the caller may be any thread: one that never set the device would bring up a
	 * context on GPU 0 */
	int rc = set_device(ze->dev);

	return rc ? rc : CU(ze->dev, cudaEventSynchronize, (((struct cuda_event *)ze)->e));
}

/* ---- work ------------------------------------------------------------------------------ */

static const enum cudaMemcpyKind copy_kind[ZINF_COPY_DIRS] = {
	[ZINF_COPY_H2D] = cudaMemcpyHostToDevice,
	[ZINF_COPY_D2H] = cudaMemcpyDeviceToHost,
	[ZINF_COPY_D2D] = cudaMemcpyDeviceToDevice,
};

static int cuda_memcpy_async(struct zinf_stream *zs, void *dst, const void *src, uint64_t len,
			     enum zinf_copy_dir dir)
{
	struct zinf_device *dev = zs->dev;
	struct cuda_stream *cs = (struct cuda_stream *)zs;
	struct cuda_timing *t;
	/* Any thread may queue work (the mover, the optimizer thread): make the stream's
	 * device current on this one first. */
	int rc = set_device(dev);

	if (rc)
		return rc;
	pthread_mutex_lock(&cs->lock);
	if (cs->count == TIMING_SLOTS)
		harvest(dev, cs, true);
	t = &cs->slot[(cs->head + cs->count) % TIMING_SLOTS];
	rc = CU(dev, cudaEventRecord, (t->start, cs->s));
	if (!rc)
		rc = CU(dev, cudaMemcpyAsync, (dst, src, len, copy_kind[dir], cs->s));
	if (!rc)
		rc = CU(dev, cudaEventRecord, (t->end, cs->s));
	if (!rc) {
		t->dir = dir;
		t->bytes = len;
		cs->count++;
	}
	pthread_mutex_unlock(&cs->lock);
	return rc;
}

static int cuda_memset_async(struct zinf_stream *zs, void *dst, int value, uint64_t len)
{
	int rc = set_device(zs->dev);

	if (!rc)
		rc = CU(zs->dev, cudaMemsetAsync, (dst, value, len, ((struct cuda_stream *)zs)->s));

	if (!rc)
		__atomic_fetch_add(&zs->dev->memset_bytes, len, __ATOMIC_RELAXED);
	return rc;
}

/* ---- compute on device memory ----------------------------------------------------------- */

/* A launcher's failure (ZINF_EDEVICE; the launcher has taken CUDA's error) as the
 * calling thread's last error. */
static int kernel_status(struct zinf_device *dev, int rc, const char *kernel)
{
	if (!rc)
		return 0;
	return zinf_device_set_error(dev, ZINF_EDEVICE, "%s on %s: kernel launch failed", kernel,
				     dev->name);
}

static int cuda_add_f32(struct zinf_stream *zs, float *dst, const float *src, uint64_t n)
{
	int rc = set_device(zs->dev);

	if (!rc)
		rc = kernel_status(zs->dev,
				   zinf_cuda_add_f32(dst, src, n, ((struct cuda_stream *)zs)->s),
				   "add_f32");
	return rc;
}

/* Each sum's kernel writes its ZINF_CUDA_SUMSQ_PARTS partial sums to its own slot of
 * parts; one copy brings them all back, and each sum adds its slot's in order. */
static int cuda_sumsq_f32_many(struct zinf_stream *zs, uint32_t count, const float *const *src,
			       const uint64_t *n, void *parts, double *out)
{
	enum { SLOT = ZINF_DEVICE_SUMSQ_BYTES / sizeof(double) };
	struct cuda_stream *cs = (struct cuda_stream *)zs;
	cudaStream_t s = cs->s;
	double *host;
	int rc;

	if (count > cs->parts_cap) { /* the first step's batch; later steps reuse it */
		host = realloc(cs->parts_host, (size_t)count * ZINF_DEVICE_SUMSQ_BYTES);
		if (!host)
			return zinf_device_set_error(zs->dev, -ENOMEM,
						     "sum of squares: out of host memory");
		cs->parts_host = host;
		cs->parts_cap = count;
	}
	host = cs->parts_host;
	rc = set_device(zs->dev);

	_Static_assert(ZINF_CUDA_SUMSQ_PARTS * sizeof(double) <= ZINF_DEVICE_SUMSQ_BYTES,
		       "the partial sums fit the buffer");
	for (uint32_t i = 0; i < count && !rc; i++)
		rc = kernel_status(zs->dev,
				   zinf_cuda_sumsq_f32(src[i], n[i], (double *)parts + i * SLOT, s),
				   "sumsq_f32");
	if (!rc)
		rc = CU(zs->dev, cudaMemcpyAsync,
			(host, parts, (size_t)count * ZINF_DEVICE_SUMSQ_BYTES,
			 cudaMemcpyDeviceToHost, s));
	if (!rc)
		rc = CU(zs->dev, cudaStreamSynchronize, (s));
	for (uint32_t i = 0; !rc && i < count; i++) {
		double sum = 0;
		for (int b = 0; b < ZINF_CUDA_SUMSQ_PARTS; b++)
			sum += host[i * SLOT + b];
		out[i] = sum;
	}
	return rc;
}

static int cuda_adam_update(struct zinf_stream *zs, const struct zinf_adam_args *a, uint64_t n)
{
	struct zinf_cuda_adam_args c = {
		.p = a->p,
		.m = a->m,
		.v = a->v,
		.g = a->g,
		.out = a->out,
		.g_dtype = a->g_dtype,
		.out_dtype = a->out_dtype,
		.decoupled = a->decoupled,
		.l2 = a->l2,
		.grad_scale = a->grad_scale,
		.beta1 = a->beta1,
		.beta2 = a->beta2,
		.one_minus_beta1 = a->one_minus_beta1,
		.one_minus_beta2 = a->one_minus_beta2,
		.neg_step_size = a->neg_step_size,
		.rsqrt_bc2 = a->rsqrt_bc2,
		.eps = a->eps,
		.weight_decay = a->weight_decay,
		.decay = a->decay,
	};
	int rc = set_device(zs->dev);

	if (!rc)
		rc = kernel_status(zs->dev,
				   zinf_cuda_adam_update(&c, n, ((struct cuda_stream *)zs)->s),
				   "adam");
	return rc;
}

static int cuda_synchronize(struct zinf_device *dev)
{
	int rc = set_device(dev);

	if (!rc)
		rc = CU(dev, cudaDeviceSynchronize, ());
	cuda_collect_stats(dev);
	return rc;
}

/* ---- host memory ----------------------------------------------------------------------- */

static int cuda_host_register(struct zinf_device *dev, void *ptr, uint64_t len)
{
	int rc = set_device(dev);

	return rc ? rc : CU(dev, cudaHostRegister, (ptr, len, cudaHostRegisterPortable));
}

static int cuda_host_unregister(struct zinf_device *dev, void *ptr, uint64_t len)
{
	int rc = set_device(dev);

	return rc ? rc : CU(dev, cudaHostUnregister, (ptr));
}

static int cuda_pci_bus_id(struct zinf_device *dev, char *buf, size_t len)
{
	return CU(dev, cudaDeviceGetPCIBusId, (buf, (int)len, to_cd(dev)->ordinal));
}

/* ---- lifecycle ------------------------------------------------------------------------- */

static void cuda_destroy(struct zinf_device *dev)
{
	struct cuda_device *cd = to_cd(dev);
	unsigned nstreams = 0, nevents = 0;

	if (cuda_synchronize(dev))
		zinf_logf(ZINF_LOG_WARN, "device %s: %s", dev->name, zinf_device_last_error(dev));
	while (cd->streams) {
		struct cuda_stream *cs = cd->streams;

		cd->streams = cs->next_all;
		stream_free(dev, cs, TIMING_SLOTS);
		nstreams++;
	}
	while (cd->events) {
		struct cuda_event *ce = cd->events;

		cd->events = ce->next_all;
		cudaEventDestroy(ce->e);
		free(ce);
		nevents++;
	}
	if (nstreams || nevents)
		zinf_logf(ZINF_LOG_WARN, "device %s destroyed with %u stream(s), %u event(s) live",
			  dev->name, nstreams, nevents);
	cudaFree(dev->heap_base);
	(void)cudaGetLastError();
	zinf_device_fini_common(dev);
	pthread_mutex_destroy(&cd->lock);
	free(cd);
}

static const struct zinf_device_ops cuda_ops = {
	.name = "cuda",
	.dma_register = true,
	.destroy = cuda_destroy,
	.stream_create = cuda_stream_create,
	.stream_destroy = cuda_stream_destroy,
	.stream_synchronize = cuda_stream_synchronize,
	.stream_wait_event = cuda_stream_wait_event,
	.stream_native = cuda_stream_native,
	.event_create = cuda_event_create,
	.event_destroy = cuda_event_destroy,
	.event_record = cuda_event_record,
	.event_query = cuda_event_query,
	.event_synchronize = cuda_event_synchronize,
	.memcpy_async = cuda_memcpy_async,
	.memset_async = cuda_memset_async,
	.add_f32 = cuda_add_f32,
	.sumsq_f32_many = cuda_sumsq_f32_many,
	.adam_update = cuda_adam_update,
	.synchronize = cuda_synchronize,
	.host_register = cuda_host_register,
	.host_unregister = cuda_host_unregister,
	.pci_bus_id = cuda_pci_bus_id,
	.collect_stats = cuda_collect_stats,
	.check_idle = NULL,
};

/* Pick the heap size: the limit asked for, or free memory minus the reserve. */
static int heap_size(const struct zinf_device_opts *opts, int ordinal, uint64_t *out, char *err,
		     size_t errlen)
{
	size_t free_b = 0, total_b = 0;
	char a[32], b[32], c[32], d[32];
	cudaError_t e = cudaMemGetInfo(&free_b, &total_b);

	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		snprintf(err, errlen, "cuda:%d: cudaMemGetInfo failed: %s (%s)", ordinal,
			 cudaGetErrorString(e), cudaGetErrorName(e));
		return ZINF_EDEVICE;
	}
	if (opts->memory_limit) {
		if (opts->memory_limit > free_b) {
			snprintf(
				err, errlen,
				"device budget: device_memory_limit %s is more than the %s free of %s on cuda:%d",
				zinf_format_bytes(opts->memory_limit, a, sizeof(a)),
				zinf_format_bytes(free_b, b, sizeof(b)),
				zinf_format_bytes(total_b, c, sizeof(c)), ordinal);
			return ZINF_EBUDGET;
		}
		/* cuBLAS's workspace, the kernels' code and the context are allocated outside
		 * the heap, at first use: with less than the reserve left, the first kernel
		 * or product may fail for want of memory */
		if (free_b - opts->memory_limit < opts->memory_reserve)
			zinf_logf(
				ZINF_LOG_WARN,
				"cuda:%d: device_memory_limit %s leaves %s of the %s free for the "
				"CUDA context, cuBLAS's workspace and kernel code (\"auto\" leaves "
				"%s): a kernel may fail for want of memory",
				ordinal, zinf_format_bytes(opts->memory_limit, a, sizeof(a)),
				zinf_format_bytes(free_b - opts->memory_limit, b, sizeof(b)),
				zinf_format_bytes(free_b, c, sizeof(c)),
				zinf_format_bytes(opts->memory_reserve, d, sizeof(d)));
		*out = opts->memory_limit;
		return 0;
	}
	if (free_b <= opts->memory_reserve + HEAP_ROUND) {
		snprintf(
			err, errlen,
			"device budget: cuda:%d has %s free of %s, not more than the %s reserve; lower memory_reserve or free the GPU",
			ordinal, zinf_format_bytes(free_b, a, sizeof(a)),
			zinf_format_bytes(total_b, b, sizeof(b)),
			zinf_format_bytes(opts->memory_reserve, c, sizeof(c)));
		return ZINF_EBUDGET;
	}
	*out = (free_b - opts->memory_reserve) & ~(HEAP_ROUND - 1);
	return 0;
}

int zinf_device_cuda_open(const struct zinf_device_opts *opts, struct zinf_device **out, char *err,
			  size_t errlen)
{
	struct cuda_device *cd;
	struct cudaDeviceProp prop;
	uint64_t size;
	void *heap = NULL;
	cudaError_t e;
	char sz[32], why[256];
	int n = zinf_device_cuda_probe(why, sizeof(why)), rc;

	*out = NULL;
	if (opts->cuda_device < 0 || opts->cuda_device >= n) {
		snprintf(err, errlen,
			 "device: cuda device %d requested but %d GPU(s) are visible%s%s",
			 opts->cuda_device, n, why[0] ? ": " : "", why);
		return ZINF_EDEVICE;
	}
	e = cudaSetDevice(opts->cuda_device);
	if (e == cudaSuccess && opts->cuda_sync != ZINF_CUDA_SYNC_AUTO) {
		static const unsigned flag[] = {
			[ZINF_CUDA_SYNC_SPIN] = cudaDeviceScheduleSpin,
			[ZINF_CUDA_SYNC_YIELD] = cudaDeviceScheduleYield,
			[ZINF_CUDA_SYNC_BLOCKING] = cudaDeviceScheduleBlockingSync,
		};
		if ((unsigned)opts->cuda_sync > ZINF_CUDA_SYNC_BLOCKING) {
			snprintf(err, errlen, "cuda:%d: zinf.cuda_sync %d is not a wait mode",
				 opts->cuda_device, (int)opts->cuda_sync);
			return -EINVAL;
		}
		e = cudaSetDeviceFlags(flag[opts->cuda_sync]);
		if (e != cudaSuccess) {
			(void)cudaGetLastError();
			snprintf(err, errlen,
				 "cuda:%d: zinf.cuda_sync: cudaSetDeviceFlags failed: %s (%s)",
				 opts->cuda_device, cudaGetErrorString(e), cudaGetErrorName(e));
			return ZINF_EDEVICE;
		}
	}
	if (e == cudaSuccess)
		e = cudaGetDeviceProperties(&prop, opts->cuda_device);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		snprintf(err, errlen,
			 "cuda:%d: cudaSetDevice/cudaGetDeviceProperties failed: %s (%s)",
			 opts->cuda_device, cudaGetErrorString(e), cudaGetErrorName(e));
		return ZINF_EDEVICE;
	}
	rc = heap_size(opts, opts->cuda_device, &size, err, errlen);
	if (rc)
		return rc;
	e = cudaMalloc(&heap, size);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		snprintf(err, errlen, "cuda:%d: cudaMalloc of the %s device heap failed: %s (%s)",
			 opts->cuda_device, zinf_format_bytes(size, sz, sizeof(sz)),
			 cudaGetErrorString(e), cudaGetErrorName(e));
		return e == cudaErrorMemoryAllocation ? ZINF_EBUDGET : ZINF_EDEVICE;
	}
	cd = calloc(1, sizeof(*cd));
	if (!cd) {
		rc = -ENOMEM;
		snprintf(err, errlen, "cuda device: out of host memory");
		goto out_free_heap;
	}
	cd->ordinal = opts->cuda_device;
	cd->event_flags = opts->cuda_sync == ZINF_CUDA_SYNC_BLOCKING ? cudaEventBlockingSync : 0;
	rc = zinf_device_init_common(&cd->base, &cuda_ops, ZINF_DEVICE_BACKEND_CUDA, heap, size,
				     opts->max_allocs);
	if (rc) {
		snprintf(err, errlen, "cuda device: heap bookkeeping for %u allocations: %s",
			 opts->max_allocs, strerror(-rc));
		goto out_free_dev;
	}
	pthread_mutex_init(&cd->lock, NULL);
	snprintf(cd->base.name, sizeof(cd->base.name), "cuda:%d %.100s", cd->ordinal, prop.name);
	*out = &cd->base;
	return 0;

out_free_dev:
	free(cd);
out_free_heap:
	cudaFree(heap);
	(void)cudaGetLastError();
	return rc;
}

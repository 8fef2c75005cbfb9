/*
 * Device layer, common part: backend selection, the budgeted heap, argument checks that
 * are the same on every backend (so a wrong pointer fails alike on host and GPU), error
 * strings and the copy counters. Backend work goes through dev->ops.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "optim.h"
#include "thread_error.h"
#include "zinf/config.h"
#include "zinf/error.h"
#include "zinf/log.h"

#define DEVICE_ALIGN 256 /* what cudaMalloc guarantees; kernels rely on it */

static const char *const backend_names[] = {"auto", "cuda", "host"};
static const char *const dir_names[] = {"h2d", "d2h", "d2d"};

uint64_t zinf_device_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void zinf_device_opts_init(struct zinf_device_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->backend = ZINF_DEVICE_BACKEND_AUTO;
	opts->memory_reserve = 1ull << 30;
	opts->max_allocs = 65536;
	opts->stream_depth = 1024;
}

const char *zinf_device_backend_name(enum zinf_device_backend b)
{
	return (unsigned)b < 3 ? backend_names[b] : "unknown";
}

int zinf_device_backend_parse(const char *text, enum zinf_device_backend *out)
{
	for (int i = 0; i < 3; i++) {
		if (text && strcmp(text, backend_names[i]) == 0) {
			*out = (enum zinf_device_backend)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *zinf_copy_dir_name(enum zinf_copy_dir dir)
{
	return (unsigned)dir < ZINF_COPY_DIRS ? dir_names[dir] : "unknown";
}

int zinf_device_create(const struct zinf_device_opts *opts, struct zinf_device **out, char *err,
		       size_t errlen)
{
	enum zinf_device_backend b = opts->backend;
	int ngpu, rc;

	*out = NULL;
	if (errlen)
		err[0] = '\0';
	if ((unsigned)b > ZINF_DEVICE_BACKEND_HOST) {
		snprintf(err, errlen, "device: backend %d is not auto, cuda or host", (int)b);
		return -EINVAL;
	}
	if (!opts->max_allocs || (b != ZINF_DEVICE_BACKEND_CUDA && !opts->stream_depth)) {
		snprintf(err, errlen, "device: max_allocs and stream_depth must be at least 1");
		return -EINVAL;
	}
	if (b == ZINF_DEVICE_BACKEND_AUTO) {
		char why[256];

		ngpu = zinf_device_cuda_probe(why, sizeof(why));
		if (why[0])
			zinf_logf(ZINF_LOG_WARN, "device: auto: no usable GPU: %s", why);
		b = ngpu > 0 ? ZINF_DEVICE_BACKEND_CUDA : ZINF_DEVICE_BACKEND_HOST;
		zinf_logf(ZINF_LOG_INFO, "device: auto: %d GPU(s) visible, using the %s backend",
			  ngpu, backend_names[b]);
	}
	if (b == ZINF_DEVICE_BACKEND_CUDA)
		rc = zinf_device_cuda_open(opts, out, err, errlen);
	else
		rc = zinf_device_host_open(opts, out, err, errlen);
	if (rc == 0 && getenv("ZINF_DEVICE_POISON") && !strcmp(getenv("ZINF_DEVICE_POISON"), "1")) {
		rc = (*out)->ops->stream_create(*out, &(*out)->poison);
		if (rc) {
			snprintf(err, errlen, "device: ZINF_DEVICE_POISON: stream: %s",
				 zinf_device_last_error(*out));
			(*out)->ops->destroy(*out);
			*out = NULL;
			return rc;
		}
		pthread_mutex_init(&(*out)->poison_lock, NULL);
		zinf_logf(ZINF_LOG_INFO,
			  "device: ZINF_DEVICE_POISON: allocations filled with 0xff");
	}
	if (rc == 0) {
		char lim[32];

		(*out)->err_serial = zinf_thread_error_serial();

		zinf_logf(ZINF_LOG_INFO, "device: %s, heap budget %s", (*out)->name,
			  zinf_format_bytes((*out)->heap_size, lim, sizeof(lim)));
	}
	return rc;
}

void zinf_device_destroy(struct zinf_device *dev)
{
	struct zinf_arena_stats st;

	if (!dev)
		return;
	zinf_arena_get_stats(&dev->heap, &st);
	if (st.live)
		zinf_logf(ZINF_LOG_WARN,
			  "device %s destroyed with %llu allocation(s), %llu bytes, still live",
			  dev->name, (unsigned long long)st.live, (unsigned long long)st.used);
	if (dev->poison) {
		dev->ops->stream_destroy(dev->poison);
		pthread_mutex_destroy(&dev->poison_lock);
	}
	dev->ops->destroy(dev);
}

int zinf_device_init_common(struct zinf_device *dev, const struct zinf_device_ops *ops,
			    enum zinf_device_backend backend, void *heap_base, uint64_t heap_size,
			    uint32_t max_allocs)
{
	int rc;

	dev->ops = ops;
	dev->backend = backend;
	dev->heap_base = heap_base;
	dev->heap_size = heap_size;
	rc = zinf_arena_init(&dev->heap, (uint64_t)(uintptr_t)heap_base, heap_size, DEVICE_ALIGN,
			     max_allocs);
	if (rc)
		return rc;
	return 0;
}

void zinf_device_fini_common(struct zinf_device *dev)
{
	zinf_arena_fini(&dev->heap);
}

/* The calling thread's last device error (io/thread_error.h: the store's mover, the
 * optimizer thread and the model's thread queue work on one device at once). */
static __thread struct zinf_thread_error last_error;

int zinf_device_set_error(struct zinf_device *dev, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	zinf_thread_error_vset(&last_error, dev, dev ? dev->err_serial : 0, fmt, ap);
	va_end(ap);
	return code;
}

const char *zinf_device_last_error(struct zinf_device *dev)
{
	return zinf_thread_error_get(&last_error, dev, dev ? dev->err_serial : 0);
}

enum zinf_device_backend zinf_device_backend(const struct zinf_device *dev)
{
	return dev->backend;
}

const char *zinf_device_name(const struct zinf_device *dev)
{
	return dev->name;
}

void zinf_device_account_copy(struct zinf_device *dev, enum zinf_copy_dir dir, uint64_t bytes,
			      uint64_t ns)
{
	__atomic_fetch_add(&dev->copy[dir].bytes, bytes, __ATOMIC_RELAXED);
	__atomic_fetch_add(&dev->copy[dir].ns, ns, __ATOMIC_RELAXED);
	__atomic_fetch_add(&dev->copy[dir].count, 1, __ATOMIC_RELAXED);
}

/* ---- memory -------------------------------------------------------------------------- */

/* Fill an allocation with 0xff before it is handed out and again when it is freed
 * (ZINF_DEVICE_POISON); the fill is not counted in memset_bytes, which stays the callers'
 * own. */
static int poison(struct zinf_device *dev, void *p, uint64_t bytes)
{
	char need[32];
	int rc;

	pthread_mutex_lock(&dev->poison_lock);
	rc = dev->ops->memset_async(dev->poison, p, 0xff, bytes);
	if (!rc)
		rc = dev->ops->stream_synchronize(dev->poison);
	if (!rc)
		__atomic_fetch_sub(&dev->memset_bytes, bytes, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&dev->poison_lock);
	if (rc)
		return zinf_device_set_error(dev, rc, "device: ZINF_DEVICE_POISON fill of %s: %s",
					     zinf_format_bytes(bytes, need, sizeof(need)),
					     zinf_device_last_error(dev));
	return 0;
}

static int device_alloc(struct zinf_device *dev, uint64_t bytes, bool high, void **out)
{
	struct zinf_arena_stats st;
	char need[32], free_b[32], lim[32], big[32];
	uint64_t off;
	int rc;

	*out = NULL;
	if (!bytes)
		return zinf_device_set_error(dev, -EINVAL, "device alloc: size 0");
	rc = high ? zinf_arena_alloc_high(&dev->heap, bytes, DEVICE_ALIGN, &off)
		  : zinf_arena_alloc(&dev->heap, bytes, DEVICE_ALIGN, &off);
	if (rc == 0) {
		*out = (char *)dev->heap_base + off;
		rc = dev->poison ? poison(dev, *out, bytes) : 0;
		if (rc) {
			zinf_arena_free(&dev->heap, off, NULL);
			*out = NULL;
		}
		return rc;
	}
	__atomic_fetch_add(&dev->alloc_failures, 1, __ATOMIC_RELAXED);
	zinf_arena_get_stats(&dev->heap, &st);
	zinf_format_bytes(bytes, need, sizeof(need));
	zinf_format_bytes(st.size - st.used, free_b, sizeof(free_b));
	zinf_format_bytes(st.size, lim, sizeof(lim));
	if (rc == -ENFILE)
		return zinf_device_set_error(
			dev, ZINF_EBUDGET,
			"device budget: need %s, but all %llu allocation slots are live (max_allocs)",
			need, (unsigned long long)st.live);
	if (rc == -EAGAIN)
		return zinf_device_set_error(
			dev, ZINF_EBUDGET,
			"device budget: need %s, %s free of %s but the largest free extent is %s (fragmented)",
			need, free_b, lim, zinf_format_bytes(st.largest_free, big, sizeof(big)));
	if (rc == -ENOSPC || rc == -E2BIG)
		return zinf_device_set_error(dev, ZINF_EBUDGET,
					     "device budget: need %s, %s free of %s", need, free_b,
					     lim);
	return zinf_device_set_error(dev, rc, "device alloc of %s: %s", need, zinf_strerror(rc));
}

int zinf_device_alloc(struct zinf_device *dev, uint64_t bytes, void **out)
{
	return device_alloc(dev, bytes, false, out);
}

int zinf_device_alloc_high(struct zinf_device *dev, uint64_t bytes, void **out)
{
	return device_alloc(dev, bytes, true, out);
}

static bool in_heap(const struct zinf_device *dev, const void *p)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)dev->heap_base;

	return a >= b && a - b < dev->heap_size;
}

int zinf_device_free(struct zinf_device *dev, void *ptr)
{
	uint64_t off = (uint64_t)((uintptr_t)ptr - (uintptr_t)dev->heap_base), len;
	int rc;

	if (!ptr)
		return 0;
	len = in_heap(dev, ptr) ? zinf_arena_length(&dev->heap, off) : 0;
	if (!len)
		return zinf_device_set_error(
			dev, -EINVAL, "device free: %p is not a live device allocation of %s", ptr,
			dev->name);
	if (dev->ops->check_idle) {
		rc = dev->ops->check_idle(dev, ptr, len);
		if (rc)
			return rc;
	}
	/* work still queued on the memory (a free before its event) then reads 0xff; freed
	 * even if the fill fails */
	rc = dev->poison ? poison(dev, ptr, len) : 0;
	zinf_arena_free(&dev->heap, off, NULL);
	return rc;
}

bool zinf_device_owns(struct zinf_device *dev, const void *ptr, uint64_t len)
{
	if (!ptr || !in_heap(dev, ptr))
		return false;
	return zinf_arena_contains(
		&dev->heap, (uint64_t)((const char *)ptr - (char *)dev->heap_base), len ? len : 1);
}

int zinf_device_host_register(struct zinf_device *dev, void *ptr, uint64_t len)
{
	if (!ptr || !len)
		return zinf_device_set_error(dev, -EINVAL, "host register: empty range %p+%llu",
					     ptr, (unsigned long long)len);
	if (in_heap(dev, ptr))
		return zinf_device_set_error(
			dev, -EINVAL, "host register: %p is device memory, not host memory", ptr);
	return dev->ops->host_register(dev, ptr, len);
}

int zinf_device_host_unregister(struct zinf_device *dev, void *ptr, uint64_t len)
{
	if (!ptr || !len)
		return zinf_device_set_error(dev, -EINVAL, "host unregister: empty range %p+%llu",
					     ptr, (unsigned long long)len);
	return dev->ops->host_unregister(dev, ptr, len);
}

bool zinf_device_registers_dma(const struct zinf_device *dev)
{
	return dev->ops->dma_register;
}

int zinf_device_pci_bus_id(struct zinf_device *dev, char *buf, size_t len)
{
	return dev->ops->pci_bus_id(dev, buf, len);
}

/* ---- streams and events ---------------------------------------------------------------- */

int zinf_stream_create(struct zinf_device *dev, struct zinf_stream **out)
{
	*out = NULL;
	return dev->ops->stream_create(dev, out);
}

void zinf_stream_destroy(struct zinf_stream *s)
{
	if (s)
		s->dev->ops->stream_destroy(s);
}

int zinf_stream_synchronize(struct zinf_stream *s)
{
	return s->dev->ops->stream_synchronize(s);
}

int zinf_stream_wait_event(struct zinf_stream *s, struct zinf_event *e)
{
	if (!e || e->dev != s->dev)
		return zinf_device_set_error(s->dev, -EINVAL,
					     "stream wait: event %p does not belong to device %s",
					     (void *)e, s->dev->name);
	return s->dev->ops->stream_wait_event(s, e);
}

void *zinf_stream_native(struct zinf_stream *s)
{
	return s->dev->ops->stream_native(s);
}

int zinf_event_create(struct zinf_device *dev, struct zinf_event **out)
{
	*out = NULL;
	return dev->ops->event_create(dev, out);
}

void zinf_event_destroy(struct zinf_event *e)
{
	if (e)
		e->dev->ops->event_destroy(e);
}

int zinf_event_record(struct zinf_event *e, struct zinf_stream *s)
{
	if (!s || s->dev != e->dev)
		return zinf_device_set_error(e->dev, -EINVAL,
					     "event record: stream %p does not belong to device %s",
					     (void *)s, e->dev->name);
	return e->dev->ops->event_record(e, s);
}

int zinf_event_query(struct zinf_event *e)
{
	return e->dev->ops->event_query(e);
}

int zinf_event_synchronize(struct zinf_event *e)
{
	return e->dev->ops->event_synchronize(e);
}

/* ---- async work ------------------------------------------------------------------------ */

/* Check that p..p+len is device memory (want_device) or lies wholly outside the heap. */
static int check_side(struct zinf_device *dev, const void *p, uint64_t len, bool want_device,
		      enum zinf_copy_dir dir, const char *side)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)dev->heap_base;

	if (!p)
		return zinf_device_set_error(dev, -EINVAL, "%s copy of %llu bytes: %s is NULL",
					     dir_names[dir], (unsigned long long)len, side);
	if (want_device && !zinf_device_owns(dev, p, len))
		return zinf_device_set_error(
			dev, -EINVAL,
			"%s copy of %llu bytes: %s %p is not inside one device allocation of %s",
			dir_names[dir], (unsigned long long)len, side, p, dev->name);
	if (!want_device && a < b + dev->heap_size && b < a + len)
		return zinf_device_set_error(
			dev, -EINVAL,
			"%s copy of %llu bytes: %s %p is device memory, not host memory",
			dir_names[dir], (unsigned long long)len, side, p);
	return 0;
}

int zinf_device_memcpy_async(struct zinf_stream *s, void *dst, const void *src, uint64_t len,
			     enum zinf_copy_dir dir)
{
	struct zinf_device *dev = s->dev;
	int rc;

	if ((unsigned)dir >= ZINF_COPY_DIRS)
		return zinf_device_set_error(dev, -EINVAL,
					     "copy: direction %d is not h2d, d2h or d2d", (int)dir);
	if (!len)
		return 0;
	rc = check_side(dev, dst, len, dir != ZINF_COPY_D2H, dir, "destination");
	if (!rc)
		rc = check_side(dev, src, len, dir != ZINF_COPY_H2D, dir, "source");
	if (rc)
		return rc;
	return dev->ops->memcpy_async(s, dst, src, len, dir);
}

int zinf_device_memset_async(struct zinf_stream *s, void *dst, int value, uint64_t len)
{
	struct zinf_device *dev = s->dev;

	if (!len)
		return 0;
	if (!zinf_device_owns(dev, dst, len))
		return zinf_device_set_error(
			dev, -EINVAL,
			"memset of %llu bytes: %p is not inside one device allocation of %s",
			(unsigned long long)len, dst, dev->name);
	return dev->ops->memset_async(s, dst, value, len);
}

int zinf_device_synchronize(struct zinf_device *dev)
{
	return dev->ops->synchronize(dev);
}

/* ---- compute on device memory ----------------------------------------------------------- */

/* p..p + len inside one device allocation (len 0: anything), or -EINVAL naming what. */
static int check_owned(struct zinf_device *dev, const char *op, const char *what, const void *p,
		       uint64_t len)
{
	if (!len || zinf_device_owns(dev, p, len))
		return 0;
	return zinf_device_set_error(dev, -EINVAL,
				     "%s of %llu bytes: %s %p is not inside one device allocation "
				     "of %s",
				     op, (unsigned long long)len, what, p, dev->name);
}

int zinf_device_add_f32(struct zinf_stream *s, float *dst, const float *src, uint64_t n)
{
	struct zinf_device *dev = s->dev;
	int rc = check_owned(dev, "add", "destination", dst, 4 * n);

	if (!rc)
		rc = check_owned(dev, "add", "source", src, 4 * n);
	if (rc || !n)
		return rc;
	return dev->ops->add_f32(s, dst, src, n);
}

int zinf_device_sumsq_f32(struct zinf_stream *s, const float *src, uint64_t n, void *parts,
			  double *out)
{
	return zinf_device_sumsq_f32_many(s, 1, &src, &n, parts, out);
}

int zinf_device_sumsq_f32_many(struct zinf_stream *s, uint32_t count, const float *const *src,
			       const uint64_t *n, void *parts, double *out)
{
	struct zinf_device *dev = s->dev;
	int rc = 0;

	for (uint32_t i = 0; i < count; i++)
		out[i] = 0;
	for (uint32_t i = 0; i < count && !rc; i++)
		rc = check_owned(dev, "sum of squares", "source", src[i], 4 * n[i]);
	if (!rc && count)
		rc = check_owned(dev, "sum of squares", "partial sums", parts,
				 (uint64_t)count * ZINF_DEVICE_SUMSQ_BYTES);
	if (rc || !count)
		return rc;
	return dev->ops->sumsq_f32_many(s, count, src, n, parts, out);
}

int zinf_device_adam_update(struct zinf_stream *s, const struct zinf_adam_args *a, uint64_t n)
{
	struct zinf_device *dev = s->dev;
	uint64_t gb = a->g_dtype == ZINF_DTYPE_F32 ? 4 : 2;
	uint64_t ob = a->out_dtype == ZINF_DTYPE_F32 ? 4 : 2;
	int rc = check_owned(dev, "adam", "master", a->p, 4 * n);

	if (!rc)
		rc = check_owned(dev, "adam", "exp_avg", a->m, 4 * n);
	if (!rc)
		rc = check_owned(dev, "adam", "exp_avg_sq", a->v, 4 * n);
	if (!rc)
		rc = check_owned(dev, "adam", "gradient", a->g, gb * n);
	if (!rc && a->out)
		rc = check_owned(dev, "adam", "parameter copy", a->out, ob * n);
	if (rc || !n)
		return rc;
	return dev->ops->adam_update(s, a, n);
}

void zinf_device_get_stats(struct zinf_device *dev, struct zinf_device_stats *out)
{
	struct zinf_arena_stats st;

	if (dev->ops->collect_stats)
		dev->ops->collect_stats(dev);
	zinf_arena_get_stats(&dev->heap, &st);
	memset(out, 0, sizeof(*out));
	out->limit = st.size;
	out->used = st.used;
	out->largest_free = st.largest_free;
	out->peak = st.peak;
	out->live_allocs = st.live;
	out->alloc_failures = __atomic_load_n(&dev->alloc_failures, __ATOMIC_RELAXED);
	for (int d = 0; d < ZINF_COPY_DIRS; d++) {
		out->copy[d].bytes = __atomic_load_n(&dev->copy[d].bytes, __ATOMIC_RELAXED);
		out->copy[d].ns = __atomic_load_n(&dev->copy[d].ns, __ATOMIC_RELAXED);
		out->copy[d].count = __atomic_load_n(&dev->copy[d].count, __ATOMIC_RELAXED);
	}
	out->memset_bytes = __atomic_load_n(&dev->memset_bytes, __ATOMIC_RELAXED);
}

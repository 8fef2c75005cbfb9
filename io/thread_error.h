/*
 * A handle's last error, per thread: the I/O handle here, and src/'s shard store, device
 * and pinned pool. Several threads call one handle at once (the model's, the store's
 * mover, the optimizer's, the gradient worker); one message buffer per handle would hand
 * a thread another's message, or a torn mix of two. So each thread keeps the message of
 * its own last failure, tagged with the handle and the handle's serial number: a handle
 * created at a destroyed one's address gets a new serial and does not show the old
 * message to any thread. Each kind of handle keeps its own thread-local record.
 */
#ifndef ZINF_IO_THREAD_ERROR_H
#define ZINF_IO_THREAD_ERROR_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "zinf/error.h"

struct zinf_thread_error {
	const void *handle;
	uint64_t serial;
	char msg[512];
};

/* A serial for a new handle: never 0, never repeated within this kind of handle. */
static inline uint64_t zinf_thread_error_serial(void)
{
	static uint64_t next;

	return __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
}

static inline void zinf_thread_error_vset(struct zinf_thread_error *t, const void *handle,
					  uint64_t serial, const char *fmt, va_list ap)
{
	vsnprintf(t->msg, sizeof(t->msg), fmt, ap);
	zinf_error_one_line(t->msg); /* names and paths may hold a newline */
	t->handle = handle;
	t->serial = serial;
}

/* The calling thread's last message on (handle, serial), or "". */
static inline const char *zinf_thread_error_get(const struct zinf_thread_error *t,
						const void *handle, uint64_t serial)
{
	return handle && t->handle == handle && t->serial == serial ? t->msg : "";
}

#endif /* ZINF_IO_THREAD_ERROR_H */

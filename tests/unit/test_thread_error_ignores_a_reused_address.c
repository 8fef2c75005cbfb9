/* The per-thread last-error record (io/thread_error.h, used by the I/O handle, the shard
 * store, the device and the pinned pool) shows a message only for the handle and the
 * handle's serial it was recorded on: a handle created at a destroyed one's address (a
 * new serial) reads "", as do other handles and NULL; serials never repeat. The
 * handles' own tests cover the threads; this one covers the address reuse that malloc
 * does not produce on demand. */
#include <stdarg.h>

#include "test.h"
#include "thread_error.h"

static __thread struct zinf_thread_error rec;

static void set(const void *h, uint64_t serial, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	zinf_thread_error_vset(&rec, h, serial, fmt, ap);
	va_end(ap);
}

int main(void)
{
	int a, b;
	uint64_t s1 = zinf_thread_error_serial(), s2 = zinf_thread_error_serial();

	T_CHECK(s1 != 0 && s2 != 0 && s1 != s2, "serials %llu %llu", (unsigned long long)s1,
		(unsigned long long)s2);
	T_CHECK_STR(zinf_thread_error_get(&rec, &a, s1), "");
	set(&a, s1, "extent %d: %s", 7, "gone");
	T_CHECK_STR(zinf_thread_error_get(&rec, &a, s1), "extent 7: gone");
	/* the same address, a new handle */
	T_CHECK_STR(zinf_thread_error_get(&rec, &a, s2), "");
	T_CHECK_STR(zinf_thread_error_get(&rec, &b, s1), "");
	T_CHECK_STR(zinf_thread_error_get(&rec, NULL, s1), "");
	set(&b, s2, "%s", "other");
	T_CHECK_STR(zinf_thread_error_get(&rec, &a, s1), "");
	T_CHECK_STR(zinf_thread_error_get(&rec, &b, s2), "other");
	return T_EXIT_PASS;
}

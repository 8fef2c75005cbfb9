/*
 * A fixed pool of worker threads for element-wise loops over host memory (src/pool.c):
 * the CPU Adam's step, the gradient sums and their sums of squares. A loop over [0, n) is cut into
 * contiguous slices, one per thread at most, the calling thread taking the last; so a
 * loop whose elements are independent gives the same bits on any number of threads.
 */
#ifndef ZINF_SRC_POOL_H
#define ZINF_SRC_POOL_H

#include <pthread.h>
#include <stdint.h>

struct zinf_pool;

/* Elements [begin, end) of the loop; ctx is the caller's. */
typedef void (*zinf_pool_fn)(void *ctx, uint64_t begin, uint64_t end);

/* A pool of threads - 1 workers (threads >= 1, the caller being the last). 0, -ENOMEM,
 * or the error of a worker that could not start (logged; nothing is left running). */
int zinf_pool_create(unsigned threads, struct zinf_pool **out);
void zinf_pool_destroy(struct zinf_pool *p);

/* Threads that share a loop, the caller included. */
unsigned zinf_pool_threads(const struct zinf_pool *p);
/* Worker i (< zinf_pool_threads - 1), to bind it to a core. */
pthread_t zinf_pool_worker(const struct zinf_pool *p, unsigned i);

/* Run fn over [0, n) and return when all of it has run: one contiguous slice per thread
 * at most, as many as slices of min_slice elements fill (under 2 * min_slice the caller
 * alone), each but the first starting on a multiple of align elements from the loop's
 * start (so that, over a buffer aligned to align elements, no two threads write one cache
 * line; the rounding can leave the last slice shorter, or a thread with none). Calls
 * from several threads take turns. p may be NULL: the caller runs it all. */
void zinf_pool_for(struct zinf_pool *p, uint64_t n, uint64_t min_slice, uint64_t align,
		   zinf_pool_fn fn, void *ctx);

/* dst[i] += src[i] for n floats on p's threads (p NULL: the caller's alone): slices of
 * 64Ki elements at least, 64 bytes apart from the start; each element added by one
 * thread, so the bits do not depend on how many. */
void zinf_pool_add_f32(struct zinf_pool *p, float *dst, const float *src, uint64_t n);

#endif /* ZINF_SRC_POOL_H */

/*
 * 1 GiB streams through a 32 MiB pinned pool and a 16 MiB device budget and comes back
 * bit-exact: chunks are staged in pinned buffers, copied up on one stream, down on
 * another after the up-copy's event, with 4 chunks of 4 MiB in flight (both budgets
 * full). The stats show the bytes per direction and peaks within both budgets. Prints
 * the copy bandwidth.
 */
#include <stdio.h>

#include "pinned.h"
#include "tiers_test.h"

#define MiB (1ull << 20)
#define TOTAL (1024 * MiB)
#define CHUNK (4 * MiB)
#define INFLIGHT 4

struct slot {
	void *in, *out, *dev;
	struct zinf_event *up, *down;
	uint64_t seed;
	bool busy;
};

static struct zinf_pinned *pool;
static struct zinf_device *dev;

static void retire(struct slot *s)
{
	if (!s->busy)
		return;
	T_CHECK_RC(zinf_event_synchronize(s->down));
	T_CHECK(tt_check(s->out, CHUNK, s->seed) == UINT64_MAX, "chunk %llu: word %llu differs",
		(unsigned long long)s->seed, (unsigned long long)tt_check(s->out, CHUNK, s->seed));
	T_CHECK_RC(zinf_pinned_free(pool, s->in));
	T_CHECK_RC(zinf_pinned_free(pool, s->out));
	T_CHECK_RC(zinf_device_free(dev, s->dev));
	s->busy = false;
}

int main(void)
{
	struct zinf_pinned_opts po;
	struct zinf_device_stats ds;
	struct zinf_pinned_stats ps;
	struct zinf_stream *up, *down;
	struct slot slot[INFLIGHT] = {0};
	char err[512];
	uint64_t t0;

	dev = tt_host_device(16 * MiB, 2);
	zinf_pinned_opts_init(&po);
	po.size = 32 * MiB;
	po.device = dev;
	po.lock = ZINF_PINNED_LOCK_BEST_EFFORT; /* CI runners often allow 8 MiB locked */
	T_CHECK(zinf_pinned_create(&po, &pool, err, sizeof(err)) == 0, "pinned: %s", err);
	T_CHECK_RC(zinf_stream_create(dev, &up));
	T_CHECK_RC(zinf_stream_create(dev, &down));
	for (int i = 0; i < INFLIGHT; i++) {
		T_CHECK_RC(zinf_event_create(dev, &slot[i].up));
		T_CHECK_RC(zinf_event_create(dev, &slot[i].down));
	}
	t0 = zinf_device_now_ns();
	for (uint64_t c = 0; c < TOTAL / CHUNK; c++) {
		struct slot *s = &slot[c % INFLIGHT];

		retire(s);
		s->seed = c;
		T_CHECK_RC(zinf_pinned_alloc(pool, CHUNK, 10ull * 1000000000ull, &s->in));
		T_CHECK_RC(zinf_pinned_alloc(pool, CHUNK, 10ull * 1000000000ull, &s->out));
		T_CHECK_RC(zinf_device_alloc(dev, CHUNK, &s->dev));
		tt_fill(s->in, CHUNK, c); /* stands in for an NVMe read into pinned memory */
		T_CHECK_RC(zinf_device_memcpy_async(up, s->dev, s->in, CHUNK, ZINF_COPY_H2D));
		T_CHECK_RC(zinf_event_record(s->up, up));
		T_CHECK_RC(zinf_stream_wait_event(down, s->up));
		T_CHECK_RC(zinf_device_memcpy_async(down, s->out, s->dev, CHUNK, ZINF_COPY_D2H));
		T_CHECK_RC(zinf_event_record(s->down, down));
		s->busy = true;
	}
	for (int i = 0; i < INFLIGHT; i++)
		retire(&slot[i]);
	zinf_device_get_stats(dev, &ds);
	zinf_pinned_get_stats(pool, &ps);
	T_CHECK(ds.copy[ZINF_COPY_H2D].bytes == TOTAL && ds.copy[ZINF_COPY_D2H].bytes == TOTAL,
		"bytes per direction");
	T_CHECK(ds.peak <= 16 * MiB && ds.peak == INFLIGHT * CHUNK, "device peak %llu",
		(unsigned long long)ds.peak);
	T_CHECK(ps.peak <= 32 * MiB && ps.peak == 2 * INFLIGHT * CHUNK, "pinned peak %llu",
		(unsigned long long)ps.peak);
	T_CHECK(ds.used == 0 && ps.used == 0, "everything returned");
	printf("1 GiB round trip in %.2f s; h2d %.2f GB/s, d2h %.2f GB/s (copy-thread time)\n",
	       (double)(zinf_device_now_ns() - t0) / 1e9,
	       (double)ds.copy[ZINF_COPY_H2D].bytes / (double)ds.copy[ZINF_COPY_H2D].ns,
	       (double)ds.copy[ZINF_COPY_D2H].bytes / (double)ds.copy[ZINF_COPY_D2H].ns);
	for (int i = 0; i < INFLIGHT; i++) {
		zinf_event_destroy(slot[i].up);
		zinf_event_destroy(slot[i].down);
	}
	zinf_stream_destroy(up);
	zinf_stream_destroy(down);
	zinf_pinned_destroy(pool);
	zinf_device_destroy(dev);
	return T_EXIT_PASS;
}

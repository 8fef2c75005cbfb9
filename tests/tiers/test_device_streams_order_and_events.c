/*
 * Host backend streams and events behave like CUDA's, under concurrency:
 *  1. private streams: each stream runs a long random mix of H2D, D2D, D2H and memset on
 *     its own blocks while all streams run at once; only in-stream order makes the
 *     final bytes right;
 *  2. a chain across streams: every op depends on the previous one through an event
 *     (re-recorded each time) and stream-wait-event, so the result equals a sequential
 *     model only if waits really wait; event_synchronize makes results visible at once;
 *  3. producer/consumer: a big H2D on A, a D2D on B after A's event, then A overwrites
 *     the source after B's event: the copy must hold the first data, never the second;
 *  4. one event re-recorded: on a busy stream and then on an idle one (the later record
 *     finishes first), and 200 times behind queued copies: a wait made before the
 *     re-record still waits for the earlier record's work.
 * A model of every buffer on the host predicts the bytes; every device block and host
 * destination is checked at the end.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tiers_test.h"

#define MiB (1ull << 20)
#define NSTREAMS 4
#define BLOCK (1 * MiB)
#define NBLOCKS 8 /* per stream in phase 1; shared in phase 2 */
#define NHOST 8
#define OPS 1500

struct world {
	uint8_t *dblk[NBLOCKS]; /* device blocks */
	uint8_t *mblk[NBLOCKS]; /* their model */
	uint8_t *hdst[NHOST];	/* D2H destinations */
	uint8_t *mdst[NHOST];	/* their model */
	uint8_t *hsrc;		/* H2D source, constant pattern */
};

static struct zinf_device *dev;

/* Device blocks start zeroed, as the model does (the heap reuses freed memory). */
static void world_init(struct world *w, struct zinf_stream *s, uint64_t seed)
{
	w->hsrc = malloc(BLOCK);
	T_CHECK(w->hsrc, "malloc");
	tt_fill(w->hsrc, BLOCK, seed);
	for (int i = 0; i < NBLOCKS; i++) {
		T_CHECK_RC(zinf_device_alloc(dev, BLOCK, (void **)&w->dblk[i]));
		T_CHECK_RC(zinf_device_memset_async(s, w->dblk[i], 0, BLOCK));
		w->mblk[i] = calloc(1, BLOCK);
		T_CHECK(w->mblk[i], "calloc");
	}
	for (int i = 0; i < NHOST; i++) {
		w->hdst[i] = calloc(1, BLOCK);
		w->mdst[i] = calloc(1, BLOCK);
		T_CHECK(w->hdst[i] && w->mdst[i], "calloc");
	}
	T_CHECK_RC(zinf_stream_synchronize(s));
}

static void world_fini(struct world *w)
{
	for (int i = 0; i < NBLOCKS; i++) {
		T_CHECK_RC(zinf_device_free(dev, w->dblk[i]));
		free(w->mblk[i]);
	}
	for (int i = 0; i < NHOST; i++) {
		free(w->hdst[i]);
		free(w->mdst[i]);
	}
	free(w->hsrc);
}

/* Queue one random op on s and apply it to the model. */
static void random_op(struct world *w, struct zinf_stream *s, uint64_t *rng)
{
	uint64_t len = 8 * (1 + tt_rand(rng) % (BLOCK / 8));
	uint64_t a = 8 * (tt_rand(rng) % ((BLOCK - len) / 8 + 1));
	uint64_t b = 8 * (tt_rand(rng) % ((BLOCK - len) / 8 + 1));
	int i = (int)(tt_rand(rng) % NBLOCKS), j = (int)(tt_rand(rng) % NBLOCKS);
	int h = (int)(tt_rand(rng) % NHOST), v = (int)(tt_rand(rng) & 255);

	switch (tt_rand(rng) % 4) {
	case 0:
		T_CHECK_RC(zinf_device_memcpy_async(s, w->dblk[i] + a, w->hsrc + b, len,
						    ZINF_COPY_H2D));
		memcpy(w->mblk[i] + a, w->hsrc + b, len);
		break;
	case 1:
		if (i == j)
			j = (i + 1) % NBLOCKS; /* no overlapping D2D */
		T_CHECK_RC(zinf_device_memcpy_async(s, w->dblk[j] + a, w->dblk[i] + b, len,
						    ZINF_COPY_D2D));
		memcpy(w->mblk[j] + a, w->mblk[i] + b, len);
		break;
	case 2:
		T_CHECK_RC(zinf_device_memcpy_async(s, w->hdst[h] + a, w->dblk[i] + b, len,
						    ZINF_COPY_D2H));
		memcpy(w->mdst[h] + a, w->mblk[i] + b, len);
		break;
	default:
		T_CHECK_RC(zinf_device_memset_async(s, w->dblk[i] + a, v, len));
		memset(w->mblk[i] + a, v, len);
		break;
	}
}

static void world_verify(struct world *w, struct zinf_stream *s, const char *phase)
{
	uint8_t *back = malloc(BLOCK);

	T_CHECK(back, "malloc");
	for (int i = 0; i < NBLOCKS; i++) {
		T_CHECK_RC(zinf_device_memcpy_async(s, back, w->dblk[i], BLOCK, ZINF_COPY_D2H));
		T_CHECK_RC(zinf_stream_synchronize(s));
		T_CHECK(memcmp(back, w->mblk[i], BLOCK) == 0, "%s: device block %d differs", phase,
			i);
	}
	for (int i = 0; i < NHOST; i++)
		T_CHECK(memcmp(w->hdst[i], w->mdst[i], BLOCK) == 0, "%s: host buffer %d differs",
			phase, i);
	free(back);
}

/* Phase 1: each stream alone on its own world, all at once. */
static void phase_private(struct zinf_stream **s)
{
	struct world w[NSTREAMS];
	uint64_t rng[NSTREAMS];

	for (int k = 0; k < NSTREAMS; k++) {
		world_init(&w[k], s[k], 100 + k);
		rng[k] = 0x9e37ull * (k + 1);
	}
	/* Interleave the enqueueing so all streams have work queued at once. */
	for (int op = 0; op < OPS; op++) {
		for (int k = 0; k < NSTREAMS; k++)
			random_op(&w[k], s[k], &rng[k]);
	}
	T_CHECK_RC(zinf_device_synchronize(dev));
	for (int k = 0; k < NSTREAMS; k++) {
		world_verify(&w[k], s[k], "private streams");
		world_fini(&w[k]);
	}
}

/* Phase 2: one world, ops hop between streams, each after the previous op's event. */
static void phase_chain(struct zinf_stream **s, struct zinf_event **ev)
{
	struct world w;
	uint64_t rng = 0xfeedull;
	int prev = -1;

	world_init(&w, s[0], 7);
	for (int op = 0; op < OPS * 2; op++) {
		int k = (int)(tt_rand(&rng) % NSTREAMS);

		if (prev >= 0 && prev != k)
			T_CHECK_RC(zinf_stream_wait_event(s[k], ev[prev]));
		random_op(&w, s[k], &rng);
		T_CHECK_RC(zinf_event_record(ev[k], s[k]));
		prev = k;
		if (op % 500 == 499) {
			/* After event_synchronize, everything the chain did so far is visible. */
			T_CHECK_RC(zinf_event_synchronize(ev[k]));
			T_CHECK(zinf_event_query(ev[k]) == 0, "query after synchronize");
			for (int i = 0; i < NHOST; i++)
				T_CHECK(memcmp(w.hdst[i], w.mdst[i], BLOCK) == 0,
					"chain op %d: host buffer %d not complete after event sync",
					op, i);
		}
	}
	T_CHECK_RC(zinf_device_synchronize(dev));
	world_verify(&w, s[0], "event chain");
	world_fini(&w);
}

/* Phase 3: B copies what A wrote, then A overwrites it; events keep them apart. */
static void phase_producer_consumer(struct zinf_stream **s, struct zinf_event **ev)
{
	const uint64_t big = 24 * MiB;
	uint8_t *x, *y, *src = malloc(big), *back = malloc(big);

	T_CHECK(src && back, "malloc");
	T_CHECK_RC(zinf_device_alloc(dev, big, (void **)&x));
	T_CHECK_RC(zinf_device_alloc(dev, big, (void **)&y));
	for (uint64_t round = 0; round < 12; round++) {
		tt_fill(src, big, 1000 + round);
		T_CHECK_RC(zinf_device_memcpy_async(s[0], x, src, big, ZINF_COPY_H2D));
		T_CHECK_RC(zinf_event_record(ev[0], s[0]));
		T_CHECK_RC(zinf_stream_wait_event(s[1], ev[0]));
		T_CHECK_RC(zinf_device_memcpy_async(s[1], y, x, big, ZINF_COPY_D2D));
		T_CHECK_RC(zinf_event_record(ev[1], s[1]));
		T_CHECK_RC(zinf_stream_wait_event(s[0], ev[1]));
		T_CHECK_RC(zinf_device_memset_async(s[0], x, 0xee, big));
		T_CHECK_RC(zinf_device_memcpy_async(s[1], back, y, big, ZINF_COPY_D2H));
		T_CHECK_RC(zinf_stream_synchronize(s[1]));
		T_CHECK(tt_check(back, big, 1000 + round) == UINT64_MAX,
			"round %llu: consumer saw word %llu wrong", (unsigned long long)round,
			(unsigned long long)tt_check(back, big, 1000 + round));
		T_CHECK_RC(zinf_stream_synchronize(s[0]));
	}
	T_CHECK_RC(zinf_device_free(dev, x));
	T_CHECK_RC(zinf_device_free(dev, y));
	free(src);
	free(back);
}

/* Phase 4: records of one event completing out of order, and many records queued. */
static void phase_rerecord(struct zinf_stream **s, struct zinf_event *e)
{
	const uint64_t big = 24 * MiB;
	uint8_t *x, *src = malloc(big), *out = malloc(big);

	T_CHECK(src && out, "malloc");
	T_CHECK_RC(zinf_device_alloc(dev, big, (void **)&x));
	for (uint64_t round = 0; round < 6; round++) {
		memset(out, 0, big);
		tt_fill(src, big, 5000 + round);
		T_CHECK_RC(zinf_device_memcpy_async(s[0], x, src, big, ZINF_COPY_H2D));
		T_CHECK_RC(zinf_event_record(e, s[0])); /* record n: behind the big copy */
		T_CHECK_RC(zinf_stream_wait_event(s[2], e));
		T_CHECK_RC(zinf_event_record(e, s[1])); /* record n + 1: on an idle stream */
		if (round % 2) {
			/* Many more records queued behind more work on s[0]. */
			for (int i = 0; i < 200; i++) {
				T_CHECK_RC(zinf_device_memset_async(s[0], x + big - 4096, 0, 8));
				T_CHECK_RC(zinf_event_record(e, s[0]));
			}
		}
		T_CHECK_RC(zinf_device_memcpy_async(s[2], out, x, big - 4096, ZINF_COPY_D2H));
		T_CHECK_RC(zinf_stream_synchronize(s[2]));
		T_CHECK(tt_check(out, big - 4096, 5000 + round) == UINT64_MAX,
			"round %llu: the wait did not wait for the earlier record (word %llu)",
			(unsigned long long)round,
			(unsigned long long)tt_check(out, big - 4096, 5000 + round));
		T_CHECK_RC(zinf_event_synchronize(e));
		T_CHECK(zinf_event_query(e) == 0, "latest record complete");
		T_CHECK_RC(zinf_device_synchronize(dev));
	}
	T_CHECK_RC(zinf_device_free(dev, x));
	free(src);
	free(out);
}

int main(void)
{
	struct zinf_stream *s[NSTREAMS];
	struct zinf_event *ev[NSTREAMS], *never;

	dev = tt_host_device(96 * MiB, 3);
	for (int k = 0; k < NSTREAMS; k++) {
		T_CHECK_RC(zinf_stream_create(dev, &s[k]));
		T_CHECK_RC(zinf_event_create(dev, &ev[k]));
		T_CHECK(zinf_stream_native(s[k]) == NULL, "host streams have no native handle");
	}
	/* An event never recorded is complete, and waiting on it is a no-op. */
	T_CHECK_RC(zinf_event_create(dev, &never));
	T_CHECK(zinf_event_query(never) == 0, "unrecorded event is complete");
	T_CHECK_RC(zinf_event_synchronize(never));
	T_CHECK_RC(zinf_stream_wait_event(s[0], never));
	zinf_event_destroy(never);

	phase_private(s);
	phase_chain(s, ev);
	phase_producer_consumer(s, ev);
	phase_rerecord(s, ev[3]);

	for (int k = 0; k < NSTREAMS; k++) {
		zinf_event_destroy(ev[k]);
		zinf_stream_destroy(s[k]);
	}
	zinf_device_destroy(dev);
	return T_EXIT_PASS;
}

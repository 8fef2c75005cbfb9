/*
 * The device heap never holds more than its budget: random allocations from several
 * threads never push "used" past the limit, a request that does not fit fails with
 * ZINF_EBUDGET and the numbers ("device budget: need 64 MiB, 10 MiB free of 256 MiB"),
 * fragmentation is named as such, and freeing everything returns used to zero.
 */
#include <pthread.h>
#include <stdio.h>

#include "tiers_test.h"
#include "zinf/error.h"

#define MiB (1ull << 20)
#define LIMIT (256 * MiB)
#define THREADS 4
#define ROUNDS 4000

static struct zinf_device *dev;

static void *churn(void *arg)
{
	uint64_t rng = 0x1234567ull + (uintptr_t)arg * 7919, refused = 0;
	void *held[32] = {0};

	for (int r = 0; r < ROUNDS; r++) {
		int i = (int)(tt_rand(&rng) % 32);
		struct zinf_device_stats st;

		if (held[i]) {
			T_CHECK_RC(zinf_device_free(dev, held[i]));
			held[i] = NULL;
		} else {
			uint64_t len = 1 + tt_rand(&rng) % (24 * MiB);
			int rc = zinf_device_alloc(dev, len, &held[i]);

			T_CHECK(rc == 0 || rc == ZINF_EBUDGET, "alloc %llu: %d",
				(unsigned long long)len, rc);
			if (rc == 0) {
				T_CHECK(((uintptr_t)held[i] & 255) == 0, "alignment %p", held[i]);
				T_CHECK(zinf_device_owns(dev, held[i], len), "owns");
				/* Touch both ends: the memory is really there. */
				((volatile char *)held[i])[0] = 1;
				((volatile char *)held[i])[len - 1] = 1;
			} else {
				refused++;
			}
		}
		zinf_device_get_stats(dev, &st);
		T_CHECK(st.used <= LIMIT && st.peak <= LIMIT, "used %llu peak %llu",
			(unsigned long long)st.used, (unsigned long long)st.peak);
	}
	for (int i = 0; i < 32; i++)
		T_CHECK_RC(zinf_device_free(dev, held[i]));
	return (void *)(uintptr_t)refused;
}

int main(void)
{
	struct zinf_device_stats st;
	pthread_t th[THREADS];
	void *a, *b, *c, *d;
	uint64_t refused = 0;

	dev = tt_host_device(LIMIT, 2);

	/* Exact message when the budget cannot hold a request. */
	T_CHECK_RC(zinf_device_alloc(dev, 246 * MiB, &a));
	T_CHECK(zinf_device_alloc(dev, 64 * MiB, &b) == ZINF_EBUDGET, "64 MiB over budget");
	T_CHECK(b == NULL, "failed alloc leaves NULL");
	T_CHECK_STR(zinf_device_last_error(dev),
		    "device budget: need 64 MiB, 10 MiB free of 256 MiB");
	T_CHECK_RC(zinf_device_free(dev, a));

	/* Larger than the whole budget. */
	T_CHECK(zinf_device_alloc(dev, LIMIT + 1, &a) == ZINF_EBUDGET, "over the limit");
	T_CHECK_STR(zinf_device_last_error(dev),
		    "device budget: need 256.00 MiB, 256 MiB free of 256 MiB");

	/* Fragmentation: 128 MiB free in two 64 MiB holes cannot hold 100 MiB. */
	T_CHECK_RC(zinf_device_alloc(dev, 64 * MiB, &a));
	T_CHECK_RC(zinf_device_alloc(dev, 64 * MiB, &b));
	T_CHECK_RC(zinf_device_alloc(dev, 64 * MiB, &c));
	T_CHECK_RC(zinf_device_alloc(dev, 64 * MiB, &d));
	T_CHECK_RC(zinf_device_free(dev, a));
	T_CHECK_RC(zinf_device_free(dev, c));
	T_CHECK(zinf_device_alloc(dev, 100 * MiB, &a) == ZINF_EBUDGET, "fragmented");
	T_CHECK_STR(
		zinf_device_last_error(dev),
		"device budget: need 100 MiB, 128 MiB free of 256 MiB but the largest free extent is 64 MiB (fragmented)");
	zinf_device_get_stats(dev, &st); /* the stores' messages say so from the stats */
	T_CHECK(st.largest_free == 64 * MiB && st.limit - st.used == 128 * MiB,
		"stats: largest free extent %llu of %llu free", (unsigned long long)st.largest_free,
		(unsigned long long)(st.limit - st.used));
	/* Freeing b merges a, b, c into one 192 MiB hole. */
	T_CHECK_RC(zinf_device_free(dev, b));
	T_CHECK_RC(zinf_device_alloc(dev, 192 * MiB, &a));
	T_CHECK_RC(zinf_device_free(dev, a));
	T_CHECK_RC(zinf_device_free(dev, d));

	/* Concurrent churn never passes the limit. */
	for (uintptr_t i = 0; i < THREADS; i++)
		T_CHECK(pthread_create(&th[i], NULL, churn, (void *)i) == 0, "thread");
	for (int i = 0; i < THREADS; i++) {
		void *r;

		pthread_join(th[i], &r);
		refused += (uintptr_t)r;
	}
	zinf_device_get_stats(dev, &st);
	T_CHECK(st.used == 0 && st.live_allocs == 0, "all freed: used %llu live %llu",
		(unsigned long long)st.used, (unsigned long long)st.live_allocs);
	T_CHECK(st.peak <= LIMIT && st.peak > LIMIT / 2, "peak %llu", (unsigned long long)st.peak);
	T_CHECK(refused > 0, "the churn must hit the budget at least once");
	T_CHECK(st.alloc_failures >= refused + 3, "failures counted: %llu",
		(unsigned long long)st.alloc_failures);
	printf("peak %llu of %llu bytes, %llu refusals\n", (unsigned long long)st.peak,
	       (unsigned long long)LIMIT, (unsigned long long)refused);
	zinf_device_destroy(dev);
	return T_EXIT_PASS;
}

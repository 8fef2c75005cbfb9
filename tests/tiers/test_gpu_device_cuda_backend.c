/*
 * The CUDA backend keeps the device contract on a real GPU: the heap is one allocation
 * capped by the budget (ZINF_EBUDGET with the numbers past it), copies in every
 * direction between a cudaHostRegister'ed pinned pool and device memory come back
 * bit-exact across streams ordered by events, memset works, timing and byte counters
 * fill in, a CUDA error is translated into a one-line message naming the call, and a
 * driver that finds no GPU is named with its error (simulated); all of it with the host
 * waiting in blocking mode (zinf.cuda_sync blocking: event waits sleep too), an unknown
 * wait mode refused, and a limit that leaves less than the reserve free warned of.
 * Skips (77) without a GPU, and in builds without CUDA.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "pinned.h"
#include "tiers_test.h"
#include "zinf/error.h"
#include "zinf/log.h"

#define MiB (1ull << 20)
#define LEN (32 * MiB)

static char warning[512];

static void keep_warning(enum zinf_log_level level, const char *msg, void *user)
{
	(void)user;
	if (level == ZINF_LOG_WARN)
		snprintf(warning, sizeof(warning), "%s", msg);
}

int main(void)
{
	struct zinf_device_opts o;
	struct zinf_device *dev;
	struct zinf_device_stats st;
	struct zinf_pinned_opts po;
	struct zinf_pinned_stats ps;
	struct zinf_pinned *pool;
	struct zinf_stream *a, *b;
	struct zinf_event *e;
	uint8_t *in, *out, *d1, *d2, *big;
	char err[512], busid[32];
	unsigned long (*spins)(void);
	int rc;

	t_require_gpu();
	zinf_device_opts_init(&o);
	o.backend = ZINF_DEVICE_BACKEND_CUDA;
	o.memory_limit = 256 * MiB;
	o.cuda_sync = (enum zinf_cuda_sync)7;
	T_CHECK(zinf_device_create(&o, &dev, err, sizeof(err)) == -EINVAL &&
			strstr(err, "zinf.cuda_sync 7"),
		"an unknown wait mode: %s", err);
	/* a limit that leaves less than the reserve free is warned of; 256 MiB is not */
	o.cuda_sync = ZINF_CUDA_SYNC_AUTO;
	o.memory_limit = 0;
	T_CHECK(zinf_device_create(&o, &dev, err, sizeof(err)) == 0, "create: %s", err);
	zinf_device_get_stats(dev, &st); /* auto: the free memory less the reserve */
	zinf_device_destroy(dev);
	o.memory_limit = st.limit + o.memory_reserve / 2;
	zinf_log_set_callback(keep_warning, NULL);
	T_CHECK(zinf_device_create(&o, &dev, err, sizeof(err)) == 0, "create: %s", err);
	zinf_device_destroy(dev);
	T_CHECK(strstr(warning, "device_memory_limit") && strstr(warning, "may fail"),
		"no warning of a limit leaving under the reserve: '%s'", warning);
	warning[0] = 0;
	o.memory_limit = 256 * MiB;
	o.cuda_sync = ZINF_CUDA_SYNC_BLOCKING;
	T_CHECK(zinf_device_create(&o, &dev, err, sizeof(err)) == 0, "create: %s", err);
	T_CHECK(!warning[0], "warned of 256 MiB: %s", warning);
	zinf_log_set_callback(NULL, NULL);
	printf("device: %s\n", zinf_device_name(dev));
	T_CHECK_RC(zinf_stream_create(dev, &a));
	T_CHECK_RC(zinf_stream_create(dev, &b));
	T_CHECK(zinf_stream_native(a) != NULL, "a cudaStream_t for kernels");
	T_CHECK_RC(zinf_event_create(dev, &e));
	T_CHECK_RC(zinf_device_pci_bus_id(dev, busid, sizeof(busid)));
	printf("pci bus id %s\n", busid);

	zinf_pinned_opts_init(&po);
	po.size = 2 * LEN;
	po.device = dev;
	T_CHECK(zinf_pinned_create(&po, &pool, err, sizeof(err)) == 0, "pinned: %s", err);
	zinf_pinned_get_stats(pool, &ps);
	T_CHECK(ps.locked, "registered with CUDA");
	T_CHECK_RC(zinf_pinned_alloc(pool, LEN, 0, (void **)&in));
	T_CHECK_RC(zinf_pinned_alloc(pool, LEN, 0, (void **)&out));

	/* Budget. */
	T_CHECK_RC(zinf_device_alloc(dev, LEN, (void **)&d1));
	T_CHECK_RC(zinf_device_alloc(dev, LEN, (void **)&d2));
	rc = zinf_device_alloc(dev, 200 * MiB, (void **)&big);
	T_CHECK(rc == ZINF_EBUDGET, "over budget: %d", rc);
	T_CHECK_STR(zinf_device_last_error(dev),
		    "device budget: need 200 MiB, 192 MiB free of 256 MiB");

	/* H2D on a, D2D on b after a's event, memset a tail, D2H on b. */
	for (uint64_t round = 0; round < 8; round++) {
		tt_fill(in, LEN, round);
		memset(out, 0, LEN);
		T_CHECK_RC(zinf_device_memcpy_async(a, d1, in, LEN, ZINF_COPY_H2D));
		T_CHECK_RC(zinf_event_record(e, a));
		T_CHECK_RC(zinf_stream_wait_event(b, e));
		T_CHECK_RC(zinf_device_memcpy_async(b, d2, d1, LEN, ZINF_COPY_D2D));
		T_CHECK_RC(zinf_device_memset_async(b, d2 + LEN - MiB, 0x5a, MiB));
		T_CHECK_RC(zinf_device_memcpy_async(b, out, d2, LEN, ZINF_COPY_D2H));
		T_CHECK_RC(zinf_stream_synchronize(b));
		T_CHECK(tt_check(out, LEN - MiB, round) == UINT64_MAX, "round %llu data",
			(unsigned long long)round);
		for (uint64_t i = LEN - MiB; i < LEN; i++)
			T_CHECK(out[i] == 0x5a, "memset byte %llu", (unsigned long long)i);
		T_CHECK(zinf_event_query(e) == 0, "event complete");
		T_CHECK_RC(zinf_event_synchronize(e));
	}
	/* in blocking mode an event wait sleeps too (on the simulator: the waits a GPU would
	 * spin through, for events made without cudaEventBlockingSync, are counted) */
	spins = (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "cudasim_spinning_event_waits");
	T_CHECK(!spins || spins() == 0, "%lu event waits spin in blocking mode", spins());
	zinf_device_get_stats(dev, &st);
	T_CHECK(st.copy[ZINF_COPY_H2D].bytes == 8 * LEN &&
			st.copy[ZINF_COPY_D2H].bytes == 8 * LEN &&
			st.copy[ZINF_COPY_D2D].bytes == 8 * LEN,
		"bytes per direction");
	T_CHECK(st.copy[ZINF_COPY_H2D].ns > 0 && st.copy[ZINF_COPY_D2H].ns > 0, "timed");
	printf("h2d %.1f GB/s, d2h %.1f GB/s, d2d %.1f GB/s\n",
	       (double)st.copy[0].bytes / (double)st.copy[0].ns,
	       (double)st.copy[1].bytes / (double)st.copy[1].ns,
	       (double)st.copy[2].bytes / (double)st.copy[2].ns);

	/* A CUDA failure is translated: registering the same range twice. */
	rc = zinf_device_host_register(dev, in, LEN);
	T_CHECK(rc == ZINF_EDEVICE, "double register: %d", rc);
	T_CHECK(strstr(zinf_device_last_error(dev), "cudaHostRegister failed at device_cuda.c:"),
		"%s", zinf_device_last_error(dev));
	printf("translated: %s\n", zinf_device_last_error(dev));

	/* A driver that is installed and finds no GPU is named (on the simulator: none). */
	if (strstr(zinf_device_name(dev), "zinf CUDA simulator")) {
		char why[256];

		setenv("ZINF_CUDASIM_DEVICES", "0", 1);
		T_CHECK(zinf_device_cuda_probe(why, sizeof(why)) == 0, "no device is counted");
		T_CHECK(strstr(why, "cudaGetDeviceCount: ") && strstr(why, "(CUDA driver "), "%s",
			why);
		printf("no GPU: %s\n", why);
		unsetenv("ZINF_CUDASIM_DEVICES");
		T_CHECK(zinf_device_cuda_probe(why, sizeof(why)) == 1 && !why[0], "%s", why);
	}

	T_CHECK_RC(zinf_device_free(dev, d1));
	T_CHECK_RC(zinf_device_free(dev, d2));
	T_CHECK_RC(zinf_pinned_free(pool, in));
	T_CHECK_RC(zinf_pinned_free(pool, out));
	zinf_event_destroy(e);
	zinf_stream_destroy(a);
	zinf_stream_destroy(b);
	zinf_pinned_destroy(pool);
	zinf_device_destroy(dev);
	return T_EXIT_PASS;
}

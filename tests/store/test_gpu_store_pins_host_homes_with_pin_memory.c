/* With parameters homed in host memory and offload_param.pin_memory (the store's
 * pin_host), every chunk's home is page-locked with the CUDA device, so fetches copy from
 * it by DMA instead of through the driver's pageable staging: cudaPointerGetAttributes
 * calls each home host memory the device knows, the stats count them as pinned, fetched
 * modules hold the homes' values, and a module write refreshes the cached device copy
 * from the (just written) homes, so the next fetch is a hit with the new values. Without
 * pin_host nothing is page-locked. Skips (77) without a GPU. */
#include <cuda_runtime.h>

#include "gpu_test.h"
#include "store_internal.h"
#include "store_test_util.h"

/* n bytes of device memory src into dst, waited for. */
static void d2h(struct zinf_device *dev, void *dst, const void *src, uint64_t n)
{
	struct zinf_stream *st;

	T_CHECK_RC(zinf_stream_create(dev, &st));
	T_CHECK_RC(zinf_device_memcpy_async(st, dst, src, n, ZINF_COPY_D2H));
	T_CHECK_RC(zinf_stream_synchronize(st));
	zinf_stream_destroy(st);
}

static void run(bool pin)
{
	struct zinf_store_stats st, before;
	struct zinf_device *dev;
	struct zinf_store *s;
	uint32_t m, p;
	void *src, *got;
	uint64_t n;

	t_cuda_host_store_up(&dev, &s, pin, &m, &p);

	zinf_store_get_stats(s, &st);
	T_CHECK(st.chunks == 5 && st.host_now > 0, "%u chunks, %llu host bytes", st.chunks,
		(unsigned long long)st.host_now);
	T_CHECK(st.host_pinned == (pin ? st.host_now : 0), "pin %d: %llu of %llu bytes pinned", pin,
		(unsigned long long)st.host_pinned, (unsigned long long)st.host_now);
	for (uint32_t c = 0; c < s->n_chunks; c++) {
		struct cudaPointerAttributes a;
		T_CHECK(cudaPointerGetAttributes(&a, s->chunks[c].host) == cudaSuccess,
			"attributes of chunk %u", c);
		T_CHECK((a.type == cudaMemoryTypeHost) == pin,
			"pin %d: chunk %u's home has type %d", pin, c, (int)a.type);
	}

	n = zinf_store_param_bytes(s, p);
	src = malloc(n);
	got = malloc(n);
	t_fill(src, n, 3);
	T_CHECK_RC(zinf_store_param_write(s, p, src));
	T_CHECK_RC(zinf_store_fetch(s, m));
	T_CHECK_RC(zinf_store_wait(s, m));
	d2h(dev, got, zinf_store_param_data(s, p), n);
	T_CHECK(memcmp(got, src, n) == 0, "pin %d: the fetched module", pin);
	T_CHECK_RC(zinf_store_release(s, m));

	t_fill(src, n, 4);
	zinf_store_get_stats(s, &before);
	T_CHECK(zinf_store_module_write(s, m, (const void *const *)&src) == 0, "%s",
		zinf_store_last_error(s));
	T_CHECK_RC(zinf_store_fetch(s, m));
	T_CHECK_RC(zinf_store_wait(s, m));
	zinf_store_get_stats(s, &st);
	T_CHECK(st.hits == before.hits + 1, "pin %d: the fetch after the write was no hit", pin);
	d2h(dev, got, zinf_store_param_data(s, p), n);
	T_CHECK(memcmp(got, src, n) == 0, "pin %d: the refreshed copy", pin);
	T_CHECK_RC(zinf_store_release(s, m));

	free(src);
	free(got);
	zinf_store_destroy(s);
	zinf_device_destroy(dev);
}

int main(void)
{
	zinf_log_set_level(ZINF_LOG_ERROR);
	t_require_gpu();
	run(true);
	run(false);
	return T_EXIT_PASS;
}

/* The CUDA simulator runs queued stream work only when something waits for it, so that
 * a missing wait shows up as wrong data here rather than as a race on a GPU: a queued
 * copy from pinned memory reads the buffer as it is when the work runs; a result is not
 * in pinned memory before its stream is synchronized; a stream sees another's work only
 * through an event wait; a pending event's first query says "not ready"; a copy from
 * pageable memory is staged at the call and one to pageable memory is done when the call
 * returns; destroying a stream runs nothing (its work runs at the next device-wide
 * wait); new device memory reads as 0xff. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "test.h"

#define N 4096

static void fill(uint8_t *p, uint8_t v)
{
	memset(p, v, N);
}

static int all(const uint8_t *p, uint8_t v)
{
	for (int i = 0; i < N; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

#define CK(call) T_CHECK((call) == cudaSuccess, "%s", #call)

int main(void)
{
	static uint8_t pinned[N] __attribute__((aligned(4096))), pageable[N];
	cudaStream_t s1, s2;
	cudaEvent_t ev;
	uint8_t *dev;

	unsetenv("ZINF_CUDASIM_EAGER");
	CK(cudaMalloc((void **)&dev, N));
	CK(cudaHostRegister(pinned, N, cudaHostRegisterDefault));
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));

	/* new device memory, read through a pageable (immediate) copy */
	fill(pageable, 0);
	CK(cudaMemcpyAsync(pageable, dev, N, cudaMemcpyDeviceToHost, s1));
	T_CHECK(all(pageable, 0xff), "new device memory reads as 0xff bytes");

	/* a queued copy from pinned memory reads the buffer when it runs */
	fill(pinned, 1);
	CK(cudaMemcpyAsync(dev, pinned, N, cudaMemcpyHostToDevice, s1));
	fill(pinned, 2); /* reused before the copy was waited for */
	CK(cudaStreamSynchronize(s1));
	CK(cudaMemcpyAsync(pageable, dev, N, cudaMemcpyDeviceToHost, s1));
	T_CHECK(all(pageable, 2), "the copy ran at the wait and took the reused buffer's bytes");

	/* a result reaches pinned memory only once its stream is waited for */
	fill(pinned, 7);
	CK(cudaMemcpyAsync(pinned, dev, N, cudaMemcpyDeviceToHost, s1));
	T_CHECK(all(pinned, 7), "the device-to-host copy has not run before the wait");
	CK(cudaEventRecord(ev, s1));
	T_CHECK(cudaEventQuery(ev) == cudaErrorNotReady, "a pending event is first not ready");
	T_CHECK(cudaGetLastError() == cudaSuccess, "not ready is not an error");
	CK(cudaEventQuery(ev));
	T_CHECK(all(pinned, 2), "the second query ran the stream up to the event");

	/* another stream sees s1's work only through an event wait */
	CK(cudaMemsetAsync(dev, 0x11, N, s1));
	fill(pinned, 0);
	CK(cudaMemcpyAsync(pinned, dev, N, cudaMemcpyDeviceToHost, s2));
	CK(cudaStreamSynchronize(s2));
	T_CHECK(all(pinned, 2), "without a wait, s2 ran before s1's memset");
	CK(cudaEventRecord(ev, s1));
	CK(cudaStreamWaitEvent(s2, ev, 0));
	CK(cudaMemcpyAsync(pinned, dev, N, cudaMemcpyDeviceToHost, s2));
	CK(cudaStreamSynchronize(s2));
	T_CHECK(all(pinned, 0x11), "the event wait ran s1's memset first");

	/* a pageable source is staged at the call */
	fill(pageable, 5);
	CK(cudaMemcpyAsync(dev, pageable, N, cudaMemcpyHostToDevice, s1));
	fill(pageable, 6);
	CK(cudaMemcpyAsync(pageable, dev, N, cudaMemcpyDeviceToHost, s1));
	T_CHECK(all(pageable, 5), "copies through pageable memory are done at the call");

	/* destroying a stream waits for nothing */
	fill(pinned, 9);
	CK(cudaMemcpyAsync(pinned, dev, N, cudaMemcpyDeviceToHost, s2));
	CK(cudaStreamDestroy(s2));
	T_CHECK(all(pinned, 9), "the destroyed stream's copy has not run");
	CK(cudaDeviceSynchronize());
	T_CHECK(all(pinned, 5), "it ran at the device-wide wait");

	CK(cudaEventDestroy(ev));
	CK(cudaStreamDestroy(s1));
	CK(cudaHostUnregister(pinned));
	CK(cudaFree(dev));
	return 0;
}

// The CUDA simulator's block scheduler gives kernels CUDA's semantics: __shared__ memory
// is the block's and a __syncthreads orders its writes before its reads (a reversal
// through shared memory and a tree reduction come out right in every block), thread and
// block indices cover 2-D shapes in CUDA's order, threads that return early do not hang
// a barrier, and a launch beyond the device's limits (or of an empty grid) is refused
// with cudaErrorInvalidConfiguration and runs nothing, as is one with a pointer argument
// that is not device memory (cudaErrorIllegalAddress); threads waiting at different
// __syncthreads (divergent code) fault the launch (cudaErrorLaunchFailure). ZINF_CUDASIM_ORDER=reverse runs
// threads and blocks the other way round: the same results for correct kernels, others
// for a kernel missing a barrier. Built with cudasim.h, like the kernels themselves.
#include <cuda_runtime.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define THREADS 256
#define BLOCKS 7

__global__ void reverse_kernel(int *out, const int *in)
{
	__shared__ int sh[THREADS];
	size_t base = (size_t)blockIdx.x * blockDim.x;

	sh[threadIdx.x] = in[base + threadIdx.x];
	__syncthreads();
	out[base + threadIdx.x] = sh[blockDim.x - 1 - threadIdx.x];
}

__global__ void sum_kernel(long *out, const int *in)
{
	__shared__ long sh[THREADS];

	sh[threadIdx.x] = in[(size_t)blockIdx.x * blockDim.x + threadIdx.x];
	__syncthreads();
	for (unsigned w = THREADS / 2; w > 0; w >>= 1) {
		if (threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = sh[0];
}

__global__ void index_kernel(unsigned *out)
{
	unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
	unsigned y = blockIdx.y * blockDim.y + threadIdx.y;

	out[y * gridDim.x * blockDim.x + x] = y << 16 | x;
}

// Wrong on purpose: half the block waits at one barrier, half at another.
__global__ void divergent_barrier_kernel(int *out)
{
	if (threadIdx.x < 16) {
		out[threadIdx.x] = 1;
		__syncthreads();
	} else {
		__syncthreads();
		out[threadIdx.x] = 2;
	}
}

// Wrong on purpose: reads a neighbour's shared write with no barrier in between.
__global__ void racy_shift_kernel(int *out, const int *in)
{
	__shared__ int sh[THREADS];

	sh[threadIdx.x] = in[threadIdx.x];
	out[threadIdx.x] = threadIdx.x ? sh[threadIdx.x - 1] : 0;
}

__global__ void early_exit_kernel(int *out)
{
	__shared__ int sh[THREADS];

	if (threadIdx.x >= 100)
		return;
	sh[threadIdx.x] = (int)threadIdx.x;
	__syncthreads();
	out[threadIdx.x] = sh[99 - threadIdx.x];
}

#define CK(call) T_CHECK((call) == cudaSuccess, "%s", #call)

// Everything above in the current order; returns the racy kernel's mismatches.
static int run_all(cudaStream_t s, int *d_in, int *d_out, long *d_sums, unsigned *d_idx);

int main(void)
{
	static int in[BLOCKS * THREADS], out[BLOCKS * THREADS];
	static long sums[BLOCKS];
	static unsigned idx[4 * 8 * 3 * 16];
	int *d_in, *d_out;
	long *d_sums;
	unsigned *d_idx;
	cudaStream_t s;

	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc((void **)&d_in, sizeof(in)));
	CK(cudaMalloc((void **)&d_out, sizeof(out)));
	CK(cudaMalloc((void **)&d_sums, sizeof(sums)));
	CK(cudaMalloc((void **)&d_idx, sizeof(idx)));
	for (int i = 0; i < BLOCKS * THREADS; i++)
		in[i] = i * 7 - 1000;
	CK(cudaMemcpyAsync(d_in, in, sizeof(in), cudaMemcpyHostToDevice, s));

	setenv("ZINF_CUDASIM_ORDER", "forward", 1);
	T_CHECK(run_all(s, d_in, d_out, d_sums, d_idx) == 0,
		"in order, the racy kernel looks right");
	setenv("ZINF_CUDASIM_ORDER", "reverse", 1);
	T_CHECK(run_all(s, d_in, d_out, d_sums, d_idx) > 0,
		"in reverse order the missing barrier shows");
	unsetenv("ZINF_CUDASIM_ORDER");

	{
		static int host_buf[THREADS];

		ZINF_LAUNCH(reverse_kernel, 1, THREADS, s)(host_buf, d_in);
		T_CHECK(cudaGetLastError() == cudaErrorIllegalAddress,
			"a kernel argument in unregistered host memory");
	}
	CK(cudaMemsetAsync(d_out, 0, sizeof(out), s));
	ZINF_LAUNCH(reverse_kernel, 1, 1025, s)(d_out, d_in);
	T_CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "1025 threads per block");
	ZINF_LAUNCH(reverse_kernel, 0, THREADS, s)(d_out, d_in);
	T_CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "an empty grid");
	ZINF_LAUNCH(index_kernel, dim3(1, 65536), dim3(1), s)(d_idx);
	T_CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "grid.y beyond 65535");
	CK(cudaMemcpyAsync(out, d_out, sizeof(out), cudaMemcpyDeviceToHost, s));
	T_CHECK(out[0] == 0 && out[THREADS - 1] == 0, "a refused launch ran nothing");

	{ /* a fault is sticky for the process: in a child */
		int status = 0;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		T_CHECK(pid >= 0, "fork");
		if (pid == 0) {
			ZINF_LAUNCH(divergent_barrier_kernel, 1, 64, s)(d_out);
			exit(cudaStreamSynchronize(s) == cudaErrorLaunchFailure ? 0 : 1);
		}
		T_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
				WEXITSTATUS(status) == 0,
			"a barrier in divergent code faults the launch (status %d)", status);
	}

	CK(cudaFree(d_idx));
	CK(cudaFree(d_sums));
	CK(cudaFree(d_out));
	CK(cudaFree(d_in));
	CK(cudaStreamDestroy(s));
	return 0;
}

static int run_all(cudaStream_t s, int *d_in, int *d_out, long *d_sums, unsigned *d_idx)
{
	static int in[BLOCKS * THREADS], out[BLOCKS * THREADS];
	static long sums[BLOCKS];
	static unsigned idx[4 * 8 * 3 * 16];
	int racy = 0;

	for (int i = 0; i < BLOCKS * THREADS; i++)
		in[i] = i * 7 - 1000;
	ZINF_LAUNCH(reverse_kernel, BLOCKS, THREADS, s)(d_out, d_in);
	ZINF_LAUNCH(sum_kernel, BLOCKS, THREADS, s)(d_sums, d_in);
	ZINF_LAUNCH(index_kernel, dim3(3, 2), dim3(16, 4), s)(d_idx);
	CK(cudaGetLastError());
	CK(cudaMemcpyAsync(out, d_out, sizeof(out), cudaMemcpyDeviceToHost, s));
	CK(cudaMemcpyAsync(sums, d_sums, sizeof(sums), cudaMemcpyDeviceToHost, s));
	CK(cudaMemcpyAsync(idx, d_idx, sizeof(idx), cudaMemcpyDeviceToHost, s));
	for (int b = 0; b < BLOCKS; b++) {
		long want = 0;

		for (int t = 0; t < THREADS; t++) {
			T_CHECK(out[b * THREADS + t] == in[b * THREADS + THREADS - 1 - t],
				"block %d thread %d reversed through shared memory", b, t);
			want += in[b * THREADS + t];
		}
		T_CHECK(sums[b] == want, "block %d sum %ld, want %ld", b, sums[b], want);
	}
	for (unsigned y = 0; y < 8; y++)
		for (unsigned x = 0; x < 48; x++)
			T_CHECK(idx[y * 48 + x] == (y << 16 | x), "2-D index (%u,%u)", x, y);

	CK(cudaMemsetAsync(d_out, 0, sizeof(out), s));
	ZINF_LAUNCH(early_exit_kernel, 1, THREADS, s)(d_out);
	CK(cudaMemcpyAsync(out, d_out, sizeof(out), cudaMemcpyDeviceToHost, s));
	for (int t = 0; t < 100; t++)
		T_CHECK(out[t] == 99 - t, "thread %d behind a barrier others skipped", t);

	ZINF_LAUNCH(racy_shift_kernel, 1, THREADS, s)(d_out, d_in);
	CK(cudaMemcpyAsync(out, d_out, THREADS * sizeof(int), cudaMemcpyDeviceToHost, s));
	for (int t = 1; t < THREADS; t++)
		racy += out[t] != in[t - 1];
	return racy;
}

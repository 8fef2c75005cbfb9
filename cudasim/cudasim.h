// Included ahead of every kernels/*.cu file when the kernels are built as host C++ for
// the CUDA simulator (ZINF_CUDA=SIM): the CUDA qualifiers, the thread and block indices,
// __syncthreads and the few device intrinsics the kernels use, and ZINF_LAUNCH, which
// queues the kernel on its stream in the simulated runtime (sim_runtime.cc). One block
// runs at a time, one fiber per thread, so a static __shared__ array is the block's: all
// of them sit in one section, filled with 0xff before each block, so a block never sees
// what another left there.
#ifndef ZINF_CUDASIM_H
#define ZINF_CUDASIM_H

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ __attribute__((section("cudasim_shared"))) static

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

struct cudasim_index {
	uint3 thread, block;
	dim3 block_dim, grid_dim;
};

// The running thread's indices, set by the block scheduler before each switch (one
// grid runs at a time, under the runtime's device lock).
extern struct cudasim_index cudasim_cur;

#define threadIdx (cudasim_cur.thread)
#define blockIdx (cudasim_cur.block)
#define blockDim (cudasim_cur.block_dim)
#define gridDim (cudasim_cur.grid_dim)

// The barrier, named by its source line: compiled code may duplicate one call, so the
// line (not the call's address) tells whether the threads of a block wait at the same one.
void cudasim_syncthreads(const char *file, int line);
#define __syncthreads() cudasim_syncthreads(__FILE__, __LINE__)

// Queue body to run over grid x block on stream (validated there; errors go to the
// thread's last CUDA error as a real launch's would).
void cudasim_launch(cudaStream_t stream, dim3 grid, dim3 block, const char *name,
		    std::function<void()> body, char *shared_lo, char *shared_hi);

// The linker's bounds of this module's cudasim_shared section (NULL when it has none).
extern "C" char __start_cudasim_shared[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_cudasim_shared[] __attribute__((weak, visibility("hidden")));

// Whether p may be a kernel's pointer argument: NULL, device memory, or registered
// (mapped) host memory; and the refusal of a launch whose argument arg is not.
bool sim_is_kernel_pointer(const void *p);
void cudasim_refuse_launch(const char *name, int arg, const void *p);

template <typename T> static inline bool cudasim_arg_ok(const char *name, int arg, const T &v)
{
	if constexpr (std::is_pointer_v<T>) {
		if (!sim_is_kernel_pointer((const void *)v)) {
			cudasim_refuse_launch(name, arg, (const void *)v);
			return false;
		}
	}
	return true;
}

static inline float __uint_as_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint32_t __float_as_uint(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

// The round-to-nearest arithmetic intrinsics: the host's IEEE float operations (the
// kernels are built without floating-point contraction).
static inline float __fadd_rn(float a, float b)
{
	return a + b;
}

static inline float __fmul_rn(float a, float b)
{
	return a * b;
}

static inline float __fdiv_rn(float a, float b)
{
	return a / b;
}

static inline float __fmaf_rn(float a, float b, float c)
{
	return fmaf(a, b, c);
}

static inline float __fsqrt_rn(float a)
{
	return sqrtf(a);
}

static inline double __dadd_rn(double a, double b)
{
	return a + b;
}

static inline double __fma_rn(double a, double b, double c)
{
	return fma(a, b, c);
}

template <typename... P> struct cudasim_launcher {
	void (*kernel)(P...);
	dim3 grid, block;
	cudaStream_t stream;
	const char *name;

	// The arguments are copied now, converted to the kernel's parameter types, as a
	// real launch copies them into its parameter buffer.
	template <typename... A> void operator()(A &&...a) const
	{
		auto args = std::make_shared<std::tuple<std::decay_t<P>...>>(std::forward<A>(a)...);
		void (*k)(P...) = kernel;
		bool ok = std::apply(
			[this](const auto &...v) {
				int i = 0;
				return (cudasim_arg_ok(name, i++, v) && ...);
			},
			*args);

		if (ok)
			cudasim_launch(
				stream, grid, block, name, [k, args]() { std::apply(k, *args); },
				__start_cudasim_shared, __stop_cudasim_shared);
	}
};

template <typename... P>
static inline cudasim_launcher<P...> cudasim_make_launcher(void (*kernel)(P...), dim3 grid,
							   dim3 block, cudaStream_t stream,
							   const char *name)
{
	return cudasim_launcher<P...>{kernel, grid, block, stream, name};
}

#define ZINF_LAUNCH(kernel, grid, block, stream)                                                   \
	cudasim_make_launcher(kernel, dim3(grid), dim3(block), (stream), #kernel)

#endif

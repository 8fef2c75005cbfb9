// Internals shared by the CUDA simulator's runtime (sim_runtime.cc), its block scheduler
// (sim_kernel.cc) and its cuBLAS (sim_blas.cc).
#ifndef ZINF_CUDASIM_INTERNAL_H
#define ZINF_CUDASIM_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include <functional>

// Run body once per thread of every block of grid x block (block by block, one fiber
// per thread), filling the kernels' shared memory [shared_lo, shared_hi) with 0xff
// before each block. Called with the device lock held.
void sim_run_grid(dim3 grid, dim3 block, const std::function<void()> &body, char *shared_lo,
		  char *shared_hi, const char *name);

// A fault of the running kernel: sticky from now on, as on a GPU. Device lock held.
void sim_fault(cudaError_t err);

// Queue op on stream (NULL: the legacy default stream); the caller has validated it.
// Returns cudaSuccess, or the error of an unknown stream.
cudaError_t sim_enqueue(cudaStream_t stream, std::function<void()> op);

// Whether [p, p + n) lies inside one device allocation (takes the device lock).
bool sim_is_device_range(const void *p, size_t n);

// Set the calling thread's last error to err (unless cudaSuccess) and return err.
cudaError_t sim_error(cudaError_t err);

// Report a misuse the real device would fault or fail on, on one line on stderr.
void sim_complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

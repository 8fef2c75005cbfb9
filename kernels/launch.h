// Kernel launch as one macro, ZINF_LAUNCH(kernel, grid, block, stream)(args...), so that
// the kernels also build as host C++ under the CUDA simulator (cudasim/), which defines
// ZINF_LAUNCH itself. With nvcc it is the usual triple-chevron launch, no shared memory
// beyond the kernel's static __shared__ arrays.
#ifndef ZINF_KERNELS_LAUNCH_H
#define ZINF_KERNELS_LAUNCH_H

#ifndef ZINF_LAUNCH
#define ZINF_LAUNCH(kernel, grid, block, stream) kernel<<<(grid), (block), 0, (stream)>>>
#endif

#endif

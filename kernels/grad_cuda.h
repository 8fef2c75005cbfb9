/*
 * Gradient kernels for the optimizer state on the device (offload_optimizer.device:
 * none): a micro-batch's gradients added to the step's accumulator, and the sum of
 * squares the global norm is made of. C-callable launchers taking an explicit stream (a
 * cudaStream_t passed as void *). Return 0 or ZINF_EDEVICE.
 * CPU references: the accumulation loop and zinf_grad_sumsq() in src/ (the sum of squares
 * agrees to rounding, not to the bit: its order of summation is the GPU's).
 */
#ifndef ZINF_KERNELS_GRAD_CUDA_H
#define ZINF_KERNELS_GRAD_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Partial sums zinf_cuda_sumsq_f32 writes: one per block, added on the host in order. */
#define ZINF_CUDA_SUMSQ_PARTS 256

/* dst[i] += src[i] for i < n (device pointers). */
int zinf_cuda_add_f32(float *dst, const float *src, uint64_t n, void *stream);
/* parts[b] (ZINF_CUDA_SUMSQ_PARTS doubles, device) = the sum in double of src[i]^2 over
 * the elements block b takes (i = b * 256 + t + k * 256 * ZINF_CUDA_SUMSQ_PARTS). */
int zinf_cuda_sumsq_f32(const float *src, uint64_t n, double *parts, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_KERNELS_GRAD_CUDA_H */

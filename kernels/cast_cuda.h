/*
 * Cast kernels: fp32 <-> bf16 on the device, round-to-nearest-even, NaN kept quiet.
 * C-callable launchers; each takes an explicit stream (a cudaStream_t passed as void *
 * so that C callers need no CUDA headers). Return 0 or ZINF_EDEVICE.
 * CPU reference: zinf_cast_f32_to_bf16_ref() in src/ (tests compare the two).
 */
#ifndef ZINF_KERNELS_CAST_CUDA_H
#define ZINF_KERNELS_CAST_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int zinf_cuda_cast_f32_to_bf16(const float *src, uint16_t *dst, size_t n, void *stream);
int zinf_cuda_cast_bf16_to_f32(const uint16_t *src, float *dst, size_t n, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_KERNELS_CAST_CUDA_H */

/*
 * CPU reference casts between fp32 and the 16-bit float formats (bf16, fp16).
 * bf16: round to nearest even on the upper 16 bits; NaN stays NaN (quiet).
 * These are the references the CUDA kernels in kernels/cast.cu are tested against.
 */
#ifndef ZINF_SRC_CAST_H
#define ZINF_SRC_CAST_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t zinf_f32_to_bf16(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float zinf_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

void zinf_cast_f32_to_bf16_ref(const float *src, uint16_t *dst, size_t n);
void zinf_cast_bf16_to_f32_ref(const uint16_t *src, float *dst, size_t n);

#endif /* ZINF_SRC_CAST_H */

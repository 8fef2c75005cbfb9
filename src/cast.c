/* CPU reference casts (see cast.h). */
#include "cast.h"

void zinf_cast_f32_to_bf16_ref(const float *src, uint16_t *dst, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = zinf_f32_to_bf16(src[i]);
}

void zinf_cast_bf16_to_f32_ref(const uint16_t *src, float *dst, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = zinf_bf16_to_f32(src[i]);
}

/* zinf element types, shared by the optimizer, the shard store and the model. */
#ifndef ZINF_DTYPE_H
#define ZINF_DTYPE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Element type of a tensor buffer (parameters, gradients, optimizer state). */
enum zinf_dtype {
	ZINF_DTYPE_NONE = 0, /* no buffer */
	ZINF_DTYPE_F32 = 1,
	ZINF_DTYPE_BF16 = 2,
	ZINF_DTYPE_F16 = 3,
};

#ifdef __cplusplus
}
#endif
#endif /* ZINF_DTYPE_H */

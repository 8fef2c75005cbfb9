/*
 * The reader accepts a safetensors file from an independent writer
 * (data/make_reference_safetensors.py: Python's struct and json, header with spaces,
 * "__metadata__" last, JSON order unlike data order, a scalar) and returns its exact
 * names, shapes, dtypes and values, converted to each dtype on request.
 * Usage: test_safetensors_reads_reference_file DATA_DIR
 */
#include <stdio.h>
#include <string.h>

#include "safetensors.h"
#include "test.h"

static void expect_values(struct zinf_st_reader *r, const char *name, enum zinf_st_dtype dtype,
			  int ndim, const uint64_t *shape, const float *want, int n)
{
	const struct zinf_st_tensor_info *t = zinf_st_reader_find(r, name);
	float got[8];
	uint16_t h[8];

	T_CHECK(t, "tensor %s missing", name);
	T_CHECK(t->dtype == dtype && t->ndim == ndim && (int)t->n_elems == n, "%s: dtype/shape",
		name);
	for (int d = 0; d < ndim; d++)
		T_CHECK(t->shape[d] == shape[d], "%s: shape[%d]", name, d);
	T_CHECK_RC(zinf_st_reader_read(r, t, got, ZINF_ST_F32));
	for (int i = 0; i < n; i++)
		T_CHECK(got[i] == want[i], "%s[%d] = %.9g, want %.9g", name, i, got[i], want[i]);
	T_CHECK_RC(zinf_st_reader_read(r, t, h, ZINF_ST_BF16));
	for (int i = 0; i < n; i++)
		T_CHECK(h[i] == zinf_st_f32_to_bf16(want[i]), "%s[%d] as bf16", name, i);
	T_CHECK_RC(zinf_st_reader_read(r, t, h, ZINF_ST_F16));
	for (int i = 0; i < n; i++)
		T_CHECK(h[i] == zinf_st_f32_to_f16(want[i]), "%s[%d] as f16", name, i);
}

int main(int argc, char **argv)
{
	static const float f32[] = {-1.5f, 0.0f, 0.25f, 3.0e-8f, 65504.0f, -2.75f};
	static const float f16[] = {1.0f, -0.333251953125f, 0x1p-14f};
	static const float bf16[] = {1.0f, -2.0f, 0.15625f, 3.140625f};
	static const float scalar[] = {7.0f};
	static const uint64_t s23[] = {2, 3}, s3[] = {3}, s22[] = {2, 2};
	struct zinf_st_reader *r;
	char path[4096];

	if (argc < 2)
		T_SKIP("usage: %s DATA_DIR", argv[0]);
	snprintf(path, sizeof(path), "%s/reference_small.safetensors", argv[1]);
	T_CHECK_RC(zinf_st_reader_create(&r));
	T_CHECK(zinf_st_reader_open(r, path) == 0, "open: %s", zinf_st_reader_last_error(r));
	T_CHECK(zinf_st_reader_count(r) == 4, "%d tensors", zinf_st_reader_count(r));
	/* Storage order is data order, whatever the JSON order. */
	T_CHECK_STR(zinf_st_reader_tensor(r, 0)->name, "w.bf16");
	T_CHECK_STR(zinf_st_reader_tensor(r, 3)->name, "scalar");
	expect_values(r, "w.f32", ZINF_ST_F32, 2, s23, f32, 6);
	expect_values(r, "w.f16", ZINF_ST_F16, 1, s3, f16, 3);
	expect_values(r, "w.bf16", ZINF_ST_BF16, 2, s22, bf16, 4);
	expect_values(r, "scalar", ZINF_ST_F32, 0, NULL, scalar, 1);
	T_CHECK(zinf_st_reader_find(r, "__metadata__") == NULL, "metadata is not a tensor");
	zinf_st_reader_destroy(r);
	return T_EXIT_PASS;
}

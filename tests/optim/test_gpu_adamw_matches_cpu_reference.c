/*
 * The CUDA fused Adam/AdamW kernel (kernels/adamw.cu) produces the same bits as the CPU
 * scalar reference for master, m, v and the param copy, over three steps, for every
 * grad dtype x param dtype x Adam/AdamW, with grad_scale != 1 and grads that include
 * zeros, subnormals, inf and nan (NaNs compare equal). Skips (77) without a GPU.
 */
#include <cuda_runtime.h>
#include <math.h>

#include "adamw_cuda.h"
#include "cast.h"
#include "optim.h"
#include "test.h"

#define N (1u << 16)

static float p0[N], m0[N], v0[N], g32[N], rp[N], rm[N], rv[N], hp[N], hm[N], hv[N];
static uint16_t g16[N], rout[N], hout[N];

static void to_cuda_args(const struct zinf_adam_args *a, struct zinf_cuda_adam_args *c)
{
	c->g_dtype = a->g_dtype;
	c->out_dtype = a->out_dtype;
	c->decoupled = a->decoupled;
	c->l2 = a->l2;
	c->grad_scale = a->grad_scale;
	c->beta1 = a->beta1;
	c->beta2 = a->beta2;
	c->one_minus_beta1 = a->one_minus_beta1;
	c->one_minus_beta2 = a->one_minus_beta2;
	c->neg_step_size = a->neg_step_size;
	c->rsqrt_bc2 = a->rsqrt_bc2;
	c->eps = a->eps;
	c->weight_decay = a->weight_decay;
	c->decay = a->decay;
}

static bool same(float a, float b)
{
	return (isnan(a) && isnan(b)) || memcmp(&a, &b, 4) == 0;
}

#define CUDA_OK(x) T_CHECK((x) == cudaSuccess, "%s", cudaGetErrorString(x))

int main(void)
{
	int ndev = 0;
	float *dp, *dm, *dv;
	void *dg, *dout;
	uint32_t r = 99;

	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
		T_SKIP("no CUDA device");
	for (uint32_t i = 0; i < N; i++) {
		r = r * 1664525u + 1013904223u;
		p0[i] = (float)((double)(r >> 8) / 16777216.0 * 4 - 2);
		m0[i] = p0[i] * 1e-3f;
		v0[i] = p0[i] * p0[i] * 1e-5f;
		g32[i] = i % 101 == 0 ? 0.0f : p0[i] * powf(10.0f, (float)(int)(r % 10) - 6.0f);
	}
	g32[1] = INFINITY;
	g32[2] = NAN;
	g32[3] = 1e-41f;
	CUDA_OK(cudaMalloc((void **)&dp, N * 4));
	CUDA_OK(cudaMalloc((void **)&dm, N * 4));
	CUDA_OK(cudaMalloc((void **)&dv, N * 4));
	CUDA_OK(cudaMalloc(&dg, N * 4));
	CUDA_OK(cudaMalloc(&dout, N * 2));
	for (int gdt = ZINF_DTYPE_F32; gdt <= ZINF_DTYPE_F16; gdt++)
		for (int odt = ZINF_DTYPE_NONE; odt <= ZINF_DTYPE_F16; odt++)
			for (int type = 0; type < 2; type++) {
				struct zinf_adam_opts o;
				const void *hg = g32;

				if (odt == ZINF_DTYPE_F32)
					continue;
				if (gdt != ZINF_DTYPE_F32) {
					for (uint32_t i = 0; i < N; i++)
						g16[i] = gdt == ZINF_DTYPE_BF16
								 ? zinf_f32_to_bf16(g32[i])
								 : zinf_f32_to_f16(g32[i]);
					hg = g16;
				}
				zinf_adam_opts_init(&o);
				o.type = type ? ZINF_ADAM : ZINF_ADAMW;
				memcpy(rp, p0, sizeof(rp));
				memcpy(rm, m0, sizeof(rm));
				memcpy(rv, v0, sizeof(rv));
				CUDA_OK(cudaMemcpy(dp, p0, N * 4, cudaMemcpyHostToDevice));
				CUDA_OK(cudaMemcpy(dm, m0, N * 4, cudaMemcpyHostToDevice));
				CUDA_OK(cudaMemcpy(dv, v0, N * 4, cudaMemcpyHostToDevice));
				CUDA_OK(cudaMemcpy(dg, hg, N * (gdt == ZINF_DTYPE_F32 ? 4 : 2),
						   cudaMemcpyHostToDevice));
				for (uint64_t step = 1; step <= 3; step++) {
					struct zinf_adam_shard sh = {rp,
								     rm,
								     rv,
								     hg,
								     odt ? rout : NULL,
								     (enum zinf_dtype)gdt,
								     (enum zinf_dtype)odt,
								     N};
					struct zinf_adam_step_info info = {
						step, 1e-3 * (double)step, 0.5f};
					struct zinf_adam_args a;
					struct zinf_cuda_adam_args c = {.p = dp,
									.m = dm,
									.v = dv,
									.g = dg,
									.out = odt ? dout : NULL};

					zinf_adam_args_init(&a, &o, &sh, &info);
					zinf_adam_update_scalar(&a, 0, N);
					to_cuda_args(&a, &c);
					T_CHECK_RC(zinf_cuda_adam_update(&c, N, NULL));
				}
				CUDA_OK(cudaMemcpy(hp, dp, N * 4, cudaMemcpyDeviceToHost));
				CUDA_OK(cudaMemcpy(hm, dm, N * 4, cudaMemcpyDeviceToHost));
				CUDA_OK(cudaMemcpy(hv, dv, N * 4, cudaMemcpyDeviceToHost));
				CUDA_OK(cudaMemcpy(hout, dout, N * 2, cudaMemcpyDeviceToHost));
				for (uint32_t i = 0; i < N; i++) {
					T_CHECK(same(hp[i], rp[i]) && same(hm[i], rm[i]) &&
							same(hv[i], rv[i]),
						"grad %d out %d type %d elem %u: gpu p %a m %a v %a, cpu "
						"p %a m %a v %a",
						gdt, odt, type, i, hp[i], hm[i], hv[i], rp[i],
						rm[i], rv[i]);
					T_CHECK(!odt || hout[i] == rout[i] || (isnan(hp[i])),
						"grad %d out %d elem %u: gpu copy 0x%04x cpu 0x%04x",
						gdt, odt, i, hout[i], rout[i]);
				}
			}
	cudaFree(dp);
	cudaFree(dm);
	cudaFree(dv);
	cudaFree(dg);
	cudaFree(dout);
	return T_EXIT_PASS;
}

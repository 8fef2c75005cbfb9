/* The trainer's model runtime is the one of the engine's device kind: an engine on the
 * host backend reports host (ordinal -1) and gets the cpu runtime, cuda gets the cuda
 * runtime. Device memory for activations comes from the engine's budget: refused before
 * finalize and beyond the budget with one line naming the numbers, counted in the
 * device stats while held. Asking for the cuda runtime where it cannot run (built
 * without CUDA, or no GPU) fails at create with one line saying which; that part is
 * skipped on a machine with a GPU, where the gpu tests cover the runtime itself. */
#include "config_fixture.h"
#include "device.h"
#include "llama_backend.h"
#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

#ifndef ZINF_TEST_CUDA_BUILT
#error "ZINF_TEST_CUDA_BUILT must be 0 or 1 (set by tests/model/CMakeLists.txt)"
#endif

static struct zinf_config *config(const char *json)
{
	return t_config(json, "e.json", false);
}

static void tiny_config(struct zinf_llama_config *c)
{
	zinf_llama_config_init(c);
	c->vocab_size = 32;
	c->hidden_size = 16;
	c->intermediate_size = 24;
	c->num_hidden_layers = 1;
	c->num_attention_heads = 2;
	c->num_key_value_heads = 1;
	c->head_dim = 8;
}

int main(void)
{
	struct zinf_config *cfg;
	struct zinf_engine *e;
	struct zinf_stats st;
	struct zinf_llama_config lc;
	struct llama_rt_opts opts;
	struct llama_rt *rt = NULL;
	char err[512];
	uint32_t mod, p;
	uint64_t shape[1] = {1000}, before;
	void *buf, *big;
	int rc;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(llama_rt_ops_for(ZINF_ENGINE_DEVICE_HOST) == &llama_rt_cpu_ops, "host -> cpu");
	T_CHECK(llama_rt_ops_for(ZINF_ENGINE_DEVICE_CUDA) == &llama_rt_cuda_ops, "cuda -> cuda");
	T_CHECK_STR(llama_rt_cpu_ops.name, "cpu");
	T_CHECK_STR(llama_rt_cuda_ops.name, "cuda");

	cfg = config("{\"train_micro_batch_size_per_gpu\": 1, \"zinf\": {\"device\": \"host\","
		     " \"device_memory_limit\": \"1MiB\", \"pinned_memory_limit\": \"2MiB\"}}");
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK(zinf_engine_device_kind(e) == ZINF_ENGINE_DEVICE_HOST, "host engine says %d",
		(int)zinf_engine_device_kind(e));
	T_CHECK(zinf_engine_device_ordinal(e) == -1, "host ordinal %d",
		zinf_engine_device_ordinal(e));
	T_CHECK(zinf_engine_device_alloc(e, 4096, &buf) == ZINF_ESTATE && !buf,
		"alloc before finalize");
	T_CHECK(strstr(zinf_last_error(e), "not finalized"), "%s", zinf_last_error(e));
	T_CHECK_RC(zinf_module_add(e, "norm", &mod));
	T_CHECK_RC(zinf_param_add(e, mod, "norm.weight", ZINF_DTYPE_F32, 1, shape, 0, &p));
	T_CHECK_RC(zinf_engine_finalize(e));
	zinf_engine_get_stats(e, &st);
	before = st.device_now;
	T_CHECK(zinf_engine_device_alloc(e, 0, &buf) == -EINVAL, "0 bytes accepted");
	T_CHECK(strstr(zinf_last_error(e), "0 bytes"), "%s", zinf_last_error(e));
	T_CHECK_RC(zinf_engine_device_alloc(e, 65536, &buf));
	T_CHECK(buf != NULL, "no buffer");
	zinf_engine_get_stats(e, &st);
	T_CHECK(st.device_now >= before + 65536, "device_now %llu, before %llu",
		(unsigned long long)st.device_now, (unsigned long long)before);
	T_CHECK(zinf_engine_device_alloc(e, 2u << 20, &big) == ZINF_EBUDGET && !big,
		"2 MiB from a 1 MiB budget");
	T_CHECK(strstr(zinf_last_error(e), "device memory for activations (2097152 bytes)") &&
			!strchr(zinf_last_error(e), '\n'),
		"%s", zinf_last_error(e));
	T_CHECK_RC(zinf_engine_device_free(e, buf));
	T_CHECK_RC(zinf_engine_device_free(e, NULL));
	zinf_engine_get_stats(e, &st);
	T_CHECK(st.device_now == before, "device_now %llu after free, %llu before",
		(unsigned long long)st.device_now, (unsigned long long)before);
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);

	/* The cpu runtime is created for any engine; its buffers are host memory. */
	tiny_config(&lc);
	llama_rt_opts_init(&opts);
	T_CHECK(llama_rt_cpu_ops.create(&lc, &opts, 1, 4, &rt, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(rt->ops->buf_alloc(rt, 64, &buf));
	memset(buf, 1, 64); /* host memory: writable here */
	rt->ops->buf_free(rt, buf);
	rt->ops->destroy(rt);
	rt = NULL;

	if (zinf_device_cuda_count() > 0) {
		printf("a GPU is visible: the cuda runtime's refusal does not apply here\n");
		return T_EXIT_PASS;
	}
	rc = llama_rt_cuda_ops.create(&lc, &opts, 1, 4, &rt, err, sizeof(err));
	T_CHECK(rc < 0 && rt == NULL, "cuda runtime created without a GPU (rc %d)", rc);
	T_CHECK(!strchr(err, '\n'), "more than one line: %s", err);
	if (ZINF_TEST_CUDA_BUILT)
		T_CHECK(strstr(err, "model runtime: no CUDA device") && rc == -ENODEV, "%s", err);
	else
		T_CHECK(strstr(err, "model runtime: built without CUDA") && rc == -ENOTSUP, "%s",
			err);
	return T_EXIT_PASS;
}

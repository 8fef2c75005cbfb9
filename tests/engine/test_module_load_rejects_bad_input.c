/* zinf_module_load refuses bad input with -EINVAL (ZINF_ESTATE before finalize, -EBUSY
 * for a module in use) and one line naming the module, the source and the value: a
 * wrong source count, NULL arrays or sources, a bad dtype, an unknown module. A module in
 * use is refused before anything changes (its values read back as before), and so is a
 * zinf_param_load into it. */
#include "config_fixture.h"
#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

static void expect(struct zinf_engine *e, int rc, int want, const char *needle, const char *what)
{
	const char *msg = zinf_last_error(e);

	T_CHECK(rc == want, "%s: returned %d, want %d (%s)", what, rc, want, msg);
	T_CHECK(strstr(msg, needle) && !strchr(msg, '\n'), "%s: want one line with '%s': %s", what,
		needle, msg);
}

int main(void)
{
	struct zinf_config *cfg;
	struct zinf_engine *e;
	uint64_t wshape[2] = {8, 4}, bshape[1] = {4};
	float w[32], b[4], got[32];
	const void *srcs[2] = {w, b}, *with_null[2] = {w, NULL};
	enum zinf_dtype dts[2] = {ZINF_DTYPE_F32, ZINF_DTYPE_F32};
	enum zinf_dtype bad[2] = {ZINF_DTYPE_F32, (enum zinf_dtype)99};
	char err[512];
	uint32_t m, p;

	zinf_log_set_level(ZINF_LOG_ERROR);
	for (int i = 0; i < 32; i++)
		w[i] = (float)i;
	for (int i = 0; i < 4; i++)
		b[i] = -(float)i;
	cfg = t_config("{\"train_micro_batch_size_per_gpu\": 1, \"zinf\": {\"device\": \"host\", "
		       "\"device_memory_limit\": \"1MiB\", \"pinned_memory_limit\": \"2MiB\"}}",
		       "e.json", false);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "block", &m));
	T_CHECK_RC(zinf_param_add(e, m, "block.weight", ZINF_DTYPE_BF16, 2, wshape, 0, &p));
	T_CHECK_RC(zinf_param_add(e, m, "block.bias", ZINF_DTYPE_F32, 1, bshape, 0, &p));
	expect(e, zinf_module_load(e, m, 2, srcs, dts), ZINF_ESTATE,
	       "module 0: used before finalize", "before finalize");
	T_CHECK(zinf_engine_finalize(e) == 0, "%s", zinf_last_error(e));

	expect(e, zinf_module_load(e, 3, 2, srcs, dts), -EINVAL, "module 3: no such module",
	       "unknown module");
	expect(e, zinf_module_load(e, m, 1, srcs, dts), -EINVAL,
	       "module 0 (block): 1 sources for its 2 parameters", "one source short");
	expect(e, zinf_module_load(e, m, 3, srcs, dts), -EINVAL,
	       "module 0 (block): 3 sources for its 2 parameters", "one source too many");
	expect(e, zinf_module_load(e, m, 2, NULL, dts), -EINVAL, "(both required)", "srcs NULL");
	expect(e, zinf_module_load(e, m, 2, srcs, NULL), -EINVAL, "(both required)",
	       "src_dtypes NULL");
	expect(e, zinf_module_load(e, m, 2, with_null, dts), -EINVAL,
	       "module 0 (block): source 1 (param 1) is NULL", "a NULL source");
	expect(e, zinf_module_load(e, m, 2, srcs, bad), -EINVAL,
	       "module 0 (block): source 1 (param 1): dtype 99 (expected f32, bf16 or f16)",
	       "a bad dtype");
	T_CHECK(zinf_module_load(e, m, 2, srcs, dts) == 0, "good load: %s", zinf_last_error(e));
	T_CHECK_RC(zinf_param_save(e, 0, got, ZINF_DTYPE_F32));
	T_CHECK(memcmp(got, w, sizeof(w)) == 0, "weight not loaded"); /* small ints: exact */

	/* in use: refused, nothing changed */
	T_CHECK(zinf_module_fetch(e, m) == 0 && zinf_module_wait(e, m) == 0, "%s",
		zinf_last_error(e));
	for (int i = 0; i < 32; i++)
		w[i] = 100.0f + (float)i;
	expect(e, zinf_module_load(e, m, 2, srcs, dts), -EBUSY,
	       "module load refused: module 0 (block): fetched, not released", "module in use");
	expect(e, zinf_param_load(e, 0, w, ZINF_DTYPE_F32), -EBUSY,
	       "param load refused: module 0 (block): fetched, not released",
	       "param of a module in use");
	T_CHECK_RC(zinf_param_save(e, 0, got, ZINF_DTYPE_F32));
	T_CHECK(got[5] == 5.0f, "a refused load changed the master: %g", got[5]);
	T_CHECK_RC(zinf_module_release(e, m));
	T_CHECK(zinf_module_load(e, m, 2, srcs, dts) == 0, "%s", zinf_last_error(e));
	T_CHECK_RC(zinf_param_save(e, 0, got, ZINF_DTYPE_F32));
	T_CHECK(got[5] == 105.0f, "reload after release: %g", got[5]);
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	return T_EXIT_PASS;
}

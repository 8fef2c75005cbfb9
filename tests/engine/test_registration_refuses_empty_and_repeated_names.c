/* Registration refuses, with -EINVAL and one line naming both, a module or parameter
 * name that is empty or already registered (a parameter's across all modules), and adds
 * nothing: the next registration gets the index the refused one would have had, and the
 * engine finalizes and loads as if the refused calls had not been made. A message naming
 * a name with a newline or a tab stays one line (each shown as '?'). A duplicate is
 * found among 20000 parameters as well (the names are indexed, not compared in pairs). */
#include "config_fixture.h"
#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

static void expect_refusal(struct zinf_engine *e, int rc, const char *what, const char *want)
{
	const char *msg = zinf_last_error(e);

	T_CHECK(rc == -EINVAL, "%s: accepted (%d)", what, rc);
	T_CHECK(strstr(msg, want) && !strchr(msg, '\n'), "%s: \"%s\", expected \"%s\"", what, msg,
		want);
}

int main(void)
{
	const uint64_t shape[1] = {8};
	const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1}, twos[8] = {2, 2, 2, 2, 2, 2, 2, 2};
	float back[8];
	struct zinf_config *cfg;
	struct zinf_engine *e;
	char err[256], name[64];
	uint32_t m = 99, p = 99;

	cfg = t_config(
		"{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 3},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"1MiB\","
		" \"pinned_memory_limit\": \"1MiB\"}}",
		"names.json", false);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);

	expect_refusal(e, zinf_module_add(e, "", &m), "an empty module name",
		       "module 0: the name is empty");
	T_CHECK_RC(zinf_module_add(e, "embed", &m));
	T_CHECK(m == 0, "the first module added after a refusal is %u, expected 0", m);
	expect_refusal(e, zinf_param_add(e, m, "", ZINF_DTYPE_F32, 1, shape, 0, &p),
		       "an empty param name", "param 0 (module embed): the name is empty");
	T_CHECK_RC(zinf_param_add(e, m, "embed.weight", ZINF_DTYPE_F32, 1, shape, 0, &p));
	T_CHECK(p == 0, "the first param added after a refusal is %u, expected 0", p);
	expect_refusal(e, zinf_param_add(e, m, "embed.weight", ZINF_DTYPE_F32, 1, shape, 0, &p),
		       "a param name twice in one module",
		       "param embed.weight: the name is param 0's already (module embed)");

	expect_refusal(e, zinf_module_add(e, "embed", &m), "a module name twice",
		       "module embed: the name is module 0's already");
	T_CHECK_RC(zinf_module_add(e, "head", &m));
	T_CHECK(m == 1, "the second module is %u, expected 1", m);
	expect_refusal(e, zinf_param_add(e, m, "embed.weight", ZINF_DTYPE_F32, 1, shape, 0, &p),
		       "a param name of another module",
		       "param embed.weight: the name is param 0's already (module embed)");
	T_CHECK_RC(zinf_param_add(e, m, "head.weight", ZINF_DTYPE_F32, 1, shape, 0, &p));
	T_CHECK(p == 1, "the second param is %u, expected 1", p);
	/* a name with a newline and a tab is taken, and messages naming it stay one line */
	T_CHECK_RC(zinf_module_add(e, "odd\nname\t", &m));
	expect_refusal(e, zinf_module_add(e, "odd\nname\t", &m), "a name with a newline twice",
		       "module odd?name?: the name is module 2's already");

	/* the refused calls left nothing behind: two modules of one 8-element param each
	 * (and one of none) */
	T_CHECK_RC(zinf_engine_finalize(e));
	T_CHECK_RC(zinf_param_load(e, 0, ones, ZINF_DTYPE_F32));
	T_CHECK_RC(zinf_param_load(e, 1, twos, ZINF_DTYPE_F32));
	T_CHECK(zinf_param_elems(e, 0) == 8 && zinf_param_elems(e, 1) == 8 &&
			zinf_param_elems(e, 2) == 0,
		"param sizes %llu %llu %llu", (unsigned long long)zinf_param_elems(e, 0),
		(unsigned long long)zinf_param_elems(e, 1),
		(unsigned long long)zinf_param_elems(e, 2));
	T_CHECK_RC(zinf_param_save(e, 1, back, ZINF_DTYPE_F32));
	T_CHECK(memcmp(back, twos, sizeof(back)) == 0, "head.weight did not round-trip");
	zinf_engine_destroy(e);

	/* many names: the index grows, and still finds the one repeated */
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "experts", &m));
	for (uint32_t i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "experts.%u.w", i);
		T_CHECK(zinf_param_add(e, m, name, ZINF_DTYPE_F32, 1, shape, 0, &p) == 0 && p == i,
			"param %u: %s", i, zinf_last_error(e));
	}
	expect_refusal(e, zinf_param_add(e, m, "experts.12345.w", ZINF_DTYPE_F32, 1, shape, 0, &p),
		       "a name repeated among 20000",
		       "param experts.12345.w: the name is param 12345's already (module experts)");
	T_CHECK_RC(zinf_param_add(e, m, "experts.20000.w", ZINF_DTYPE_F32, 1, shape, 0, &p));
	T_CHECK(p == 20000, "the param after the refusal is %u, expected 20000", p);
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	return T_EXIT_PASS;
}

/* The public API's rule for NULL (include/zinf/error.h): destroy(NULL) does nothing and
 * last_error(NULL) is ""; a create with a NULL out or options, a NULL required pointer
 * (a name, a shape, a destination, a list, an out-pointer) and a NULL config, plan or
 * Adam handle are refused with -EINVAL before anything changes; an err buffer may be
 * NULL. Each call here crashed, or behaved unlike its siblings, before the rule. */
#include <sys/stat.h>
#include <unistd.h>

#include "config_fixture.h"
#include "test.h"
#include "zinf/engine.h"
#include "zinf/train.h"
#include "zinf/zinf.h"

static struct zinf_config *host_config(void)
{
	return t_config("{\"train_micro_batch_size_per_gpu\": 1, \"zinf\": {\"device\": \"host\","
			" \"device_memory_limit\": \"4MiB\", \"pinned_memory_limit\": \"2MiB\"}}",
			"null.json", false);
}

static void config_and_plan(void)
{
	struct zinf_config *cfg = host_config();
	struct zinf_plan *plan;
	uint64_t u;
	bool b;
	struct stat st;

	T_CHECK(zinf_config_create(NULL) == -EINVAL, "config create, out NULL");
	T_CHECK(strcmp(zinf_config_last_error(NULL), "") == 0, "config last_error(NULL)");
	T_CHECK(zinf_config_warning_count(NULL) == 0 && zinf_config_warning(NULL, 0) == NULL,
		"config warnings of NULL");
	T_CHECK(zinf_config_load_string(NULL, "{}", "x") == -EINVAL, "load_string, cfg NULL");
	T_CHECK(zinf_config_load_string(cfg, NULL, "x") == -EINVAL, "load_string, json NULL");
	T_CHECK(zinf_config_load_file(cfg, NULL) == -EINVAL, "load_file, path NULL");
	T_CHECK(zinf_config_get_u64(cfg, "train_micro_batch_size_per_gpu", &u) == 0 && u == 1,
		"a refused load changed the config");
	T_CHECK(zinf_config_get_u64(NULL, "zero_optimization.stage", &u) == -EINVAL &&
			zinf_config_get_u64(cfg, "zero_optimization.stage", NULL) == -EINVAL &&
			zinf_config_get_bool(cfg, NULL, &b) == -ENOENT,
		"getters with NULL");
	T_CHECK(zinf_config_resolve(NULL, NULL) == -EINVAL, "resolve, cfg NULL");
	T_CHECK(zinf_config_set(NULL, "zero_optimization.stage", "1") == -EINVAL, "set, cfg NULL");
	/* a NULL out path is refused before anything is written (no "(null).partial") */
	T_CHECK(zinf_config_write_edited(NULL, NULL, 0, NULL, true, NULL, 100) == -EINVAL,
		"write_edited, out_path NULL");
	T_CHECK(stat("(null).partial", &st) != 0 && stat("(null)", &st) != 0,
		"write_edited made a file for a NULL path");
	zinf_config_destroy(NULL);

	T_CHECK(zinf_plan_create(NULL) == -EINVAL, "plan create, out NULL");
	T_CHECK_RC(zinf_plan_create(&plan));
	T_CHECK(zinf_plan_module_add(plan, NULL) == -EINVAL &&
			zinf_plan_module_add(NULL, &(uint32_t){0}) == -EINVAL,
		"plan module_add with NULL");
	T_CHECK(zinf_plan_nvme_free(NULL, &u, NULL, 100) == -EINVAL &&
			zinf_plan_nvme_free(cfg, NULL, NULL, 100) == -EINVAL,
		"plan nvme_free with NULL, err NULL");
	zinf_plan_destroy(plan);
	zinf_plan_destroy(NULL);
	zinf_config_destroy(cfg);
}

static void engine(void)
{
	static const uint64_t shape[2] = {16, 16};
	struct zinf_config *cfg = host_config();
	struct zinf_engine *e = (struct zinf_engine *)1;
	struct zinf_engine_progress pr;
	struct zinf_stats st;
	uint32_t m, p;
	float dst[256];
	void *mem;

	T_CHECK(strcmp(zinf_last_error(NULL), "") == 0, "engine last_error(NULL)");
	T_CHECK(zinf_engine_create(NULL, &e, NULL, 100) == -EINVAL && e == NULL,
		"engine create, cfg NULL (err NULL, errlen 100)");
	T_CHECK(zinf_engine_create(cfg, NULL, NULL, 0) == -EINVAL, "engine create, out NULL");
	T_CHECK_RC(zinf_engine_create(cfg, &e, NULL, 0));

	/* registration: nothing is added by a refused call */
	T_CHECK(zinf_module_add(e, NULL, &m) == -EINVAL, "module_add, name NULL");
	T_CHECK(zinf_module_add(e, "m", NULL) == -EINVAL, "module_add, out NULL");
	T_CHECK_RC(zinf_module_add(e, "m", &m));
	T_CHECK(m == 0, "a refused module_add added a module: the first is %u", m);
	T_CHECK(zinf_param_add(e, m, "w", ZINF_DTYPE_F32, 2, NULL, 0, &p) == -EINVAL,
		"param_add, shape NULL");
	T_CHECK(zinf_param_add(e, m, NULL, ZINF_DTYPE_F32, 2, shape, 0, &p) == -EINVAL,
		"param_add, name NULL");
	T_CHECK(zinf_param_add(e, m, "w", ZINF_DTYPE_F32, 2, shape, 0, NULL) == -EINVAL,
		"param_add, out NULL");
	T_CHECK_RC(zinf_param_add(e, m, "w", ZINF_DTYPE_F32, 2, shape, 0, &p));
	T_CHECK(p == 0, "a refused param_add added a parameter: the first is %u", p);
	T_CHECK(zinf_engine_finalize(e) == 0, "%s", zinf_last_error(e));

	T_CHECK(zinf_param_save(e, p, NULL, ZINF_DTYPE_F32) == -EINVAL, "param_save, dst NULL");
	T_CHECK_RC(zinf_param_save(e, p, dst, ZINF_DTYPE_F32));
	T_CHECK(zinf_engine_check_room(e, 1, NULL, true) == -EINVAL, "check_room, list NULL");
	T_CHECK(zinf_engine_progress_get(e, NULL) == -EINVAL, "progress_get, out NULL");
	T_CHECK(zinf_engine_progress_set(e, NULL) == -EINVAL, "progress_set, in NULL");
	T_CHECK_RC(zinf_engine_progress_get(e, &pr));
	T_CHECK(zinf_engine_device_alloc(e, 4096, NULL) == -EINVAL, "device_alloc, out NULL");
	T_CHECK_RC(zinf_engine_device_alloc(e, 4096, &mem));
	T_CHECK_RC(zinf_engine_device_free(e, mem));
	zinf_engine_get_stats(e, NULL);
	zinf_engine_get_stats(e, &st);
	T_CHECK(st.param_elems == 256, "stats after the NULL calls: %llu elements",
		(unsigned long long)st.param_elems);
	zinf_engine_destroy(e);
	zinf_engine_destroy(NULL);
	zinf_config_destroy(cfg);
}

static void io_and_adam(void)
{
	struct zinf_io *io = (struct zinf_io *)1;
	struct zinf_io_opts o;
	struct zinf_adam *adam = (struct zinf_adam *)1;
	struct zinf_adam_opts ao;
	struct zinf_io_req *done[1];
	char dir[] = "/var/tmp/zinf-null-XXXXXX", err[256];

	T_CHECK(strcmp(zinf_io_last_error(NULL), "") == 0, "io last_error(NULL)");
	T_CHECK(zinf_io_create(NULL, &io, err, sizeof(err)) == -EINVAL && io == NULL,
		"io create, opts NULL");
	zinf_io_opts_init(&o);
	T_CHECK(zinf_io_create(&o, NULL, NULL, 0) == -EINVAL, "io create, out NULL");
	T_CHECK(mkdtemp(dir), "mkdtemp");
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	o.file_size = 1 << 20;
	T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	T_CHECK(zinf_io_poll(io, NULL, 4) == -EINVAL && zinf_io_poll(io, done, -1) == -EINVAL,
		"poll with a NULL array or max < 0 (as zinf_io_wait)");
	T_CHECK(zinf_io_poll(io, done, 0) == 0 && zinf_io_poll(io, done, 1) == 0, "poll");
	zinf_io_get_stats(io, NULL);
	zinf_io_destroy(io);
	zinf_io_destroy(NULL);
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");

	T_CHECK(strcmp(zinf_adam_last_error(NULL), "") == 0, "adam last_error(NULL)");
	zinf_adam_opts_init(&ao);
	T_CHECK(zinf_adam_create(NULL, &ao) == -EINVAL, "adam create, out NULL");
	T_CHECK(zinf_adam_create(&adam, NULL) == -EINVAL && adam == NULL, "adam create, opts NULL");
	T_CHECK(zinf_adam_step(NULL, NULL, NULL) == -EINVAL, "adam step, adam NULL");
	zinf_adam_destroy(NULL);
}

/* The trainer's calls (include/zinf/train.h) take a NULL err too: refused input still
 * gets its message built (they read it) but none is written. */
static void trainer(void)
{
	struct zinf_train_opts to;
	struct zinf_plan_opts po;
	struct zinf_plan_result pr;

	zinf_train_opts_init(&to); /* no model, no config: refused */
	T_CHECK(zinf_train_run(&to, NULL, NULL, 0) == -EINVAL, "train_run, err NULL");
	T_CHECK(zinf_train_run(NULL, NULL, NULL, 100) == -EINVAL, "train_run, opts NULL");
	{ /* a count of overrides with no list: refused, not read through */
		char err[256] = "";

		to.init_config = "model.json";
		to.config_path = "ds.json";
		to.data_path = "data.txt";
		to.seq_len = 16;
		to.steps = 1;
		to.n_config_sets = 1;
		T_CHECK(zinf_train_run(&to, NULL, err, sizeof(err)) == -EINVAL &&
				strstr(err, "--set: 1 overrides in a NULL list"),
			"train_run, config_sets NULL: %s", err);
		zinf_train_opts_init(&to);
	}
	zinf_plan_opts_init(&po);
	T_CHECK(zinf_train_plan(&po, &pr, NULL, 100) < 0, "train_plan, err NULL");
	po.n_config_sets = 2;
	{
		char err[256] = "";

		T_CHECK(zinf_train_plan(&po, &pr, err, sizeof(err)) == -EINVAL &&
				strstr(err, "--set: 2 overrides in a NULL list"),
			"train_plan, config_sets NULL: %s", err);
	}
	zinf_plan_opts_init(&po);
	T_CHECK(zinf_train_plan(&po, NULL, NULL, 0) == -EINVAL, "train_plan, r NULL");
	T_CHECK(zinf_plan_write_config(&po, &pr, 0, NULL, false, NULL, 100) == -EINVAL,
		"plan_write_config, out_path NULL");
	T_CHECK(zinf_stats_json(NULL, stdout) == -EINVAL, "stats_json, st NULL");
}

int main(void)
{
	zinf_log_set_level(ZINF_LOG_ERROR);
	config_and_plan();
	engine();
	io_and_adam();
	trainer();
	return T_EXIT_PASS;
}

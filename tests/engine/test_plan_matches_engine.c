/* zinf_plan_estimate gives the figures a finalized engine has, for every placement of
 * the parameters (device, cpu, nvme) and the optimizer state (device, cpu, nvme), fp32 and bf16,
 * a tied pair of modules or none, small modules kept on the device or not (layers too,
 * up to a quarter of the budget), and the
 * gradients' tier (cpu, nvme, auto), and NVMe homes split by offload_param.max_in_cpu
 * (some modules in host memory): the pinned pool an "auto" limit makes and the need
 * behind it, the NVMe drive bytes, the host bytes finalize checks and where the
 * gradients go. And it says "fits" exactly when the engine accepts the device budget
 * (finalize, then zinf_engine_check_room for every module and the pair): at the
 * estimate's device figure and one allocation unit (256 bytes) below it. A shape
 * zinf_param_add refuses (a dimension of 0, more than 2^48 elements, 2^50 in all, none)
 * is refused.
 *
 * White-box: engine_pinned_need, engine_nvme_drive_bytes and engine_grad_host_bytes
 * (engine_internal.h). */
#include <unistd.h>

#include "engine_internal.h"
#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

#define N_LAYERS 3
#define V 500
#define C 128
#define I 384

/* The toy model's parameters of module m: an embedding, layers of two norms and four
 * matrices, a head of a norm and (untied) a matrix. */
struct pdesc {
	int ndim;
	uint64_t shape[2];
};

static int module_params(int m, bool tied, struct pdesc *out)
{
	int n = 0;

	if (m == 0) {
		out[n++] = (struct pdesc){2, {V, C}};
	} else if (m <= N_LAYERS) {
		out[n++] = (struct pdesc){1, {C, 0}};
		out[n++] = (struct pdesc){2, {3 * C, C}};
		out[n++] = (struct pdesc){2, {C, C}};
		out[n++] = (struct pdesc){1, {C, 0}};
		out[n++] = (struct pdesc){2, {2 * I, C}};
		out[n++] = (struct pdesc){2, {C, I}};
		out[n++] = (struct pdesc){1, {300, 0}}; /* off the 256- and 512-byte grains */
	} else {
		out[n++] = (struct pdesc){1, {C, 0}};
		if (!tied)
			out[n++] = (struct pdesc){2, {V, C}};
	}
	return n;
}

struct setup {
	const char *param, *optim, *grads;
	enum zinf_dtype dtype;
	bool tied;
	uint64_t persist;    /* stage3_param_persistence_threshold */
	const char *pinned;  /* NULL: auto */
	uint64_t max_in_cpu; /* offload_param.max_in_cpu */
	double ratio;	     /* offload_optimizer.ratio (0: 1) */
	const char *chunk;   /* zinf.chunk_size; NULL: 64KiB (below every module) */
};

static struct zinf_config *config_for(const struct setup *s, const char *dir, uint64_t device)
{
	struct zinf_config_resolve_info info = {
		.world_size = 1, .host_total_bytes = zinf_host_memory_bytes(), .require_all = true};
	struct zinf_config *cfg;
	char json[2048], pinned[96] = "", split[64] = "";
	double ratio = s->ratio ? s->ratio : 1;

	if (s->pinned)
		snprintf(pinned, sizeof(pinned), ", \"pinned_memory_limit\": \"%s\"", s->pinned);
	if (s->max_in_cpu)
		snprintf(split, sizeof(split), ", \"max_in_cpu\": %llu",
			 (unsigned long long)s->max_in_cpu);
	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": %s},"
		" \"zero_optimization\": {\"stage\": 3,"
		"  \"offload_param\": {\"device\": \"%s\", \"nvme_path\": \"%s\"%s},"
		"  \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"%s\", \"ratio\": %g},"
		"  \"sub_group_size\": 40000, \"stage3_param_persistence_threshold\": %llu},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": %llu,"
		"  \"chunk_size\": \"%s\", \"offload_gradients\": \"%s\"%s}}",
		s->dtype == ZINF_DTYPE_BF16 ? "true" : "false", s->param, dir, split, s->optim, dir,
		ratio, (unsigned long long)s->persist, (unsigned long long)device,
		s->chunk ? s->chunk : "64KiB", s->grads, pinned);
	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_config_load_string(cfg, json, "plan.json") == 0, "%s",
		zinf_config_last_error(cfg));
	T_CHECK(zinf_config_resolve(cfg, &info) == 0, "%s", zinf_config_last_error(cfg));
	return cfg;
}

static void describe(struct zinf_plan *p, const struct setup *s)
{
	uint32_t first = 0, last = 0;

	for (int m = 0; m < N_LAYERS + 2; m++) {
		struct pdesc d[8];
		int n = module_params(m, s->tied, d);
		uint32_t id;
		T_CHECK_RC(zinf_plan_module_add(p, &id));
		if (m == 0)
			first = id;
		last = id;
		for (int k = 0; k < n; k++)
			T_CHECK_RC(zinf_plan_param_add(p, id, s->dtype, d[k].ndim, d[k].shape, 0));
	}
	if (s->tied)
		T_CHECK_RC(zinf_plan_modules_together(p, first, last));
}

/* The engine for s with a device budget of device bytes: whether it takes the model
 * (finalize and the check before step 1 pass), and its figures. */
struct engine_figures {
	bool fits;
	uint64_t pinned_pool, pinned_need, nvme, grad_host, param_elems;
	uint64_t host_split; /* max_in_cpu's part of NVMe homes */
	uint64_t host_state; /* the optimizer state finalize puts in host memory */
};

static struct engine_figures engine_run(const struct setup *s, const char *dir, uint64_t device)
{
	struct zinf_config *cfg = config_for(s, dir, device);
	struct engine_figures f = {0};
	struct zinf_engine *e;
	struct zinf_stats st;
	uint32_t mod[N_LAYERS + 2];
	char err[512];
	int rc;

	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	for (int m = 0; m < N_LAYERS + 2; m++) {
		struct pdesc d[8];
		int n = module_params(m, s->tied, d);
		char name[32];
		snprintf(name, sizeof(name), "m%d", m);
		T_CHECK_RC(zinf_module_add(e, name, &mod[m]));
		for (int k = 0; k < n; k++) {
			uint32_t par;
			snprintf(name, sizeof(name), "m%d.p%d", m, k);
			T_CHECK_RC(zinf_param_add(e, mod[m], name, s->dtype, d[k].ndim, d[k].shape,
						  0, &par));
		}
	}
	f.pinned_need = engine_pinned_need(e);
	f.nvme = engine_nvme_drive_bytes(e);
	f.grad_host = engine_grad_host_bytes(e);
	f.host_split = zinf_store_host_split_bytes(e->store);
	for (uint32_t m = 0; m < e->dev_first && !e->nvme_state; m++)
		f.host_state += 16 * e->modules[m].elems;
	rc = zinf_engine_finalize(e);
	T_CHECK(rc == 0 || rc == ZINF_EBUDGET, "finalize: %s", zinf_last_error(e));
	f.fits = rc == 0;
	for (int m = 0; f.fits && m < N_LAYERS + 2; m++)
		f.fits = zinf_engine_check_room(e, 1, &mod[m], true) == 0;
	if (f.fits && s->tied)
		f.fits = zinf_engine_check_room(
				 e, 2, (const uint32_t[2]){mod[0], mod[N_LAYERS + 1]}, true) == 0;
	if (rc == 0) {
		zinf_engine_get_stats(e, &st);
		f.pinned_pool = st.pinned_limit;
		f.param_elems = st.param_elems;
	}
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	return f;
}

static struct zinf_plan_need plan_run(const struct setup *s, const char *dir, uint64_t device)
{
	struct zinf_config *cfg = config_for(s, dir, device);
	struct zinf_plan_machine mc = {
		.device_bytes = device,
		.host_bytes = zinf_host_memory_bytes(),
		.host_device = true,
	};
	struct zinf_plan_need need;
	struct zinf_plan *p;

	T_CHECK_RC(zinf_config_get_u64(cfg, "zinf.pinned_memory_limit", &mc.pinned_bytes));
	mc.pinned_auto = !s->pinned;
	T_CHECK_RC(zinf_plan_create(&p));
	describe(p, s);
	T_CHECK_RC(zinf_plan_estimate(p, cfg, &mc, &need));
	zinf_plan_destroy(p);
	zinf_config_destroy(cfg);
	return need;
}

static void check(const struct setup *s, const char *dir)
{
	char what[160];
	struct zinf_plan_need big = plan_run(s, dir, 64u << 20), at, below;
	struct engine_figures f;
	uint64_t x = big.device_bytes;
	bool nvme_state = strcmp(s->optim, "nvme") == 0, dev_state = strcmp(s->optim, "none") == 0;
	uint64_t cpu_params;

	snprintf(
		what, sizeof(what),
		"param %s, optimizer %s, grads %s, %s%s, persist %llu%s, max_in_cpu %llu, ratio %g",
		s->param, s->optim, s->grads, s->dtype == ZINF_DTYPE_BF16 ? "bf16" : "fp32",
		s->tied ? ", tied" : "", (unsigned long long)s->persist,
		s->pinned ? ", pinned set" : "", (unsigned long long)s->max_in_cpu,
		s->ratio ? s->ratio : 1);
	/* the device figure at a budget of itself (small modules kept depend on it) */
	for (int i = 0; i < 4; i++) {
		at = plan_run(s, dir, x);
		if (at.device_bytes == x)
			break;
		x = at.device_bytes;
	}
	T_CHECK(at.fits, "%s: no fit at the estimate's own figure %llu: %s", what,
		(unsigned long long)x, at.why);
	f = engine_run(s, dir, x);
	cpu_params = strcmp(s->param, "cpu") == 0
			     ? f.param_elems * (s->dtype == ZINF_DTYPE_BF16 ? 2 : 4)
			     : f.host_split;
	T_CHECK((f.host_split > 0) == (s->max_in_cpu > 0),
		"%s: %llu bytes of NVMe homes in host memory", what,
		(unsigned long long)f.host_split);
	T_CHECK(f.fits, "%s: the engine refused the %llu bytes the plan said fit", what,
		(unsigned long long)x);
	T_CHECK(f.pinned_need == at.pinned_need, "%s: pinned need %llu, plan %llu", what,
		(unsigned long long)f.pinned_need, (unsigned long long)at.pinned_need);
	T_CHECK(f.pinned_pool == at.pinned_bytes, "%s: pinned pool %llu, plan %llu", what,
		(unsigned long long)f.pinned_pool, (unsigned long long)at.pinned_bytes);
	T_CHECK(f.nvme == at.nvme_bytes, "%s: NVMe %llu bytes, plan %llu", what,
		(unsigned long long)f.nvme, (unsigned long long)at.nvme_bytes);
	T_CHECK(f.param_elems == at.param_elems, "%s: %llu parameters, plan %llu", what,
		(unsigned long long)f.param_elems, (unsigned long long)at.param_elems);
	/* engine_check_host_memory: homes there + 16 bytes a parameter of the state in host
	 * memory (all with cpu, none with the state on the device, a share with ratio) */
	if (s->ratio)
		T_CHECK(f.host_state > 0 && f.host_state < 16 * f.param_elems,
			"%s: ratio %g puts %llu bytes of state in host memory", what, s->ratio,
			(unsigned long long)f.host_state);
	else
		T_CHECK(f.host_state == (dev_state || nvme_state ? 0 : 16 * f.param_elems),
			"%s: %llu bytes of optimizer state in host memory", what,
			(unsigned long long)f.host_state);
	if (!nvme_state)
		T_CHECK(at.host_checked == cpu_params + f.host_state,
			"%s: host checked %llu, engine %llu", what,
			(unsigned long long)at.host_checked,
			(unsigned long long)(cpu_params + f.host_state));
	if (nvme_state) {
		T_CHECK(at.grads_on_nvme == (f.grad_host == 0), "%s: gradients on NVMe: plan %d",
			what, at.grads_on_nvme);
		T_CHECK(at.host_checked == cpu_params + f.grad_host,
			"%s: host checked %llu, engine %llu", what,
			(unsigned long long)at.host_checked,
			(unsigned long long)(cpu_params + f.grad_host));
	}
	/* below it: the same answer from both, and a page less is refused (the host
	 * backend's budget is whole pages) */
	for (uint64_t less = 256; less <= 4096; less += 3840) {
		below = plan_run(s, dir, x - less);
		f = engine_run(s, dir, x - less);
		T_CHECK(below.fits == f.fits, "%s: at %llu bytes the plan says %s, the engine %s",
			what, (unsigned long long)(x - less), below.fits ? "fits" : below.why,
			f.fits ? "fits" : "refuses");
		T_CHECK(less < 4096 || (!below.fits && below.refused_tier == ZINF_PLAN_DEVICE),
			"%s: the plan fits at %llu, a page under its own figure", what,
			(unsigned long long)(x - less));
	}
	fprintf(stderr, "%s: device %llu (base %llu), pinned %llu, host %llu, nvme %llu\n", what,
		(unsigned long long)x, (unsigned long long)at.device_base,
		(unsigned long long)at.pinned_bytes, (unsigned long long)at.host_bytes,
		(unsigned long long)at.nvme_bytes);
}

/* A placement in bf16 (chunks below the modules, then above them), then fp32 with a tied head and its norm kept on the device, then
 * with the layers kept too and the pinned pool set. */
static void check_variants(const char *param, const char *optim, const char *grads,
			   uint64_t max_in_cpu, double ratio, const char *dir)
{
	struct setup s = {param, optim, grads,	    ZINF_DTYPE_BF16, false,
			  0,	 NULL,	max_in_cpu, ratio,	     NULL};

	check(&s, dir);
	s.chunk = "32MiB"; /* above every module: a chunk is the module */
	check(&s, dir);
	s.chunk = NULL;
	s.dtype = ZINF_DTYPE_F32;
	s.tied = true;
	s.persist = 1000; /* the norms-only head */
	check(&s, dir);
	s.persist = 250000; /* the layers too, as far as a quarter */
	s.pinned = "32MiB";
	check(&s, dir);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-plan-XXXXXX";
	static const char *const params[] = {"none", "cpu", "nvme"};
	static const char *const optims[] = {"none", "cpu", "nvme"};
	static const char *const grads[] = {"cpu", "nvme", "auto"};

	zinf_log_set_level(ZINF_LOG_ERROR);
	{ /* shapes zinf_param_add refuses are refused here too: a plan of them would "fit" */
		struct zinf_plan *p;
		uint32_t m;
		const uint64_t zero[] = {0}, huge[] = {1ull << 40, 1ull << 40}, ok[] = {4, 8};

		T_CHECK_RC(zinf_plan_create(&p));
		T_CHECK_RC(zinf_plan_module_add(p, &m));
		T_CHECK(zinf_plan_param_add(p, m, ZINF_DTYPE_F32, 1, zero, 0) == -EINVAL,
			"a dimension of 0");
		T_CHECK(zinf_plan_param_add(p, m, ZINF_DTYPE_F32, 2, huge, 0) == -EINVAL,
			"2^80 elements");
		T_CHECK(zinf_plan_param_add(p, m, ZINF_DTYPE_F32, 2, NULL, 0) == -EINVAL,
			"no shape");
		T_CHECK(zinf_plan_param_add(p, m, ZINF_DTYPE_F32, 1, (uint64_t[]){(1ull << 48) + 1},
					    0) == -EINVAL,
			"2^48 + 1 elements");
		T_CHECK_RC(zinf_plan_param_add(p, m, ZINF_DTYPE_F32, 2, ok, 0));
		zinf_plan_destroy(p);
		T_CHECK_RC(zinf_plan_create(&p));
		T_CHECK_RC(zinf_plan_module_add(p, &m));
		for (int k = 0; k < 4; k++) /* 2^50 in all, then one more */
			T_CHECK_RC(zinf_plan_param_add(p, m, ZINF_DTYPE_BF16, 2,
						       (uint64_t[]){1ull << 24, 1ull << 24}, 0));
		T_CHECK(zinf_plan_param_add(p, m, ZINF_DTYPE_F32, 1, (uint64_t[]){1}, 0) == -EINVAL,
			"more than 2^50 elements in all");
		zinf_plan_destroy(p);
	}
	T_CHECK(mkdtemp(dir), "mkdtemp");
	for (int pi = 0; pi < 3; pi++) {
		for (int oi = 0; oi < 3; oi++) {
			for (int gi = 0; gi < (oi == 2 ? 3 : 1); gi++) {
				const char *g = oi == 2 ? grads[gi] : "auto";
				check_variants(params[pi], optims[oi], g, 0, 0, dir);
				/* NVMe homes split by max_in_cpu 300000: the embedding (64000)
				 * and the first layer (213548) in host memory, and a tied
				 * head's norm */
				if (pi == 2)
					check_variants(params[pi], optims[oi], g, 300000, 0, dir);
				/* the optimizer state split by ratio 0.37: untied, the embedding
				 * and the first layer (277548 of 64000 + 3 x 213548 + 64128) in
				 * host memory, the rest on the device; tied (a head of 128), the
				 * embedding alone. Untied, the head's matrix decides it (without
				 * it the first layer would not fit under the ratio): a split taken
				 * before the last parameter is registered shows */
				if (oi == 1)
					check_variants(params[pi], optims[oi], g, 0, 0.37, dir);
			}
		}
	}
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");
	return T_EXIT_PASS;
}

/*
 * zinf plan: where a model's training state fits. For each placement of the parameters
 * and the optimizer state, the model is described to zinf_plan_estimate exactly as
 * zinf train registers it (train_model_describe) with the model runtime's buffers for
 * B x T (train_pass_sizes), under the config with that placement set, on this machine or
 * on the sizes given. The first placement that fits, in the order of the table (least
 * traffic a step first), is chosen, and can be written out as a config.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "zinf/error.h"
#include "zinf/log.h"
#include "zinf/train.h"

/* The placements, fastest first: everything on the device (no traffic but the step's
 * new copies written home), then the optimizer on the CPU (a step's gradients come off
 * the device), with the NVMe traffic a step adds growing down the table (parameters on
 * NVMe: their 16-bit copies read in each pass and written once; the optimizer state
 * there: 12-16 bytes a parameter read and written). */
static const struct {
	const char *param, *optimizer;
} placements[ZINF_PLAN_ROWS] = {
	{"none", "none"}, {"none", "cpu"}, {"cpu", "cpu"},   {"nvme", "cpu"},
	{"none", "nvme"}, {"cpu", "nvme"}, {"nvme", "nvme"},
};

void zinf_plan_opts_init(struct zinf_plan_opts *o)
{
	memset(o, 0, sizeof(*o));
}

static int plan_module_add(void *user, const char *name, uint32_t *module)
{
	(void)name;
	return zinf_plan_module_add(user, module);
}

static int plan_param_add(void *user, uint32_t module, const char *name, enum zinf_dtype dtype,
			  int ndim, const uint64_t *shape, uint32_t *param)
{
	(void)name;
	*param = 0;
	return zinf_plan_param_add(user, module, dtype, ndim, shape, 0);
}

/* zinf.device_memory_limit's least value (the config schema's) */
#define PLAN_MIN_DEVICE_BYTES (1ull << 20)

static const char *plan_error(void *user)
{
	(void)user;
	return "plan: out of memory";
}

/* The config of o with the extra "KEY=VALUE" sets (named extra_origin in messages;
 * NULL: --set), resolved for this plan's host. */
static int load_config(const struct zinf_plan_opts *o, const char *const *extra, int n_extra,
		       const char *extra_origin, uint64_t hidden, uint64_t host_bytes,
		       struct zinf_config **out, char *err, size_t errlen)
{
	struct zinf_config_resolve_info info = {.world_size = 1,
						.hidden_size = hidden,
						.host_total_bytes = host_bytes,
						.planning = true};
	struct zinf_config *cfg;
	int rc;

	*out = NULL;
	rc = zinf_config_create(&cfg);
	if (rc)
		return rc;
	rc = o->config_path ? zinf_config_load_file(cfg, o->config_path) : 0;
	for (int i = 0; !rc && i < o->n_config_sets + n_extra; i++) {
		const char *kv =
			i < o->n_config_sets ? o->config_sets[i] : extra[i - o->n_config_sets];
		char key[256];
		const char *eq = strchr(kv, '=');

		if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof(key)) {
			snprintf(err, errlen, "--set %s: expected KEY=VALUE", kv);
			zinf_config_destroy(cfg);
			return -EINVAL;
		}
		memcpy(key, kv, (size_t)(eq - kv));
		key[eq - kv] = 0;
		if (i >= o->n_config_sets && extra_origin &&
		    train_batch_flag_check(cfg, extra_origin, strtoull(eq + 1, NULL, 10), key, err,
					   errlen)) {
			zinf_config_destroy(cfg);
			return ZINF_ECONFIG;
		}
		rc = i < o->n_config_sets || !extra_origin
			     ? zinf_config_set(cfg, key, eq + 1)
			     : zinf_config_set_from(cfg, key, eq + 1, extra_origin);
	}
	if (!rc)
		rc = zinf_config_resolve(cfg, &info);
	if (rc) {
		snprintf(err, errlen, "%s", zinf_config_last_error(cfg));
		zinf_config_destroy(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

/* The sets that make row's placement on top of the user's config. */
static int row_sets(const struct zinf_plan_result *r, int row, char sets[][600], const char **ptrs)
{
	const struct zinf_plan_row *w = &r->rows[row];
	int n = 0;

	snprintf(sets[n++], 600, "zero_optimization.stage=%d", w->stage);
	snprintf(sets[n++], 600, "zero_optimization.offload_param.device=%s", w->param);
	snprintf(sets[n++], 600, "zero_optimization.offload_optimizer.device=%s", w->optimizer);
	if (r->nvme_path[0] && strcmp(w->param, "nvme") == 0)
		snprintf(sets[n++], 600, "zero_optimization.offload_param.nvme_path=%s",
			 r->nvme_path);
	if (r->nvme_path[0] && strcmp(w->optimizer, "nvme") == 0)
		snprintf(sets[n++], 600, "zero_optimization.offload_optimizer.nvme_path=%s",
			 r->nvme_path);
	if (w->sub_group_size)
		snprintf(sets[n++], 600, "zero_optimization.sub_group_size=%llu",
			 (unsigned long long)w->sub_group_size);
	if (w->max_in_cpu && strcmp(w->param, "nvme") == 0)
		snprintf(sets[n++], 600, "zero_optimization.offload_param.max_in_cpu=%llu",
			 (unsigned long long)w->max_in_cpu);
	if (w->ratio > 0 && w->ratio < 1 && strcmp(w->optimizer, "cpu") == 0)
		snprintf(sets[n++], 600, "zero_optimization.offload_optimizer.ratio=%.17g",
			 w->ratio); /* a user's value to the bit: a module may sit on it */
	else if (r->user_ratio > 0 && r->user_ratio < 1 && strcmp(w->optimizer, "cpu") != 0)
		snprintf(sets[n++], 600, "zero_optimization.offload_optimizer.ratio=1");
	for (int i = 0; i < n; i++)
		ptrs[i] = sets[i];
	return n;
}

/* The config of row: o's, with the row's placement and the device budget planned for.
 * Quietly: the user's config said its warnings once when first loaded, and a row's own
 * (a key without effect on its tiers, such as max_in_cpu off NVMe) are the plan's doing. */
static int row_config(const struct zinf_plan_opts *o, const struct zinf_plan_result *r, int row,
		      uint64_t hidden, struct zinf_config **cfg, char *err, size_t errlen)
{
	enum zinf_log_level level = zinf_log_get_level();
	char sets[8][600], dev[64];
	const char *ptrs[9];
	int n = row_sets(r, row, sets, ptrs), rc;

	snprintf(dev, sizeof(dev), "zinf.device_memory_limit=%llu",
		 (unsigned long long)r->device_bytes);
	ptrs[n++] = dev;
	if (level > ZINF_LOG_ERROR)
		zinf_log_set_level(ZINF_LOG_ERROR);
	rc = load_config(o, ptrs, n, NULL, hidden, r->host_bytes, cfg, err, errlen);
	zinf_log_set_level(level);
	return rc;
}

/* The estimate of row under its config, on the machine mc. */
static int estimate_row(const struct zinf_plan_opts *o, struct zinf_plan_result *r, int row,
			const struct zinf_plan *p, struct zinf_plan_machine *mc, uint64_t hidden,
			char *err, size_t errlen)
{
	struct zinf_plan_row *w = &r->rows[row];
	struct zinf_config *cfg;
	int rc = row_config(o, r, row, hidden, &cfg, err, errlen);

	if (rc)
		return rc;
	if (!r->nvme_free_known &&
	    (strcmp(w->param, "nvme") == 0 || strcmp(w->optimizer, "nvme") == 0)) {
		int why = zinf_plan_nvme_free(cfg, &mc->nvme_free_bytes, r->nvme_free_why,
					      sizeof(r->nvme_free_why));

		if (why == 0) {
			mc->nvme_free_known = true;
			r->nvme_free_known = true;
			r->nvme_free_bytes = mc->nvme_free_bytes;
			r->nvme_free_why[0] = 0;
		} else if (o->nvme_path) { /* the flag that gave the path, not the key it sets */
			snprintf(r->nvme_free_why, sizeof(r->nvme_free_why), "--nvme-path %s: %s",
				 o->nvme_path, zinf_strerror(why));
		}
	}
	rc = zinf_plan_estimate(p, cfg, mc, &w->need);
	if (rc)
		snprintf(err, errlen, "plan: out of memory");
	if (!w->sub_group_size)
		zinf_config_get_u64(cfg, "zero_optimization.sub_group_size", &w->sub_group_size);
	if (!w->max_in_cpu && strcmp(w->param, "nvme") == 0)
		zinf_config_get_u64(cfg, "zero_optimization.offload_param.max_in_cpu",
				    &w->max_in_cpu);
	if (!w->ratio && strcmp(w->optimizer, "cpu") == 0)
		zinf_config_get_double(cfg, "zero_optimization.offload_optimizer.ratio", &w->ratio);
	zinf_config_destroy(cfg);
	return rc;
}

/* Parameters on NVMe with host memory to spare, and no max_in_cpu in the user's config:
 * keep in host memory the modules that half of what the row leaves free holds (rounded
 * down to whole millions above a million, unless it holds them all), so their fetches
 * read no drive. Halved again while the row would no longer fit (it grows by less than
 * the half, so once at most). */
static int use_spare_host(const struct zinf_plan_opts *o, struct zinf_plan_result *r, int row,
			  const struct zinf_plan *p, struct zinf_plan_machine *mc, uint64_t hidden,
			  bool user_set, char *err, size_t errlen)
{
	struct zinf_plan_row *w = &r->rows[row];
	struct zinf_plan_need before = w->need;
	uint64_t spare, elems;
	int rc = 0;

	if (user_set || strcmp(w->param, "nvme") != 0 || !w->need.fits || !mc->host_bytes ||
	    w->need.host_bytes >= mc->host_bytes)
		return 0;
	spare = (mc->host_bytes - w->need.host_bytes) / 2;
	elems = spare / (r->dtype == ZINF_DTYPE_F32 ? 4 : 2);
	if (elems > r->param_elems)
		elems = r->param_elems;
	for (;;) {
		if (elems >= 1000000 && elems < r->param_elems)
			elems = elems / 1000000 * 1000000;
		w->max_in_cpu = elems;
		if (!elems) {
			w->need = before;
			return 0;
		}
		rc = estimate_row(o, r, row, p, mc, hidden, err, errlen);
		if (rc || w->need.fits)
			return rc;
		elems /= 2;
	}
}

/* Parameters on the device, the optimizer state in host memory, and no ratio in the
 * user's config: as much of the state on the device as fits (offload_optimizer.ratio,
 * DeepSpeed's Twin-Flow), so that less of it crosses to the CPU and back each step. The
 * fewest first modules whose state stays in host memory for which the row still fits,
 * by a binary search: the device need falls as modules move to host memory, while the
 * host and pinned needs stay within the row's at ratio 1, which fits. n_modules: the
 * modules described. */
static int use_spare_device(const struct zinf_plan_opts *o, struct zinf_plan_result *r, int row,
			    const struct zinf_plan *p, struct zinf_plan_machine *mc,
			    uint64_t hidden, bool user_set, uint32_t n_modules, char *err,
			    size_t errlen)
{
	struct zinf_plan_row *w = &r->rows[row];
	struct zinf_plan_need best = w->need;
	double best_ratio = w->ratio;
	uint32_t lo = 1, hi = n_modules - 1;

	if (user_set || strcmp(w->param, "none") != 0 || strcmp(w->optimizer, "cpu") != 0 ||
	    !w->need.fits || n_modules < 2)
		return 0;
	while (lo <= hi) {
		uint32_t k = lo + (hi - lo) / 2;
		int rc;

		w->ratio = zinf_plan_ratio_of(p, k);
		if (!w->ratio) { /* no ratio keeps exactly k there (an empty module) */
			lo = k + 1;
			continue;
		}
		rc = estimate_row(o, r, row, p, mc, hidden, err, errlen);
		if (rc)
			return rc;
		if (!w->need.fits) {
			lo = k + 1;
			continue;
		}
		best = w->need;
		best_ratio = w->ratio;
		if (k == 1)
			break;
		hi = k - 1;
	}
	w->need = best;
	w->ratio = best_ratio;
	return 0;
}

static const char *dtype_name(enum zinf_dtype t)
{
	return t == ZINF_DTYPE_BF16 ? "bf16" : t == ZINF_DTYPE_F16 ? "fp16" : "fp32";
}

/* The model, the config's batch and precision, and the machine. */
static int setup(const struct zinf_plan_opts *o, struct train_model *tm, struct zinf_plan_result *r,
		 struct zinf_plan_machine *mc, struct zinf_config **base, char *err, size_t errlen)
{
	struct zinf_train_opts to;
	uint64_t B = 0, stage = 0;
	bool bf16 = false, fp16 = false, cpu_ckpt = false, given;
	const char *path = NULL, *kind = NULL;
	enum zinf_config_source src;
	char mb[64];
	const char *extra[1];
	int rc;

	zinf_train_opts_init(&to);
	to.model_dir = o->model_dir;
	to.init_config = o->init_config;
	if (!o->model_dir == !o->init_config) {
		snprintf(err, errlen,
			 "plan: give exactly one of --model DIR and --init CONFIG.json");
		return -EINVAL;
	}
	rc = train_model_config(tm, &to, err, errlen);
	if (rc)
		return rc;
	rc = train_model_check_seq_len(&tm->hf, o->seq_len, err, errlen);
	if (rc)
		return rc;
	r->host_bytes = o->host_bytes ? o->host_bytes : zinf_host_memory_bytes();
	snprintf(mb, sizeof(mb), "train_micro_batch_size_per_gpu=%llu",
		 (unsigned long long)o->micro_batch_size);
	extra[0] = mb;
	rc = load_config(o, extra, o->micro_batch_size ? 1 : 0, "--micro-batch-size",
			 tm->hf.hidden_size, r->host_bytes, base, err, errlen);
	if (rc)
		return rc;
	if (zinf_config_get_u64(*base, "train_micro_batch_size_per_gpu", &B) || !B) {
		B = 1; /* "auto" with no --micro-batch-size: the Trainer's default would decide */
		r->B_assumed = true;
	}
	zinf_config_get_bool(*base, "bf16.enabled", &bf16);
	zinf_config_get_bool(*base, "fp16.enabled", &fp16);
	zinf_config_get_bool(*base, "activation_checkpointing.cpu_checkpointing", &cpu_ckpt);
	zinf_config_get_u64(*base, "zero_optimization.stage", &stage);
	if (B * o->seq_len > (1u << 30)) {
		snprintf(err, errlen, "micro-batch %llu x --seq-len %llu is too large",
			 (unsigned long long)B, (unsigned long long)o->seq_len);
		return -EINVAL;
	}
	tm->param_dtype = bf16 ? ZINF_DTYPE_BF16 : fp16 ? ZINF_DTYPE_F16 : ZINF_DTYPE_F32;
	r->B = B;
	r->T = o->seq_len;
	r->layers = tm->L;
	r->dtype = tm->param_dtype;
	r->stage = (int)stage;
	snprintf(r->dtype_name, sizeof(r->dtype_name), "%s", dtype_name(tm->param_dtype));

	/* the device: its kind from zinf.device (auto: a GPU if usable), its budget given
	 * or this machine's (both read from the device itself unless given) */
	zinf_config_get_string(*base, "zinf.device", &kind);
	given = zinf_config_get_source(*base, "zinf.device_memory_limit", &src) == 0 &&
		src != ZINF_SRC_DEFAULT && src != ZINF_SRC_AUTO;
	if (o->device_bytes) {
		/* checked as the key it sets (in a config of its own: the device probe
		 * below opens the device with base's), named as the flag */
		static const char key[] = "zinf.device_memory_limit";
		struct zinf_config *check;
		char v[32];
		const char *why;

		snprintf(v, sizeof(v), "%llu", (unsigned long long)o->device_bytes);
		rc = zinf_config_create(&check);
		if (rc)
			return rc;
		rc = zinf_config_set(check, key, v);
		if (rc) {
			why = strstr(zinf_config_last_error(check), key);
			snprintf(err, errlen, "--device-memory%s",
				 why ? why + strlen(key) : ": out of range");
			/* (the key's "auto" is not the flag's) */
			if ((why = strstr(err, " or \"auto\"")) != NULL)
				memmove((char *)why, why + 10, strlen(why + 10) + 1);
		}
		zinf_config_destroy(check);
		if (rc)
			return rc;
		r->device_bytes = o->device_bytes;
	} else if (given)
		zinf_config_get_u64(*base, "zinf.device_memory_limit", &r->device_bytes);
	if (kind && strcmp(kind, "auto") != 0 && r->device_bytes) {
		r->device_kind = strcmp(kind, "cuda") == 0 ? ZINF_ENGINE_DEVICE_CUDA
							   : ZINF_ENGINE_DEVICE_HOST;
	} else {
		uint64_t limit = 0;
		rc = zinf_plan_device_probe(*base, &r->device_kind, &limit, err, errlen);
		if (rc)
			return rc;
		if (!r->device_bytes) /* the host backend's "auto": a quarter of the host's */
			r->device_bytes = r->device_kind != ZINF_ENGINE_DEVICE_CUDA && o->host_bytes
						  ? r->host_bytes / 4
						  : limit;
	}
	/* (a budget given is checked as given: only --host-memory's quarter is this small) */
	if (r->device_bytes < PLAN_MIN_DEVICE_BYTES && o->host_bytes &&
	    r->device_kind != ZINF_ENGINE_DEVICE_CUDA) {
		char a[32];

		snprintf(err, errlen,
			 "--host-memory %s: the host device's budget, a quarter of it, is under "
			 "zinf.device_memory_limit's least 1 MiB (give more, or --device-memory)",
			 zinf_format_bytes(o->host_bytes, a, sizeof(a)));
		return -EINVAL;
	}
	/* as zinf train's device open: the host backend's heap is host memory */
	if (r->device_kind != ZINF_ENGINE_DEVICE_CUDA && r->host_bytes &&
	    r->device_bytes > r->host_bytes) {
		char a[32], b[32];

		snprintf(
			err, errlen,
			"%s %s is more than the %s of host memory (the host device backend's heap is host memory; plan a GPU with --set zinf.device=cuda)",
			o->device_bytes ? "--device-memory" : "zinf.device_memory_limit",
			zinf_format_bytes(r->device_bytes, a, sizeof(a)),
			zinf_format_bytes(r->host_bytes, b, sizeof(b)));
		return -EINVAL;
	}
	rc = train_pass_sizes(tm, r->device_kind, (int)B, (int)o->seq_len,
			      &(struct train_pass_opts){.ckpt = o->activation_checkpointing,
							.cpu_ckpt = cpu_ckpt},
			      &mc->runtime_device_bytes, &mc->runtime_host_bytes);
	if (rc) {
		snprintf(err, errlen,
			 "plan: this zinf was built without CUDA: the GPU runtime's buffers "
			 "cannot be sized (plan with zinf.device \"host\")");
		return rc;
	}
	if (r->device_kind != ZINF_ENGINE_DEVICE_CUDA) { /* the cpu runtime: host memory */
		mc->runtime_host_bytes += mc->runtime_device_bytes;
		mc->runtime_device_bytes = 0;
	}
	r->runtime_device_bytes = mc->runtime_device_bytes;
	r->runtime_host_bytes = mc->runtime_host_bytes;
	mc->device_bytes = r->device_bytes;
	mc->host_bytes = r->host_bytes;
	mc->host_device = r->device_kind != ZINF_ENGINE_DEVICE_CUDA;
	zinf_config_get_u64(*base, "zinf.pinned_memory_limit", &mc->pinned_bytes);
	mc->pinned_auto = zinf_config_get_source(*base, "zinf.pinned_memory_limit", &src) == 0 &&
			  (src == ZINF_SRC_RESOLVED || src == ZINF_SRC_AUTO);
	r->pinned_bytes = mc->pinned_bytes;
	r->pinned_auto = mc->pinned_auto;
	/* the NVMe path the rows on NVMe use: given, or the config's (zinf.nvme_paths
	 * serves both tiers; a single path is set for both) */
	if (!o->nvme_path && zinf_config_get_list(*base, "zinf.nvme_paths", 0, &path) == 0 &&
	    path && *path) {
		r->has_nvme = true;
	} else {
		path = o->nvme_path;
		if (!path &&
		    (zinf_config_get_string(*base, "zero_optimization.offload_optimizer.nvme_path",
					    &path) ||
		     !path || !*path))
			zinf_config_get_string(*base, "zero_optimization.offload_param.nvme_path",
					       &path);
		r->has_nvme = path && *path;
		snprintf(r->nvme_path, sizeof(r->nvme_path), "%s", r->has_nvme ? path : "");
	}
	if (o->nvme_free_bytes) {
		mc->nvme_free_bytes = o->nvme_free_bytes;
		mc->nvme_free_known = true;
		r->nvme_free_bytes = o->nvme_free_bytes;
		r->nvme_free_known = true;
	}
	return 0;
}

int zinf_train_plan(const struct zinf_plan_opts *o, struct zinf_plan_result *r, char *err,
		    size_t errlen)
{
	char scratch[1024];
	struct train_model tm;
	struct zinf_plan_machine mc = {0};
	struct zinf_config *base = NULL;
	struct zinf_plan *p = NULL;
	enum zinf_config_source src;
	bool user_max_in_cpu, user_ratio;
	int rc;

	if (!err || !errlen) { /* no message wanted: one is still built (it is read below) */
		err = scratch;
		errlen = sizeof(scratch);
	}
	if (!o || !r) {
		snprintf(err, errlen, "plan: %s is NULL (required)", !o ? "o" : "r");
		return -EINVAL;
	}
	memset(r, 0, sizeof(*r));
	if (train_check_config_sets(o->config_sets, o->n_config_sets, err, errlen))
		return -EINVAL;
	memset(&tm, 0, sizeof(tm));
	r->chosen = -1;
	rc = setup(o, &tm, r, &mc, &base, err, errlen);
	if (rc) {
		r->bad_input = rc != -ENOMEM;
		goto out;
	}
	rc = zinf_plan_create(&p);
	if (!rc) {
		const struct train_sink sink = {plan_module_add, plan_param_add, plan_error, p};
		rc = train_model_describe(&tm, &sink, err, errlen);
	}
	if (!rc && tm.lc.tie_word_embeddings)
		rc = zinf_plan_modules_together(p, tm.module[0], tm.module[tm.L + 1]);
	if (rc) {
		if (!*err)
			snprintf(err, errlen, "plan: out of memory");
		goto out;
	}
	r->param_elems = tm.param_elems;
	user_max_in_cpu = zinf_config_get_source(base, "zero_optimization.offload_param.max_in_cpu",
						 &src) == 0 &&
			  src != ZINF_SRC_DEFAULT;
	user_ratio = zinf_config_get_source(base, "zero_optimization.offload_optimizer.ratio",
					    &src) == 0 &&
		     src != ZINF_SRC_DEFAULT;
	if (user_ratio)
		zinf_config_get_double(base, "zero_optimization.offload_optimizer.ratio",
				       &r->user_ratio);
	for (int i = 0; i < ZINF_PLAN_ROWS && !rc; i++) {
		struct zinf_plan_row *w = &r->rows[i];
		bool nvme;

		w->param = placements[i].param;
		w->optimizer = placements[i].optimizer;
		nvme = strcmp(w->param, "nvme") == 0 || strcmp(w->optimizer, "nvme") == 0;
		/* offloading parameters needs stage 3, the optimizer state stage 1 */
		w->stage = strcmp(w->param, "none") ? 3 : r->stage > 1 ? r->stage : 1;
		if (r->stage > w->stage)
			w->stage = r->stage;
		if (nvme && !r->has_nvme) {
			snprintf(w->why, sizeof(w->why), "no NVMe path (give --nvme-path)");
			continue;
		}
		w->tried = true;
		rc = estimate_row(o, r, i, p, &mc, tm.hf.hidden_size, err, errlen);
		if (!rc && strcmp(w->optimizer, "nvme") == 0 && !w->need.fits &&
		    w->need.refused_tier == ZINF_PLAN_PINNED) {
			/* a smaller sub_group_size, when one fits the pool */
			struct zinf_config *cfg = NULL;
			uint64_t sub = 0;

			rc = row_config(o, r, i, tm.hf.hidden_size, &cfg, err, errlen);
			if (!rc)
				sub = zinf_plan_largest_sub_group(p, cfg, &mc);
			zinf_config_destroy(cfg);
			if (sub >= 1000000)
				sub = sub / 1000000 * 1000000;
			if (!rc && sub) {
				w->sub_group_size = sub;
				rc = estimate_row(o, r, i, p, &mc, tm.hf.hidden_size, err, errlen);
			}
		}
		if (!rc)
			rc = use_spare_host(o, r, i, p, &mc, tm.hf.hidden_size, user_max_in_cpu,
					    err, errlen);
		if (!rc)
			rc = use_spare_device(o, r, i, p, &mc, tm.hf.hidden_size, user_ratio,
					      (uint32_t)tm.L + 2, err, errlen);
		if (!rc && !w->need.fits)
			snprintf(w->why, sizeof(w->why), "%s", w->need.why);
		if (!rc && w->need.fits && r->chosen < 0)
			r->chosen = i;
	}
	if (rc)
		r->bad_input = rc != -ENOMEM;
out:
	zinf_plan_destroy(p);
	zinf_config_destroy(base);
	train_model_free(&tm);
	return rc;
}

int zinf_plan_write_config(const struct zinf_plan_opts *o, const struct zinf_plan_result *r,
			   int row, const char *out_path, bool force, char *err, size_t errlen)
{
	char sets[8][600], mb[64], dev[64], scratch[1024];
	const char *ptrs[64 + 8 + 2];
	int n;

	if (!err || !errlen) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	if (!o || !r || !out_path) {
		snprintf(err, errlen, "plan: %s is NULL (required)",
			 !o   ? "o"
			 : !r ? "r"
			      : "out_path");
		return -EINVAL;
	}
	n = o->n_config_sets;
	if (row < 0 || row >= ZINF_PLAN_ROWS || !r->rows[row].tried) {
		snprintf(err, errlen, "plan: no placement to write");
		return -EINVAL;
	}
	if (n > 64) {
		snprintf(err, errlen, "plan: more than 64 --set");
		return -EINVAL;
	}
	/* the user's overrides first: the plan's own keys come after and win */
	if (n)
		memcpy(ptrs, o->config_sets, (size_t)n * sizeof(*ptrs));
	n += row_sets(r, row, sets, ptrs + n);
	if (o->micro_batch_size || r->B_assumed) { /* the micro-batch planned for */
		snprintf(mb, sizeof(mb), "train_micro_batch_size_per_gpu=%llu",
			 (unsigned long long)r->B);
		ptrs[n++] = mb;
	}
	if (o->device_bytes) { /* the budget planned for, kept by the run */
		snprintf(dev, sizeof(dev), "zinf.device_memory_limit=%llu",
			 (unsigned long long)o->device_bytes);
		ptrs[n++] = dev;
	}
	return zinf_config_write_edited(o->config_path, ptrs, n, out_path, force, err, errlen);
}

/*
 * zero_optimization.offload_optimizer.fast_init (optimizer state on NVMe, CRC32C on):
 * a model loaded with it on and off has, bit for bit, the same optimizer state after the
 * load (master, m and v of every group), the same losses, state and parameter copies
 * after 1 and 3 steps, and saves the same weights; with a module never loaded too. The
 * load (and the flush before the first step) writes the master parts alone, a third
 * of the bytes of fast_init off or less: exactly the layout's figure, nothing for the
 * never-loaded sub-groups that are all zero, and no zeroed spare extents. The config value reaches the NVMe
 * optimizer, with the checksum setting.
 * White-box: reads the state through the engine's optimizer handles (engine_internal.h)
 * and counts the bytes of the engine's I/O handle.
 */
#include <unistd.h>

#include "engine_internal.h"
#include "load_fixture.h"
#include "optim_nvme.h"

#define SUB 1024ull

static void *src[LF_N_MOD][2];

/* lf_create with fast_init and CRC32C set. */
static void create(struct lf_engine *le, const char *dir, bool fast_init)
{
	lf_extra_offload_optimizer = fast_init ? ", \"fast_init\": true" : ", \"fast_init\": false";
	lf_extra_zinf = ", \"checksum\": \"crc32c\"";
	lf_create(le, "none", "nvme", ZINF_DTYPE_BF16, dir, SUB);
	T_CHECK(zinf_config_warning_count(le->cfg) == 0, "config warns: %s",
		zinf_config_warning(le->cfg, 0));
	for (int g = 0; g < le->e->n_groups; g++)
		T_CHECK(le->e->groups[g].nvme->fast_init == fast_init &&
				le->e->groups[g].nvme->crc32c,
			"group %d: fast_init %d, crc32c %d: the config did not reach it", g,
			le->e->groups[g].nvme->fast_init, le->e->groups[g].nvme->crc32c);
}

static uint64_t written_bytes(struct zinf_engine *e)
{
	struct zinf_io_stats st;

	zinf_io_get_stats(e->io, &st);
	return st.write_bytes;
}

/* Master, m and v of every group, one after the other (malloc'd). */
static float *state(struct zinf_engine *e, uint64_t *n_floats)
{
	uint64_t n = 0, off = 0;
	float *out;

	T_CHECK(zinf_engine_sync(e) == 0, "%s", zinf_last_error(e));
	for (int g = 0; g < e->n_groups; g++)
		n += 3 * e->groups[g].elems;
	out = malloc(n * sizeof(float));
	T_CHECK(out, "out of memory");
	for (int g = 0; g < e->n_groups; g++) {
		struct egroup *grp = &e->groups[g];
		float *p = out + off;

		T_CHECK(zinf_adam_nvme_read_state(grp->nvme, p, p + grp->elems,
						  p + 2 * grp->elems) == 0,
			"group %d: read state: %s", g, zinf_adam_nvme_last_error(grp->nvme));
		off += 3 * grp->elems;
	}
	*n_floats = n;
	return out;
}

/* What one run saw: the state after the load and after steps 1 and 3, the losses and
 * the parameter copies of steps 1 to 3, the saved weights, and the bytes the load wrote
 * (and, by the layout, those of the parts written and of the zeroed spares). */
struct run {
	float *st[3];
	uint64_t st_n;
	double loss[3];
	void *copy[3];
	float *saved;
	uint64_t load_bytes, part_bytes, spare_bytes;
	uint64_t zero_sub_groups; /* all zero after the load */
};

/* The parameter copies the modules read (the step's output), in registration order. */
static void *copies(struct lf_engine *le)
{
	char *out = malloc(lf_total() * 2);
	uint64_t off = 0;

	T_CHECK(out, "out of memory");
	for (int m = 0; m < LF_N_MOD; m++) {
		T_CHECK(zinf_module_fetch(le->e, le->mod[m]) == 0 &&
				zinf_module_wait(le->e, le->mod[m]) == 0,
			"%s", zinf_last_error(le->e));
		for (int k = 0; k < 2; k++) {
			memcpy(out + off, zinf_param_data(le->e, le->par[m][k]),
			       lf_elems(m, k) * 2);
			off += lf_elems(m, k) * 2;
		}
		T_CHECK_RC(zinf_module_release(le->e, le->mod[m]));
	}
	return out;
}

/* The bytes a load must write by the layout: each sub-group's master part (with
 * fast_init nothing for one whose master is all zero, a sub-group never loaded at all;
 * without, all three parts and the spares, zeroed once). */
static void layout_bytes(struct zinf_engine *e, const float *st, bool fast_init, struct run *r)
{
	for (int g = 0; g < e->n_groups; g++) {
		struct zinf_adam_nvme *h = e->groups[g].nvme;
		struct zinf_adam_nvme_info info;

		zinf_adam_nvme_get_info(h, &info);
		for (uint64_t s = 0; s < info.n_sub_groups; s++) {
			uint64_t first, n, req;
			bool zero = true;

			T_CHECK_RC(zinf_adam_nvme_sub_group(h, s, &first, &n, &req));
			for (uint64_t i = first; i < first + n; i++)
				zero &= st[i] == 0.0f && !signbit(st[i]);
			r->part_bytes += zero && fast_init ? 0 : req / 3;
			r->zero_sub_groups += zero;
		}
		r->spare_bytes +=
			fast_init ? 0 : (info.n_extents - info.n_sub_groups) * info.extent_bytes;
		st += 3 * e->groups[g].elems;
	}
}

static void run(const char *dir, bool fast_init, int skip_module, struct run *r)
{
	struct lf_engine le;
	uint64_t w0;

	memset(r, 0, sizeof(*r));
	create(&le, dir, fast_init);
	w0 = written_bytes(le.e);
	for (int m = 0; m < LF_N_MOD; m++) {
		const void *s[2] = {src[m][0], src[m][1]};
		enum zinf_dtype t[2] = {lf_src_dtype(m, 0), lf_src_dtype(m, 1)};

		if (m != skip_module)
			T_CHECK(zinf_module_load(le.e, le.mod[m], 2, s, t) == 0, "module %d: %s", m,
				zinf_last_error(le.e));
	}
	r->saved = lf_save(&le); /* flushes every group: the whole state is on NVMe */
	r->load_bytes = written_bytes(le.e) - w0;
	free(r->saved);
	r->st[0] = state(le.e, &r->st_n);
	layout_bytes(le.e, r->st[0], fast_init, r);
	for (int t = 0; t < 3; t++) {
		r->loss[t] = lf_step(&le);
		r->copy[t] = copies(&le);
		if (t == 0 || t == 2)
			r->st[t == 0 ? 1 : 2] = state(le.e, &r->st_n);
	}
	r->saved = lf_save(&le);
	lf_destroy(&le);
}

static void run_free(struct run *r)
{
	for (int i = 0; i < 3; i++) {
		free(r->st[i]);
		free(r->copy[i]);
	}
	free(r->saved);
}

/* Sub-groups wholly inside module m's parameters (-1: none): in registration order, the
 * weights form one optimizer group and the biases another. */
static uint64_t sub_groups_inside(int m)
{
	uint64_t count = 0;

	for (int k = 0; m >= 0 && k < 2; k++) {
		uint64_t off = 0, total = 0, end;

		for (int j = 0; j < LF_N_MOD; j++) {
			off += j < m ? lf_elems(j, k) : 0;
			total += lf_elems(j, k);
		}
		end = off + lf_elems(m, k);
		for (uint64_t s = 0; s * SUB < total; s++) {
			uint64_t last = (s + 1) * SUB < total ? (s + 1) * SUB : total;

			count += s * SUB >= off && last <= end;
		}
	}
	return count;
}

static void compare(const char *dir, int skip_module, const char *what)
{
	static const char *when[3] = {"after the load", "after step 1", "after step 3"};
	struct run on, off;

	run(dir, true, skip_module, &on);
	run(dir, false, skip_module, &off);
	for (int i = 0; i < 3; i++)
		T_CHECK(on.st_n == off.st_n &&
				memcmp(on.st[i], off.st[i], on.st_n * sizeof(float)) == 0,
			"%s: optimizer state %s differs with fast_init on and off", what, when[i]);
	for (int t = 0; t < 3; t++) {
		T_CHECK(on.loss[t] == off.loss[t], "%s: step %d loss %.17g (on) vs %.17g (off)",
			what, t + 1, on.loss[t], off.loss[t]);
		T_CHECK(memcmp(on.copy[t], off.copy[t], lf_total() * 2) == 0,
			"%s: parameter copies after step %d differ", what, t + 1);
	}
	T_CHECK(memcmp(on.saved, off.saved, lf_total() * 4) == 0, "%s: saved weights differ", what);
	fprintf(stderr,
		"%s: the load wrote %llu bytes with fast_init, %llu without (%.3f): master parts "
		"%llu; all parts %llu and zeroed spares %llu\n",
		what, (unsigned long long)on.load_bytes, (unsigned long long)off.load_bytes,
		(double)on.load_bytes / (double)off.load_bytes, (unsigned long long)on.part_bytes,
		(unsigned long long)(3 * off.part_bytes), (unsigned long long)off.spare_bytes);
	T_CHECK(on.zero_sub_groups == sub_groups_inside(skip_module) &&
			off.zero_sub_groups == on.zero_sub_groups,
		"%s: %llu sub-groups all zero after the load", what,
		(unsigned long long)on.zero_sub_groups);
	T_CHECK(on.load_bytes == on.part_bytes &&
			off.load_bytes == 3 * off.part_bytes + off.spare_bytes,
		"%s: the load wrote %llu / %llu bytes, the layout says %llu / %llu", what,
		(unsigned long long)on.load_bytes, (unsigned long long)off.load_bytes,
		(unsigned long long)on.part_bytes,
		(unsigned long long)(3 * off.part_bytes + off.spare_bytes));
	T_CHECK(on.load_bytes * 3 <= off.load_bytes, "%s: fast_init wrote %.3f of the bytes", what,
		(double)on.load_bytes / (double)off.load_bytes);
	run_free(&on);
	run_free(&off);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-fast-init-XXXXXX";

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++)
			src[m][k] = lf_source(m, k, lf_src_dtype(m, k), 0);
	compare(dir, -1, "every module loaded");
	compare(dir, 1, "module 1 never loaded");
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++)
			free(src[m][k]);
	T_CHECK(rmdir(dir) == 0, "scratch directory not empty after the engines closed");
	return T_EXIT_PASS;
}

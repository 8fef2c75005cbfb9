/* zinf_param_load_range, which lets a resume hold a piece of a parameter instead of a
 * module, gives what zinf_module_load_state gives: for parameters on NVMe, in host memory
 * and on the device, optimizer state in host memory and on NVMe (small sub-groups that
 * parameters span and modules share), fp32 and bf16 parameters,
 *   - a state loaded in pieces of 1 to a few thousand elements, in a shuffled order,
 *     reads back bit-identical (masters and both moments), the modules the model fetches
 *     hold the same copies, and the next step gives the same loss and state as the
 *     engine loaded module by module;
 *   - with the state on NVMe, each sub-group is written once, as soon as all of it is
 *     loaded (pieces that overlap counted once), and nothing is read back to merge;
 *   - a range reloaded after a step, without moments, across sub-groups and chunks, takes
 *     the new values with zero moments there, and every other element keeps its value
 *     and moments (on NVMe: merged element by element into the sub-groups it shares);
 *   - a range that covers a chunk of the parameter store on NVMe whole writes it without
 *     reading it first; a write home that fails part-way leaves no stale cached copy;
 *   - ranges cut where zinf_param_chunk_elems says and handed over a chunk at a time
 *     (zinf_param_load_ranges) give what a module load gives and read nothing back;
 *   - bad input (a range outside the parameter, no elements, no source, one moment, a
 *     held module; ranges that overlap or span modules, none) is refused with one line
 *     and changes nothing.
 * White-box: reads the parameter store's NVMe counters (engine_internal.h). */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_internal.h"
#include "io_internal.h" /* zinf_io_fault_set */
#include "load_fixture.h"
#include "store.h"

#define SUB 3000ull

struct state {
	float *part[3]; /* master, exp_avg, exp_avg_sq: every parameter, registration order */
};

static uint64_t param_off(int m, int k)
{
	uint64_t off = 0;

	for (int j = 0; j < m; j++)
		off += lf_elems(j, 0) + lf_elems(j, 1);
	return off + (k ? lf_elems(m, 0) : 0);
}

static void state_alloc(struct state *s)
{
	for (int p = 0; p < 3; p++) {
		s->part[p] = malloc(lf_total() * 4);
		T_CHECK(s->part[p], "out of memory");
	}
}

static void state_free(struct state *s)
{
	for (int p = 0; p < 3; p++)
		free(s->part[p]);
}

static void state_save(struct lf_engine *le, struct state *s)
{
	state_alloc(s);
	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++) {
			uint64_t off = param_off(m, k);
			T_CHECK(zinf_param_state_save(le->e, le->par[m][k], 0, lf_elems(m, k),
						      s->part[0] + off, s->part[1] + off,
						      s->part[2] + off) == 0,
				"state save: %s", zinf_last_error(le->e));
		}
}

static void same_state(const struct state *a, const struct state *b, const char *what)
{
	for (int p = 0; p < 3; p++)
		for (uint64_t i = 0; i < lf_total(); i++)
			T_CHECK(memcmp(&a->part[p][i], &b->part[p][i], 4) == 0,
				"%s: part %d element %llu: %.9g vs %.9g", what, p,
				(unsigned long long)i, a->part[p][i], b->part[p][i]);
}

/* A state to load: masters that round differently to bf16, moments of both signs (v
 * positive). */
static void state_make(struct state *s)
{
	state_alloc(s);
	for (uint64_t i = 0; i < lf_total(); i++) {
		s->part[0][i] =
			(float)(0.3 * sin(0.013 * (double)i + 0.2) + 1e-5 * (double)(i % 7));
		s->part[1][i] = (float)(0.01 * cos(0.029 * (double)i));
		s->part[2][i] = (float)(1e-4 * (1.5 + sin(0.007 * (double)i)));
	}
}

static void module_load_state(struct lf_engine *le, int m, const struct state *s)
{
	const float *part[3][2];

	for (int k = 0; k < 2; k++)
		for (int p = 0; p < 3; p++)
			part[p][k] = s->part[p] + param_off(m, k);
	T_CHECK(zinf_module_load_state(le->e, le->mod[m], 2, part[0], part[1], part[2]) == 0,
		"load state: %s", zinf_last_error(le->e));
}

struct range {
	int m, k;
	uint64_t first, n;
};

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Every parameter but the first cut into pieces of varied sizes (1 to 4099 elements, or
 * whole), in a shuffled order. Returns the count; free the array. */
static struct range *pieces_shuffled(int *count)
{
	static const uint64_t sizes[] = {1, 63, 64, 65, 777, 4099, UINT64_MAX};
	struct range *r = NULL;
	int n = 0, cap = 0;

	for (int m = 0; m < LF_N_MOD; m++)
		for (int k = 0; k < 2; k++)
			for (uint64_t i = 0; i < lf_elems(m, k) && (m || k);) {
				uint64_t c = sizes[next_rand() % 7], left = lf_elems(m, k) - i;
				if (c > left)
					c = left;
				if (n == cap) {
					cap = cap ? 2 * cap : 256;
					r = realloc(r, (size_t)cap * sizeof(*r));
					T_CHECK(r, "out of memory");
				}
				r[n++] = (struct range){m, k, i, c};
				i += c;
			}
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(next_rand() % (uint64_t)(i + 1));
		struct range t = r[i];
		r[i] = r[j];
		r[j] = t;
	}
	*count = n;
	return r;
}

static void load_range(struct lf_engine *le, const struct range *r, const struct state *s,
		       bool moments)
{
	uint64_t off = param_off(r->m, r->k) + r->first;

	T_CHECK(zinf_param_load_range(le->e, le->par[r->m][r->k], r->first, r->n, s->part[0] + off,
				      ZINF_DTYPE_F32, moments ? s->part[1] + off : NULL,
				      moments ? s->part[2] + off : NULL) == 0,
		"range load of (%d, %d) [%llu + %llu): %s", r->m, r->k,
		(unsigned long long)r->first, (unsigned long long)r->n, zinf_last_error(le->e));
}

/* The copies the model reads of every module are the same bytes in a and b. */
static void same_copies(struct lf_engine *a, struct lf_engine *b, const char *what)
{
	for (int m = 0; m < LF_N_MOD; m++) {
		T_CHECK(zinf_module_fetch(a->e, a->mod[m]) == 0 &&
				zinf_module_wait(a->e, a->mod[m]) == 0 &&
				zinf_module_fetch(b->e, b->mod[m]) == 0 &&
				zinf_module_wait(b->e, b->mod[m]) == 0,
			"%s: fetch: %s %s", what, zinf_last_error(a->e), zinf_last_error(b->e));
		for (int k = 0; k < 2; k++)
			T_CHECK(memcmp(zinf_param_data(a->e, a->par[m][k]),
				       zinf_param_data(b->e, b->par[m][k]),
				       lf_elems(m, k) * lf_dtype_bytes(a->dtype)) == 0,
				"%s: the copy of parameter (%d, %d) differs", what, m, k);
		T_CHECK_RC(zinf_module_release(a->e, a->mod[m]));
		T_CHECK_RC(zinf_module_release(b->e, b->mod[m]));
	}
}

static uint64_t store_nvme_read_bytes(struct lf_engine *le)
{
	struct zinf_store_stats st;

	zinf_store_get_stats(le->e->store, &st);
	return st.link[ZINF_LINK_NVME_TO_PINNED].bytes;
}

/* The first parameter (the first 26000 elements of the weights' group) loaded as [0,
 * 2000) twice, then the rest: with the state on NVMe, the sub-groups inside it (0 to 7)
 * are written as soon as their last element is loaded, the elements loaded twice
 * counted once. */
static void overlapping_ranges_count_once(struct lf_engine *le, const struct state *s,
					  const char *what)
{
	struct range head = {0, 0, 0, 2000}, rest = {0, 0, 2000, lf_elems(0, 0) - 2000};

	load_range(le, &head, s, true);
	load_range(le, &head, s, true);
	load_range(le, &rest, s, true);
	if (!le->e->nvme_state)
		return;
	T_CHECK(le->e->groups[0].sub_elems == SUB, "%s: sub-groups of %llu", what,
		(unsigned long long)le->e->groups[0].sub_elems);
	T_CHECK_RC(zinf_engine_sync(le->e)); /* (the writes go on after the load calls) */
	for (uint64_t sg = 0; sg < lf_elems(0, 0) / SUB; sg++)
		T_CHECK(!le->e->groups[0].pending[sg] &&
				zinf_adam_nvme_sub_group_written(le->e->groups[0].nvme, sg),
			"%s: sub-group %llu not written when all of it was loaded", what,
			(unsigned long long)sg);
}

/* With the state on NVMe, once every element is loaded every sub-group is there and no
 * assembly buffer is left; nothing was read back to merge (each sub-group was written
 * once, when complete: pieces loaded twice counted once). The parameter store's own
 * reads, when it is on NVMe too, share the I/O counters: not checked then. */
static void each_sub_group_written_once(struct lf_engine *le, bool store_on_nvme, const char *what)
{
	struct zinf_io_stats io;

	T_CHECK_RC(zinf_engine_sync(le->e));
	for (int gi = 0; gi < le->e->n_groups; gi++) {
		const struct egroup *g = &le->e->groups[gi];
		for (uint64_t s = 0; s < g->n_sub; s++)
			T_CHECK(!g->pending[s] && zinf_adam_nvme_sub_group_written(g->nvme, s),
				"%s: group %d sub-group %llu: %s after every element was loaded",
				what, gi, (unsigned long long)s,
				g->pending[s] ? "still assembling" : "not written");
	}
	zinf_io_get_stats(le->e->io, &io);
	T_CHECK(store_on_nvme || io.read_bytes == 0,
		"%s: %llu bytes read back while loading (a sub-group written before it was "
		"complete)",
		what, (unsigned long long)io.read_bytes);
	T_CHECK(le->e->load_bytes == 0, "%s: %llu bytes of assembly buffers left", what,
		(unsigned long long)le->e->load_bytes);
}

static void load_ranges(struct lf_engine *le, uint32_t n, const struct zinf_param_range *r)
{
	T_CHECK(zinf_param_load_ranges(le->e, n, r) == 0, "%u ranges: %s", n,
		zinf_last_error(le->e));
}

/* Module 1 (its weight crossing chunk ends) loaded with s by both engines: a whole
 * (zinf_module_load_state), b in ranges cut where zinf_param_chunk_elems says and handed
 * over a chunk at a time (zinf_param_load_ranges). The same state and copies, and b's
 * parameter store read nothing back. */
static void gathered_ranges_read_nothing(struct lf_engine *a, struct lf_engine *b,
					 const struct state *s, const char *what)
{
	struct zinf_param_range r[16];
	uint64_t cur = 0, before = store_nvme_read_bytes(b);
	struct state sa, sb;
	uint32_t n = 0, calls = 0;

	module_load_state(a, 1, s);
	for (int k = 0; k < 2; k++)
		for (uint64_t first = 0, len; first < lf_elems(1, k); first += len) {
			uint64_t chunk = 0, off = param_off(1, k) + first;
			len = zinf_param_chunk_elems(b->e, b->par[1][k], first, &chunk);
			T_CHECK(len > 0, "%s: no chunk at (1, %d) element %llu", what, k,
				(unsigned long long)first);
			if (n && chunk != cur) {
				load_ranges(b, n, r);
				calls++;
				n = 0;
			}
			cur = chunk;
			T_CHECK(n < 16, "too many ranges");
			r[n++] = (struct zinf_param_range){
				.param = b->par[1][k],
				.first_elem = first,
				.n_elems = len,
				.src = s->part[0] + off,
				.src_dtype = ZINF_DTYPE_F32,
				.exp_avg = s->part[1] + off,
				.exp_avg_sq = s->part[2] + off,
			};
		}
	load_ranges(b, n, r);
	T_CHECK(calls >= 1, "%s: module 1 fits one chunk", what);
	T_CHECK(store_nvme_read_bytes(b) == before,
		"%s: ranges gathered per chunk read %llu bytes back", what,
		(unsigned long long)(store_nvme_read_bytes(b) - before));
	state_save(a, &sa);
	state_save(b, &sb);
	same_state(&sa, &sb, "ranges gathered per chunk");
	same_copies(a, b, "ranges gathered per chunk");
	state_free(&sa);
	state_free(&sb);
}

/* Module 1's weight as the model reads it (a fetch) is what its home holds. */
static void copy_is_home(struct lf_engine *le, const char *what)
{
	uint64_t bytes = lf_elems(1, 0) * lf_dtype_bytes(le->dtype);
	char *seen = malloc(bytes), *home = malloc(bytes);

	T_CHECK(seen && home, "out of memory");
	T_CHECK(zinf_module_fetch(le->e, le->mod[1]) == 0 &&
			zinf_module_wait(le->e, le->mod[1]) == 0,
		"%s: fetch: %s", what, zinf_last_error(le->e));
	memcpy(seen, zinf_param_data(le->e, le->par[1][0]), bytes);
	T_CHECK_RC(zinf_module_release(le->e, le->mod[1]));
	T_CHECK(zinf_store_param_read(le->e->store, le->e->params[le->par[1][0]].store_id, home) ==
			0,
		"%s: read home", what);
	T_CHECK(memcmp(seen, home, bytes) == 0,
		"%s: the module fetched after a failed write is not what its home holds", what);
	free(seen);
	free(home);
}

/* A write home that fails part-way (a range's whole first chunk written, the read of its
 * partly covered second chunk failing; a module load whose second chunk write fails)
 * leaves no stale cached copy: the next fetch reads what the home holds. */
static void failed_write_drops_the_cached_copy(struct lf_engine *le, const struct state *s,
					       const char *what)
{
	struct range whole = {1, 0, 0, lf_elems(1, 0)};
	uint64_t off = param_off(1, 0);
	const float *part[3][2];
	float *neg;

	copy_is_home(le, "before"); /* (fetched: cached now) */
	zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_READ);
	T_CHECK(zinf_param_load_range(le->e, le->par[1][0], 0, whole.n, s->part[0] + off,
				      ZINF_DTYPE_F32, NULL, NULL) == -EIO,
		"%s: a range load with a failing read: %s", what, zinf_last_error(le->e));
	zinf_io_fault_clear();
	copy_is_home(le, what);

	/* other values than the range load's, whose first chunk is home already */
	neg = malloc(lf_total() * 4);
	T_CHECK(neg, "out of memory");
	for (uint64_t i = 0; i < lf_total(); i++)
		neg[i] = -s->part[0][i];
	for (int k = 0; k < 2; k++) {
		part[0][k] = neg + param_off(1, k);
		for (int p = 1; p < 3; p++)
			part[p][k] = s->part[p] + param_off(1, k);
	}
	zinf_io_fault_set(IO_FAULT_ERRNO, 1, EIO, 0, 1u << ZINF_IO_WRITE);
	zinf_io_fault_pass(1); /* the first chunk is written */
	T_CHECK(zinf_module_load_state(le->e, le->mod[1], 2, part[0], part[1], part[2]) != 0,
		"%s: a module load with a failing write succeeded", what);
	zinf_io_fault_clear();
	copy_is_home(le, what);
	free(neg);
}

/* Refused with one line, nothing changed. */
static void refuses(struct lf_engine *le, const struct state *s, const char *what)
{
	struct state before, after;
	uint32_t p = le->par[1][0];
	uint64_t n = lf_elems(1, 0);
	const float *x = s->part[0];

	state_save(le, &before);
	T_CHECK(zinf_param_load_range(le->e, p, n - 5, 6, x, ZINF_DTYPE_F32, NULL, NULL) ==
				-EINVAL &&
			strstr(zinf_last_error(le->e), "not inside"),
		"%s: a range past the end: %s", what, zinf_last_error(le->e));
	T_CHECK(zinf_param_load_range(le->e, p, UINT64_MAX, 2, x, ZINF_DTYPE_F32, NULL, NULL) ==
			-EINVAL,
		"%s: a first element past the end", what);
	T_CHECK(zinf_param_load_range(le->e, p, 0, 0, x, ZINF_DTYPE_F32, NULL, NULL) == -EINVAL,
		"%s: no elements", what);
	T_CHECK(zinf_param_load_range(le->e, p, 0, 4, NULL, ZINF_DTYPE_F32, NULL, NULL) ==
				-EINVAL &&
			strstr(zinf_last_error(le->e), "source"),
		"%s: no source: %s", what, zinf_last_error(le->e));
	T_CHECK(zinf_param_load_range(le->e, p, 0, 4, x, (enum zinf_dtype)99, NULL, NULL) ==
			-EINVAL,
		"%s: a bad dtype", what);
	T_CHECK(zinf_param_load_range(le->e, p, 0, 4, x, ZINF_DTYPE_F32, x, NULL) == -EINVAL &&
			strstr(zinf_last_error(le->e), "both moments or neither") &&
			!strchr(zinf_last_error(le->e), '\n'),
		"%s: one moment: %s", what, zinf_last_error(le->e));
	T_CHECK(zinf_param_load_range(le->e, 1u << 30, 0, 4, x, ZINF_DTYPE_F32, NULL, NULL) ==
			-EINVAL,
		"%s: no such parameter", what);
	{
		struct zinf_param_range two[2] = {
			{.param = p,
			 .first_elem = 0,
			 .n_elems = 10,
			 .src = x,
			 .src_dtype = ZINF_DTYPE_F32},
			{.param = p,
			 .first_elem = 9,
			 .n_elems = 10,
			 .src = x,
			 .src_dtype = ZINF_DTYPE_F32},
		};
		T_CHECK(zinf_param_load_ranges(le->e, 2, two) == -EINVAL &&
				strstr(zinf_last_error(le->e), "overlap"),
			"%s: overlapping ranges: %s", what, zinf_last_error(le->e));
		two[1].first_elem = 10;
		two[1].param = le->par[2][0];
		T_CHECK(zinf_param_load_ranges(le->e, 2, two) == -EINVAL &&
				strstr(zinf_last_error(le->e), "one module a call"),
			"%s: ranges of two modules: %s", what, zinf_last_error(le->e));
		T_CHECK(zinf_param_load_ranges(le->e, 0, two) == -EINVAL, "%s: no ranges", what);
		two[1].param = p;
		two[1].n_elems = n; /* past the end: refused, and the first range not loaded */
		T_CHECK(zinf_param_load_ranges(le->e, 2, two) == -EINVAL, "%s: range 1 outside",
			what);
	}
	T_CHECK(zinf_module_fetch(le->e, le->mod[1]) == 0 &&
			zinf_module_wait(le->e, le->mod[1]) == 0,
		"%s", zinf_last_error(le->e));
	T_CHECK(zinf_param_load_range(le->e, p, 0, 4, x, ZINF_DTYPE_F32, NULL, NULL) == -EBUSY,
		"%s: a held module: %s", what, zinf_last_error(le->e));
	T_CHECK_RC(zinf_module_release(le->e, le->mod[1]));
	state_save(le, &after);
	same_state(&before, &after, "after refused range loads");
	state_free(&before);
	state_free(&after);
}

static void check(const char *param_home, const char *opt_home, enum zinf_dtype dtype,
		  const char *dir)
{
	struct lf_engine a, b;
	struct state src, sa, sb, other;
	struct range *r;
	char what[96], dir_b[160];
	int n;

	snprintf(what, sizeof(what), "params %s, state %s, %s", param_home, opt_home,
		 dtype == ZINF_DTYPE_F32 ? "f32" : "bf16");
	state_make(&src);
	lf_create(&a, param_home, opt_home, dtype, dir, SUB);
	for (int m = 0; m < LF_N_MOD; m++)
		module_load_state(&a, m, &src);
	snprintf(dir_b, sizeof(dir_b), "%s/b", dir);
	T_CHECK(mkdir(dir_b, 0755) == 0 || errno == EEXIST, "mkdir %s", dir_b);
	lf_create(&b, param_home, opt_home, dtype, dir_b, SUB);
	overlapping_ranges_count_once(&b, &src, what);
	r = pieces_shuffled(&n);
	for (int i = 0; i < n; i++)
		load_range(&b, &r[i], &src, true);
	free(r);
	if (b.e->nvme_state)
		each_sub_group_written_once(&b, !strcmp(param_home, "nvme"), what);

	state_save(&a, &sa);
	state_save(&b, &sb);
	same_state(&src, &sa, what);
	same_state(&sa, &sb, what);
	same_copies(&a, &b, what);
	T_CHECK(lf_step(&a) == lf_step(&b), "%s: the next step's loss differs", what);
	state_free(&sa);
	state_free(&sb);
	state_save(&a, &sa);
	state_save(&b, &sb);
	same_state(&sa, &sb, "after a step");

	/* A range of module 1's weight (across sub-groups and 64 KiB chunks) reloaded
	 * without moments: new values and zero moments there, the rest kept. */
	{
		struct range part = {1, 0, 2999, 33001};
		uint64_t lo = param_off(1, 0) + part.first, hi = lo + part.n;
		state_alloc(&other);
		for (uint64_t i = 0; i < lf_total(); i++) {
			other.part[0][i] = (float)(-0.25 + 1e-6 * (double)i);
			other.part[1][i] = other.part[2][i] = 0;
		}
		load_range(&a, &part, &other, false);
		load_range(&b, &part, &other, false);
		state_free(&sb);
		state_save(&b, &sb);
		for (int p = 0; p < 3; p++)
			memcpy(sa.part[p] + lo, other.part[p] + lo, (hi - lo) * 4);
		same_state(&sa, &sb, "after a reloaded range");
		state_free(&sa);
		state_save(&a, &sa);
		same_state(&sa, &sb, "a reloaded range, module-loaded engine");
		same_copies(&a, &b, "after a reloaded range");
		T_CHECK(lf_step(&a) == lf_step(&b), "%s: the loss after a reloaded range", what);
	}

	/* In one sub-group, a range reloaded without moments, then the next one with them
	 * (the sub-group's buffer gains its moments half-filled, after a step has used the
	 * NVMe optimizer's staging buffers): zero moments in the first, the loaded ones in
	 * the second, every other element kept. Then again with three other sub-groups
	 * partly reloaded first (taking the staging buffers: the buffer is its own). */
	for (int busy = 0; busy < 2; busy++) {
		struct range plain = {3, 0, 100 + 10000 * (uint64_t)busy, 1400};
		struct range with = {3, 0, plain.first + plain.n, 1400};
		uint64_t lo = param_off(3, 0) + plain.first, mid = lo + plain.n, hi = mid + with.n;
		state_free(&sa);
		state_free(&sb);
		state_save(&a, &sa);
		for (struct lf_engine *le = &a; le; le = le == &a ? &b : NULL) {
			for (uint64_t j = 0; busy && j < 3; j++)
				load_range(le, &(struct range){0, 0, 10 + SUB * j, 5}, &other,
					   false);
			load_range(le, &plain, &other, false);
			load_range(le, &with, &src, true);
		}
		state_save(&b, &sb);
		for (int p = 0; p < 3; p++) {
			for (uint64_t j = 0; busy && j < 3; j++)
				memcpy(sa.part[p] + 10 + SUB * j, other.part[p] + 10 + SUB * j,
				       5 * 4);
			memcpy(sa.part[p] + lo, other.part[p] + lo, (mid - lo) * 4);
			memcpy(sa.part[p] + mid, src.part[p] + mid, (hi - mid) * 4);
		}
		same_state(&sa, &sb,
			   busy ? "a range reloaded without moments, then one with them, the "
				  "staging buffers taken"
				: "a range reloaded without moments, then one with them");
	}

	gathered_ranges_read_nothing(&a, &b, &src, what);

	/* module 1's weight (76800 bytes in bf16) starts its module: the range over all of
	 * it covers the first 64 KiB chunk whole, which is written without being read */
	if (!strcmp(param_home, "nvme") && dtype == ZINF_DTYPE_BF16) {
		struct range whole = {1, 0, 0, lf_elems(1, 0)};
		uint64_t before = store_nvme_read_bytes(&b), read;
		/* the module's second chunk: the rest of the weight and the bias, in 4 KiB */
		uint64_t tail =
			((lf_elems(1, 0) + lf_elems(1, 1)) * 2 - 65536 + 4095) / 4096 * 4096;
		load_range(&b, &whole, &other, false);
		read = store_nvme_read_bytes(&b) - before;
		T_CHECK(read == tail,
			"%s: writing a range that covers a chunk whole read %llu bytes (expected "
			"the partly covered chunk's %llu alone)",
			what, (unsigned long long)read, (unsigned long long)tail);
	}

	if (!strcmp(param_home, "nvme") && !strcmp(opt_home, "cpu"))
		failed_write_drops_the_cached_copy(&b, &src, what);
	refuses(&b, &other, what);
	state_free(&src);
	state_free(&sa);
	state_free(&sb);
	state_free(&other);
	lf_destroy(&a);
	lf_destroy(&b);
}

int main(void)
{
	static const char *param_homes[] = {"nvme", "cpu", "none"};
	char dir[] = "/var/tmp/zinf-range-test-XXXXXX";

	T_CHECK(mkdtemp(dir), "mkdtemp");
	for (int ph = 0; ph < 3; ph++)
		for (int nvme = 0; nvme < 2; nvme++)
			for (int bf16 = nvme; bf16 < 2; bf16++) /* NVMe state: 16-bit params */
				check(param_homes[ph], nvme ? "nvme" : "cpu",
				      bf16 ? ZINF_DTYPE_BF16 : ZINF_DTYPE_F32, dir);
	{
		char cmd[96];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		T_CHECK(system(cmd) == 0, "cleanup %s", dir);
	}
	return T_EXIT_PASS;
}

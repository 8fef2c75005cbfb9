/* zinf_plan_ratio_of(p, k) is the shortest decimal offload_optimizer.ratio that keeps
 * exactly the first k modules' optimizer state in host memory, by the rule the config
 * documents (the longest prefix of modules whose elements add up to at most the ratio of
 * all, computed here on its own): a prefix exactly at the ratio is kept (0.5 of 1+1+2
 * keeps two; 0.8 of 63+27 keeps one, as 0.7 x 90 rounds below 63), no decimal with a
 * digit fewer keeps k, an empty module k makes k unreachable (0), and so do k = 0 and
 * k = all. Checked on hand-made shapes and on every k of random ones. */
#include <math.h>
#include <stdint.h>

#include "test.h"
#include "zinf/engine.h"

#define MAX_MODULES 64

struct shape {
	uint32_t n;
	uint64_t elems[MAX_MODULES];
};

/* The modules the rule keeps in host memory at ratio r. */
static uint32_t kept(const struct shape *s, double r)
{
	uint64_t total = 0, sum = 0;
	uint32_t m;

	for (m = 0; m < s->n; m++)
		total += s->elems[m];
	for (m = 0; m < s->n; m++) {
		sum += s->elems[m];
		if ((double)sum > r * (double)total)
			break;
	}
	return m;
}

static struct zinf_plan *plan_of(const struct shape *s)
{
	struct zinf_plan *p;

	T_CHECK_RC(zinf_plan_create(&p));
	for (uint32_t m = 0; m < s->n; m++) {
		uint32_t id;
		T_CHECK_RC(zinf_plan_module_add(p, &id));
		if (s->elems[m]) {
			uint64_t shape[1] = {s->elems[m]};
			T_CHECK_RC(zinf_plan_param_add(p, id, ZINF_DTYPE_BF16, 1, shape, 0));
		}
	}
	return p;
}

/* The decimals r needs (1 to 9); 0 if it needs more. */
static int digits_of(double r)
{
	double scale = 1;

	for (int d = 1; d <= 9; d++) {
		scale *= 10;
		if (fabs(nearbyint(r * scale) / scale - r) <= 1e-15)
			return d;
	}
	return 0;
}

/* Whether one of the two decimals of scale (10^digits) nearest above the first k
 * modules' share keeps k (those below it keep fewer, those further above keep at least
 * as many as these two). */
static double decimal_keeping(const struct shape *s, uint32_t k, double scale)
{
	uint64_t total = 0, below = 0;

	for (uint32_t m = 0; m < s->n; m++) {
		total += s->elems[m];
		below += m < k ? s->elems[m] : 0;
	}
	for (int up = 0; up < 2; up++) {
		double c = (ceil((double)below / (double)total * scale) + up) / scale;
		if (c < 1 && kept(s, c) == k)
			return c;
	}
	return 0;
}

/* Every k of s: ratio_of gives one that keeps exactly k, with no shorter decimal that
 * does, or 0 exactly when none of 9 digits does. Returns how many k it gave one for. */
static uint32_t check_shape(const struct shape *s, const char *name)
{
	struct zinf_plan *p = plan_of(s);
	uint32_t reachable = 0;

	T_CHECK(zinf_plan_ratio_of(p, 0) == 0 && zinf_plan_ratio_of(p, s->n) == 0 &&
			zinf_plan_ratio_of(p, s->n + 5) == 0,
		"%s: k = 0 or all modules gave a ratio", name);
	for (uint32_t k = 1; k < s->n; k++) {
		double r = zinf_plan_ratio_of(p, k), scale = 1, c;
		int d;
		if (r == 0) {
			c = decimal_keeping(s, k, 1e9);
			T_CHECK(c == 0, "%s: k %u: none given, yet %.17g keeps it", name, k, c);
			continue;
		}
		T_CHECK(s->elems[k] != 0, "%s: k %u: module k is empty, yet ratio %.17g", name, k,
			r);
		T_CHECK(r > 0 && r < 1 && kept(s, r) == k, "%s: k %u: ratio %.17g keeps %u", name,
			k, r, kept(s, r));
		d = digits_of(r);
		T_CHECK(d > 0, "%s: k %u: ratio %.17g has more than 9 decimals", name, k, r);
		for (int i = 1; i < d; i++)
			scale *= 10;
		c = d > 1 ? decimal_keeping(s, k, scale) : 0;
		T_CHECK(c == 0, "%s: k %u: %.17g keeps it too, shorter than %.17g", name, k, c, r);
		reachable++;
	}
	zinf_plan_destroy(p);
	return reachable;
}

int main(void)
{
	struct shape exact = {3, {1, 1, 2}}, empty = {4, {4, 0, 4, 8}}, below = {2, {63, 27}};
	struct shape llama = {
		10, {32768, 184576, 184576, 184576, 184576, 184576, 184576, 184576, 184576, 32896}};
	struct zinf_plan *p;
	uint64_t seed = 12345;

	/* a prefix at exactly the ratio is kept: two modules at 0.5 */
	p = plan_of(&exact);
	T_CHECK(zinf_plan_ratio_of(p, 2) == 0.5 && zinf_plan_ratio_of(p, 1) == 0.3,
		"1+1+2: ratios %.17g for 2 modules, %.17g for 1", zinf_plan_ratio_of(p, 2),
		zinf_plan_ratio_of(p, 1));
	zinf_plan_destroy(p);
	T_CHECK(check_shape(&exact, "1+1+2") == 2, "1+1+2: not every k reachable");
	/* an empty module k: keeping the first k means keeping k + 1 too */
	T_CHECK(check_shape(&empty, "4+0+4+8") == 2, "4+0+4+8: k 1 reachable");
	T_CHECK(check_shape(&llama, "llama") == 9, "llama: not every k reachable");
	/* 0.7 x 90 is just below 63 in double: 0.7 keeps none, 0.8 keeps the first */
	p = plan_of(&below);
	T_CHECK(zinf_plan_ratio_of(p, 1) == 0.8, "63+27: ratio %.17g for 1 module",
		zinf_plan_ratio_of(p, 1));
	zinf_plan_destroy(p);
	for (int round = 0; round < 300; round++) {
		struct shape s;
		char name[32];
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		s.n = 2 + (uint32_t)(seed >> 33) % (MAX_MODULES - 1);
		for (uint32_t m = 0; m < s.n; m++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			/* sizes from 1 to about 1e9, often repeated (decoder layers) */
			s.elems[m] = m > 0 && (seed >> 60) < 6
					     ? s.elems[m - 1]
					     : 1 + (seed >> 20) % (1ull << (seed >> 59 & 31));
		}
		snprintf(name, sizeof(name), "random %d", round);
		check_shape(&s, name);
	}
	return T_EXIT_PASS;
}

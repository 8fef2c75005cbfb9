/*
 * Every rope scaling (default, linear, dynamic NTK within and beyond its context, YaRN
 * with and without truncation, custom betas, equal betas, mscale pairs, mscale alone,
 * a given attention factor, a factor below 1, the ramp clamped at 0, at hd - 1 and to
 * width 0.001, Llama 3.1) gives the inverse frequencies
 * and cos/sin scale of gen_llama_fixture.py's float64 rendering of transformers 5's
 * formulas (rope_reference.txt), within 1e-6 relative; the cos/sin tables carry the scale
 * (position 0: cos = scale, sin = 0).
 * Usage: test_rope_scaling_matches_torch_reference rope_reference.txt
 */
#include "llama_ops.h"
#include "test_llama_net.h"

#define MAX_HALF 256

struct rope_case {
	char name[64];
	int T;
	struct fixture fx; /* fx.cfg: the runtime's config (head_dim, theta, rope fields) */
	float inv[MAX_HALF];
	int n_inv;
	float scale;
};

static int check_case(struct rope_case *c)
{
	struct zinf_llama_config *cfg = &c->fx.cfg;
	int half = cfg->head_dim / 2;
	float inv[MAX_HALF], scale, *cos_t, *sin_t;
	char err[256];

	T_CHECK(c->n_inv == half, "%s: %d reference frequencies for head_dim %d", c->name, c->n_inv,
		cfg->head_dim);
	T_CHECK(llama_rope_check(cfg, err, sizeof(err)) == 0, "%s: %s", c->name, err);
	scale = llama_rope_inv_freq(inv, cfg, c->T);
	for (int i = 0; i < half; i++)
		T_CHECK(fabsf(inv[i] - c->inv[i]) <= 1e-6f * c->inv[i],
			"%s: inv_freq[%d] = %.9g, reference %.9g", c->name, i, (double)inv[i],
			(double)c->inv[i]);
	T_CHECK(fabsf(scale - c->scale) <= 1e-6f * c->scale, "%s: scale %.9g, reference %.9g",
		c->name, (double)scale, (double)c->scale);
	cos_t = malloc(sizeof(float) * (size_t)c->T * half);
	sin_t = malloc(sizeof(float) * (size_t)c->T * half);
	T_CHECK(cos_t && sin_t, "out of memory");
	llama_rope_tables(cos_t, sin_t, inv, c->T, cfg->head_dim, scale);
	for (int i = 0; i < half; i++)
		T_CHECK(cos_t[i] == scale && sin_t[i] == 0.0f, "%s: position 0 not scaled",
			c->name);
	free(cos_t);
	free(sin_t);
	printf("%-22s %-8s inv_freq[%d] %.6g .. %.6g, scale %.6f: match\n", c->name,
	       zinf_rope_type_name(cfg->rope_type), half, (double)inv[0], (double)inv[half - 1],
	       (double)scale);
	return 1;
}

int main(int argc, char **argv)
{
	size_t size;
	char *text, *save = NULL;
	struct rope_case c;
	int cases = 0;
	bool open_case = false;

	T_CHECK(argc == 2, "usage: %s rope_reference.txt", argv[0]);
	text = (char *)fx_read_file(argv[1], &size);
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char key[64], val[64];
		int hd, used = 0;
		double theta;

		if (line[0] == '#')
			continue;
		if (strncmp(line, "case ", 5) == 0) {
			T_CHECK(!open_case, "case inside a case: %s", line);
			memset(&c, 0, sizeof(c));
			zinf_llama_config_init(&c.fx.cfg);
			T_CHECK(sscanf(line, "case %63s %d %d %lf", c.name, &hd, &c.T, &theta) == 4,
				"bad case line: %s", line);
			c.fx.cfg.head_dim = hd;
			c.fx.cfg.rope_theta = (float)theta;
			open_case = true;
		} else if (strncmp(line, "config ", 7) == 0) {
			T_CHECK(open_case && sscanf(line, "config %63s %63s", key, val) == 2,
				"bad config line: %s", line);
			fx_config(&c.fx, key, val);
		} else if (strncmp(line, "inv_freq ", 9) == 0) {
			char *p = line + 9;

			while (c.n_inv < MAX_HALF &&
			       sscanf(p, "%f%n", &c.inv[c.n_inv], &used) == 1) {
				c.n_inv++;
				p += used;
			}
		} else if (strncmp(line, "scale ", 6) == 0) {
			T_CHECK(sscanf(line, "scale %f", &c.scale) == 1, "bad scale: %s", line);
		} else if (strcmp(line, "end") == 0) {
			T_CHECK(open_case, "end without a case");
			cases += check_case(&c);
			open_case = false;
		} else {
			T_CHECK(0, "unknown line: %s", line);
		}
	}
	T_CHECK(!open_case, "last case not closed");
	T_CHECK(cases >= 17, "only %d cases", cases);
	free(text);
	printf("%d rope settings match the reference\n", cases);
	return T_EXIT_PASS;
}

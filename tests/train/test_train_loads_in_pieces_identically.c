/* zinf train loads a module larger than one parameter-store chunk parameter by parameter,
 * in pieces (so that it holds a chunk's elements, not the module). Cut into pieces of
 * 777 elements here (every module of the tiny model is larger), loading gives the same
 * run as loading whole modules, bit for bit:
 *   - --init: the seeded values do not depend on the pieces (the same losses, and the
 *     saved model.safetensors byte-identical);
 *   - --model, from checkpoints saved in bf16, fp16 and fp32: the same losses;
 * with bf16 parameters and optimizer state on NVMe, and fp32 in host memory. (--resume in
 * pieces: test_train_resume_is_bit_identical.) */
#include "train_fixture.h"
#include "train_internal.h" /* train_load_piece_elems */

#define STEPS 3

/* One run; returns the bytes it read from NVMe. */
static uint64_t run(struct tf_dir *d, const char *model_dir, const char *save_dir,
		    enum zinf_dtype save_dtype, uint64_t piece, struct tf_losses *l)
{
	struct zinf_train_opts o;
	struct zinf_train_result res;

	train_load_piece_elems = piece;
	tf_opts(d, &o, STEPS, l);
	if (model_dir) {
		o.init_config = NULL;
		o.model_dir = model_dir;
	}
	o.save_dir = save_dir;
	o.save_dtype = save_dtype;
	tf_run(&o, &res);
	T_CHECK(l->n == STEPS, "%d steps reported", l->n);
	train_load_piece_elems = UINT64_MAX;
	return res.nvme_read_bytes;
}

static void same(const struct tf_losses *a, const struct tf_losses *b, const char *what)
{
	for (int i = 0; i < STEPS; i++)
		T_CHECK(a->loss[i] == b->loss[i], "%s: step %d loss %.17g whole, %.17g in pieces",
			what, i + 1, a->loss[i], b->loss[i]);
}

static void same_file(const char *a, const char *b)
{
	char *x, *y;
	size_t nx, ny;

	tf_read_all(a, &x, &nx);
	tf_read_all(b, &y, &ny);
	T_CHECK(nx == ny && memcmp(x, y, nx) == 0, "%s and %s differ", a, b);
	free(x);
	free(y);
}

static void check(struct tf_dir *d, const char *home, bool bf16)
{
	static const enum zinf_dtype saves[] = {ZINF_DTYPE_BF16, ZINF_DTYPE_F16, ZINF_DTYPE_F32};
	static const char *save_names[] = {"bf16", "fp16", "fp32"};
	struct tf_losses whole, pieces;
	uint64_t read_whole, read_pieces;
	char sa[192], sb[192], fa[256], fb[256], what[96];

	tf_write_ds(d, home, home, bf16);
	for (int k = 0; k < 3; k++) {
		snprintf(what, sizeof(what), "%s, %s, saved as %s", home, bf16 ? "bf16" : "fp32",
			 save_names[k]);
		snprintf(sa, sizeof(sa), "%s/whole-%s-%d", d->root, home, k);
		snprintf(sb, sizeof(sb), "%s/pieces-%s-%d", d->root, home, k);
		read_whole = run(d, NULL, sa, saves[k], UINT64_MAX, &whole);
		read_pieces = run(d, NULL, sb, saves[k], 777, &pieces);
		same(&whole, &pieces, what);
		/* the pieces were taken: the chunks they share were read back */
		T_CHECK(!strcmp(home, "cpu") || read_pieces > read_whole,
			"%s: %llu bytes read from NVMe in pieces, %llu whole", what,
			(unsigned long long)read_pieces, (unsigned long long)read_whole);
		snprintf(fa, sizeof(fa), "%s/model.safetensors", sa);
		snprintf(fb, sizeof(fb), "%s/model.safetensors", sb);
		same_file(fa, fb);

		run(d, sa, NULL, saves[k], UINT64_MAX, &whole);
		run(d, sa, NULL, saves[k], 777, &pieces);
		same(&whole, &pieces, what);
	}
}

int main(void)
{
	struct tf_dir d;

	tf_setup(&d, NULL);
	check(&d, "nvme", true);
	check(&d, "cpu", false);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

/*
 * Bad input to every function of the NVMe optimizer step is refused with -EINVAL (or
 * ZINF_ESTATE for a call in the wrong state) and one line naming what was wrong, and
 * changes nothing: missing opts, handles or buffers, zero sizes, bad dtypes, a step or a
 * read before the state was written, a sub-group out of range; destroy(NULL) is a no-op.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_test_util.h"
#include "test.h"
#include "zinf/error.h"
#include "zinf/optim.h"

#define N 10000ull

static float master[N];
static uint16_t grad[N], out[N];

static void expect_create_error(const struct zinf_adam_nvme_opts *o, const char *needle)
{
	struct zinf_adam_nvme *h = (void *)1;
	char err[512] = "";
	int rc = zinf_adam_nvme_create(o, &h, err, sizeof(err));

	T_CHECK(rc == -EINVAL && h == NULL, "create (%s) returned %d", needle, rc);
	T_CHECK(strstr(err, needle) && !strchr(err, '\n'), "create: want one line with '%s': %s",
		needle, err);
}

static void expect_error(struct zinf_adam_nvme *h, int rc, int want, const char *needle,
			 const char *what)
{
	const char *msg = zinf_adam_nvme_last_error(h);

	T_CHECK(rc == want, "%s returned %d, want %d (%s)", what, rc, want, msg);
	T_CHECK(strstr(msg, needle) && !strchr(msg, '\n'), "%s: want one line with '%s': %s", what,
		needle, msg);
}

int main(void)
{
	struct zinf_adam_opts ao;
	struct zinf_adam *adam;
	struct zinf_io_opts io_o;
	struct zinf_io *io = NULL;
	struct zinf_adam_nvme_opts o, base;
	struct zinf_adam_nvme *h;
	struct zinf_adam_nvme_result r;
	struct zinf_adam_step_info si = {1, 1e-3, 1.0f};
	struct zinf_adam_nvme_bufs b = {.grad = grad,
					.param_out = out,
					.grad_dtype = ZINF_DTYPE_BF16,
					.param_dtype = ZINF_DTYPE_BF16},
				   bad;
	char *dir = t_mkdtemp("/var/tmp"), err[512];
	uint64_t first, n, bytes;
	int e;

	T_CHECK(dir, "cannot make a scratch directory under /var/tmp");
	zinf_io_opts_init(&io_o);
	io_o.nvme_paths[0] = dir;
	io_o.n_paths = 1;
	io_o.file_size = 4 << 20;
	for (e = 0; e < T_N_ENGINES && t_create(&io_o, &io, e) == 77; e++)
		;
	if (!io)
		T_SKIP("no I/O backend available");
	zinf_adam_opts_init(&ao);
	T_CHECK_RC(zinf_adam_create(&adam, &ao));
	zinf_adam_nvme_opts_init(&base);
	T_CHECK(base.sub_group_size == 1000000000ull && base.pipeline_read && base.pipeline_write &&
			base.pinned_bytes == 0,
		"defaults");
	base.adam = adam;
	base.io = io;
	base.n_elems = N;
	base.sub_group_size = 3000;

	/* create */
	expect_create_error(NULL, "opts is NULL");
	o = base;
	o.adam = NULL;
	expect_create_error(&o, "opts.adam");
	o = base;
	o.io = NULL;
	expect_create_error(&o, "opts.io");
	o = base;
	o.n_elems = 0;
	expect_create_error(&o, "opts.n_elems 0");
	o = base;
	o.sub_group_size = 0;
	expect_create_error(&o, "sub_group_size 0");
	o = base; /* n + sub_group_size - 1 wraps: was 0 sub-groups, and a create that did nothing */
	o.sub_group_size = UINT64_MAX;
	T_CHECK(zinf_adam_nvme_drive_bytes(&o) > 0 && zinf_adam_nvme_pinned_bytes(&o, 0) > 0,
		"a sub_group_size of 2^64 - 1: no bytes");
	o.n_elems = 1ull << 56; /* one element a sub-group: 2^56 of them, refused */
	o.sub_group_size = 1;
	T_CHECK(zinf_adam_nvme_drive_bytes(&o) == 0 && zinf_adam_nvme_pinned_bytes(&o, 0) == 0,
		"2^56 sub-groups: %llu drive bytes (wrapped)",
		(unsigned long long)zinf_adam_nvme_drive_bytes(&o));
	expect_create_error(&o, "more than 2^32 (raise it)");
	T_CHECK(zinf_adam_nvme_create(&base, NULL, err, sizeof(err)) == -EINVAL &&
			strstr(err, "out is NULL"),
		"create with out NULL: %s", err);
	T_CHECK(zinf_adam_nvme_create(&base, &h, NULL, 0) == 0, "create without err buffer");

	/* calls before the state is written */
	expect_error(h, zinf_adam_nvme_step(h, &b, &si, &r), ZINF_ESTATE, "never written",
		     "step before write_state");
	T_CHECK(r.n_updated == 0 && r.failed_sub_group == -1, "refused step updated something");
	expect_error(h, zinf_adam_nvme_read_state(h, master, NULL, NULL), ZINF_ESTATE,
		     "never written", "read before write_state");
	expect_error(h, zinf_adam_nvme_write_state(h, NULL, NULL, NULL), -EINVAL, "master is NULL",
		     "write_state without master");
	T_CHECK(zinf_adam_nvme_write_state(h, master, NULL, NULL) == 0, "write state: %s",
		zinf_adam_nvme_last_error(h));
	T_CHECK(zinf_adam_nvme_last_error(h)[0] == '\0', "error left after a good call");

	/* step input */
	expect_error(h, zinf_adam_nvme_step(h, NULL, &si, &r), -EINVAL, "both required",
		     "step without bufs");
	expect_error(h, zinf_adam_nvme_step(h, &b, NULL, &r), -EINVAL, "both required",
		     "step without info");
	bad = b;
	bad.grad = NULL;
	expect_error(h, zinf_adam_nvme_step(h, &bad, &si, &r), -EINVAL,
		     "bufs.grad and bufs.sub_buffers are NULL", "step without grad");
	bad = b;
	bad.grad_dtype = ZINF_DTYPE_NONE;
	expect_error(h, zinf_adam_nvme_step(h, &bad, &si, &r), -EINVAL, "bufs.grad_dtype 0",
		     "step with grad dtype NONE");
	bad = b;
	bad.param_dtype = ZINF_DTYPE_NONE;
	expect_error(h, zinf_adam_nvme_step(h, &bad, &si, &r), -EINVAL, "bufs.param_dtype 0",
		     "step with a copy of no dtype");
	bad = b;
	bad.param_out = NULL;
	expect_error(h, zinf_adam_nvme_step(h, &bad, &si, &r), -EINVAL, "bufs.param_dtype 2",
		     "step with a copy dtype but no buffer");
	/* a bad step info is refused before any sub-group is read, as bad bufs are */
	si.step = 0;
	expect_error(h, zinf_adam_nvme_step(h, &b, &si, &r), -EINVAL,
		     "optimizer step: adam step: step count is 0", "step 0");
	T_CHECK(r.n_updated == 0 && r.failed_sub_group == -1 && r.read_bytes == 0,
		"step 0: %llu updated, failed %lld, %llu bytes read",
		(unsigned long long)r.n_updated, (long long)r.failed_sub_group,
		(unsigned long long)r.read_bytes);
	si.step = 1;
	si.lr = NAN;
	expect_error(h, zinf_adam_nvme_step(h, &b, &si, &r), -EINVAL, "lr nan is not", "lr NaN");
	si.lr = 1e-3;
	T_CHECK(zinf_adam_nvme_step(h, &b, &si, &r) == 0 && r.n_updated == 4, "good step: %s",
		zinf_adam_nvme_last_error(h));

	/* layout queries */
	T_CHECK(zinf_adam_nvme_sub_group(h, 4, &first, &n, &bytes) == -EINVAL, "sub-group 4 of 4");
	T_CHECK(zinf_adam_nvme_sub_group(NULL, 0, &first, &n, &bytes) == -EINVAL, "NULL handle");
	T_CHECK(zinf_adam_nvme_sub_group(h, 3, &first, &n, &bytes) == 0 && first == 9000 &&
			n == 1000 && bytes == 3 * 4096,
		"last sub-group: %llu + %llu, %llu bytes", (unsigned long long)first,
		(unsigned long long)n, (unsigned long long)bytes);

	/* NULL handles */
	T_CHECK(zinf_adam_nvme_step(NULL, &b, &si, &r) == -EINVAL, "step(NULL)");
	T_CHECK(zinf_adam_nvme_write_state(NULL, master, NULL, NULL) == -EINVAL, "write(NULL)");
	T_CHECK(zinf_adam_nvme_read_state(NULL, master, NULL, NULL) == -EINVAL, "read(NULL)");
	T_CHECK_STR(zinf_adam_nvme_last_error(NULL), "");
	zinf_adam_nvme_destroy(NULL);

	zinf_adam_nvme_destroy(h);
	zinf_adam_destroy(adam);
	zinf_io_destroy(io);
	t_rmrf(dir);
	return T_EXIT_PASS;
}

/*
 * Bad input to every I/O interface is refused with a one-line message naming what and
 * where: options, nvme paths (one directory twice, one inside another's run directory),
 * extent ids and ranges, unaligned O_DIRECT buffers (address
 * and required alignment), in-flight resubmission (a batch refused for it leaves its
 * requests free), resubmission before poll collected it, buffer registration; bounce mode
 * accepts an unaligned buffer instead, and an external file whose length is no multiple
 * of the block (read whole, written without growing, and an extent shorter than its file
 * leaves the file's later bytes alone).
 */
#include "io_test_util.h"
#include "zinf/error.h"

static void want_create_error(struct zinf_io_opts *o, const char *want)
{
	struct zinf_io *io = (struct zinf_io *)1;
	char err[512] = "";
	int rc = zinf_io_create(o, &io, err, sizeof(err));

	T_CHECK(rc < 0 && io == NULL, "create accepted bad opts (%s)", want);
	T_CHECK(strstr(err, want) != NULL, "create error '%s' lacks '%s'", err, want);
	T_CHECK(strchr(err, '\n') == NULL, "error is not one line: %s", err);
}

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp");
	struct zinf_io_opts o;
	struct zinf_io *io;
	struct zinf_io_req req, *rp = &req;
	enum zinf_io_engine eng;
	uint32_t ext;
	char addr[64];
	char *buf;
	int rc;

	T_CHECK(dir, "scratch directory");
	zinf_log_set_level(ZINF_LOG_ERROR);
	zinf_io_opts_init(&o);
	o.block_size = 1000;
	want_create_error(&o, "aio.block_size 1000");
	zinf_io_opts_init(&o);
	o.queue_depth = 0;
	want_create_error(&o, "aio.queue_depth 0");
	zinf_io_opts_init(&o);
	o.intra_op_parallelism = 0;
	want_create_error(&o, "aio.intra_op_parallelism 0");
	zinf_io_opts_init(&o); /* a unit no file system makes a file of */
	o.file_size = 1ull << 62;
	want_create_error(&o, "file_size 4611686018427387904: expected 1 MiB to 16 TiB");
	zinf_io_opts_init(&o);
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	o.run_dir_name = "a/b";
	want_create_error(&o, "run directory name 'a/b'");
	zinf_io_opts_init(&o);
	o.nvme_paths[0] = "/nonexistent/zinf/path";
	o.n_paths = 1;
	want_create_error(&o, "nvme_paths[0] /nonexistent/zinf/path");
	zinf_io_opts_init(&o);
	o.n_paths = 1;
	want_create_error(&o, "nvme_paths[0]: empty path");
	{ /* one directory twice (a trailing slash), and a path inside another's run directory:
	   * refused before any run directory is made */
		char twice[300], inside[300];
		struct stat st;

		snprintf(twice, sizeof(twice), "%s/", dir);
		snprintf(inside, sizeof(inside), "%s/zinf-run", dir);
		zinf_io_opts_init(&o);
		o.nvme_paths[0] = dir;
		o.nvme_paths[1] = twice;
		o.n_paths = 2;
		want_create_error(&o, "nvme_paths[1]");
		want_create_error(&o, "the directory of nvme_paths[0]");
		T_CHECK(mkdir(inside, 0700) == 0, "mkdir %s", inside);
		o.nvme_paths[1] = inside;
		want_create_error(&o, "inside the run directory");
		T_CHECK(rmdir(inside) == 0 && stat(inside, &st) != 0, "rmdir");
	}
	T_CHECK(zinf_io_parse_engine("uring", &eng) == -EINVAL, "parse_engine accepted 'uring'");
	T_CHECK(zinf_io_parse_engine("libaio", &eng) == 0 && eng == ZINF_IO_ENGINE_LIBAIO,
		"parse_engine libaio");

	zinf_io_opts_init(&o);
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	o.file_size = 1 << 20;
	T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	T_CHECK(zinf_io_extent_alloc(io, 0, &ext) == -EINVAL, "zero-length extent");
	T_CHECK(strstr(zinf_io_last_error(io), "invalid length 0"), "%s", zinf_io_last_error(io));
	T_CHECK_RC(zinf_io_extent_alloc(io, 65536, &ext));
	buf = t_buf(65536 + 4096, 1);

	/* unaligned buffer: names the address and the alignment */
	req = (struct zinf_io_req){.op = ZINF_IO_READ, .extent = ext, .len = 4096, .buf = buf + 8};
	rc = zinf_io_submit(io, &rp, 1);
	T_CHECK(rc == -EINVAL, "unaligned buffer accepted: %d", rc);
	snprintf(addr, sizeof(addr), "%p", (void *)(buf + 8));
	T_CHECK(strstr(req.error, addr) && strstr(req.error, "4096"), "%s", req.error);
	T_CHECK(strstr(zinf_io_last_error(io), addr), "%s", zinf_io_last_error(io));
	/* unaligned offset and length */
	req.buf = buf;
	req.offset = 512;
	T_CHECK(zinf_io_submit(io, &rp, 1) == -EINVAL && strstr(req.error, "offset 512"), "%s",
		req.error);
	req.offset = 0;
	req.len = 1000;
	T_CHECK(zinf_io_submit(io, &rp, 1) == -EINVAL && strstr(req.error, "length 1000"), "%s",
		req.error);
	/* range past the end; unknown extent; NULL buffer; NULL request */
	req.len = 8192;
	req.offset = 65536 - 4096;
	T_CHECK(zinf_io_submit(io, &rp, 1) == -EINVAL && strstr(req.error, "past its end"), "%s",
		req.error);
	req.offset = 0;
	req.extent = 999;
	T_CHECK(zinf_io_submit(io, &rp, 1) == -EINVAL && strstr(req.error, "unknown extent 999"),
		"%s", req.error);
	req.extent = ext;
	req.buf = NULL;
	T_CHECK(zinf_io_submit(io, &rp, 1) == -EINVAL && strstr(req.error, "buffer"), "%s",
		req.error);
	rp = NULL;
	T_CHECK(zinf_io_submit(io, &rp, 1) == -EINVAL, "NULL request accepted");
	rp = &req;
	/* freeing an unknown extent; registering a NULL buffer */
	T_CHECK(zinf_io_extent_free(io, 12345) == -EINVAL, "free of unknown extent");
	T_CHECK(strstr(zinf_io_last_error(io), "unknown extent 12345"), "%s",
		zinf_io_last_error(io));
	T_CHECK(zinf_io_register_buffer(io, NULL, 10) == -EINVAL, "NULL buffer registered");
	/* an external file shorter than asked */
	T_CHECK(zinf_io_extent_open_file(io, "/nonexistent/zinf/file", 4096, false, &ext) ==
			-ENOENT,
		"open of a missing file");
	T_CHECK(strstr(zinf_io_last_error(io), "/nonexistent/zinf/file"), "%s",
		zinf_io_last_error(io));
	/* a request resubmitted while in flight */
	req = (struct zinf_io_req){.op = ZINF_IO_WRITE, .extent = ext, .len = 65536, .buf = buf};
	{
		struct zinf_io_req *two[2] = {&req, &req};

		struct zinf_io_req b = req, c = req, *got[4];
		struct zinf_io_req *bc[2] = {&b, &c};

		rc = zinf_io_submit(io, two, 2);
		T_CHECK(rc == ZINF_ESTATE, "the same request twice in one batch: %d", rc);
		T_CHECK(strstr(zinf_io_last_error(io), "request 1 of 2"), "%s",
			zinf_io_last_error(io));
		/* ... which leaves it free to submit (it never ran) */
		T_CHECK_RC(zinf_io_submit(io, two, 1));
		T_CHECK(zinf_io_wait(io, got, 1, 4, 10000) == 1 && got[0] == &req, "wait");
		/* completed and not yet collected: refused, and the others still come */
		T_CHECK_RC(zinf_io_submit(io, bc, 2));
		T_CHECK_RC(zinf_io_drain(io));
		rc = zinf_io_submit(io, bc, 1);
		T_CHECK(rc == ZINF_ESTATE &&
				strstr(zinf_io_last_error(io), "waiting to be collected") &&
				b.error[0] == '\0' && b.status == 0,
			"a completed request resubmitted before poll: %d %s (its own: %d %s)", rc,
			zinf_io_last_error(io), b.status, b.error);
		T_CHECK(zinf_io_poll(io, got, 4) == 2, "both completed requests come back");
		T_CHECK_RC(zinf_io_submit(io, bc, 1)); /* collected: free again */
		T_CHECK(zinf_io_wait(io, got, 1, 4, 10000) == 1 && got[0] == &b, "wait b");
		/* a timeout below -1 is refused, not taken as no limit */
		T_CHECK(zinf_io_wait(io, got, 1, 4, -2) == -EINVAL &&
				strstr(zinf_io_last_error(io), "timeout -2 ms"),
			"a timeout of -2: %s", zinf_io_last_error(io));
	}
	zinf_io_drain(io);
	zinf_io_destroy(io);

	{ /* space checks of sizes past any drive: refused or short, never wrapped to "fits" */
		struct zinf_io_opts o2 = o;
		struct zinf_io *io2;
		char a[300], b[300];

		snprintf(a, sizeof(a), "%s/a", dir);
		snprintf(b, sizeof(b), "%s/b", dir);
		T_CHECK(mkdir(a, 0700) == 0 && mkdir(b, 0700) == 0, "mkdir");
		o2.nvme_paths[0] = a;
		o2.nvme_paths[1] = b;
		o2.n_paths = 2; /* one file system: the shares add up */
		T_CHECK_RC(zinf_io_create(&o2, &io2, NULL, 0));
		T_CHECK(zinf_io_check_space(io2, UINT64_MAX, 0) == -EINVAL &&
				strstr(zinf_io_last_error(io2), "at most 4 EiB"),
			"2^64 - 1 bytes: %s", zinf_io_last_error(io2));
		T_CHECK(zinf_io_check_space(io2, 0, (1ull << 62) + 1) == -EINVAL,
			"a largest extent past 4 EiB");
		T_CHECK(zinf_io_check_space(io2, 1ull << 62, 1ull << 62) == -ENOSPC,
			"4 EiB on one file system passed");
		T_CHECK(zinf_io_check_space(io2, 1 << 20, 1 << 20) == 0, "1 MiB: %s",
			zinf_io_last_error(io2));
		zinf_io_destroy(io2);
		T_CHECK(rmdir(a) == 0 && rmdir(b) == 0, "rmdir");
	}

	/* bounce mode: unaligned buffers and a padded last block work */
	o.bounce = true;
	T_CHECK_RC(zinf_io_create(&o, &io, NULL, 0));
	T_CHECK_RC(zinf_io_extent_alloc(io, 65536, &ext));
	{
		char *big = t_buf(4 * 65536, 3), *ref = t_buf(4 * 65536, 3);

		T_CHECK_RC(zinf_io_rw(io, ZINF_IO_WRITE, ext, 0, big + 8, 65536));
		memset(big + 65536 + 8, 0, 2 * 65536);
		T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext, 0, big + 70001, 65536));
		T_CHECK(memcmp(big + 70001, ref + 8, 65536) == 0, "bounce round trip differs");
		T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext, 4096, big + 3, 5000));
		T_CHECK(memcmp(big + 3, ref + 8 + 4096, 5000) == 0, "bounce partial read differs");
		T_CHECK(zinf_io_rw(io, ZINF_IO_READ, ext, 100, big, 4096) == -EINVAL,
			"bounce accepted an unaligned offset");
		/* an external file of 5000 bytes: read whole though it ends inside the padded
		 * block, and written whole without growing to the block's end */
		char path[300];
		uint32_t file_ext;
		struct stat fst;

		snprintf(path, sizeof(path), "%s/odd-length.bin", dir);
		T_CHECK_RC(zinf_io_extent_open_file(io, path, 5000, true, &file_ext));
		T_CHECK_RC(zinf_io_rw(io, ZINF_IO_WRITE, file_ext, 0, ref + 1, 5000));
		T_CHECK(stat(path, &fst) == 0 && fst.st_size == 5000,
			"a bounced write made the 5000-byte file %lld bytes",
			(long long)fst.st_size);
		memset(big, 0, 8192);
		T_CHECK(zinf_io_rw(io, ZINF_IO_READ, file_ext, 0, big + 1, 5000) == 0,
			"a bounced read of a 5000-byte file: %s", zinf_io_last_error(io));
		T_CHECK(memcmp(big + 1, ref + 1, 5000) == 0,
			"the 5000-byte file read back differs");
		T_CHECK_RC(zinf_io_extent_free(io, file_ext));
		/* a 5000-byte extent of a 6000-byte file: the write leaves bytes 5000.. as they
		 * were (the block's padding is the file's own bytes, not zeros) */
		FILE *six = fopen(path, "r+");
		T_CHECK(six && fwrite(ref + 9000, 1, 6000, six) == 6000 && fclose(six) == 0,
			"write the 6000-byte file");
		T_CHECK_RC(zinf_io_extent_open_file(io, path, 5000, false, &file_ext));
		T_CHECK_RC(zinf_io_rw(io, ZINF_IO_WRITE, file_ext, 0, ref + 1, 5000));
		T_CHECK_RC(zinf_io_extent_free(io, file_ext));
		six = fopen(path, "r");
		T_CHECK(six && fread(big, 1, 8192, six) == 6000 && fclose(six) == 0,
			"the 6000-byte file is no longer 6000 bytes");
		T_CHECK(memcmp(big, ref + 1, 5000) == 0 &&
				memcmp(big + 5000, ref + 14000, 1000) == 0,
			"a bounced write of 5000 bytes changed the file's bytes past them");
		unlink(path);
		free(big);
		free(ref);
	}
	zinf_io_destroy(io);
	free(buf);
	zinf_io_destroy(NULL);
	t_rmrf(dir);
	return 0;
}

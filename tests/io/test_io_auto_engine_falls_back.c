/*
 * engine auto: io_uring when it works; when its setup is refused (EPERM, as from a
 * seccomp filter; injected here) libaio, and when both are refused psync, each time
 * with a warning naming what was refused and why. An explicit engine that is refused
 * is an error, not a silent fallback.
 */
#include "io_test_util.h"

static char last_warn[512];

static void keep_warn(enum zinf_log_level level, const char *msg, void *user)
{
	if (level == ZINF_LOG_WARN)
		snprintf(last_warn, sizeof(last_warn), "%s", msg);
}

static void roundtrip(struct zinf_io *io)
{
	uint32_t ext;
	char *src = t_buf(65536, 1), *dst = t_buf(65536, 2);

	T_CHECK_RC(zinf_io_extent_alloc(io, 65536, &ext));
	T_CHECK_RC(zinf_io_rw(io, ZINF_IO_WRITE, ext, 0, src, 65536));
	T_CHECK_RC(zinf_io_rw(io, ZINF_IO_READ, ext, 0, dst, 65536));
	T_CHECK(memcmp(src, dst, 65536) == 0, "%s: round trip differs", zinf_io_engine_name(io));
	free(src);
	free(dst);
}

int main(void)
{
	char *dir = t_mkdtemp("/var/tmp"), err[512];
	struct zinf_io_opts o;
	struct zinf_io *io;
	int rc;

	T_CHECK(dir, "scratch directory");
	zinf_log_set_callback(keep_warn, NULL);
	zinf_io_opts_init(&o);
	o.nvme_paths[0] = dir;
	o.n_paths = 1;
	o.file_size = 1 << 20;

	T_CHECK_RC(zinf_io_create(&o, &io, err, sizeof(err)));
	if (strcmp(zinf_io_engine_name(io), "io_uring") != 0)
		fprintf(stderr, "note: auto picked %s here: %s\n", zinf_io_engine_name(io),
			last_warn);
	roundtrip(io);
	zinf_io_destroy(io);

	last_warn[0] = '\0';
	zinf_io_fault_set(IO_FAULT_ENGINE, 1, EPERM, 0, 0);
	T_CHECK_RC(zinf_io_create(&o, &io, err, sizeof(err)));
	T_CHECK_STR(zinf_io_engine_name(io), "libaio");
	T_CHECK(strstr(last_warn, "fell back to libaio") &&
			strstr(last_warn, "io_uring unavailable") &&
			strstr(last_warn, "Operation not permitted"),
		"warning: %s", last_warn);
	roundtrip(io);
	zinf_io_destroy(io);

	zinf_io_fault_set(IO_FAULT_ENGINE, 2, EPERM, 0, 0);
	T_CHECK_RC(zinf_io_create(&o, &io, err, sizeof(err)));
	T_CHECK_STR(zinf_io_engine_name(io), "psync");
	T_CHECK(strstr(last_warn, "fell back to psync") && strstr(last_warn, "libaio unavailable"),
		"warning: %s", last_warn);
	roundtrip(io);
	zinf_io_destroy(io);

	zinf_io_fault_set(IO_FAULT_ENGINE, 1, EPERM, 0, 0);
	o.engine = ZINF_IO_ENGINE_IO_URING;
	io = NULL;
	rc = zinf_io_create(&o, &io, err, sizeof(err));
	T_CHECK(rc == -EPERM && io == NULL, "refused explicit io_uring: rc %d", rc);
	T_CHECK(strstr(err, "io engine io_uring"), "error: %s", err);
	zinf_io_fault_clear();
	zinf_log_set_callback(NULL, NULL);
	t_rmrf(dir);
	return 0;
}

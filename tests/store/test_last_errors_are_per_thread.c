/* The store, the device and the pinned pool are called from several threads at once (the
 * model's, the optimizer's, the store's mover), so each thread must read the message of
 * its own failed call: two threads fail different calls on one store, one device and one
 * pool concurrently, in a loop, and each reads back exactly its own message every time,
 * never the other's or a torn mix (under ThreadSanitizer, a shared buffer is also
 * reported as a race). A thread's message stays until its own next failure, and a
 * thread that never failed reads "". */
#include <pthread.h>

#include "store_test_util.h"

#define ROUNDS 100000
#define POOL_BYTES (1ull << 20)

static struct t_tiers t;
static uint32_t mod[2];
static pthread_barrier_t start;

struct failing {
	int who; /* 0 or 1: which calls this thread fails */
	char want[3][512];
	long wrong[3]; /* per call: store, device, pool */
	char seen[1200];
};

/* Thread who's three failing calls: one on the store, one on the device, one on the
 * pool, each with a message of its own. */
static int fail_store(int who)
{
	return who ? zinf_store_wait(t.store, mod[1]) : zinf_store_release(t.store, mod[0]);
}

static int fail_device(int who)
{
	void *p;

	return zinf_device_alloc(t.dev, who ? 0 : 1ull << 40, &p);
}

static int fail_pinned(int who)
{
	void *p;

	return zinf_pinned_try_alloc(t.pinned, (who ? 4 : 2) * POOL_BYTES, &p);
}

static void check(struct failing *f, int rc, int k, const char *msg)
{
	if (rc != 0 && strcmp(msg, f->want[k]) == 0)
		return;
	if (!f->wrong[0] && !f->wrong[1] && !f->wrong[2])
		snprintf(f->seen, sizeof(f->seen), "rc %d, \"%s\" for \"%s\"", rc, msg, f->want[k]);
	f->wrong[k]++;
}

static void *run(void *arg)
{
	struct failing *f = arg;

	pthread_barrier_wait(&start);
	for (int i = 0; i < ROUNDS; i++) {
		int rc = fail_store(f->who);
		check(f, rc, 0, zinf_store_last_error(t.store));
		rc = fail_device(f->who);
		check(f, rc, 1, zinf_device_last_error(t.dev));
		rc = fail_pinned(f->who);
		check(f, rc, 2, zinf_pinned_last_error(t.pinned));
	}
	return NULL;
}

static void *never_failed(void *arg)
{
	char(*got)[512] = arg;

	snprintf(got[0], sizeof(got[0]), "%s", zinf_store_last_error(t.store));
	snprintf(got[1], sizeof(got[1]), "%s", zinf_device_last_error(t.dev));
	snprintf(got[2], sizeof(got[2]), "%s", zinf_pinned_last_error(t.pinned));
	return NULL;
}

int main(void)
{
	struct failing f[2] = {{.who = 0}, {.who = 1}};
	char fresh[3][512];
	pthread_t th[2];
	uint64_t shape[1] = {1024};
	uint32_t p;

	zinf_log_set_level(ZINF_LOG_ERROR);
	t_tiers_up(&t, ZINF_TIER_HOST, 1ull << 20, POOL_BYTES, 64 * 1024);
	for (int k = 0; k < 2; k++) {
		char name[16];
		snprintf(name, sizeof(name), "mod%d", k);
		T_CHECK_RC(zinf_store_module_add(t.store, name, &mod[k]));
		T_CHECK_RC(
			zinf_store_param_add(t.store, mod[k], name, ZINF_DTYPE_F32, 1, shape, &p));
	}
	T_CHECK(zinf_store_finalize(t.store) == 0, "%s", zinf_store_last_error(t.store));

	/* Each thread's messages, taken one at a time first. */
	for (int w = 0; w < 2; w++) {
		T_CHECK(fail_store(w) != 0, "store call %d did not fail", w);
		snprintf(f[w].want[0], sizeof(f[w].want[0]), "%s", zinf_store_last_error(t.store));
		T_CHECK(fail_device(w) != 0, "device call %d did not fail", w);
		snprintf(f[w].want[1], sizeof(f[w].want[1]), "%s", zinf_device_last_error(t.dev));
		T_CHECK(fail_pinned(w) != 0, "pinned call %d did not fail", w);
		snprintf(f[w].want[2], sizeof(f[w].want[2]), "%s",
			 zinf_pinned_last_error(t.pinned));
	}
	for (int k = 0; k < 3; k++)
		T_CHECK(f[0].want[k][0] && strcmp(f[0].want[k], f[1].want[k]) != 0,
			"call %d: the two threads' messages must differ: \"%s\", \"%s\"", k,
			f[0].want[k], f[1].want[k]);
	T_CHECK(strstr(f[0].want[0], "module mod0: released more often than fetched") &&
			strstr(f[1].want[0], "module mod1: waited for without a fetch"),
		"store messages: \"%s\", \"%s\"", f[0].want[0], f[1].want[0]);

	T_CHECK(pthread_barrier_init(&start, NULL, 2) == 0, "barrier");
	for (int w = 0; w < 2; w++)
		T_CHECK(pthread_create(&th[w], NULL, run, &f[w]) == 0, "thread %d", w);
	for (int w = 0; w < 2; w++)
		pthread_join(th[w], NULL);
	pthread_barrier_destroy(&start);
	for (int w = 0; w < 2; w++)
		T_CHECK(!f[w].wrong[0] && !f[w].wrong[1] && !f[w].wrong[2],
			"thread %d read a message not its own (store %ld, device %ld, pool %ld times "
			"of %d each); first: %s",
			w, f[w].wrong[0], f[w].wrong[1], f[w].wrong[2], ROUNDS, f[w].seen);

	/* The main thread's last failures (thread 1's calls) are still its own. */
	T_CHECK_STR(zinf_store_last_error(t.store), f[1].want[0]);
	T_CHECK_STR(zinf_device_last_error(t.dev), f[1].want[1]);
	T_CHECK_STR(zinf_pinned_last_error(t.pinned), f[1].want[2]);
	T_CHECK(pthread_create(&th[0], NULL, never_failed, fresh) == 0, "thread");
	pthread_join(th[0], NULL);
	for (int k = 0; k < 3; k++)
		T_CHECK(strcmp(fresh[k], "") == 0, "a thread that never failed reads \"%s\"",
			fresh[k]);
	t_tiers_down(&t);
	return T_EXIT_PASS;
}

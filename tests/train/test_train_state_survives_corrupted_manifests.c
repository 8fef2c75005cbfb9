/* Reading a training state (zinf_state.json) never crashes or hangs on a damaged
 * manifest, fuzz-style: every prefix of a valid one (truncated writes), 3000 seeded
 * single-byte changes (a random byte, a flipped bit, a digit), all of them under
 * AddressSanitizer in CI. Each read fails with a negative code and one line naming
 * zinf_state.json, or (a change that keeps the bytes' meaning, such as the case of a
 * hex digit in the seal) reads the original's values. Resealed manifests with a key
 * twice, or with text after the object, are refused too. The checkpoint's other files are
 * never written. */
#include "train_fixture.h"
#include "train_internal.h"
#include "train_state_internal.h"
#include "zinf/crc32c.h"
#include "zinf/error.h"

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int n_ok, n_refused;

/* Seal buf (a manifest, changed) again: its seal, the last MANIFEST_CRC_TAG on, is
 * replaced by one of the text before it. Returns the new length. */
static size_t reseal(char *buf)
{
	const char *tag = NULL;
	size_t n;

	for (const char *t = buf; (t = strstr(t, MANIFEST_CRC_TAG)); t++)
		tag = t;
	T_CHECK(tag, "the seal in the manifest");
	n = (size_t)(tag - buf);
	return n + (size_t)sprintf(buf + n, "%s%08x\"\n}\n", MANIFEST_CRC_TAG,
				   train_state_manifest_crc(buf, n));
}

/* Read dir's state with manifest text in place; check the outcome's shape. */
static void try_read(const char *dir, const char *manifest, const char *text, size_t len,
		     const struct train_state *good, const char *what)
{
	struct train_state st;
	char err[1024] = "";
	int rc;

	tf_write_all(manifest, text, len);
	rc = train_state_read(dir, &st, err, sizeof(err));
	if (rc == 0) {
		T_CHECK(st.step == good->step && st.progress.steps == good->progress.steps &&
				st.data_tokens == good->data_tokens &&
				st.data_crc == good->data_crc,
			"%s: read as another state", what);
		train_state_free(&st);
		n_ok++;
		return;
	}
	T_CHECK(rc < 0, "%s: rc %d", what, rc);
	T_CHECK(strstr(err, "zinf_state.json") && !strchr(err, '\n'), "%s: message %s", what, err);
	T_CHECK(st.numerics == NULL, "%s: numerics left after a failure", what);
	n_refused++;
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	struct train_state good;
	char ck[256], manifest[300], model[300], err[1024], *text, *buf, *mbefore, *mafter;
	size_t len, nb, na;
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(ck, sizeof(ck), "%s/ck", d.root);
	tf_opts(&d, &o, 2, &l);
	o.save_dir = ck;
	o.save_state = true;
	o.save_max_shard_bytes = 100000; /* an index and shards to list */
	tf_run(&o, &res);
	snprintf(manifest, sizeof(manifest), "%s/zinf_state.json", ck);
	snprintf(model, sizeof(model), "%s/model.safetensors.index.json", ck);
	tf_read_all(manifest, &text, &len);
	tf_read_all(model, &mbefore, &nb);
	T_CHECK(train_state_read(ck, &good, err, sizeof(err)) == 0, "%s", err);
	buf = malloc(len + 1);

	for (size_t n = 0; n < len; n++) {
		char what[64];
		snprintf(what, sizeof(what), "prefix of %zu bytes", n);
		try_read(ck, manifest, text, n, &good, what);
	}
	for (int i = 0; i < 3000; i++) {
		size_t at = rng(&seed) % len;
		char what[96];
		memcpy(buf, text, len);
		switch (i % 3) {
		case 0:
			buf[at] = (char)(rng(&seed) & 0xff);
			break;
		case 1:
			buf[at] ^= (char)(1u << (rng(&seed) % 8));
			break;
		default:
			buf[at] = (char)('0' + rng(&seed) % 10);
			break;
		}
		snprintf(what, sizeof(what), "change %d: byte %zu 0x%02x -> 0x%02x", i, at,
			 (unsigned char)text[at], (unsigned char)buf[at]);
		try_read(ck, manifest, buf, len, &good, what);
	}
	T_CHECK(n_refused > 3000, "%d refused, %d read", n_refused, n_ok);
	/* a key given twice, sealed again: cJSON would read the first, Python the last */
	{
		const char *step = strstr(text, "\"step\":");
		char *dup = malloc(len + 32), err2[1024] = "";
		size_t head = (size_t)(step - text);
		struct train_state st;
		T_CHECK(step && dup, "\"step\" in the manifest");
		sprintf(dup, "%.*s\"step\":\t1,\n\t%s", (int)head, text, step);
		tf_write_all(manifest, dup, reseal(dup));
		T_CHECK(train_state_read(ck, &st, err2, sizeof(err2)) == ZINF_EFORMAT &&
				strstr(err2, "zinf_state.json") &&
				strstr(err2, "step: appears twice"),
			"a resealed manifest with a key twice: %s", err2);
		free(dup);
	}
	/* a raw tab inside the first key, sealed again: not JSON to Python, cJSON takes it */
	{
		const char *q = strchr(text, '"');
		char *tab = malloc(len + 32), err2[1024] = "";
		struct train_state st;
		T_CHECK(q && tab, "a key in the manifest");
		sprintf(tab, "%.*s\t%s", (int)(q + 1 - text), text, q + 1);
		tf_write_all(manifest, tab, reseal(tab));
		T_CHECK(train_state_read(ck, &st, err2, sizeof(err2)) == ZINF_EJSON &&
				strstr(err2, "zinf_state.json") &&
				strstr(err2, "control character 0x09 inside a string"),
			"a resealed manifest with a raw tab: %s", err2);
		free(tab);
	}
	/* the object closed before its seal, text after it, sealed again: not JSON (cJSON
	 * would read the first object and ignore the rest) */
	{
		const char *tag = NULL;
		char *junk = malloc(len + 64), err2[1024] = "";
		size_t n;
		struct train_state st;
		T_CHECK(junk, "out of memory");
		for (const char *t = text; (t = strstr(t, MANIFEST_CRC_TAG)); t++)
			tag = t;
		T_CHECK(tag, "the seal in the manifest");
		/* the tag starts with the comma after the last member */
		n = (size_t)sprintf(junk, "%.*s}\nTHIS IS NOT JSON", (int)(tag - text), text);
		n += (size_t)sprintf(junk + n, "%s%08x\"\n}\n", MANIFEST_CRC_TAG,
				     train_state_manifest_crc(junk, n));
		tf_write_all(manifest, junk, n);
		T_CHECK(train_state_read(ck, &st, err2, sizeof(err2)) < 0 &&
				strstr(err2, "zinf_state.json") && strstr(err2, "not valid JSON"),
			"a resealed manifest with text after its object: %s", err2);
		free(junk);
	}
	tf_read_all(model, &mafter, &na);
	T_CHECK(na == nb && memcmp(mbefore, mafter, nb) == 0, "the checkpoint's files changed");
	tf_write_all(manifest, text, len);
	train_state_free(&good);
	free(text);
	free(buf);
	free(mbefore);
	free(mafter);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

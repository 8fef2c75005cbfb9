/* zinf train --data 'DIR/part_*.txt' (a quoted glob pattern of shards) trains exactly as
 * on the one file that is their concatenation: the same loss at every step, shuffled,
 * the first window of the run crossing both shard boundaries, and the same evaluation
 * loss on shards cut inside its first window. The state's data CRC is the documented one, for a file (its size, first and
 * last MiB) and for shards (each one's size, first and last 64 KiB, in order). A
 * checkpoint of the shards resumes from them, and refuses them renamed into another order
 * or with a middle shard's byte changed. --log-json naming a shard of --data or
 * --eval-data, or a file the pattern would match (a glob in its directory part too), is
 * refused and leaves the data alone.
 * argv: the zinf binary. */
#include "cli_util.h"
#include "tokens.h"
#include "train_fixture.h"
#include "zinf/crc32c.h"

#define STEPS 3
#define TEXT_BYTES (3u << 20)
#define SEED 5

/* The losses of the --log-json file at path, one a line, and the last step's eval_loss. */
static int read_losses(const char *path, double *loss, int max, double *eval)
{
	char *text, *line, *save = NULL;
	size_t len;
	int n = 0;

	tf_read_all(path, &text, &len);
	for (line = strtok_r(text, "\n", &save); line && n < max;
	     line = strtok_r(NULL, "\n", &save)) {
		loss[n++] = t_json_number(line, "loss");
		if (n == STEPS)
			*eval = t_json_number(line, "eval_loss");
	}
	free(text);
	return n;
}

/* data.sample_crc32c of DIR/zinf_state.json. */
static uint32_t state_crc(const char *dir)
{
	char path[256], *text, *p;
	size_t len;
	uint32_t crc;

	snprintf(path, sizeof(path), "%s/zinf_state.json", dir);
	tf_read_all(path, &text, &len);
	p = strstr(text, "\"sample_crc32c\":");
	T_CHECK(p, "%s: no sample_crc32c", path);
	p += strlen("\"sample_crc32c\":");
	p += strspn(p, " \t\"");
	crc = (uint32_t)strtoul(p, NULL, 16);
	free(text);
	return crc;
}

/* crc carried over a file of len bytes: its size (8 bytes, little-endian), its first
 * sample bytes and its last sample bytes (once where they overlap). */
static uint32_t sample_crc(uint32_t crc, const char *data, size_t len, size_t sample)
{
	uint8_t le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)((uint64_t)len >> (8 * i));
	crc = zinf_crc32c(crc, le, 8);
	crc = zinf_crc32c(crc, data, len < sample ? len : sample);
	if (len > sample)
		crc = zinf_crc32c(crc, data + len - sample, sample);
	return crc;
}

static void write_part(const char *root, const char *name, const char *data, size_t len)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", root, name);
	tf_write_all(path, data, len);
}

/* cmd exits 2 with one line holding want. */
static void refused(const char *cmd, const char *want)
{
	char out[4096];
	int rc = t_run(cmd, out, sizeof(out));

	T_CHECK(rc == 2 && strstr(out, want) && strchr(out, '\n') == out + strlen(out) - 1,
		"%s: exit %d, want 2 and one line with '%s': %s", cmd, rc, want, out);
}

int main(int argc, char **argv)
{
	struct tf_dir d;
	struct zinf_token_windows w;
	char cmd[4096], out[4096], common[2048], pattern[256], eval[256], log_a[200], log_b[200];
	char resume[2048], shard[256], swap[512], big[200], *text, *before, *after;
	double a[STEPS + 1], b[STEPS + 1], eval_a = 0, eval_b = 1;
	size_t len_before, len_after, cut;
	uint64_t x = 88172645463325252ull;
	uint32_t want;
	int rc;

	T_CHECK(argc == 2, "usage: %s ZINF_BINARY", argv[0]);
	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	/* 3 MiB of text that never repeats itself (xorshift words) */
	text = malloc(TEXT_BYTES);
	T_CHECK(text, "malloc");
	for (size_t i = 0; i < TEXT_BYTES;) {
		char word[32];
		int n;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		n = snprintf(word, sizeof(word), "w%llu ", (unsigned long long)(x % 5000));
		for (int k = 0; k < n && i < TEXT_BYTES; k++)
			text[i++] = word[k];
	}
	snprintf(big, sizeof(big), "%s/big.txt", d.root);
	tf_write_all(big, text, TEXT_BYTES);
	/* three shards, the middle one a single byte, cut so that the run's first window
	 * (micro-batch 0, row 0: 17 tokens from its start) spans both boundaries */
	T_CHECK_RC(zinf_token_windows_init(&w, TEXT_BYTES, 2, 16, true, SEED, out, sizeof(out)));
	cut = (size_t)zinf_token_windows_start(&w, 0, 0) + 8;
	T_CHECK(cut + 9 < TEXT_BYTES - (256u << 10), "window at %zu", cut);
	snprintf(cmd, sizeof(cmd), "%s/parts", d.root);
	T_CHECK(mkdir(cmd, 0755) == 0, "mkdir %s", cmd);
	snprintf(cmd, sizeof(cmd), "%s/eparts", d.root);
	T_CHECK(mkdir(cmd, 0755) == 0, "mkdir %s", cmd);
	write_part(d.root, "parts/part_02.txt", text + cut + 1, TEXT_BYTES - cut - 1);
	write_part(d.root, "parts/part_00.txt", text, cut);
	write_part(d.root, "parts/part_01.txt", text + cut, 1);
	/* evaluation shards cut inside its first window (and the file they make) */
	write_part(d.root, "eparts/e_0.txt", text, 20);
	write_part(d.root, "eparts/e_1.txt", text + 20, 180);
	write_part(d.root, "eval.txt", text, 200);
	snprintf(pattern, sizeof(pattern), "%s/parts/part_*.txt", d.root);
	snprintf(eval, sizeof(eval), "%s/eparts/e_?.txt", d.root);
	snprintf(log_a, sizeof(log_a), "%s/a.jsonl", d.root);
	snprintf(log_b, sizeof(log_b), "%s/b.jsonl", d.root);
	snprintf(common, sizeof(common),
		 "--init '%s' --config '%s' --data-format text --seq-len 16 --shuffle seeded "
		 "--seed %d -q",
		 d.model, d.ds, SEED);

	snprintf(cmd, sizeof(cmd),
		 "'%s' train %s --data '%s' --steps %d --log-json '%s' --eval-data '%s/eval.txt' "
		 "--eval-batches 2 --save '%s/ck1' --save-state 2>&1",
		 argv[1], common, big, STEPS, log_a, d.root, d.root);
	rc = t_run(cmd, out, sizeof(out));
	T_CHECK(rc == 0, "one file: exit %d: %s", rc, out);
	snprintf(cmd, sizeof(cmd),
		 "'%s' train %s --data '%s' --steps %d --log-json '%s' --eval-data '%s' "
		 "--eval-batches 2 --save '%s/ck' --save-state 2>&1",
		 argv[1], common, pattern, STEPS, log_b, eval, d.root);
	rc = t_run(cmd, out, sizeof(out));
	T_CHECK(rc == 0, "shards: exit %d: %s", rc, out);
	T_CHECK(read_losses(log_a, a, STEPS + 1, &eval_a) == STEPS &&
			read_losses(log_b, b, STEPS + 1, &eval_b) == STEPS,
		"a step a line");
	for (int s = 0; s < STEPS; s++)
		T_CHECK(a[s] == b[s], "step %d: loss %.9g on the file, %.9g on its shards", s + 1,
			a[s], b[s]);
	T_CHECK(eval_a == eval_b, "eval loss %.9g on the file, %.9g on its shards", eval_a, eval_b);

	/* the data CRC as documented: a file's MiB samples, shards' 64 KiB ones in order */
	snprintf(cmd, sizeof(cmd), "%s/ck1", d.root);
	want = sample_crc(0, text, TEXT_BYTES, 1u << 20);
	T_CHECK(state_crc(cmd) == want, "one file: data CRC %08x, want %08x", state_crc(cmd), want);
	want = sample_crc(0, text, cut, 64u << 10);
	want = sample_crc(want, text + cut, 1, 64u << 10);
	want = sample_crc(want, text + cut + 1, TEXT_BYTES - cut - 1, 64u << 10);
	snprintf(cmd, sizeof(cmd), "%s/ck", d.root);
	T_CHECK(state_crc(cmd) == want, "shards: data CRC %08x, want %08x", state_crc(cmd), want);

	/* resume: from the same shards it goes on; another middle byte, or the shards
	 * renamed into another order, are refused */
	snprintf(resume, sizeof(resume),
		 "'%s' train --resume '%s/ck' --config '%s' --data-format text --seq-len 16 "
		 "--shuffle seeded --seed %d -q --data '%s' --steps %d 2>&1",
		 argv[1], d.root, d.ds, SEED, pattern, STEPS + 1);
	rc = t_run(resume, out, sizeof(out));
	T_CHECK(rc == 0, "resume from the shards: exit %d: %s", rc, out);
	write_part(d.root, "parts/part_01.txt", text + cut + 1, 1);
	refused(resume, "not the same data");
	write_part(d.root, "parts/part_01.txt", text + cut, 1);
	snprintf(swap, sizeof(swap),
		 "cd '%s/parts' && mv part_00.txt x && mv part_02.txt part_00.txt && mv x "
		 "part_02.txt",
		 d.root);
	T_CHECK(system(swap) == 0, "swap part_00 and part_02");
	refused(resume, "not the same data");

	/* outputs naming a shard of --data or --eval-data, or a file --data would match */
	snprintf(shard, sizeof(shard), "%s/parts/part_01.txt", d.root);
	tf_read_all(shard, &before, &len_before);
	snprintf(cmd, sizeof(cmd), "'%s' train %s --data '%s' --steps 1 --log-json '%s' 2>&1",
		 argv[1], common, pattern, shard);
	refused(cmd, "is the --data file");
	tf_read_all(shard, &after, &len_after);
	T_CHECK(len_before == len_after && !memcmp(before, after, len_after), "the shard changed");
	snprintf(cmd, sizeof(cmd),
		 "'%s' train %s --data '%s' --eval-data '%s' --steps 1 --log-json "
		 "'%s/eparts/e_1.txt' 2>&1",
		 argv[1], common, pattern, eval, d.root);
	refused(cmd, "is the --eval-data file");
	snprintf(cmd, sizeof(cmd),
		 "'%s' train %s --data '%s' --steps 1 --log-json '%s/parts/../parts/part_zz.txt' "
		 "2>&1",
		 argv[1], common, pattern, d.root);
	refused(cmd, "matches the --data pattern");
	snprintf(cmd, sizeof(cmd),
		 "'%s' train %s --data '%s/p*s/part_*.txt' --steps 1 --log-json "
		 "'%s/./parts/part_zz.txt' 2>&1",
		 argv[1], common, d.root, d.root);
	refused(cmd, "matches the --data pattern"); /* (a glob in the directory part) */
	snprintf(cmd, sizeof(cmd), "%s/parts/part_zz.txt", d.root);
	T_CHECK(access(cmd, F_OK) != 0, "%s was made", cmd);
	free(before);
	free(after);
	free(text);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}

/*
 * tools/tokenize_hf.py writes token files zinf reads back: with a stand-in tokenizer (a
 * `transformers` module of the test's own: byte + offset per UTF-8 byte), every .jsonl
 * line and every other file is a document, its tokens framed by BOS and EOS (or not, with
 * --no-bos / --no-eos; once, before it, when they are one token), in input order, empty documents left out; uint16 tokens when the
 * vocabulary fits, uint32 when not. With --shard-tokens N the tokens go into shards of N
 * tokens that zinf reads back through a glob pattern as the same stream, and --force
 * removes the shards of an earlier, longer output; a .json input is JSON lines. Bad input
 * (an existing --out, a line that is not JSON, not an object or lacks the field, a .json
 * that is not JSON lines, a flag argparse refuses, text that is not UTF-8, an input that is the output, an id too
 * wide, a tokenizer that does not load, no text) exits 2 with one line naming the file
 * and line, and leaves no output behind and an existing one untouched; a write that
 * fails exits 1 naming the file and leaves nothing. Skips (77) without python3.
 *
 * Usage: test_tokenize_hf_writes_llmc_token_files TOOLS/tokenize_hf.py
 */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "tokens.h"

static const char *script;
static char dir[64] = "/var/tmp/zinf-tokenize-XXXXXX";

static const char *stub =
	"import json, os\n"
	"class _Tok:\n"
	"    def __init__(self, c):\n"
	"        self.c = c\n"
	"        self.bos_token_id = c.get('bos')\n"
	"        self.eos_token_id = c.get('eos')\n"
	"    def __len__(self):\n"
	"        return self.c['vocab']\n"
	"    def __call__(self, texts, add_special_tokens=True, return_attention_mask=True):\n"
	"        assert add_special_tokens is False and return_attention_mask is False\n"
	"        off = self.c['offset']\n"
	"        return {'input_ids': [[b + off for b in t.encode('utf-8')] for t in texts]}\n"
	"class logging:\n"
	"    @staticmethod\n"
	"    def set_verbosity_error():\n"
	"        pass\n"
	"class AutoTokenizer:\n"
	"    @staticmethod\n"
	"    def from_pretrained(path):\n"
	"        with open(os.path.join(path, 'stub.json')) as f:\n"
	"            return _Tok(json.load(f))\n";

/* The documents of the inputs written below, in order (the empty one left out). */
static const char *docs[] = {"Hello, world\n", "h\xc3\xa9llo", "second \"line\""};

static void write_file(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	T_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
}

static void tokenizer(const char *json)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/tok", dir);
	T_CHECK(mkdir(path, 0700) == 0 || errno == EEXIST, "mkdir %s", path);
	write_file("tok/stub.json", json);
}

/* Run the script with the stand-in on the path; its stderr and stdout into out. */
static int run(const char *args, char *out, size_t len)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "cd '%s' && PYTHONPATH='%s/stub' python3 '%s' %s 2>&1", dir, dir,
		 script, args);
	return t_run(cmd, out, len);
}

/* The token file out holds docs framed by bos and eos (-1: none) with ids byte + offset,
 * as width-byte tokens. */
static void check_tokens(const char *out, int bos, int eos, uint32_t offset, int width)
{
	struct zinf_token_file *tf;
	uint32_t want[256];
	int32_t got[256];
	uint64_t n = 0;
	char path[256];

	for (size_t d = 0; d < sizeof(docs) / sizeof(docs[0]); d++) {
		if (bos >= 0)
			want[n++] = (uint32_t)bos;
		for (const unsigned char *c = (const unsigned char *)docs[d]; *c; c++)
			want[n++] = *c + offset;
		if (eos >= 0)
			want[n++] = (uint32_t)eos;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, out);
	T_CHECK_RC(zinf_token_file_create(&tf));
	T_CHECK(zinf_token_file_open(tf, path, ZINF_TOKEN_FORMAT_LLMC) == 0, "%s",
		zinf_token_file_last_error(tf));
	T_CHECK(zinf_token_file_token_bytes(tf) == width, "%s: %d-byte tokens, want %d", out,
		zinf_token_file_token_bytes(tf), width);
	T_CHECK(zinf_token_file_count(tf) == n, "%s: %llu tokens, want %llu", out,
		(unsigned long long)zinf_token_file_count(tf), (unsigned long long)n);
	T_CHECK_RC(zinf_token_file_read(tf, 0, n, 0, got));
	for (uint64_t i = 0; i < n; i++)
		T_CHECK((uint32_t)got[i] == want[i], "%s: token %llu is %d, want %u", out,
			(unsigned long long)i, got[i], want[i]);
	zinf_token_file_destroy(tf);
}

/* args exits 2 with one line naming what, writing neither out nor out.partial. */
static void refused(const char *args, const char *out, const char *what)
{
	char text[4096], path[256];
	int rc = run(args, text, sizeof(text));

	T_CHECK(rc == 2, "%s: exit %d, want 2: %s", args, rc, text);
	T_CHECK(strstr(text, what) && t_count(text, "\n") == 1, "%s: not one line naming %s: %s",
		args, what, text);
	snprintf(path, sizeof(path), "%s/%s.partial", dir, out);
	T_CHECK(access(path, F_OK) != 0, "%s: %s left behind", args, path);
	snprintf(path, sizeof(path), "%s/%s", dir, out);
	T_CHECK(access(path, F_OK) != 0, "%s: %s written", args, path);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(p);
}

int main(int argc, char **argv)
{
	char text[4096], path[256];
	int rc;

	T_CHECK(argc == 2, "usage: %s TOOLS/tokenize_hf.py", argv[0]);
	script = argv[1];
	if (system("python3 -c 'import json' >/dev/null 2>&1") != 0)
		T_SKIP("no python3");
	T_CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(path, sizeof(path), "%s/stub", dir);
	T_CHECK(mkdir(path, 0700) == 0, "mkdir");
	snprintf(path, sizeof(path), "%s/stub/transformers", dir);
	T_CHECK(mkdir(path, 0700) == 0, "mkdir");
	write_file("stub/transformers/__init__.py", stub);
	write_file("a.txt", docs[0]);
	write_file("b.jsonl", "{\"text\": \"h\\u00e9llo\"}\n\n{\"text\": \"\", \"id\": 1}\n"
			      "{\"text\": \"second \\\"line\\\"\", \"id\": 2}\n");

	/* a vocabulary that fits uint16: BOS 1, EOS 2, byte b is b + 3 */
	tokenizer("{\"vocab\": 259, \"offset\": 3, \"bos\": 1, \"eos\": 2}");
	rc = run("--tokenizer tok --out narrow.bin a.txt b.jsonl", text, sizeof(text));
	T_CHECK(rc == 0, "exit %d: %s", rc, text);
	T_CHECK(strstr(text, "3 documents") && strstr(text, "uint16"), "%s", text);
	check_tokens("narrow.bin", 1, 2, 3, 2);
	rc = run("--tokenizer tok --out bare.bin --no-bos --no-eos a.txt b.jsonl", text,
		 sizeof(text));
	T_CHECK(rc == 0, "exit %d: %s", rc, text);
	check_tokens("bare.bin", -1, -1, 3, 2);
	/* JSON lines in a .json file are documents as in a .jsonl */
	write_file("empty.json", "\n\n"); /* no documents, as an empty .jsonl */
	write_file("bom.jsonl", "\xef\xbb\xbf{\"text\": \"x\"}\n"); /* a byte order mark */
	rc = run("--tokenizer tok --out bom.bin empty.json bom.jsonl", text, sizeof(text));
	T_CHECK(rc == 0 && strstr(text, "1 documents"), "an empty .json, a BOM: exit %d: %s", rc,
		text);
	write_file("b.json", "{\"text\": \"h\\u00e9llo\"}\n\n{\"text\": \"\", \"id\": 1}\n"
			     "{\"text\": \"second \\\"line\\\"\", \"id\": 2}\n");
	rc = run("--tokenizer tok --out lines.bin a.txt b.json", text, sizeof(text));
	T_CHECK(rc == 0, "exit %d: %s", rc, text);
	check_tokens("lines.bin", 1, 2, 3, 2);
	/* BOS and EOS one token (<|endoftext|>): once, before each document, not twice */
	tokenizer("{\"vocab\": 259, \"offset\": 3, \"bos\": 1, \"eos\": 1}");
	rc = run("--tokenizer tok --out same.bin a.txt b.jsonl", text, sizeof(text));
	T_CHECK(rc == 0, "exit %d: %s", rc, text);
	check_tokens("same.bin", 1, -1, 3, 2);
	tokenizer("{\"vocab\": 259, \"offset\": 3, \"bos\": 1, \"eos\": 2}");
	/* standard input is one document */
	rc = run("--tokenizer tok --out stdin.bin --no-bos - < a.txt", text, sizeof(text));
	T_CHECK(rc == 0 && strstr(text, "1 documents"), "exit %d: %s", rc, text);

	/* shards of 7 tokens: the same stream through the pattern the script prints */
	rc = run("--tokenizer tok --out sh.bin --shard-tokens 7 a.txt b.jsonl", text, sizeof(text));
	T_CHECK(rc == 0 && strstr(text, "6 shards, --data 'sh_??????.bin'"), "shards: exit %d: %s",
		rc, text);
	check_tokens("sh_*.bin", 1, 2, 3, 2);
	{
		struct zinf_token_file *tf;

		snprintf(path, sizeof(path), "%s/sh_000000.bin", dir);
		T_CHECK_RC(zinf_token_file_create(&tf));
		T_CHECK(zinf_token_file_open(tf, path, ZINF_TOKEN_FORMAT_LLMC) == 0 &&
				zinf_token_file_count(tf) == 7,
			"%s: a shard of 7 tokens", path);
		zinf_token_file_destroy(tf);
	}
	rc = run("--tokenizer tok --out sh.bin --shard-tokens 20 a.txt b.jsonl", text,
		 sizeof(text));
	T_CHECK(rc == 2 && strstr(text, "--out sh.bin: sh_000000.bin exists") &&
			t_count(text, "\n") == 1,
		"existing shards: exit %d: %s", rc, text);
	rc = run("--tokenizer tok --out sh.bin --shard-tokens 20 --force a.txt b.jsonl", text,
		 sizeof(text));
	T_CHECK(rc == 0 && strstr(text, "2 shards"), "--force: exit %d: %s", rc, text);
	snprintf(path, sizeof(path), "%s/sh_000002.bin", dir);
	T_CHECK(access(path, F_OK) != 0, "--force left the earlier output's %s", path);
	check_tokens("sh_*.bin", 1, 2, 3, 2);
	refused("--tokenizer tok --out t.bin --shard-tokens 0 a.txt", "t_000000.bin",
		"--shard-tokens 0: out of range");
	refused("--tokenizer tok --out sh.bin --shard-tokens 5 --force sh_000003.bin.partial",
		"sh_000099.bin", "is also an input");
	check_tokens("sh_*.bin", 1, 2, 3, 2); /* the refusals left the shards alone */
	/* a doubled slash in --out names the same shards (none removed as an earlier set's) */
	snprintf(path, sizeof(path), "%s/sub", dir);
	T_CHECK(mkdir(path, 0700) == 0, "mkdir %s", path);
	rc = run("--tokenizer tok --out sub//sh.bin --shard-tokens 7 a.txt b.jsonl", text,
		 sizeof(text));
	T_CHECK(rc == 0, "sub//sh.bin: exit %d: %s", rc, text);
	check_tokens("sub/sh_*.bin", 1, 2, 3, 2);
	refused("--tokenizer tok --out sh.bin --shard-tokens 5 --force sh_000001.bin",
		"sh_000099.bin", "is also an input");

	/* one that does not: uint32 ids past 65535, no BOS (as Qwen2's) */
	tokenizer("{\"vocab\": 70000, \"offset\": 65536, \"bos\": null, \"eos\": 69999}");
	rc = run("--tokenizer tok --out wide.bin a.txt b.jsonl", text, sizeof(text));
	T_CHECK(rc == 0, "exit %d: %s", rc, text);
	T_CHECK(strstr(text, "uint32"), "%s", text);
	check_tokens("wide.bin", -1, 69999, 65536, 4);

	/* bad input */
	rc = run("--tokenizer tok --out narrow.bin a.txt", text, sizeof(text));
	T_CHECK(rc == 2 && strstr(text, "--out narrow.bin: exists") && t_count(text, "\n") == 1,
		"an existing --out: exit %d: %s", rc, text);
	check_tokens("narrow.bin", 1, 2, 3, 2); /* untouched */
	write_file("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"cut\n");
	refused("--tokenizer tok --out o.bin a.txt bad.jsonl", "o.bin", "bad.jsonl:2: not a JSON");
	write_file("nofield.jsonl", "{\"text\": \"ok\"}\n\n{\"body\": \"x\"}\n");
	refused("--tokenizer tok --out o.bin nofield.jsonl", "o.bin",
		"nofield.jsonl:3: no \"text\"");
	refused("--tokenizer tok --out o.bin --field body nofield.jsonl", "o.bin",
		"nofield.jsonl:1: no \"body\"");
	write_file("list.jsonl", "[1, 2]\n");
	refused("--tokenizer tok --out o.bin list.jsonl", "o.bin",
		"list.jsonl:1: not a JSON object: list");
	/* a .json input is JSON lines (datasets' to_json()), or refused: never its JSON text */
	write_file("pretty.json", "{\n  \"text\": \"x\"\n}\n");
	refused("--tokenizer tok --out o.bin pretty.json", "o.bin",
		"pretty.json: a .json input must hold one JSON object a line");
	/* argparse's usage errors on one line too */
	refused("--tokenizer tok --out o.bin --shard-tokens 1e8 a.txt", "o.bin",
		"argument --shard-tokens: invalid int value: '1e8'");
	write_file("empty.jsonl", "{\"text\": \"\"}\n");
	refused("--tokenizer tok --out o.bin empty.jsonl", "o.bin", "no text");
	refused("--tokenizer missing --out o.bin a.txt", "o.bin",
		"--tokenizer missing: cannot load");
	refused("--tokenizer tok --out o.bin absent.txt", "o.bin", "absent.txt: cannot open");
	refused("--tokenizer tok --out nodir/o.bin a.txt", "nodir/o.bin", "--out nodir/o.bin");
	refused("--tokenizer tok --out o.bin o.bin.partial", "o.bin", "is also an input");
	write_file("latin1.txt", "caf\xe9\n");
	refused("--tokenizer tok --out o.bin latin1.txt", "o.bin",
		"latin1.txt: not UTF-8 text (byte 3)");
	refused("--tokenizer tok --out o.bin - < latin1.txt", "o.bin", "<stdin>: not UTF-8 text");
	/* a write that fails (a full disk; here a file size limit) exits 1 naming the file,
	 * and leaves nothing */
	{
		char cmd[2048];
		snprintf(
			cmd, sizeof(cmd),
			"cd '%s' && ulimit -f 1 && PYTHONPATH='%s/stub' python3 '%s' --tokenizer tok "
			"--out o.bin a.txt b.jsonl 2>&1",
			dir, dir, script);
		rc = t_run(cmd, text, sizeof(text));
		T_CHECK(rc == 1 && strstr(text, "o.bin.partial") && t_count(text, "\n") == 1,
			"a failed write: exit %d: %s", rc, text);
		snprintf(path, sizeof(path), "%s/o.bin.partial", dir);
		T_CHECK(access(path, F_OK) != 0, "a failed write left %s", path);
	}
	tokenizer("{\"vocab\": 259, \"offset\": 65500, \"bos\": 1, \"eos\": 2}");
	refused("--tokenizer tok --out o.bin a.txt", "o.bin", "a.txt: token id 65619"); /* 'w' */
	/* a failure after several shards were begun leaves none of them */
	tokenizer("{\"vocab\": 259, \"offset\": 65400, \"bos\": 1, \"eos\": 2}");
	refused("--tokenizer tok --out bad.bin --shard-tokens 3 a.txt b.jsonl", "bad_000000.bin",
		"b.jsonl:1: token id 65595"); /* the first byte of 'é' */
	{
		char cmd[512], out[256];

		snprintf(cmd, sizeof(cmd), "ls '%s' | grep '^bad_'", dir);
		T_CHECK(t_run(cmd, out, sizeof(out)) == 1, "a failed sharded write left: %s", out);
	}

	T_CHECK(nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0, "remove %s", dir);
	return T_EXIT_PASS;
}

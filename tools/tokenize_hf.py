#!/usr/bin/env python3
"""Tokenize text with a Hugging Face tokenizer into an llm.c token file for `zinf train`.

Each input is documents: a .jsonl file holds one JSON object a line (its --field, default
"text", is the document), and so must a .json file (the JSON lines that datasets'
to_json() writes); any other file, or - (standard input), is one document. Each
document becomes the tokenizer's BOS (when it has one), the text's tokens, and its EOS
(when it has one), so documents packed back to back stay apart; --no-bos and --no-eos
leave those out. A tokenizer whose BOS and EOS are one token (<|endoftext|>) gets it once,
before each document, as llm.c's files have it. The tokens go out in llm.c's format (docs/formats.md, "Token files"):
uint16 (magic 20240520, version 1) when every id of the tokenizer fits, else uint32
(magic 20240801, version 7).

Usage:
    tools/tokenize_hf.py --tokenizer MODEL_DIR --out tokens.bin INPUT [INPUT...]
    tools/tokenize_hf.py --tokenizer MODEL_DIR --out train.bin --shard-tokens 100000000 ...

With --shard-tokens N the tokens go into shards of N tokens each (the last holds the
rest), train_000000.bin, train_000001.bin, ... beside OUT's name (at most 1000000),
which `zinf train --data 'train_??????.bin'` reads as one stream (a document may
continue in the next shard). One file holds at most 2^31 - 1 tokens (its header's count
is an int32), so a larger corpus needs shards.

MODEL_DIR is the checkpoint directory `zinf train --model` reads (its tokenizer files);
anything AutoTokenizer.from_pretrained takes works. A file that is not .jsonl is one
document, read and tokenized whole (its text and tokens all in memory, on the order of a
hundred bytes a token with a fast tokenizer): split a large corpus into a .jsonl of
documents. The output is written to OUT.partial (each shard to its own .partial)
and renamed into place when complete; an existing OUT (or shard of OUT's name) is refused
unless --force, with which the complete output replaces it and shards of OUT's name
beyond the new count are removed (the pattern would read them; an interruption while
the shards are renamed into place leaves a mix of the two outputs: run it again).
Exit status: 0 written, 2 bad input (one line on stderr naming the file and line),
1 other failures. Needs the transformers package (and the tokenizer's own, e.g.
tokenizers or sentencepiece).
"""
import argparse
import array
import glob
import json
import os
import re
import shlex
import struct
import sys

PROG = os.path.basename(sys.argv[0])
BATCH = 512  # documents handed to the tokenizer at once (fast tokenizers use threads)
MAX_SHARDS = 1000000  # shard numbers have six digits, so that name order is shard order


class Bad(Exception):
    """Bad input: the message is one line naming what and where."""


class Failed(Exception):
    """Another failure (a full disk): the message is one line naming the file."""


def utf8(data, where):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Bad("%s: not UTF-8 text (byte %d)" % (where, e.start))


def documents(path, field):
    """(where, text) for each document of one input. A file that is not .jsonl is read
    and tokenized whole: its text and tokens are all in memory at once."""
    if path == "-":
        yield "<stdin>", utf8(sys.stdin.buffer.read(), "<stdin>")
        return
    try:
        f = open(path, "rb")
    except OSError as e:
        raise Bad("%s: cannot open: %s" % (path, e.strerror))
    with f:
        if path.endswith(".json"):  # datasets' to_json() writes JSON lines there
            head = f.readline()
            while head and not head.strip():
                head = f.readline()
            if not head:  # empty: no documents, as an empty .jsonl
                return
            try:
                lines = isinstance(json.loads(utf8(head, path).lstrip("\ufeff")), dict)
            except ValueError:
                lines = False
            if not lines:
                raise Bad("%s: a .json input must hold one JSON object a line (JSON lines); "
                          "tokenize other JSON as text through standard input: - < %s"
                          % (path, path))
            f.seek(0)
        elif not path.endswith(".jsonl"):
            yield path, utf8(f.read(), path)
            return
        for n, raw in enumerate(f, 1):
            where = "%s:%d" % (path, n)
            line = utf8(raw, where)
            if n == 1:
                line = line.lstrip("\ufeff")  # a byte order mark some editors write
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise Bad("%s: not a JSON object: %s" % (where, e))
            if not isinstance(obj, dict):
                raise Bad("%s: not a JSON object: %s" % (where, type(obj).__name__))
            if field not in obj:
                raise Bad('%s: no "%s" field (choose one with --field)' % (where, field))
            if not isinstance(obj[field], str):
                raise Bad('%s: "%s" is not a string' % (where, field))
            yield where, obj[field]


class Writer:
    """Tokens in llm.c's format to OUT.partial, or with shard_tokens to the .partial of
    each shard; each file's count goes in its header when it is full or at the end, and
    finish() renames them all into place."""

    def __init__(self, out, wide, shard_tokens=None):
        self.out, self.wide, self.shard_tokens = out, wide, shard_tokens
        self.limit = 1 << (31 if wide else 16)
        self.per_file = shard_tokens or (1 << 31) - 1
        self.count = 0  # all the tokens
        self.names = []  # the files begun, in order
        self.f, self.in_file = None, 0
        self._next()  # (an --out that cannot be made fails before any tokenizing)

    def name(self, i):
        if not self.shard_tokens:
            return self.out
        stem, ext = os.path.splitext(self.out)
        return "%s_%06d%s" % (stem, i, ext)

    def partial(self, name):
        return name + ".partial"

    def current(self):
        """The file being written (for messages)."""
        return self.partial(self.name(max(len(self.names) - 1, 0)))

    def _close(self):
        header = [0] * 256
        header[0], header[1] = (20240801, 7) if self.wide else (20240520, 1)
        header[2] = self.in_file
        self.f.seek(0)
        self.f.write(struct.pack("<256i", *header))
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        self.f = None

    def _next(self):
        if len(self.names) == MAX_SHARDS:
            raise Bad("--shard-tokens %d: more than %d shards (the names have six digits; "
                      "use a larger N)" % (self.shard_tokens, MAX_SHARDS))
        if self.f:
            self._close()
        name = self.name(len(self.names))
        try:
            self.f = open(self.partial(name), "wb")
        except OSError as e:
            raise Bad("--out %s: cannot create %s: %s" % (self.out, self.partial(name),
                                                          e.strerror))
        self.names.append(name)
        self.in_file = 0
        self.f.write(b"\0" * 1024)

    def add(self, where, ids):
        if len(ids) and (max(ids) >= self.limit or min(ids) < 0):
            bad = max(ids) if max(ids) >= self.limit else min(ids)
            raise Bad("%s: token id %d does not fit %s tokens" %
                      (where, bad, "uint32" if self.wide else "uint16"))
        at = 0
        while at < len(ids):
            if self.in_file == self.per_file:
                if not self.shard_tokens:
                    raise Bad("%s: more than 2^31 - 1 tokens, the most one file holds "
                              "(write shards with --shard-tokens)" % where)
                self._next()
            take = min(len(ids) - at, self.per_file - self.in_file)
            a = array.array("I" if self.wide else "H", ids[at:at + take])
            if sys.byteorder != "little":
                a.byteswap()
            a.tofile(self.f)
            self.in_file += take
            self.count += take
            at += take

    def finish(self):
        self._close()
        if self.shard_tokens:  # shards of an earlier, longer output (--force), first
            keep = {os.path.basename(n) for n in self.names}
            for old in shards_of(self.out):
                if os.path.basename(old) not in keep:
                    os.unlink(old)
        for name in self.names:
            os.rename(self.partial(name), name)

    def abandon(self):
        try:
            if self.f:
                self.f.close()  # (its flush may fail again on a full disk)
        except OSError:
            pass
        for name in self.names:
            try:
                os.unlink(self.partial(name))
            except FileNotFoundError:
                pass


def shard_names(out, partial=False):
    """The file names (no directory) of out's shards, stem_NNNNNN.ext, as Writer.name
    makes them; with partial, their .partial files too."""
    stem, ext = os.path.splitext(os.path.basename(out))
    return re.compile(re.escape(stem) + r"_[0-9]{6}" + re.escape(ext) +
                      (r"(\.partial)?" if partial else "") + "$")


def shards_of(out):
    """The files named as shards of out that exist, in order."""
    d = os.path.dirname(out)
    pat = shard_names(out)
    try:
        names = sorted(n for n in os.listdir(d or ".") if pat.match(n))
    except OSError:
        return []
    return [os.path.join(d, n) for n in names]


class Parser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line (exit 2) as every other bad input."""

    def error(self, message):
        raise Bad(message)


def main():
    ap = Parser(
        prog=PROG, description="Tokenize text with a Hugging Face tokenizer into an llm.c "
        "token file for zinf train.")
    ap.add_argument("--tokenizer", required=True,
                    help="tokenizer directory (a checkpoint's) or name for AutoTokenizer")
    ap.add_argument("--out", required=True, help="token file to write")
    ap.add_argument("--field", default="text",
                    help='the document field of .jsonl and .json inputs (default "text")')
    ap.add_argument("--no-bos", action="store_true", help="no BOS before each document")
    ap.add_argument("--no-eos", action="store_true", help="no EOS after each document")
    ap.add_argument("--force", action="store_true", help="replace an existing --out")
    ap.add_argument("--shard-tokens", type=int, metavar="N",
                    help="write shards of N tokens (OUT_000000.EXT, ...), 1..2^31-1")
    ap.add_argument("inputs", nargs="+", metavar="INPUT",
                    help=".jsonl or .json (JSON lines: a document a line), any other file "
                    "or - (one document)")
    a = ap.parse_args()

    if a.shard_tokens is not None and not 1 <= a.shard_tokens <= (1 << 31) - 1:
        raise Bad("--shard-tokens %d: out of range (expected 1 to 2^31 - 1)" % a.shard_tokens)
    existing = shards_of(a.out) if a.shard_tokens else \
        [a.out] if os.path.lexists(a.out) else []
    if existing and not a.force:
        what = "" if existing[0] == a.out else " " + existing[0]
        raise Bad("--out %s:%s exists (remove it, or pass --force)" % (a.out, what))
    for e in existing:
        if os.path.isdir(e):
            raise Bad("--out %s:%s is a directory" % (a.out, "" if e == a.out else " " + e))
    out_dir, shard_name = os.path.dirname(os.path.abspath(a.out)), shard_names(a.out, True)
    for p in a.inputs:
        path = os.path.abspath(p)
        if p != "-" and (path in (os.path.abspath(a.out), os.path.abspath(a.out + ".partial"))
                         or (a.shard_tokens and os.path.dirname(path) == out_dir and
                             shard_name.match(os.path.basename(path)))):
            raise Bad("--out %s: is also an input (%s)" % (a.out, p))
    try:
        import transformers
        from transformers import AutoTokenizer
    except ImportError:
        print("%s: needs the transformers package (pip install transformers)" % PROG,
              file=sys.stderr)
        return 1
    # its warnings (a document longer than the model's context) would break the one-line
    # messages; documents are packed and cut into windows by zinf train anyway
    transformers.logging.set_verbosity_error()
    try:
        tok = AutoTokenizer.from_pretrained(a.tokenizer)
    except Exception as e:  # transformers raises OSError, ValueError, ...
        raise Bad("--tokenizer %s: cannot load: %s" % (a.tokenizer,
                                                       str(e).splitlines()[0] if str(e) else
                                                       type(e).__name__))
    bos = None if a.no_bos else tok.bos_token_id
    eos = None if a.no_eos else tok.eos_token_id
    if bos is not None and bos == eos:  # one token for both (<|endoftext|>): one
        eos = None                      # delimiter before each document, as llm.c's
    w = Writer(a.out, len(tok) > 1 << 16, a.shard_tokens)
    docs = 0
    try:
        batch = []

        def flush():
            enc = tok([t for _, t in batch], add_special_tokens=False,
                      return_attention_mask=False)["input_ids"]
            for (where, _), ids in zip(batch, enc):
                if bos is not None:
                    w.add(where, [bos])
                w.add(where, ids)
                if eos is not None:
                    w.add(where, [eos])
            batch.clear()

        for p in a.inputs:
            for where, text in documents(p, a.field):
                if not text:
                    continue
                batch.append((where, text))
                docs += 1
                if len(batch) == BATCH:
                    flush()
        if batch:
            flush()
        if w.count == 0:
            raise Bad("%s: no text in the inputs (nothing to write)" % ", ".join(a.inputs))
        w.finish()
    except OSError as e:
        w.abandon()
        raise Failed("%s: %s" % (e.filename or w.current(), e.strerror or e))
    except BaseException:
        w.abandon()
        raise
    if a.shard_tokens:
        stem, ext = os.path.splitext(a.out)
        print("%s: %d documents, %d tokens (%s) -> %d shards, --data %s" %
              (PROG, docs, w.count, "uint32" if w.wide else "uint16", len(w.names),
               shlex.quote(glob.escape(stem) + "_??????" + glob.escape(ext))),
              file=sys.stderr)
    else:
        print("%s: %d documents, %d tokens (%s) -> %s" %
              (PROG, docs, w.count, "uint32" if w.wide else "uint16", a.out),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Bad as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        sys.exit(2)
    except Failed as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        sys.exit(1)
    except OSError as e:
        print("%s: %s: %s" % (PROG, e.filename or "?", e.strerror or e), file=sys.stderr)
        sys.exit(1)

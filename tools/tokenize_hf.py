#!/usr/bin/env python3
"""Tokenize text with a Hugging Face tokenizer into an llm.c token file for `zinf train`.

Each input is documents: a .jsonl file holds one JSON object a line (its --field, default
"text", is the document); any other file, or - (standard input), is one document. Each
document becomes the tokenizer's BOS (when it has one), the text's tokens, and its EOS
(when it has one), so documents packed back to back stay apart; --no-bos and --no-eos
leave those out. The tokens go out in llm.c's format (docs/formats.md, "Token files"):
uint16 (magic 20240520, version 1) when every id of the tokenizer fits, else uint32
(magic 20240801, version 7).

Usage:
    tools/tokenize_hf.py --tokenizer MODEL_DIR --out tokens.bin INPUT [INPUT...]

MODEL_DIR is the checkpoint directory `zinf train --model` reads (its tokenizer files);
anything AutoTokenizer.from_pretrained takes works. A file that is not .jsonl is one
document, read and tokenized whole (its text and tokens all in memory, on the order of a
hundred bytes a token with a fast tokenizer): split a large corpus into a .jsonl of
documents. The output is written to OUT.partial
and renamed into place when complete; an existing OUT is refused unless --force.
Exit status: 0 written, 2 bad input (one line on stderr naming the file and line),
1 other failures. Needs the transformers package (and the tokenizer's own, e.g.
tokenizers or sentencepiece).
"""
import argparse
import array
import json
import os
import struct
import sys

PROG = os.path.basename(sys.argv[0])
BATCH = 512  # documents handed to the tokenizer at once (fast tokenizers use threads)


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
        if not path.endswith(".jsonl"):
            yield path, utf8(f.read(), path)
            return
        for n, raw in enumerate(f, 1):
            where = "%s:%d" % (path, n)
            line = utf8(raw, where)
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise Bad("%s: not a JSON object: %s" % (where, e))
            if not isinstance(obj, dict) or field not in obj:
                raise Bad('%s: no "%s" field (choose one with --field)' % (where, field))
            if not isinstance(obj[field], str):
                raise Bad('%s: "%s" is not a string' % (where, field))
            yield where, obj[field]


class Writer:
    """Tokens to OUT.partial in llm.c's format; the count goes in the header at the end."""

    def __init__(self, out, wide):
        self.out, self.partial, self.wide = out, out + ".partial", wide
        self.limit = 1 << (31 if wide else 16)
        self.count = 0
        try:
            self.f = open(self.partial, "wb")
        except OSError as e:
            raise Bad("--out %s: cannot create %s: %s" % (out, self.partial, e.strerror))
        self.f.write(b"\0" * 1024)

    def add(self, where, ids):
        if len(ids) and (max(ids) >= self.limit or min(ids) < 0):
            bad = max(ids) if max(ids) >= self.limit else min(ids)
            raise Bad("%s: token id %d does not fit %s tokens" %
                      (where, bad, "uint32" if self.wide else "uint16"))
        a = array.array("I" if self.wide else "H", ids)
        if sys.byteorder != "little":
            a.byteswap()
        a.tofile(self.f)
        self.count += len(ids)
        if self.count > (1 << 31) - 1:
            raise Bad("%s: more than 2^31 - 1 tokens, the most one file holds "
                      "(split the inputs over several files)" % where)

    def finish(self):
        header = [0] * 256
        header[0], header[1] = (20240801, 7) if self.wide else (20240520, 1)
        header[2] = self.count
        self.f.seek(0)
        self.f.write(struct.pack("<256i", *header))
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        os.rename(self.partial, self.out)

    def abandon(self):
        try:
            self.f.close()  # (its flush may fail again on a full disk)
        except OSError:
            pass
        try:
            os.unlink(self.partial)
        except FileNotFoundError:
            pass


def main():
    ap = argparse.ArgumentParser(
        prog=PROG, description="Tokenize text with a Hugging Face tokenizer into an llm.c "
        "token file for zinf train.")
    ap.add_argument("--tokenizer", required=True,
                    help="tokenizer directory (a checkpoint's) or name for AutoTokenizer")
    ap.add_argument("--out", required=True, help="token file to write")
    ap.add_argument("--field", default="text",
                    help='the document field of .jsonl inputs (default "text")')
    ap.add_argument("--no-bos", action="store_true", help="no BOS before each document")
    ap.add_argument("--no-eos", action="store_true", help="no EOS after each document")
    ap.add_argument("--force", action="store_true", help="replace an existing --out")
    ap.add_argument("inputs", nargs="+", metavar="INPUT",
                    help=".jsonl (a document a line), any other file or - (one document)")
    a = ap.parse_args()

    if os.path.lexists(a.out) and not a.force:
        raise Bad("--out %s: exists (remove it, or pass --force)" % a.out)
    if os.path.lexists(a.out) and os.path.isdir(a.out):
        raise Bad("--out %s: is a directory" % a.out)
    for p in a.inputs:
        if p != "-" and os.path.abspath(p) in (os.path.abspath(a.out),
                                               os.path.abspath(a.out + ".partial")):
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
    w = Writer(a.out, len(tok) > 1 << 16)
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
        raise Failed("%s: %s" % (e.filename or w.partial, e.strerror or e))
    except BaseException:
        w.abandon()
        raise
    print("%s: %d documents, %d tokens (%s) -> %s" %
          (PROG, docs, w.count, "uint32" if w.wide else "uint16", a.out), file=sys.stderr)
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

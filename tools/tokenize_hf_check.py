#!/usr/bin/env python3
"""Check tools/tokenize_hf.py against a real Hugging Face tokenizer, without a network.

A small byte-level BPE is trained here with the tokenizers package and saved as a
transformers tokenizer directory (BOS <s>, EOS </s>); tokenize_hf.py turns a .jsonl of
documents into a token file, and the file must hold, document by document, BOS + what the
tokenizer's own encode() gives + EOS, as uint16 with magic 20240520. Then a word-level
tokenizer of 70000 words: the file must be uint32 (magic 20240801) and hold ids above
65535. The first again with --shard-tokens 5: the shards, in name order, must hold the
same tokens, five each but the last.

Usage: tools/tokenize_hf_check.py
Exit status: 0 pass, 1 a mismatch, 77 when transformers or tokenizers is missing.
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
except ImportError:
    print("tokenize_hf_check: skipped (no transformers or tokenizers)")
    sys.exit(77)

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenize_hf.py")
DOCS = ["The quick brown fox jumps over the lazy dog.",
        "Z\u00fcrich \u2014 na\u00efve caf\u00e9, 1234 \U0001f600",
        "def f(x):\n    return x * 2\n"]


def read_tokens(path):
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        body = f.read()
    width = {20240520: 2, 20240801: 4}[header[0]]
    n = header[2]
    assert len(body) == n * width, "size %d for %d tokens" % (len(body), n)
    return header[0], list(struct.unpack("<%d%s" % (n, "H" if width == 2 else "I"), body))


def check(tokdir, docs, d, want_magic, shard_tokens=None):
    src = os.path.join(d, "docs.jsonl")
    with open(src, "w", encoding="utf-8") as f:
        for t in docs:
            f.write(json.dumps({"text": t}) + "\n")
    out = os.path.join(d, "shard.bin" if shard_tokens else "tokens.bin")
    if os.path.exists(out):
        os.unlink(out)
    subprocess.run([sys.executable, SCRIPT, "--tokenizer", tokdir, "--out", out, src] +
                   (["--shard-tokens", str(shard_tokens)] if shard_tokens else []), check=True)
    ref = AutoTokenizer.from_pretrained(tokdir)
    want = []
    for t in docs:
        want += [ref.bos_token_id] + ref.encode(t, add_special_tokens=False) + \
            ([ref.eos_token_id] if ref.eos_token_id != ref.bos_token_id else [])
    if shard_tokens:
        got, sizes = [], []
        for shard in sorted(glob.glob(os.path.join(d, "shard_??????.bin"))):
            magic, part = read_tokens(shard)
            got += part
            sizes.append(len(part))
        if not sizes or sizes[:-1] != [shard_tokens] * (len(sizes) - 1) or \
                not 0 < sizes[-1] <= shard_tokens:
            print("tokenize_hf_check: shards of %s tokens, want %d each" % (sizes, shard_tokens))
            return False
    else:
        magic, got = read_tokens(out)
    if magic != want_magic or got != want:
        print("tokenize_hf_check: mismatch (magic %d, want %d)\n got  %s\n want %s" %
              (magic, want_magic, got[:40], want[:40]))
        return False
    print("tokenize_hf_check: %d tokens, magic %d, as the tokenizer's own encode()" %
          (len(got), magic))
    return True


def main():
    with tempfile.TemporaryDirectory() as d:
        tk = Tokenizer(models.BPE())
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tk.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tk.train_from_iterator(DOCS * 20, trainer=trainer)
        fast = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>")
        tokdir = os.path.join(d, "tok")
        fast.save_pretrained(tokdir)
        ok = check(tokdir, DOCS, d, 20240520)
        ok = check(tokdir, DOCS, d, 20240520, shard_tokens=5) and ok
        # a vocabulary past 65536: a word-level model of 70000 words (quicker to build
        # and load than as many added tokens)
        vocab = {"w%d" % i: i for i in range(70000)}
        vocab.update({"<s>": 70000, "</s>": 70001, "<unk>": 70002})
        wl = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
        wl.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        wide = PreTrainedTokenizerFast(tokenizer_object=wl, bos_token="<s>", eos_token="</s>",
                                       unk_token="<unk>")
        widedir = os.path.join(d, "wide")
        wide.save_pretrained(widedir)
        ok = check(widedir, ["w1 w65535 w65536 w69999", "w7 unknown w3"], d, 20240801) and ok
        if ok and max(read_tokens(os.path.join(d, "tokens.bin"))[1]) <= 65535:
            print("tokenize_hf_check: no id above 65535 in the wide file")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Train a small random Hugging Face Llama with transformers and with `zinf train`, step
for step on the same batches, and compare the losses.

The model is a seeded LlamaForCausalLM (grouped-query attention, untied head) saved with
save_pretrained as safetensors; zinf loads that directory with --model. Both sides train
in fp32 (TF32 off) with AdamW (weight decay on 2-D parameters only, as zinf does),
gradient clipping 1.0 and a constant learning rate, on a token file in llm.c's format
read sequentially (--shuffle none): micro-batch i, row r is tokens
[(i*B + r)*T, (i*B + r)*T + T + 1). Each step's loss is the mean cross-entropy before that
step's update, which is what zinf's --log-json reports.

--rope-scaling JSON gives the model a rope scaling (transformers' rope_scaling object, e.g.
'{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}'), passed
as rope_parameters; it needs transformers 5 or later (zinf follows 5's formulas; 4
releases differ for yarn), and skips (77) with an older one.

Usage: tools/hf_compare.py --zinf BUILD/zinf [--device cuda|host] [--out DIR]
                           [--rope-scaling JSON]
Exit status: 0 when every step's loss agrees within --tol (relative), 1 when not,
77 when torch or transformers is missing (nothing to compare against), 2 on a zinf error.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile


def write_tokens(path, tokens):
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))


def make_tokens(n, vocab):
    # learnable but not trivial: a slow drift plus a short repeating motif
    return [(7 * i + (i // 13) * 3 + (i % 5) * (i % 3)) % vocab for i in range(n)]


def zinf_config(path, batch, lr, wd, clip):
    cfg = {
        "train_micro_batch_size_per_gpu": batch,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": clip,
        "bf16": {"enabled": False},
        "optimizer": {"type": "AdamW", "params": {"lr": lr, "weight_decay": wd,
                                                  "betas": [0.9, 0.999], "eps": 1e-8}},
        "zero_optimization": {"stage": 3, "offload_param": {"device": "none"},
                              "offload_optimizer": {"device": "cpu"}},
        # a small pinned pool, this model needs a few MiB (auto would size it to the run
        # too; a fixed size keeps the comparison's setup the same everywhere)
        "zinf": {"pinned_memory_limit": "256MiB"},
    }
    with open(path, "w") as f:
        json.dump(cfg, f)


def hf_losses(args, model_dir, tokens, torch, transformers):
    import torch.nn.functional as F

    dev = torch.device("cuda" if args.device == "cuda" else "cpu")
    # exact fp32 products: the newer API where torch has it (2.9+ deprecates the flags,
    # and mixing the two raises), else the flags
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        conv = getattr(torch.backends.cudnn, "conv", None)
        if conv is not None and hasattr(conv, "fp32_precision"):
            conv.fp32_precision = "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    # no dtype argument (renamed in transformers 5): the checkpoint is fp32 anyway
    model = transformers.LlamaForCausalLM.from_pretrained(
        model_dir, attn_implementation="eager").float().to(dev)
    model.train()
    named = list(model.named_parameters())
    decay = [p for _, p in named if p.dim() >= 2]
    no_decay = [p for _, p in named if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    data = torch.tensor(tokens, dtype=torch.long)
    B, T, V = args.batch, args.seq_len, args.vocab
    losses = []
    for i in range(args.steps):
        rows = [data[(i * B + r) * T:(i * B + r) * T + T + 1] for r in range(B)]
        win = torch.stack(rows).to(dev)
        logits = model(input_ids=win[:, :T]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, V), win[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        losses.append(loss.item())
    return losses


def zinf_losses(args, model_dir, token_path, work):
    ds = os.path.join(work, "ds.json")
    log = os.path.join(work, "zinf.jsonl")
    zinf_config(ds, args.batch, args.lr, args.wd, args.clip)
    cmd = [args.zinf, "train", "--model", model_dir, "--config", ds, "--data", token_path,
           "--seq-len", str(args.seq_len), "--steps", str(args.steps), "--shuffle", "none",
           "--log-json", log, "--set", "zinf.device=" + args.device]
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(os.path.join(work, "zinf.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + run.stdout)
    if run.returncode != 0:
        sys.stderr.write(run.stdout[-4000:])
        return None
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zinf", required=True, help="the zinf binary")
    ap.add_argument("--device", choices=["cuda", "host"], default="cuda")
    ap.add_argument("--out", default=None, help="keep the model, logs and summary here")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--rope-scaling", type=json.loads, default=None,
                    help="a rope_scaling object (JSON) for the model")
    args = ap.parse_args()
    try:
        import torch
        import transformers
    except ImportError as err:
        print("hf_compare: skipped: %s" % err)
        return 77
    if args.rope_scaling is not None and int(transformers.__version__.split(".")[0]) < 5:
        # transformers 4 releases differ in yarn (the context, the factor): zinf follows 5
        print("hf_compare: skipped: --rope-scaling compares with transformers 5 or later, "
              "not %s" % transformers.__version__)
        return 77
    if args.device == "cuda" and not torch.cuda.is_available():
        print("hf_compare: skipped: torch sees no CUDA device")
        return 77
    work = args.out or tempfile.mkdtemp(prefix="zinf-hf-")
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(1234)
    rope = {}
    if args.rope_scaling is not None:
        rope["rope_parameters"] = dict(args.rope_scaling, rope_theta=10000.0)
    cfg = transformers.LlamaConfig(
        vocab_size=args.vocab, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        rms_norm_eps=1e-5, tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False, **rope)  # rope theta: the default, 10000
    model_dir = os.path.join(work, "hf-model")
    # safetensors is save_pretrained's default since transformers 4.35 and its only format
    # in 5, which removed the safe_serialization argument
    transformers.LlamaForCausalLM(cfg).to(torch.float32).save_pretrained(model_dir)
    token_path = os.path.join(work, "tokens.bin")
    tokens = make_tokens(args.steps * args.batch * args.seq_len + 1, args.vocab)
    write_tokens(token_path, tokens)

    zl = zinf_losses(args, model_dir, token_path, work)
    if zl is None:
        print("hf_compare: zinf train failed (log: %s)" % os.path.join(work, "zinf.log"))
        return 2
    hl = hf_losses(args, model_dir, tokens, torch, transformers)
    worst = 0.0
    print("step  transformers      zinf              rel. diff")
    for i, (h, z) in enumerate(zip(hl, zl)):
        rel = abs(h - z) / abs(h)
        worst = max(worst, rel)
        print("%4d  %.9f  %.9f  %.2e" % (i + 1, h, z, rel))
    ok = len(zl) == len(hl) == args.steps and worst <= args.tol
    summary = {"device": args.device, "rope_scaling": args.rope_scaling,
               "torch": torch.__version__,
               "transformers": transformers.__version__, "steps": args.steps,
               "hf_loss": hl, "zinf_loss": zl, "worst_rel_diff": worst, "tol": args.tol,
               "ok": ok}
    with open(os.path.join(work, "hf_compare.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("hf_compare: %s: worst relative difference %.2e (tolerance %.0e) over %d steps"
          % ("ok" if ok else "MISMATCH", worst, args.tol, len(zl)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

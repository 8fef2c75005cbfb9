#!/usr/bin/env python3
"""Reference trajectory for tests/train/test_train_trajectory_matches_torch.c.

An independent torch run of what `zinf train` does over several optimizer steps, as
DeepSpeed and Hugging Face define it, so that the combination (not each piece alone) is
checked end to end:

- the model: the llama_mlp_bias checkpoint of tests/model/fixtures (fp32 weights, q/k/v/o
  and MLP biases, GQA 4 / 2, untied head), read from its model.safetensors, run by
  gen_llama_fixture.py's forward (Hugging Face's Llama math) in float64;
- the data: tokens.bin (written here, an llm.c uint16 token file of N tokens), read by
  the `--shuffle none` window rule of docs/formats.md: row r of micro-batch i takes the
  tokens (w T + j) mod N, j = 0..T, w = i B + r (N is chosen so that windows wrap and the
  second pass starts mid-file);
- micro batch B = 2, gradient_accumulation_steps 2: each micro-batch back-propagates its
  mean loss divided by the accumulation steps (DeepSpeed's scaling), so the step's
  gradient is the mean over its micro-batches; the reported loss is the mean over the
  step's tokens, before its update;
- gradient_clipping: the global L2 norm of the averaged gradient (grad_norm), and torch's
  clip_grad_norm_ coefficient min(1, max_norm / (norm + 1e-6)) (DeepSpeed's ZeRO
  unscale_and_clip_grads is the same); max_norm is chosen between the steps' norms so
  that some steps clip and some do not (the output says which);
- torch.optim.AdamW with non-default betas and eps, weight_decay on the 2-D parameters
  only (embedding and matrices; norm weights and biases in a group of decay 0, as the
  Hugging Face Trainer groups them and docs/optim.md says zinf does);
- WarmupDecayLR (log warmup) as in deepspeed/runtime/lr_schedules.py: the scheduler is
  built at last_batch_iteration -1, which in current DeepSpeed sets the optimizer's rate
  to warmup_min_lr (older releases left optimizer.params.lr for step 1; zinf follows
  current DeepSpeed, docs/optim.md), and DeepSpeed's engine steps it after each optimizer
  step that was not skipped (_take_model_step), so
  optimizer step k runs at iteration k - 2: steps 1 and 2 at the minimum (iteration 0's
  log(1) = 0), the maximum at iteration warmup_num_steps - 1, then the linear decay to
  total_num_steps.

Writes into OUTDIR (default: fixtures/trajectory next to this script): tokens.bin,
ds.json (the DeepSpeed config of the run; the test adds where the state lives with
--set) and expected.txt (seq_len and steps, then per step: loss, lr, grad_norm and the
clip coefficient, as repr() of the doubles).

Needs torch (Debian: python3-torch). Not run by the build; the outputs are committed.
Usage: gen_train_trajectory_fixture.py [OUTDIR]
"""
import json
import math
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "model"))
import gen_llama_fixture as ref  # noqa: E402

MODEL = os.path.join(HERE, "..", "model", "fixtures", "llama_mlp_bias")
DT = torch.float64

B, T, GAS, STEPS = 2, 12, 2, 8
N_TOKENS = 257  # not a multiple of T: the second pass through the file starts at 384 mod 257
SEED = 2468

DS = {
    "train_micro_batch_size_per_gpu": B,
    "gradient_accumulation_steps": GAS,
    "gradient_clipping": 1.8,
    "bf16": {"enabled": False},
    "optimizer": {"type": "AdamW",
                  "params": {"lr": 0.02, "betas": [0.8, 0.99], "eps": 1e-6,
                             "weight_decay": 0.3}},
    "scheduler": {"type": "WarmupDecayLR",
                  "params": {"warmup_min_lr": 0.002, "warmup_max_lr": 0.02,
                             "warmup_num_steps": 3, "warmup_type": "log",
                             "total_num_steps": 10}},
    "zero_optimization": {"stage": 3, "sub_group_size": 4096,
                          "offload_param": {"device": "none"},
                          "offload_optimizer": {"device": "none"}},
    "zinf": {"device": "host", "device_memory_limit": "8MiB",
             "pinned_memory_limit": "4MiB", "chunk_size": "64KiB"},
}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    base = 8 + hlen
    P = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "F32", (name, h["dtype"])
        a, b = h["data_offsets"]
        t = torch.frombuffer(bytearray(raw[base + a:base + b]), dtype=torch.float32)
        P[name] = t.reshape(h["shape"]).clone()
    return P


def model_cfg(path):
    with open(os.path.join(path, "config.json")) as f:
        c = json.load(f)
    assert c["model_type"] == "llama" and not c["tie_word_embeddings"]
    return dict(c, attention_out_bias=c["attention_bias"], sliding_window=0)


def lr_at(it):
    """WarmupDecayLR's rate at last_batch_iteration it (current DeepSpeed: -1 is min)."""
    p = DS["scheduler"]["params"]
    lo, hi = p["warmup_min_lr"], p["warmup_max_lr"]
    n = max(2, p["warmup_num_steps"])
    if it < 0:
        return lo
    if it < n:
        assert p["warmup_type"] == "log"
        gamma = math.log(it + 1) / math.log(n)
    else:
        gamma = max(0.0, (p["total_num_steps"] - it) / max(1.0, p["total_num_steps"] - n))
    return lo + (hi - lo) * gamma


def window(stream, w):
    idx = [(w * T + j) % len(stream) for j in range(T + 1)]
    return stream[idx]


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "trajectory")
    os.makedirs(outdir, exist_ok=True)
    cfg = model_cfg(MODEL)
    V = cfg["vocab_size"]
    gen = torch.Generator().manual_seed(SEED)
    stream = torch.randint(0, V, (N_TOKENS,), generator=gen, dtype=torch.int64)

    P = {n: t.to(DT).requires_grad_(True)
         for n, t in read_safetensors(os.path.join(MODEL, "model.safetensors")).items()}
    decay = [t for t in P.values() if t.dim() == 2]
    no_decay = [t for t in P.values() if t.dim() != 2]
    op = DS["optimizer"]["params"]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": op["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr_at(-1), betas=tuple(op["betas"]), eps=op["eps"])
    max_norm = DS["gradient_clipping"]

    rows = []
    micro = 0
    for step in range(1, STEPS + 1):
        lr = lr_at(step - 2)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=False)
        loss_sum = 0.0
        for _ in range(GAS):
            win = torch.stack([window(stream, micro * B + r) for r in range(B)])
            micro += 1
            _, loss = ref.forward(cfg, P, win[:, :T].contiguous(), win[:, 1:].contiguous())
            (loss / GAS).backward()
            loss_sum += loss.item()
        norm = math.sqrt(sum(float((t.grad * t.grad).sum()) for t in P.values()))
        coef = min(1.0, max_norm / (norm + 1e-6))
        with torch.no_grad():
            for t in P.values():
                t.grad.mul_(coef)
        opt.step()
        rows.append((step, loss_sum / GAS, lr, norm, coef))

    clipped = sum(1 for r in rows if r[4] < 1.0)
    assert 0 < clipped < STEPS, f"clipping on {clipped} of {STEPS} steps: move max_norm"

    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, N_TOKENS
    with open(os.path.join(outdir, "tokens.bin"), "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(stream.numpy().astype("<u2").tobytes())
    with open(os.path.join(outdir, "ds.json"), "w") as f:
        json.dump(DS, f, indent=2)
        f.write("\n")
    lines = [f"# written by tests/train/gen_train_trajectory_fixture.py (torch {torch.__version__},"
             " float64)",
             "# model tests/model/fixtures/llama_mlp_bias, data tokens.bin, config ds.json,"
             f" --seq-len {T} --steps {STEPS} --shuffle none",
             f"# {clipped} of {STEPS} steps clipped (coef < 1)",
             f"seq_len {T}",
             f"steps {STEPS}",
             "# step K LOSS LR GRAD_NORM CLIP_COEF (loss before the step's update)"]
    for step, loss, lr, norm, coef in rows:
        lines.append(f"step {step} {loss!r} {lr!r} {norm!r} {coef!r}")
    with open(os.path.join(outdir, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    for r in rows:
        print("step %d loss %.9f lr %.6g norm %.6f coef %.6f" % r)


if __name__ == "__main__":
    main()

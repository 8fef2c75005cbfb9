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

Then the same run with bf16 parameters (`"bf16": {"enabled": true}`), as zinf defines it
(docs/engine.md "Loading", docs/optim.md, docs/model.md): the fp32 master weights are
the checkpoint's values (not rounded), the parameters the forward and backward read are
the masters rounded to nearest even bf16 (after the load and after every update), the
compute reads them widened exactly (here in float64), the gradients are not rounded
(fp32 in zinf) and are taken with respect to those copies, and AdamW updates the
masters. (DeepSpeed itself would start its fp32 masters from the bf16-rounded weights
and compute in bf16; zinf computes in fp32.)

Both runs are evaluated (--eval-data eval.bin --eval-every EVAL_EVERY --eval-batches
EVAL_BATCHES, docs/train.md): before step 1, after every EVAL_EVERY steps and after the
last, the mean of the mean losses of the first EVAL_BATCHES micro-batches of eval.bin
(the --shuffle none windows from its start, B rows each; the file is long enough not to
wrap), from the weights the forward reads, no update.

Writes into OUTDIR (default: fixtures/trajectory next to this script): tokens.bin,
ds.json (the DeepSpeed config of the run; the test adds where the state lives with
--set) and expected.txt (seq_len and steps, then per step: loss, lr, grad_norm and the
clip coefficient, as repr() of the doubles), all three as before the evaluation and bf16
runs were added; eval.bin (N_EVAL_TOKENS tokens); expected_eval.txt (the fp32 run's
evaluations: eval_every, eval_batches, then `eval K LOSS`, K = 0 before step 1);
ds_bf16.json (ds.json with bf16 enabled), expected_bf16.txt (the bf16 run's steps and
evaluations) and final_bf16.safetensors (the bf16 copies after the last step, BF16 with
Hugging Face's names).

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
EVAL_EVERY, EVAL_BATCHES = 3, 3
N_EVAL_TOKENS = EVAL_BATCHES * B * T + 5  # more than the evaluation reads: no wrap

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


def trajectory(cfg, stream, eval_stream, bf16):
    """STEPS optimizer steps from the checkpoint; with bf16, forward and backward run on
    the master weights rounded to bf16 (as zinf's parameter copies) and the update on
    the masters. Returns the step rows, the evaluations {step: loss} (0: before step 1)
    and the final parameters the forward uses (bf16 with bf16, else the masters)."""
    P = {n: t.to(DT).requires_grad_(True)
         for n, t in read_safetensors(os.path.join(MODEL, "model.safetensors")).items()}
    decay = [t for t in P.values() if t.dim() == 2]
    no_decay = [t for t in P.values() if t.dim() != 2]
    op = DS["optimizer"]["params"]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": op["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr_at(-1), betas=tuple(op["betas"]), eps=op["eps"])
    max_norm = DS["gradient_clipping"]

    def copies():
        """What the forward reads: the masters, or (bf16) each rounded to nearest even
        bf16 (torch rounds float64 through float32, as zinf's fp32 master is rounded),
        widened exactly; gradients are taken with respect to these, in float64."""
        if not bf16:
            return P
        return {n: t.detach().to(torch.bfloat16).to(DT).requires_grad_(True)
                for n, t in P.items()}

    def evaluate(W):
        """--eval-batches micro-batches from the eval file's start, --shuffle none's
        windows, no update: the mean of their mean losses."""
        with torch.no_grad():
            s = 0.0
            for i in range(EVAL_BATCHES):
                win = torch.stack([window(eval_stream, i * B + r) for r in range(B)])
                s += ref.forward(cfg, W, win[:, :T].contiguous(),
                                 win[:, 1:].contiguous())[1].item()
        return s / EVAL_BATCHES

    rows, evals = [], {}
    micro = 0
    W = copies()
    evals[0] = evaluate(W)
    for step in range(1, STEPS + 1):
        lr = lr_at(step - 2)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=False)
        loss_sum = 0.0
        for _ in range(GAS):
            win = torch.stack([window(stream, micro * B + r) for r in range(B)])
            micro += 1
            _, loss = ref.forward(cfg, W, win[:, :T].contiguous(), win[:, 1:].contiguous())
            (loss / GAS).backward()
            loss_sum += loss.item()
        if bf16:
            for n, t in P.items():
                t.grad = W[n].grad.clone()
        norm = math.sqrt(sum(float((t.grad * t.grad).sum()) for t in P.values()))
        coef = min(1.0, max_norm / (norm + 1e-6))
        with torch.no_grad():
            for t in P.values():
                t.grad.mul_(coef)
        opt.step()
        W = copies()
        rows.append((step, loss_sum / GAS, lr, norm, coef))
        if step % EVAL_EVERY == 0 or step == STEPS:
            evals[step] = evaluate(W)
    clipped = sum(1 for r in rows if r[4] < 1.0)
    assert 0 < clipped < STEPS, f"clipping on {clipped} of {STEPS} steps: move max_norm"
    return rows, evals, {n: t.detach() for n, t in W.items()}


def write_tokens(path, tokens):
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(tokens.numpy().astype("<u2").tobytes())


def write_bf16_safetensors(path, W):
    """The parameters as BF16 safetensors (Hugging Face names, the checkpoint's order)."""
    header, data = {}, bytearray()
    for n, t in W.items():
        raw = t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
        header[n] = {"dtype": "BF16", "shape": list(t.shape),
                     "data_offsets": [len(data), len(data) + len(raw)]}
        data.extend(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(data))


def step_lines(rows):
    clipped = sum(1 for r in rows if r[4] < 1.0)
    lines = [f"# {clipped} of {STEPS} steps clipped (coef < 1)",
             f"seq_len {T}",
             f"steps {STEPS}",
             "# step K LOSS LR GRAD_NORM CLIP_COEF (loss before the step's update)"]
    for step, loss, lr, norm, coef in rows:
        lines.append(f"step {step} {loss!r} {lr!r} {norm!r} {coef!r}")
    return lines


def eval_lines(evals):
    lines = [f"eval_every {EVAL_EVERY}",
             f"eval_batches {EVAL_BATCHES}",
             "# eval K LOSS (after step K; 0: before step 1)"]
    for step, loss in sorted(evals.items()):
        lines.append(f"eval {step} {loss!r}")
    return lines


def write_lines(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "trajectory")
    os.makedirs(outdir, exist_ok=True)
    cfg = model_cfg(MODEL)
    V = cfg["vocab_size"]
    gen = torch.Generator().manual_seed(SEED)
    stream = torch.randint(0, V, (N_TOKENS,), generator=gen, dtype=torch.int64)
    eval_stream = torch.randint(0, V, (N_EVAL_TOKENS,), generator=gen, dtype=torch.int64)

    rows, evals, _ = trajectory(cfg, stream, eval_stream, bf16=False)
    rows16, evals16, W16 = trajectory(cfg, stream, eval_stream, bf16=True)

    write_tokens(os.path.join(outdir, "tokens.bin"), stream)
    write_tokens(os.path.join(outdir, "eval.bin"), eval_stream)
    with open(os.path.join(outdir, "ds.json"), "w") as f:
        json.dump(DS, f, indent=2)
        f.write("\n")
    with open(os.path.join(outdir, "ds_bf16.json"), "w") as f:
        json.dump(dict(DS, bf16={"enabled": True}), f, indent=2)
        f.write("\n")
    by = f"# written by tests/train/gen_train_trajectory_fixture.py (torch {torch.__version__},"
    model = "# model tests/model/fixtures/llama_mlp_bias, data tokens.bin, config"
    run = f" --seq-len {T} --steps {STEPS} --shuffle none"
    evalrun = f" --eval-data eval.bin --eval-every {EVAL_EVERY} --eval-batches {EVAL_BATCHES}"
    write_lines(os.path.join(outdir, "expected.txt"),
                [by + " float64)", model + " ds.json," + run] + step_lines(rows))
    write_lines(os.path.join(outdir, "expected_eval.txt"),
                [by + " float64)", "# the run of expected.txt with" + evalrun]
                + eval_lines(evals))
    write_lines(os.path.join(outdir, "expected_bf16.txt"),
                [by + " float64 from bf16-rounded weights)",
                 model + " ds_bf16.json," + run + evalrun]
                + step_lines(rows16) + eval_lines(evals16))
    write_bf16_safetensors(os.path.join(outdir, "final_bf16.safetensors"), W16)
    for name, rs, ev in (("fp32", rows, evals), ("bf16", rows16, evals16)):
        for r in rs:
            print(name + " step %d loss %.9f lr %.6g norm %.6f coef %.6f" % r)
        for k, v in sorted(ev.items()):
            print(name + " eval %d %.9f" % (k, v))


if __name__ == "__main__":
    main()

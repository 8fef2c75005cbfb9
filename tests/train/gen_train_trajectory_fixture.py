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

Then STEPS_FP16 steps of the fp16 run with dynamic loss scaling (ds_fp16.json: DS with
fp16 enabled, initial_scale_power 63 (zinf's largest), loss_scale_window 2, hysteresis 2,
and its own rate and schedule) as zinf defines fp16 (trajectory_fp16) with DeepSpeed's
DynamicLossScaler and skip semantics: expected_fp16.txt (per step the row above, the
skipped flag and the loss scale; then the scaler after the last step).

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


def lr_at(it, ds=DS):
    """WarmupDecayLR's rate at last_batch_iteration it (current DeepSpeed: -1 is min)."""
    p = ds["scheduler"]["params"]
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


# fp16 with dynamic loss scaling (ds_fp16.json, expected_fp16.txt)
FLT_MAX = float(torch.finfo(torch.float32).max)
FP32_INF_AT = 2.0 ** 128 - 2.0 ** 103  # the least magnitude fp32 rounds to infinity
STEPS_FP16 = 142
DS_FP16 = dict(DS, bf16={"enabled": False},
               fp16={"enabled": True, "loss_scale": 0, "initial_scale_power": 63,
                     "loss_scale_window": 2, "hysteresis": 2,
                     "consecutive_hysteresis": False, "min_loss_scale": 1},
               optimizer={"type": "AdamW",
                          "params": {"lr": 0.005, "betas": [0.8, 0.99], "eps": 1e-6,
                                     "weight_decay": 0.3}},
               scheduler={"type": "WarmupDecayLR",
                          "params": {"warmup_min_lr": 0.0005, "warmup_max_lr": 0.005,
                                     "warmup_num_steps": 10, "warmup_type": "log",
                                     "total_num_steps": 200}})


class Scaler:
    """deepspeed/runtime/fp16/loss_scaler.py DynamicLossScaler.update_scale, with the
    arguments DeepSpeed's engine passes from the fp16 section: init_scale
    2**initial_scale_power, scale_factor 2, scale_window loss_scale_window, min_scale
    min_loss_scale, delayed_shift hysteresis, consecutive_hysteresis."""

    def __init__(self, f):
        self.cur_scale = 2.0 ** f["initial_scale_power"]
        self.cur_iter, self.last_overflow_iter = 0, -1
        self.scale_window, self.min_scale = f["loss_scale_window"], f["min_loss_scale"]
        self.delayed_shift = self.cur_hysteresis = f["hysteresis"]
        self.consecutive_hysteresis = f["consecutive_hysteresis"]

    def update_scale(self, overflow):
        if overflow:
            if self.delayed_shift == 1 or self.cur_hysteresis == 1:
                assert self.cur_scale != self.min_scale, "overflow at min_loss_scale"
                self.cur_scale = max(self.cur_scale / 2.0, self.min_scale)
            else:
                self.cur_hysteresis -= 1
            self.last_overflow_iter = self.cur_iter
        else:
            if self.consecutive_hysteresis:
                self.cur_hysteresis = self.delayed_shift
            if (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
                if not self.consecutive_hysteresis:
                    self.cur_hysteresis = self.delayed_shift
                self.cur_scale *= 2.0
        self.cur_iter += 1


def trajectory_fp16(cfg, stream):
    """STEPS_FP16 steps of the fp16 run as zinf defines it (docs/config.md fp16, docs/
    engine.md, docs/optim.md): fp32 masters from the checkpoint, forward and backward from
    their fp16 copies (round to nearest even, through fp32) in fp32, each micro-batch
    back-propagating its mean loss with the seed S (the loss scale as an fp32 number)
    into fp32 gradients that the engine sums over the micro-batches; an overflow is an
    inf or nan there (the sum of squares of the fp32 gradients). S being a power of two,
    the scaled gradients are the exact unscaled ones (float64 here) times S, so that is
    S past fp32's range (S >= 2^128: the seed itself is inf, every gradient overflows;
    docs/engine.md) or S |g| >= 2^128 - 2^103 for an element g of a micro-batch's
    gradient or of their sum. The second never decides here: every step at a finite S
    has S max|g| below 2^127 (asserted), a doubling short of it, so no intermediate of
    zinf's fp32 backward reaches fp32's infinity unless it is twice the largest gradient
    (torch's largest scaled intermediate is the seed S itself). A step that overflows is
    skipped as DeepSpeed's engine skips it (_take_model_step): its micro-batches are
    consumed, the optimizer and the LR scheduler do not step; then the scaler's
    update_scale. Returns the step rows (step, loss, lr, grad_norm, coef, skipped,
    scale; lr the scheduler's rate, which a skipped step does not use) and the final
    scaler."""
    ds = DS_FP16
    P = {n: t.to(DT).requires_grad_(True)
         for n, t in read_safetensors(os.path.join(MODEL, "model.safetensors")).items()}
    decay = [t for t in P.values() if t.dim() == 2]
    no_decay = [t for t in P.values() if t.dim() != 2]
    op = ds["optimizer"]["params"]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": op["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr_at(-1, ds), betas=tuple(op["betas"]), eps=op["eps"])
    max_norm = ds["gradient_clipping"]
    scaler = Scaler(ds["fp16"])

    def copies():
        return {n: t.detach().to(torch.float32).to(torch.float16).to(DT).requires_grad_(True)
                for n, t in P.items()}

    rows, micro, applied = [], 0, 0
    for step in range(1, STEPS_FP16 + 1):
        S = scaler.cur_scale
        lr = lr_at(applied + 1 - 2, ds)  # the scheduler stepped after each applied step
        W = copies()
        grads = {n: torch.zeros_like(t) for n, t in P.items()}
        loss_sum, gmax = 0.0, 0.0
        for _ in range(GAS):
            win = torch.stack([window(stream, micro * B + r) for r in range(B)])
            micro += 1
            for t in W.values():
                t.grad = None
            _, loss = ref.forward(cfg, W, win[:, :T].contiguous(), win[:, 1:].contiguous())
            loss.backward()
            loss_sum += loss.item()
            for n, t in W.items():
                gmax = max(gmax, float(t.grad.abs().max()))
                grads[n] += t.grad
        gmax = max([gmax] + [float(g.abs().max()) for g in grads.values()])
        overflow = S > FLT_MAX or S * gmax >= FP32_INF_AT
        assert S > FLT_MAX or S * gmax < 2.0 ** 127, (step, S, gmax)
        if overflow:
            norm, coef = math.inf, 1.0
        else:
            for n, t in P.items():
                t.grad = grads[n] / GAS
            norm = math.sqrt(sum(float((t.grad * t.grad).sum()) for t in P.values()))
            coef = min(1.0, max_norm / (norm + 1e-6))
            for g in opt.param_groups:
                g["lr"] = lr
            with torch.no_grad():
                for t in P.values():
                    t.grad.mul_(coef)
            opt.step()
            applied += 1
        scaler.update_scale(overflow)
        rows.append((step, loss_sum / GAS, lr, norm, coef, overflow, S))
    return rows, scaler


def write_tokens(path, tokens):
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(tokens.numpy().astype("<u2").tobytes())


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


def fp16_lines(rows, scaler):
    skipped = sum(1 for r in rows if r[5])
    lines = [f"# {skipped} of {STEPS_FP16} steps skipped (gradient overflow)",
             f"seq_len {T}",
             f"steps {STEPS_FP16}",
             "# step K LOSS LR GRAD_NORM CLIP_COEF SKIPPED LOSS_SCALE (loss before the step's",
             "# update; LOSS_SCALE the scale its backward used; a skipped step: GRAD_NORM inf,",
             "# LR the scheduler's rate, not used)"]
    for step, loss, lr, norm, coef, skip, scale in rows:
        lines.append(f"step {step} {loss!r} {lr!r} {norm!r} {coef!r} {int(skip)} {scale!r}")
    lines += ["# scaler LOSS_SCALE ITERATION LAST_OVERFLOW_ITER HYSTERESIS_LEFT (after the last step)",
              f"scaler {scaler.cur_scale!r} {scaler.cur_iter} {scaler.last_overflow_iter} "
              f"{scaler.cur_hysteresis}"]
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
    ref.write_safetensors(os.path.join(outdir, "final_bf16.safetensors"), W16, "BF16")
    rows_fp16, scaler = trajectory_fp16(cfg, stream)
    with open(os.path.join(outdir, "ds_fp16.json"), "w") as f:
        json.dump(DS_FP16, f, indent=2)
        f.write("\n")
    write_lines(os.path.join(outdir, "expected_fp16.txt"),
                [by + " float64 from fp16-rounded weights, DeepSpeed's DynamicLossScaler)",
                 model + " ds_fp16.json," + run.replace(str(STEPS), str(STEPS_FP16))]
                + fp16_lines(rows_fp16, scaler))
    for name, rs, ev in (("fp32", rows, evals), ("bf16", rows16, evals16)):
        for r in rs:
            print(name + " step %d loss %.9f lr %.6g norm %.6f coef %.6f" % r)
        for k, v in sorted(ev.items()):
            print(name + " eval %d %.9f" % (k, v))
    for r in rows_fp16:
        print("fp16 step %d loss %.9f lr %.6g norm %.6f coef %.6f skipped %d scale 2^%d"
              % (r[:6] + (int(math.log2(r[6])),)))
    print("fp16 scaler", vars(scaler))


if __name__ == "__main__":
    main()

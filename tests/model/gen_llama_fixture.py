#!/usr/bin/env python3
"""Reference fixtures for the Llama-family CPU ops (tests/model/test_llama_*.c).

A straightforward, independent PyTorch implementation of Hugging Face's LlamaForCausalLM,
MistralForCausalLM and Qwen2ForCausalLM math (RMSNorm, rotate_half RoPE with optional
Llama-3 rope_scaling, causal GQA attention with Mistral/Qwen2's sliding window, SwiGLU MLP
with optional biases, tied or untied LM head, mean cross-entropy with ignore index -1),
run on tiny seeded configs. Weights are fp32 values; the forward/backward is evaluated in
float64 so the fixture is the exact answer for those weights, and the C code's fp32 error
is the only error a test sees. Writes, per config, NAME.txt (config and a table of
tensors) and NAME.bin (the tensors, little-endian, back to back).

Sliding window (transformers' masking_utils and Qwen2Config.layer_types): key j is
visible from query i when i - sliding_window < j <= i, in the layers l >=
max_window_layers (mistral: every layer; qwen2: only with use_sliding_window).

Configs with a "checkpoint" entry also get a Hugging Face checkpoint directory NAME/:
config.json, model.safetensors (fp32) and tokens.bin, an llm.c token file of B * T + 1
tokens whose windows under `--shuffle none` are exactly the fixture's tokens and targets,
so that the first step of `zinf train --model NAME` has the fixture's loss.

Needs torch (Debian: python3-torch). Not run by the build; the outputs are committed.
Usage: gen_llama_fixture.py [OUTDIR [NAME...]]   (default: fixtures/ next to this script,
every config)
"""
import json
import math
import os
import struct
import sys

import torch

CONFIGS = {
    # untied, plain RoPE
    "llama_tiny": dict(vocab_size=64, hidden_size=32, intermediate_size=64,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=8, rms_norm_eps=1e-5, rope_theta=10000.0,
                       attention_bias=False, attention_out_bias=False,
                       tie_word_embeddings=False, rope_scaling=None,
                       B=2, T=8, bf16_weights=False, ignored_targets=0, seed=1234),
    # tied head, Llama-3 rope_scaling (all three frequency bands), q/k/v/o biases (llama's
    # attention_bias; qwen2 has q/k/v only),
    # nh*hd != C, bf16-representable weights, some ignored targets
    "llama_tied_scaled_bias": dict(vocab_size=48, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6,
                                   rope_theta=10000.0, attention_bias=True,
                                   attention_out_bias=True,
                                   tie_word_embeddings=True,
                                   rope_scaling=dict(rope_type="llama3", factor=8.0,
                                                     low_freq_factor=1.0, high_freq_factor=8.0,
                                                     original_max_position_embeddings=256),
                                   B=2, T=8, bf16_weights=True, ignored_targets=3, seed=4321),
    # mistral: sliding window 5 < T = 16 in every layer, GQA 4 / 2
    "mistral_window": dict(vocab_size=48, hidden_size=16, intermediate_size=32,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=8, rms_norm_eps=1e-5, rope_theta=10000.0,
                           attention_bias=False, attention_out_bias=False,
                           tie_word_embeddings=False, rope_scaling=None,
                           sliding_window=5, max_window_layers=0,
                           B=2, T=16, bf16_weights=False, ignored_targets=0, seed=555,
                           checkpoint=dict(model_type="mistral")),
    # qwen2: q/k/v biases, use_sliding_window with window 6 in layers 1 and 2 of 3
    # (max_window_layers 1), GQA 4 / 1, tied head
    "qwen2_window_bias": dict(vocab_size=48, hidden_size=16, intermediate_size=32,
                              num_hidden_layers=3, num_attention_heads=4,
                              num_key_value_heads=1, head_dim=8, rms_norm_eps=1e-6,
                              rope_theta=1000000.0, attention_bias=True,
                              attention_out_bias=False, tie_word_embeddings=True,
                              rope_scaling=None, sliding_window=6, max_window_layers=1,
                              B=2, T=16, bf16_weights=False, ignored_targets=0, seed=666,
                              checkpoint=dict(model_type="qwen2")),
    # llama: mlp_bias and attention_bias (q/k/v/o biases), GQA 4 / 2
    "llama_mlp_bias": dict(vocab_size=48, hidden_size=16, intermediate_size=32,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=8, rms_norm_eps=1e-5, rope_theta=10000.0,
                           attention_bias=True, attention_out_bias=True, mlp_bias=True,
                           tie_word_embeddings=False, rope_scaling=None,
                           B=2, T=12, bf16_weights=False, ignored_targets=0, seed=777,
                           checkpoint=dict(model_type="llama")),
}

DT = torch.float64


def inv_freq_of(cfg):
    hd, theta = cfg["head_dim"], cfg["rope_theta"]
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).to(DT) / hd))
    rs = cfg["rope_scaling"]
    if rs is None:
        return inv
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    lo_wavelen, hi_wavelen = old / lo, old / hi
    wavelen = 2 * math.pi / inv
    out = torch.where(wavelen > lo_wavelen, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = (wavelen >= hi_wavelen) & (wavelen <= lo_wavelen)
    return torch.where(medium, smoothed, out)


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward(cfg, P, tokens, targets):
    B, T = tokens.shape
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps = cfg["rms_norm_eps"]
    # fp32 angle products, as Hugging Face computes them, then cos/sin
    inv = inv_freq_of(cfg).to(torch.float32)
    ang = (torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]).to(DT)
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos(), emb.sin()  # (T, hd)

    x = P["model.embed_tokens.weight"][tokens]  # (B, T, C)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    mask = j > i  # True: masked
    window = cfg.get("sliding_window", 0)
    window_mask = mask | (j <= i - window) if window else mask
    for l in range(cfg["num_hidden_layers"]):
        p = lambda n: P[f"model.layers.{l}.{n}"]
        n1 = rms_norm(x, p("input_layernorm.weight"), eps)
        q = n1 @ p("self_attn.q_proj.weight").T
        k = n1 @ p("self_attn.k_proj.weight").T
        v = n1 @ p("self_attn.v_proj.weight").T
        if cfg["attention_bias"]:
            q = q + p("self_attn.q_proj.bias")
            k = k + p("self_attn.k_proj.bias")
            v = v + p("self_attn.v_proj.bias")
        q = q.view(B, T, nh, hd).transpose(1, 2)
        k = k.view(B, T, nkv, hd).transpose(1, 2)
        v = v.view(B, T, nkv, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
        s = (q @ k.transpose(-1, -2)) * hd ** -0.5
        windowed = window and l >= cfg.get("max_window_layers", 0)
        s = s.masked_fill(window_mask if windowed else mask, float("-inf"))
        a = torch.softmax(s, dim=-1) @ v  # (B, nh, T, hd)
        a = a.transpose(1, 2).reshape(B, T, nh * hd)
        h = x + a @ p("self_attn.o_proj.weight").T
        if cfg["attention_out_bias"]:
            h = h + p("self_attn.o_proj.bias")
        n2 = rms_norm(h, p("post_attention_layernorm.weight"), eps)
        g = n2 @ p("mlp.gate_proj.weight").T
        u = n2 @ p("mlp.up_proj.weight").T
        if cfg.get("mlp_bias", False):
            g = g + p("mlp.gate_proj.bias")
            u = u + p("mlp.up_proj.bias")
        d = (torch.nn.functional.silu(g) * u) @ p("mlp.down_proj.weight").T
        if cfg.get("mlp_bias", False):
            d = d + p("mlp.down_proj.bias")
        x = h + d
    xf = rms_norm(x, P["model.norm.weight"], eps)
    lm = P["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else P["lm_head.weight"]
    logits = xf @ lm.T
    loss = torch.nn.functional.cross_entropy(logits.view(B * T, -1), targets.view(-1),
                                             ignore_index=-1, reduction="mean")
    return logits, loss


def make_params(cfg, gen):
    V, C, I = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    shapes = {"model.embed_tokens.weight": (V, C)}
    for l in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{l}."
        shapes[pre + "input_layernorm.weight"] = (C,)
        shapes[pre + "self_attn.q_proj.weight"] = (nh * hd, C)
        shapes[pre + "self_attn.k_proj.weight"] = (nkv * hd, C)
        shapes[pre + "self_attn.v_proj.weight"] = (nkv * hd, C)
        shapes[pre + "self_attn.o_proj.weight"] = (C, nh * hd)
        if cfg["attention_bias"]:
            shapes[pre + "self_attn.q_proj.bias"] = (nh * hd,)
            shapes[pre + "self_attn.k_proj.bias"] = (nkv * hd,)
            shapes[pre + "self_attn.v_proj.bias"] = (nkv * hd,)
        if cfg["attention_out_bias"]:
            shapes[pre + "self_attn.o_proj.bias"] = (C,)
        shapes[pre + "post_attention_layernorm.weight"] = (C,)
        shapes[pre + "mlp.gate_proj.weight"] = (I, C)
        shapes[pre + "mlp.up_proj.weight"] = (I, C)
        shapes[pre + "mlp.down_proj.weight"] = (C, I)
        if cfg.get("mlp_bias", False):
            shapes[pre + "mlp.gate_proj.bias"] = (I,)
            shapes[pre + "mlp.up_proj.bias"] = (I,)
            shapes[pre + "mlp.down_proj.bias"] = (C,)
    shapes["model.norm.weight"] = (C,)
    if not cfg["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (V, C)
    P = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        elif name.endswith("bias"):
            t = 0.1 * torch.randn(shape, generator=gen)
        elif name == "model.embed_tokens.weight":
            t = 0.5 * torch.randn(shape, generator=gen)
        else:
            t = torch.randn(shape, generator=gen) / math.sqrt(shape[1])
        t = t.to(torch.float32)
        if cfg["bf16_weights"]:
            t = t.to(torch.bfloat16).to(torch.float32)
        P[name] = t
    return P


def write_fixture(outdir, name, cfg):
    gen = torch.Generator().manual_seed(cfg["seed"])
    B, T, V = cfg["B"], cfg["T"], cfg["vocab_size"]
    P32 = make_params(cfg, gen)
    if "checkpoint" in cfg:
        # one stream: row b's window is stream[b T .. b T + T] (inputs, then targets)
        stream = torch.randint(0, V, (B * T + 1,), generator=gen, dtype=torch.int64)
        tokens = torch.stack([stream[b * T:b * T + T] for b in range(B)])
        targets = torch.stack([stream[b * T + 1:b * T + T + 1] for b in range(B)])
    else:
        tokens = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
        targets = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    flat = targets.view(-1)
    for i in range(cfg["ignored_targets"]):
        flat[(5 * i + 3) % flat.numel()] = -1
    P = {n: t.to(DT).requires_grad_(True) for n, t in P32.items()}
    logits, loss = forward(cfg, P, tokens, targets)
    loss.backward()

    table, blob = [], bytearray()

    def add(tname, t, dtype):
        t = t.detach().contiguous().to(torch.int32 if dtype == "i32" else torch.float32)
        table.append((tname, dtype, len(blob), t.numel(), tuple(t.shape)))
        blob.extend(t.numpy().astype("<i4" if dtype == "i32" else "<f4").tobytes())

    add("tokens", tokens, "i32")
    add("targets", targets, "i32")
    add("logits", logits, "f32")
    add("loss", loss.reshape(1), "f32")
    for n, t in P32.items():
        add("w." + n, t, "f32")
    for n, t in P.items():
        add("g." + n, t.grad, "f32")

    rs = cfg["rope_scaling"]
    lines = [f"# {name}: written by tests/model/gen_llama_fixture.py (torch {torch.__version__})",
             "# config KEY VALUE | tensor NAME DTYPE BYTE_OFFSET ELEMS DIMS..."]
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim", "B", "T"):
        lines.append(f"config {k} {cfg[k]}")
    lines.append(f"config rms_norm_eps {cfg['rms_norm_eps']!r}")
    lines.append(f"config rope_theta {cfg['rope_theta']!r}")
    lines.append(f"config attention_bias {int(cfg['attention_bias'])}")
    lines.append(f"config attention_out_bias {int(cfg['attention_out_bias'])}")
    lines.append(f"config tie_word_embeddings {int(cfg['tie_word_embeddings'])}")
    lines.append(f"config bf16_weights {int(cfg['bf16_weights'])}")
    if cfg.get("mlp_bias", False):
        lines.append("config mlp_bias 1")
    if cfg.get("sliding_window", 0):
        lines.append(f"config sliding_window {cfg['sliding_window']}")
        lines.append(f"config max_window_layers {cfg['max_window_layers']}")
    lines.append(f"config rope_llama3 {int(rs is not None)}")
    if rs is not None:
        lines.append(f"config rope_factor {rs['factor']!r}")
        lines.append(f"config rope_low_freq_factor {rs['low_freq_factor']!r}")
        lines.append(f"config rope_high_freq_factor {rs['high_freq_factor']!r}")
        lines.append(f"config rope_original_max_position_embeddings "
                     f"{rs['original_max_position_embeddings']}")
    for tname, dtype, off, n, shape in table:
        lines.append(f"tensor {tname} {dtype} {off} {n} " + " ".join(str(d) for d in shape))
    with open(os.path.join(outdir, name + ".txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(outdir, name + ".bin"), "wb") as f:
        f.write(bytes(blob))
    print(f"{name}: loss {loss.item():.6f}, {len(blob)} bytes")
    if "checkpoint" in cfg:
        write_checkpoint(os.path.join(outdir, name), cfg, P32, stream)


def write_safetensors(path, P32):
    header, data = {}, bytearray()
    for n, t in P32.items():
        raw = t.contiguous().numpy().astype("<f4").tobytes()
        header[n] = {"dtype": "F32", "shape": list(t.shape),
                     "data_offsets": [len(data), len(data) + len(raw)]}
        data.extend(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(data))


def write_checkpoint(ckdir, cfg, P32, stream):
    mt = cfg["checkpoint"]["model_type"]
    arch = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
            "qwen2": "Qwen2ForCausalLM"}[mt]
    c = {"architectures": [arch], "model_type": mt, "hidden_act": "silu",
         "max_position_embeddings": 64, "torch_dtype": "float32", "rope_scaling": None}
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps",
              "rope_theta", "tie_word_embeddings"):
        c[k] = cfg[k]
    if mt == "llama":
        assert cfg["attention_bias"] == cfg["attention_out_bias"]
        c["attention_bias"] = cfg["attention_bias"]
        c["mlp_bias"] = cfg.get("mlp_bias", False)
    elif mt == "mistral":
        assert cfg["max_window_layers"] == 0 and not cfg["attention_bias"]
        c["sliding_window"] = cfg.get("sliding_window") or None
    else:
        assert cfg["attention_bias"] and not cfg["attention_out_bias"]
        c["use_sliding_window"] = bool(cfg.get("sliding_window", 0))
        c["sliding_window"] = cfg.get("sliding_window") or 4096
        c["max_window_layers"] = cfg["max_window_layers"]
    os.makedirs(ckdir, exist_ok=True)
    with open(os.path.join(ckdir, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(ckdir, "model.safetensors"), P32)
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, stream.numel()
    with open(os.path.join(ckdir, "tokens.bin"), "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(stream.numpy().astype("<u2").tobytes())


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "fixtures")
    names = sys.argv[2:] or list(CONFIGS)
    os.makedirs(outdir, exist_ok=True)
    for name in names:
        write_fixture(outdir, name, CONFIGS[name])


if __name__ == "__main__":
    main()

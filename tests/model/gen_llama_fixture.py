#!/usr/bin/env python3
"""Reference fixtures for the Llama-family CPU ops (tests/model/test_llama_*.c).

A straightforward, independent PyTorch implementation of Hugging Face's LlamaForCausalLM,
MistralForCausalLM and Qwen2ForCausalLM math (RMSNorm, rotate_half RoPE with transformers'
rope scalings: linear, dynamic NTK, YaRN and Llama 3, causal GQA attention with Mistral/Qwen2's sliding window, SwiGLU MLP
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

Also writes rope_reference.txt: the inverse frequencies and cos/sin scale of each rope
scaling (transformers 5's formulas, in float64) for a table of settings, for
test_rope_scaling_matches_torch_reference.

Needs torch (Debian: python3-torch). Not run by the build; the outputs are committed.
Usage: gen_llama_fixture.py [OUTDIR [NAME...]]   (default: fixtures/ next to this script,
every config and rope_reference)
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
    # llama: linear rope scaling in the legacy form ("type", not "rope_type")
    "llama_rope_linear": dict(vocab_size=48, hidden_size=16, intermediate_size=32,
                              num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                              rope_theta=10000.0, attention_bias=False,
                              attention_out_bias=False, tie_word_embeddings=False,
                              rope_scaling=dict(type="linear", factor=4.0),
                              B=2, T=12, bf16_weights=False, ignored_targets=0, seed=888,
                              checkpoint=dict(model_type="llama")),
    # qwen2: YaRN in transformers 5's rope_parameters; head_dim 8 over a 4096-token context
    # puts the ramp at dimensions 1..3 (two kept, one blended, one interpolated); cos and
    # sin scaled by 0.1 ln 4 + 1
    "qwen2_rope_yarn": dict(vocab_size=48, hidden_size=16, intermediate_size=32,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=8, rms_norm_eps=1e-6, rope_theta=10000.0,
                            attention_bias=True, attention_out_bias=False,
                            tie_word_embeddings=True,
                            rope_scaling=dict(rope_type="yarn", factor=4.0,
                                              original_max_position_embeddings=4096),
                            rope_parameters=True,
                            B=2, T=12, bf16_weights=False, ignored_targets=0, seed=999,
                            checkpoint=dict(model_type="qwen2")),
    # llama: YaRN in the legacy form with every optional key and no
    # original_max_position_embeddings (the context is max_position_embeddings 4096): the
    # untruncated ramp runs from 1.61 to 2.51 (dimension 2 blended 0.43), cos and sin
    # scaled by (0.1 ln 8 + 1) / (0.05 ln 8 + 1)
    "llama_rope_yarn_keys": dict(vocab_size=48, hidden_size=16, intermediate_size=32,
                                 num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                                 rope_theta=10000.0, attention_bias=False,
                                 attention_out_bias=False, tie_word_embeddings=False,
                                 rope_scaling=dict(type="yarn", factor=8.0, beta_fast=16.0,
                                                   beta_slow=2.0, mscale=1.0,
                                                   mscale_all_dim=0.5, truncate=False),
                                 max_position_embeddings=4096,
                                 B=2, T=12, bf16_weights=False, ignored_targets=0, seed=1111,
                                 checkpoint=dict(model_type="llama")),
    # mistral: dynamic NTK with T = 12 beyond max_position_embeddings 8: theta grows to
    # 10000 (2 * 12 / 8 - 1)^(8 / 6)
    "mistral_rope_dynamic": dict(vocab_size=48, hidden_size=16, intermediate_size=32,
                                 num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                                 rope_theta=10000.0, attention_bias=False,
                                 attention_out_bias=False, tie_word_embeddings=False,
                                 rope_scaling=dict(rope_type="dynamic", factor=2.0),
                                 max_position_embeddings=8, sliding_window=0,
                                 max_window_layers=0,
                                 B=2, T=12, bf16_weights=False, ignored_targets=0, seed=1010,
                                 checkpoint=dict(model_type="mistral")),
}

# Settings for rope_reference.txt: (name, head_dim, T, rope_theta, max_position_embeddings,
# rope_scaling as config.json gives it)
ROPE_CASES = [
    ("default", 64, 16, 10000.0, 2048, None),
    ("linear", 64, 16, 10000.0, 2048, dict(rope_type="linear", factor=4.0)),
    ("dynamic_within", 64, 16, 10000.0, 32, dict(rope_type="dynamic", factor=2.0)),
    ("dynamic_beyond", 64, 40, 10000.0, 16, dict(rope_type="dynamic", factor=2.0)),
    ("yarn_qwen", 128, 16, 1000000.0, 32768,
     dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=32768)),
    ("yarn_no_original", 64, 16, 10000.0, 4096, dict(rope_type="yarn", factor=8.0)),
    ("yarn_untruncated", 64, 16, 10000.0, 4096,
     dict(rope_type="yarn", factor=8.0, truncate=False)),
    ("yarn_betas", 64, 16, 500000.0, 8192,
     dict(rope_type="yarn", factor=16.0, beta_fast=16.0, beta_slow=2.0,
          original_max_position_embeddings=8192)),
    ("yarn_equal_betas", 64, 16, 10000.0, 4096,
     dict(rope_type="yarn", factor=4.0, beta_fast=8.0, beta_slow=8.0, truncate=False)),
    ("yarn_mscale", 64, 16, 10000.0, 4096,
     dict(rope_type="yarn", factor=40.0, mscale=0.707, mscale_all_dim=1.0)),
    ("yarn_mscale_alone", 64, 16, 10000.0, 4096,
     dict(rope_type="yarn", factor=40.0, mscale=0.707)),
    ("yarn_attention_factor", 64, 16, 10000.0, 4096,
     dict(rope_type="yarn", factor=4.0, attention_factor=1.5)),
    ("yarn_shrink", 64, 16, 10000.0, 4096, dict(rope_type="yarn", factor=0.5)),
    # the ramp's clamps: low below 0 (context 128), high above hd - 1 (hd 16, theta 20,
    # context 2000: the ramp runs 6 .. 15, not 16), and both 0 after truncation (context 6:
    # the ramp's width is 0.001)
    ("yarn_low_clamp", 64, 16, 10000.0, 4096,
     dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=128)),
    ("yarn_high_clamp", 16, 16, 20.0, 4096,
     dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=2000)),
    ("yarn_tiny_context", 64, 16, 10000.0, 4096,
     dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=6)),
    ("llama3", 64, 16, 500000.0, 131072,
     dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
          original_max_position_embeddings=8192)),
]

DT = torch.float64


def rope_type_of(rs):
    if rs is None:
        return "default"
    return rs.get("rope_type", rs.get("type"))


def yarn_mscale(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def inv_freq_of(hd, theta, max_pos, rs, T):
    """transformers 5's inverse frequencies and cos/sin scale for rope_scaling rs."""
    kind = rope_type_of(rs)
    dims = torch.arange(0, hd, 2, dtype=torch.int64).to(DT) / hd
    if kind == "dynamic":
        # recomputed for the longest sequence seen: positions 0..T-1
        seq = max(T, max_pos)
        theta = theta * ((rs["factor"] * seq / max_pos) - (rs["factor"] - 1)) ** (hd / (hd - 2))
    inv = 1.0 / (theta ** dims)
    if kind in ("default", "dynamic"):
        return inv, 1.0
    if kind == "linear":
        return inv / rs["factor"], 1.0
    if kind == "yarn":
        factor = rs["factor"]
        context = rs.get("original_max_position_embeddings", max_pos)
        fast, slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1
        at = rs.get("attention_factor")
        if at is None:
            if rs.get("mscale") and rs.get("mscale_all_dim"):
                at = yarn_mscale(factor, rs["mscale"]) / yarn_mscale(factor, rs["mscale_all_dim"])
            else:
                at = yarn_mscale(factor)

        def dim_at(rotations):
            return hd * math.log(context / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        lo, hi = dim_at(fast), dim_at(slow)
        if rs.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, hd - 1)
        if lo == hi:
            hi += 0.001
        ramp = ((torch.arange(hd // 2, dtype=DT) - lo) / (hi - lo)).clamp(0, 1)
        return (inv / factor) * ramp + inv * (1 - ramp), at
    assert kind == "llama3", kind
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    lo_wavelen, hi_wavelen = old / lo, old / hi
    wavelen = 2 * math.pi / inv
    out = torch.where(wavelen > lo_wavelen, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = (wavelen >= hi_wavelen) & (wavelen <= lo_wavelen)
    return torch.where(medium, smoothed, out), 1.0


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward(cfg, P, tokens, targets):
    B, T = tokens.shape
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps = cfg["rms_norm_eps"]
    # fp32 angle products, as Hugging Face computes them, then cos/sin (times yarn's
    # attention factor)
    inv, scale = inv_freq_of(hd, cfg["rope_theta"], cfg.get("max_position_embeddings", 64),
                             cfg["rope_scaling"], T)
    inv = inv.to(torch.float32)
    ang = (torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]).to(DT)
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos() * scale, emb.sin() * scale  # (T, hd)

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


def rope_config_lines(rs, max_pos):
    """The runtime's rope fields (struct zinf_llama_config) for rope_scaling rs."""
    kind = rope_type_of(rs)
    lines = [f"config rope_type {kind}"]
    if kind == "default":
        return lines
    lines.append(f"config rope_factor {rs['factor']!r}")
    if kind == "llama3":
        lines.append(f"config rope_low_freq_factor {rs['low_freq_factor']!r}")
        lines.append(f"config rope_high_freq_factor {rs['high_freq_factor']!r}")
    if kind != "linear":
        context = max_pos if kind == "dynamic" else rs.get("original_max_position_embeddings",
                                                          max_pos)
        lines.append(f"config rope_original_max_position_embeddings {context}")
    if kind == "yarn":
        lines.append(f"config rope_beta_fast {float(rs.get('beta_fast') or 32)!r}")
        lines.append(f"config rope_beta_slow {float(rs.get('beta_slow') or 1)!r}")
        lines.append(f"config rope_attention_factor {float(rs.get('attention_factor', 0))!r}")
        lines.append(f"config rope_mscale {float(rs.get('mscale', 0))!r}")
        lines.append(f"config rope_mscale_all_dim {float(rs.get('mscale_all_dim', 0))!r}")
        lines.append(f"config rope_truncate {int(rs.get('truncate', True))}")
    return lines


def write_rope_reference(outdir):
    lines = ["# rope_reference: written by tests/model/gen_llama_fixture.py "
             f"(torch {torch.__version__})",
             "# case NAME head_dim T rope_theta, then the runtime's config lines, then",
             "# inv_freq (head_dim / 2 values) and scale (cos/sin factor); end closes a case"]
    for name, hd, T, theta, max_pos, rs in ROPE_CASES:
        inv, scale = inv_freq_of(hd, theta, max_pos, rs, T)
        lines.append(f"case {name} {hd} {T} {theta!r}")
        lines += rope_config_lines(rs, max_pos)
        lines.append("inv_freq " + " ".join(repr(float(v)) for v in inv.to(torch.float32)))
        lines.append(f"scale {float(torch.tensor(scale, dtype=torch.float32))!r}")
        lines.append("end")
    with open(os.path.join(outdir, "rope_reference.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"rope_reference: {len(ROPE_CASES)} cases")


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
    lines += rope_config_lines(rs, cfg.get("max_position_embeddings", 64))
    for tname, dtype, off, n, shape in table:
        lines.append(f"tensor {tname} {dtype} {off} {n} " + " ".join(str(d) for d in shape))
    with open(os.path.join(outdir, name + ".txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(outdir, name + ".bin"), "wb") as f:
        f.write(bytes(blob))
    print(f"{name}: loss {loss.item():.6f}, {len(blob)} bytes")
    if "checkpoint" in cfg:
        write_checkpoint(os.path.join(outdir, name), cfg, P32, stream)


def write_safetensors(path, P32, dtype="F32"):
    """The tensors as safetensors of dtype F32 or BF16 (bf16: rounded to nearest even)."""
    header, data = {}, bytearray()
    for n, t in P32.items():
        if dtype == "BF16":
            raw = t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
        else:
            raw = t.contiguous().numpy().astype("<f4").tobytes()
        header[n] = {"dtype": dtype, "shape": list(t.shape),
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
    v5 = cfg.get("rope_parameters", False)
    c = {"architectures": [arch], "model_type": mt, "hidden_act": "silu",
         "max_position_embeddings": cfg.get("max_position_embeddings", 64),
         "torch_dtype": "float32"}
    if v5:
        c["rope_parameters"] = dict(cfg["rope_scaling"], rope_theta=cfg["rope_theta"])
    else:
        c["rope_scaling"] = cfg["rope_scaling"]
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps",
              "rope_theta", "tie_word_embeddings"):
        if not (v5 and k == "rope_theta"):
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
        c["max_window_layers"] = cfg.get("max_window_layers", 0)
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
    names = sys.argv[2:] or list(CONFIGS) + ["rope_reference"]
    os.makedirs(outdir, exist_ok=True)
    for name in names:
        if name == "rope_reference":
            write_rope_reference(outdir)
        else:
            write_fixture(outdir, name, CONFIGS[name])


if __name__ == "__main__":
    main()

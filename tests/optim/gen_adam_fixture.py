#!/usr/bin/python3
"""Write the reference fixtures for test_adam_matches_torch_fixture.

Runs 10 steps of torch.optim.AdamW and torch.optim.Adam (CPU, fp32 master weights) on
small vectors, with fp32 grads and with bf16 grads (upcast exactly to fp32, as zinf
does), and stores inputs and expected results as little-endian binary files:

    magic "ZADAMFX1"; u32 n, steps, type (0 AdamW, 1 Adam), grad_dtype (1 fp32, 2 bf16);
    f64 lr, beta1, beta2, eps, weight_decay (the Python floats torch used);
    f32 param0[n]; grads[steps][n] (f32 or bf16 bits); f32 param[n], exp_avg[n],
    exp_avg_sq[n] after the last step; u16 bf16(param)[n].

The outputs are committed, so the test suite never needs torch. Regenerate with
    /usr/bin/python3 tests/optim/gen_adam_fixture.py tests/optim/fixtures
"""
import struct
import sys

import torch

N = 200
STEPS = 10

CASES = [
    # name, optimizer, grad dtype, lr, betas, eps, weight_decay
    ("adamw_fp32", "AdamW", torch.float32, 1e-2, (0.9, 0.999), 1e-8, 0.1),
    ("adam_fp32", "Adam", torch.float32, 1e-2, (0.9, 0.999), 1e-8, 0.1),
    ("adamw_bf16", "AdamW", torch.bfloat16, 3e-3, (0.8, 0.95), 1e-6, 0.01),
    ("adam_bf16", "Adam", torch.bfloat16, 3e-3, (0.8, 0.95), 1e-6, 0.05),
]


def bits16(t):
    return t.view(torch.int16).numpy().astype("<u2").tobytes()


def f32(t):
    return t.detach().numpy().astype("<f4").tobytes()


def make(name, opt_name, gdtype, lr, betas, eps, wd, seed):
    gen = torch.Generator().manual_seed(seed)
    p0 = torch.randn(N, generator=gen)
    # grads spanning many magnitudes, a few exact zeros
    mags = torch.pow(10.0, torch.randint(-6, 2, (STEPS, N), generator=gen).float())
    grads = torch.randn(STEPS, N, generator=gen) * mags
    grads[:, ::37] = 0.0
    grads = grads.to(gdtype)

    param = torch.nn.Parameter(p0.clone())
    cls = torch.optim.AdamW if opt_name == "AdamW" else torch.optim.Adam
    opt = cls([param], lr=lr, betas=betas, eps=eps, weight_decay=wd)
    for s in range(STEPS):
        param.grad = grads[s].float().clone()
        opt.step()
    state = opt.state[param]

    out = bytearray(b"ZADAMFX1")
    out += struct.pack("<4I", N, STEPS, 0 if opt_name == "AdamW" else 1,
                       1 if gdtype == torch.float32 else 2)
    out += struct.pack("<5d", lr, betas[0], betas[1], eps, wd)
    out += f32(p0)
    out += f32(grads) if gdtype == torch.float32 else bits16(grads)
    out += f32(param) + f32(state["exp_avg"]) + f32(state["exp_avg_sq"])
    out += bits16(param.detach().to(torch.bfloat16))
    return bytes(out)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "fixtures"
    for i, case in enumerate(CASES):
        data = make(*case, seed=1234 + i)
        with open(f"{outdir}/{case[0]}.bin", "wb") as f:
            f.write(data)
        print(f"{outdir}/{case[0]}.bin: {len(data)} bytes (torch {torch.__version__})")


if __name__ == "__main__":
    main()

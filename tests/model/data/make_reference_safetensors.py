#!/usr/bin/env python3
"""Write reference_small.safetensors with the Python standard library only (struct,
json): an independent writer for test_safetensors_reads_reference_file. The header is
json.dumps' default spacing, "__metadata__" comes last, the JSON order differs from the
data order, and there is no padding - all valid safetensors the reader must accept.
Run from this directory: python3 make_reference_safetensors.py"""
import json
import struct

f32 = [-1.5, 0.0, 0.25, 3.0e-8, 65504.0, -2.75]
f16 = [1.0, -0.333251953125, 2.0 ** -14]
bf16 = [1.0, -2.0, 0.15625, 3.140625]  # exact in bfloat16: the top half of their fp32 bits
scalar = [7.0]

blobs = {
    "w.bf16": ("BF16", [2, 2],
               b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", v))[0] >> 16)
                        for v in bf16)),
    "w.f32": ("F32", [2, 3], struct.pack("<6f", *f32)),
    "w.f16": ("F16", [3], struct.pack("<3e", *f16)),
    "scalar": ("F32", [], struct.pack("<f", *scalar)),
}
header, data = {}, b""
for name in ["w.bf16", "w.f32", "w.f16", "scalar"]:  # data order
    dtype, shape, raw = blobs[name]
    header[name] = {"dtype": dtype, "shape": shape,
                    "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
ordered = {k: header[k] for k in ["w.f32", "scalar", "w.f16", "w.bf16"]}  # JSON order
ordered["__metadata__"] = {"format": "pt", "source": "struct+json"}
text = json.dumps(ordered).encode()
with open("reference_small.safetensors", "wb") as out:
    out.write(struct.pack("<Q", len(text)) + text + data)

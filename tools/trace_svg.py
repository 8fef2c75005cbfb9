#!/usr/bin/env python3
"""Render a zinf timeline (Chrome trace-event JSON written by zinf.trace) as an SVG:
one row per track, one box per event, a time axis in milliseconds. Standard library only.

usage: tools/trace_svg.py TRACE.json OUT.svg [--from MS] [--to MS] [--title TEXT]
"""
import argparse
import json
import sys

COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#9c755f", "#76b7b2", "#edc948"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--from", dest="t0", type=float, default=None, help="window start, ms")
    ap.add_argument("--to", dest="t1", type=float, default=None, help="window end, ms")
    ap.add_argument("--title", default="zinf timeline")
    a = ap.parse_args()
    try:
        events = json.load(open(a.trace))["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"{a.trace}: not a Chrome trace ({e})")
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    boxes = [e for e in events if e.get("ph") == "X"]
    if not boxes:
        sys.exit(f"{a.trace}: no events")
    t0 = a.t0 if a.t0 is not None else min(e["ts"] for e in boxes) / 1000
    t1 = a.t1 if a.t1 is not None else max(e["ts"] + e["dur"] for e in boxes) / 1000
    tids = sorted(names)
    left, width, row, top = 130, 1000, 28, 40
    height = top + row * len(tids) + 40
    scale = width / max(t1 - t0, 1e-9)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 20}" height="{height}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{left}" y="20" font-size="14">{a.title}</text>']
    for i, tid in enumerate(tids):
        y = top + i * row
        out.append(f'<text x="5" y="{y + row * 0.65:.1f}">{names[tid]}</text>')
        out.append(f'<line x1="{left}" x2="{left + width}" y1="{y + row}" y2="{y + row}" stroke="#ddd"/>')
    for e in boxes:
        s, d = e["ts"] / 1000, e["dur"] / 1000
        if s + d < t0 or s > t1 or e["tid"] not in names:
            continue
        x = left + (max(s, t0) - t0) * scale
        w = max((min(s + d, t1) - max(s, t0)) * scale, 0.5)
        y = top + tids.index(e["tid"]) * row + 4
        color = COLORS[tids.index(e["tid"]) % len(COLORS)]
        out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row - 8}" fill="{color}">'
                   f'<title>{e["name"]} {d:.3f} ms</title></rect>')
    axis_y = top + row * len(tids) + 15
    for k in range(11):
        x = left + k * width / 10
        out.append(f'<text x="{x:.1f}" y="{axis_y}" text-anchor="middle">{t0 + k * (t1 - t0) / 10:.0f}</text>')
    out.append(f'<text x="{left + width}" y="{axis_y + 15}" text-anchor="end">ms</text></svg>')
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()

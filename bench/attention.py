"""Attention's time over a long context: one pass over every layer of a random F16 KV cache.

    PYTHONPATH=python python bench/attention.py [--depths 1000,3000] [--ns 1,8] [--isa avx2]

The shape defaults to Qwen2.5-Coder-1.5B's (12 query heads, 2 KV heads of 128, 28 layers), so a
cell is what a decode (n = 1) or a verify of n rows adds to the forward pass at that depth. The
cache is 56 MB per 1000 positions at that shape, far past the L3 at 3000: the kernels stream it
from memory as the model's do. Each cell gives the best and the median pass (ms) and the KV bytes
read per second of the median pass.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", default="1000,3000")
    ap.add_argument("--ns", default="1,8")
    ap.add_argument("--heads", default="12,2,128", help="query heads, KV heads, head size")
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--isa", default=None, help="run with QD_FORCE_ISA=ISA (default: the dispatched ISA)")
    a = ap.parse_args()
    if a.isa and os.environ.get("QD_FORCE_ISA") != a.isa:  # the ISA is chosen once per process
        sys.exit(subprocess.call([sys.executable, *sys.argv], env={**os.environ, "QD_FORCE_ISA": a.isa}))
    from quickdraft import _core

    n_head, n_kv, hd = (int(v) for v in a.heads.split(","))
    print(f"isa {_core.current_isa()}, {n_head} query heads, {n_kv} KV heads of {hd}, {a.layers} layers, "
          f"{a.threads} threads, best and median of {a.iters}")
    print(f"{'depth':>6} {'n':>3} {'best ms':>8} {'med ms':>8} {'KV GB/s':>8}")
    for depth in (int(v) for v in a.depths.split(",")):
        for n in (int(v) for v in a.ns.split(",")):
            secs = _core._testing.kernels.bench_attention(depth, n, n_head, n_kv, hd, a.layers, a.threads, a.iters)
            med = float(np.median(secs))
            kv_bytes = 2 * a.layers * n_kv * (depth + n) * hd * 2
            print(f"{depth:6d} {n:3d} {min(secs) * 1e3:8.2f} {med * 1e3:8.2f} {kv_bytes / med / 1e9:8.1f}")


if __name__ == "__main__":
    main()

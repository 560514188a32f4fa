"""Matmul kernel speed: ms and weight GB/s per type, batch size n and thread count.

    PYTHONPATH=python python bench/kernels.py [--rows 8960 --cols 1536] [--isa avx2] [--types Q4_K,Q6_K]

The matrix defaults to the shape of Qwen2.5-Coder-1.5B's ffn_up (8960 x 1536). GB/s counts the
weight bytes read once per call; ratio = time(n) / time(1), the cost of verifying n-1 drafted
tokens relative to one decode step (the skinny GEMM target is ratio(8) <= 2).

Each cell gives the best call's ms and GB/s, then the median call's GB/s ("med"): the best says
what the kernel can do, the median what a forward can expect on a shared machine (on a 2-core
Zen 4 VM the median of a 75 MB Q4_K stream read 31.8-36.5 GB/s on two threads against a best of
46). Ratios are of the best calls.
"""

from __future__ import annotations

import argparse

import gguf
import numpy as np

from quickdraft import _core

from machine import cpu_model

T = gguf.GGMLQuantizationType
HALF_FIELDS = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.IQ4_NL: [0], T.Q2_K: [80, 82],
               T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208], T.IQ4_XS: [0]}


def random_weight(t, rows: int, cols: int, rng) -> np.ndarray:
    if t == T.F16:
        return rng.standard_normal((rows, cols)).astype(np.float16).view(np.uint8)
    block, size = gguf.GGML_QUANT_SIZES[t]
    nb = rows * cols // block
    raw = rng.integers(0, 256, (nb, size), dtype=np.uint8)
    for off in HALF_FIELDS[t]:
        raw[:, off:off + 2] = (rng.uniform(0.5, 1.5, nb) / 128).astype(np.float16).view(np.uint8).reshape(nb, 2)
    return raw.reshape(rows, -1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8960)
    ap.add_argument("--cols", type=int, default=1536)
    ap.add_argument("--types", default="Q4_0,Q4_1,Q5_0,Q8_0,Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,IQ4_XS,F16")
    ap.add_argument("--ns", default="1,2,4,8,16")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--isa", default=None, help="default: the dispatched ISA (%s)" % _core.current_isa())
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    ns = [int(v) for v in a.ns.split(",")]
    rng = np.random.default_rng(0)
    isa = a.isa or _core.current_isa()
    print(f"CPU {cpu_model()}; isa {isa}, matrix {a.rows} x {a.cols}, best and median of {a.iters}")
    print(f"{'type':6} {'thr':>3} {'MB':>6} " + " ".join(f"{'n=' + str(n) + ' ms':>10} {'GB/s':>5} {'med':>5}" for n in ns)
          + "  " + " ".join(f"{'r' + str(n):>5}" for n in ns if n > 1))
    for name in a.types.split(","):
        t = T[name]
        w = random_weight(t, a.rows, a.cols, rng)
        for threads in [int(v) for v in a.threads.split(",")]:
            runs = [_core._testing.kernels.bench_matmul(w, int(t), a.rows, a.cols, n, threads, a.iters, isa) for n in ns]
            secs = [min(r) for r in runs]
            cells = " ".join(f"{s * 1e3:10.3f} {w.nbytes / s / 1e9:5.1f} {w.nbytes / float(np.median(r)) / 1e9:5.1f}"
                             for s, r in zip(secs, runs))
            ratios = " ".join(f"{s / secs[0]:5.2f}" for n, s in zip(ns, secs) if n > 1)
            print(f"{name:6} {threads:3d} {w.nbytes / 1e6:6.1f} {cells}  {ratios}")


if __name__ == "__main__":
    main()

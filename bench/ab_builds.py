"""Two builds of quickdraft timed in turns: the forward of n tokens, paired.

    cp -r python/quickdraft /tmp/a/                    # build A (say, main) ...
    ./dev-build.sh && cp -r python/quickdraft /tmp/b/  # ... and build B, each a package folder's parent
    QD_FORCE_ISA=avx2 python bench/ab_builds.py /tmp/a /tmp/b --ns 1,2,4,8 --reps 20
    python bench/slice_model.py && QD_FORCE_ISA=avx2 python bench/ab_builds.py /tmp/a /tmp/b \
        --model bench/out/qwen2.5-coder-1.5b-slice.gguf --repeat 20 --reps 40   # bound by the cores

Each build runs in a worker process of its own (two builds of the extension cannot share one
process), with the model loaded and a 64-token context evaluated. The driver then asks the two in
turns, order alternating, for one forward of n tokens after that context, and pairs each of B's
timings with A's next to it. A shared machine's memory changes speed within seconds (this
project's VM: 35 or 65 GB/s), which moves single timings by 30 % or more; a pair shares its
phase, so the median of the paired ratios resolves differences of 1-2 % that separate runs
cannot (an A/A run reads 0.99-1.01). Prints per n: each build's median and best, in ms, and the
median ratio B / A with its quartiles; where the run saw both memory phases, the same for the
pairs of each phase apart (by_phase).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import quickdraft
from quickdraft import models
m = quickdraft.Model(models.resolve(sys.argv[2]), n_ctx=1024, threads=int(sys.argv[3]))
ids = [int(x) for x in np.random.default_rng(0).integers(100, min(m.n_vocab, 30000), 700)]
m.eval_last(ids[:64])
print("ready", flush=True)
repeat = int(sys.argv[4])
for line in sys.stdin:
    n = int(line)
    t = 0.0
    for _ in range(repeat):
        m.truncate(64)
        t0 = time.perf_counter()
        m.eval(ids[64:64 + n])
        t += time.perf_counter() - t0
    print(t / repeat, flush=True)
"""


def quartiles(v: list[float]) -> tuple[float, float, float]:
    s = sorted(v)
    return s[len(s) // 4], s[len(s) // 2], s[3 * len(s) // 4]


def by_phase(a: list[float], b: list[float]) -> list[tuple[str, list[tuple[float, float]]]]:
    """The pairs split by the memory's phase, where the run saw two: a kernel that is faster only
    while the memory is fast (bound by the cores there, by memory in the slow phase) shows in the
    fast pairs alone. A pair's phase is its geometric mean time against the geometric midpoint of
    the 10th and 90th percentiles; one phase (those within 1.2x) gives no split."""
    t = sorted((x * y) ** 0.5 for x, y in zip(a, b))
    lo, hi = t[len(t) // 10], t[(9 * len(t)) // 10]
    if len(t) < 8 or hi < 1.2 * lo:
        return []
    mid = (lo * hi) ** 0.5
    fast = [(x, y) for x, y in zip(a, b) if (x * y) ** 0.5 < mid]
    slow = [(x, y) for x, y in zip(a, b) if (x * y) ** 0.5 >= mid]
    return [(name, pairs) for name, pairs in (("fast", fast), ("slow", slow)) if len(pairs) >= 4]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="folder holding build A's quickdraft package")
    ap.add_argument("b", help="folder holding build B's quickdraft package")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--ns", default="1,2,4,8", help="rows per forward")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1,
                    help="forwards per timing (their mean): a slice model's forward (bench/slice_model.py) takes "
                         "under a millisecond, where a single one times the thread pool's wake-ups more than the "
                         "kernels")
    ap.add_argument("--env-a", default="", help="KEY=VALUE,... set for build A's worker alone (a setting read from "
                                                 "the environment, timed against another with one build for both)")
    ap.add_argument("--env-b", default="", help="the same for build B")
    args = ap.parse_args()
    for folder in (args.a, args.b):
        if not (Path(folder) / "quickdraft").is_dir():
            sys.exit(f"ab_builds: no quickdraft package in {folder}")
    def env(pairs: str) -> dict:
        extra = dict(kv.split("=", 1) for kv in pairs.split(",") if kv)
        return {**os.environ, **extra}

    # One worker loads at a time: two loads side by side contend for the cores, and a pool that met
    # contention leaves a thread out for a second or more after it ends (ContentionGovernor), so a
    # worker could time its first forwards on fewer threads than the other.
    procs = {}
    try:
        for k, folder, extra in (("A", args.a, args.env_a), ("B", args.b, args.env_b)):
            procs[k] = subprocess.Popen([sys.executable, "-c", WORKER, folder, args.model, str(args.threads),
                                         str(args.repeat)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=env(extra))
            if procs[k].stdout.readline().strip() != "ready":
                sys.exit(f"ab_builds: worker {k} failed to start")
        ns = [int(v) for v in args.ns.split(",")]
        times = {(k, n): [] for k in procs for n in ns}
        for rep in range(args.reps):
            for n in ns:
                for k in (("A", "B") if (rep + n) % 2 == 0 else ("B", "A")):
                    procs[k].stdin.write(f"{n}\n")
                    procs[k].stdin.flush()
                    times[(k, n)].append(float(procs[k].stdout.readline()))
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait()
    print(f"{args.model}, {args.threads} threads, {args.reps} pairs per n; ms")
    print(f"{'n':>3} {'A median':>9} {'A best':>7} {'B median':>9} {'B best':>7} {'B / A':>6}  quartiles")
    for n in ns:
        a, b = times[("A", n)], times[("B", n)]
        q1, med, q3 = quartiles([y / x for x, y in zip(a, b)])
        print(f"{n:3d} {1e3 * quartiles(a)[1]:9.2f} {1e3 * min(a):7.2f} {1e3 * quartiles(b)[1]:9.2f} {1e3 * min(b):7.2f} "
              f"{med:6.3f}  {q1:.3f}-{q3:.3f}")
        for phase, pairs in by_phase(a, b):
            q1, med, q3 = quartiles([y / x for x, y in pairs])
            print(f"    {phase}: {len(pairs)} pairs at {1e3 * quartiles([x for x, _ in pairs])[1]:.2f} ms (A), "
                  f"B / A {med:.3f}  {q1:.3f}-{q3:.3f}")


if __name__ == "__main__":
    main()

"""Decoding while another process keeps CPUs busy: ours and llama.cpp, side by side.

    QD_FORCE_ISA=avx2 python bench/contention.py --isa avx2          # the 1.5B, 1 and 2 threads, 0 and 1 busy loops
    python bench/contention.py --model qwen2.5-coder-0.5b --busy 0,1,2 --reps 3
    QD_FORCE_ISA=avx2 python bench/contention.py --busy 0 --threads 2 --draft none --reps 1 --recovery 8

A laptop's CPUs are rarely all free: a build, a browser tab, an indexer. Each "busy" process is a
shell loop that never sleeps, pinned to no CPU, as such a process would be. For every count of
busy loops and every thread count, this prints ours (plain decoding, 64 tokens, and speculative
decoding with --draft on a code prompt, 128 tokens) and llama.cpp's llama-bench tg64 on the same
GGUF file, each the median of --reps runs, with the ratio ours / llama.cpp. A busy loop is
started before each setting's runs and killed after them. The pool's governor
(cpp/src/common/contention.h) leaves a thread out of the parallel regions while the workers lose
time to preemption; this benchmark is where that shows.

--recovery S: then our plain decoding on all --threads' largest count, in generations of 16
tokens, beside one busy loop for S seconds and on after its end; prints tok/s in half-second
slices from 2 s before the end to 3 s after, against the same engine's quiet speed: how soon the
pool takes its threads back (the governor's timed probes are up to 16 s apart after a long
contention; where the system reports idle CPUs it tries again within a fraction of a second).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
import quickdraft  # noqa: E402
from quickdraft import models  # noqa: E402

sys.path.insert(0, str(HERE))
import machine  # noqa: E402
import peer  # noqa: E402

CODE = ("<|im_start|>user\nWrite a Python function that parses an ISO 8601 date string and returns a "
        "datetime. Code only.<|im_end|>\n<|im_start|>assistant\n")


def busy_loops(n: int) -> list[subprocess.Popen]:
    procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]
    time.sleep(0.3)
    return procs


def ours(engine: quickdraft.Engine, prompt: str, n: int) -> float:
    t0 = time.perf_counter()
    c = engine.generate(prompt, max_tokens=n, temperature=0)
    return len(c.tokens) / (time.perf_counter() - t0)


def recovery(engine: quickdraft.Engine, busy_seconds: float, after: float = 3.0) -> list[tuple[float, float]]:
    """(seconds since the busy loop ended, tok/s) of each 16-token generation, from busy_seconds
    before its end to `after` seconds after."""
    out = []
    procs = busy_loops(1)
    end = time.perf_counter() + busy_seconds
    try:
        while time.perf_counter() < end + after:
            if procs and time.perf_counter() >= end:
                for p in procs:
                    p.kill()
                    p.wait()
                procs = []
            tok_s = ours(engine, "def quicksort(a):", 16)
            out.append((time.perf_counter() - end, tok_s))
    finally:
        for p in procs:
            p.kill()
    return out


def llama(bin_dir: Path, path: Path, threads: int) -> float:
    out = subprocess.run([str(bin_dir / "llama-bench"), "-m", str(path), "-t", str(threads), "-p", "0", "-n", "64",
                          "-r", "1", "-o", "json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0]["avg_ts"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft", default="qwen2.5-coder-0.5b", help="draft model for the speculative column; none: skip")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--busy", default="0,1", help="counts of busy loops beside the runs")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--isa", default=None, help="llama.cpp build: avx2 for the AVX2-only peer (pair with QD_FORCE_ISA)")
    ap.add_argument("--recovery", type=float, default=0.0,
                    help="seconds of one busy loop before the recovery trace (0: no trace)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    threads = [int(t) for t in args.threads.split(",")]
    busy = [int(b) for b in args.busy.split(",")]
    path = models.resolve(args.model)
    bin_dir = peer.ensure(args.isa)
    plain = {t: quickdraft.Engine(path, draft="none", threads=t) for t in threads}
    spec = {}
    if args.draft != "none":
        spec = {t: quickdraft.Engine(path, draft=models.resolve(args.draft), threads=t) for t in threads}
    for e in list(plain.values()) + list(spec.values()):
        e.generate(CODE, max_tokens=8, temperature=0)  # page in, start the pools

    rows = []
    for b in busy:
        procs = busy_loops(b)
        try:
            for t in threads:
                res = {"plain": [], "spec": [], "llama": []}
                for _ in range(args.reps):
                    res["plain"].append(ours(plain[t], "def quicksort(a):", 64))
                    if spec:
                        res["spec"].append(ours(spec[t], CODE, 128))
                    res["llama"].append(llama(bin_dir, path, t))
                row = {"busy": b, "threads": t, **{k: statistics.median(v) if v else None for k, v in res.items()}}
                rows.append(row)
                print(f"busy {b} threads {t}: " + ", ".join(f"{k} {[round(x, 1) for x in v]}" for k, v in res.items()),
                      flush=True)
        finally:
            for p in procs:
                p.kill()

    print(f"CPU {machine.cpu_model()}; ISA {quickdraft.current_isa()}; read bandwidth "
          f"{machine.read_bandwidth(2):.1f} GB/s (2 threads, after the runs); {args.model}, "
          f"{'draft ' + args.draft if spec else 'no draft'}, median of {args.reps}; llama.cpp tg64, {args.isa or 'native'} build")
    print(f"{'busy':>4} {'thr':>3} {'ours plain':>10} {'llama.cpp':>9} {'ratio':>6} {'ours spec':>9} {'spec / llama':>12}")
    for r in rows:
        spec_cell = f"{r['spec']:9.1f} {r['spec'] / r['llama']:11.2f}x" if r["spec"] else ""
        print(f"{r['busy']:>4} {r['threads']:>3} {r['plain']:10.1f} {r['llama']:9.1f} {r['plain'] / r['llama']:5.2f}x "
              + spec_cell)
    trace = []
    if args.recovery > 0:
        t = max(threads)
        quiet = statistics.median(ours(plain[t], "def quicksort(a):", 16) for _ in range(5))
        trace = recovery(plain[t], args.recovery)
        print(f"\nrecovery, {t} threads, plain, 16-token generations: quiet {quiet:.1f} tok/s; one busy loop for "
              f"{args.recovery:g} s, then none")
        print(f"{'from':>5} {'to':>5} {'tok/s':>6} {'/ quiet':>7}  (seconds from the busy loop's end)")
        for lo in [x / 2 for x in range(-4, 6)]:
            cell = [v for s, v in trace if lo <= s < lo + 0.5]
            if cell:
                m = statistics.median(cell)
                print(f"{lo:5.1f} {lo + 0.5:5.1f} {m:6.1f} {m / quiet:6.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": machine.cpu_model(), "isa": quickdraft.current_isa(),
                                               "model": args.model, "rows": rows, "recovery": trace}, indent=1))


if __name__ == "__main__":
    main()

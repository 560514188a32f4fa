"""The cost of returning a hybrid recurrent model (qwen35) to the accepted prefix of a verify
batch, snapshot against recompute, per batch size, at the Qwen3.5-0.8B shape; and its decode and
verify timings against llama.cpp's on the same file.

    python bench/qwen35_rollback.py [--model q35.gguf] [--threads 1] [--rows 1,2,4,8,12,17] [--llama]

The model is synthetic (tests/fixtures/tiny_models.py, seeded random Q8_0 weights) at the shape of
Qwen3.5-0.8B as llama.cpp reads it: n_embd 1024, 24 layers of which every 4th is gated attention
(8 query heads and 2 KV heads of 256, 64 rotated dims, M-RoPE sections 11/11/10), the others
Gated DeltaNet (16 k and 16 v heads of 128, conv kernel 4), FFN 3584, vocabulary 248320 (tied), and
one MTP block. Real weights are not reachable here; the timings depend on the shape only.
--model keeps the file (written once, ~0.8 GB) for later runs.

For each batch size n (a verify of n - 1 drafts) and each rollback mode, after a 32-token prefix:
  verify    one eval of n rows (snapshot mode writes each row's state to its own slot)
  keep 1    truncate to the first row (every draft rejected): snapshot picks a slot; recompute
            replays 1 row of the recurrence from the state saved before the eval
  keep n-1  truncate to all but the last row: recompute replays n - 1 rows
Best of --reps runs each (the machine may be shared). --llama also runs llama-bench (bench/peer.py)
on the same file: tg (decode, t/s) and pp of the same n rows (t/s), at the same thread count.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "python"))
import quickdraft  # noqa: E402
from fixtures.tiny_models import TinySpec, write_tiny_model  # noqa: E402

SHAPE_08B = dict(arch="qwen35", n_vocab=248320, n_embd=1024, n_layer=24, n_head=8, n_head_kv=2, head_dim=256,
                 n_rot=64, n_ff=3584, ssm_d_conv=4, ssm_d_state=128, ssm_n_k_heads=16, ssm_n_v_heads=16,
                 full_attention_interval=4, rope_sections=(11, 11, 10, 0), n_mtp=1, rope_base=1e7,
                 n_ctx_train=262144, wtype="Q8_0", seed=8, llamacpp_vocab=True)


def best(fn, reps):
    times = []
    for _ in range(reps):
        times.append(fn())
    return 1e3 * min(times)


def rollback_row(m, n: int, reps: int) -> dict:
    rng = np.random.default_rng(n)
    prefix = rng.integers(0, 4096, 32)
    rows = rng.integers(0, 4096, n)
    out = {}

    def verify():
        m.reset()
        m.eval(prefix)
        t = time.perf_counter()
        m.eval(rows)
        return time.perf_counter() - t

    def keep(k):
        def run():
            m.reset()
            m.eval(prefix)
            m.eval(rows)
            t = time.perf_counter()
            m.truncate(32 + k)
            return time.perf_counter() - t
        return run

    out["verify"] = best(verify, reps)
    out["keep1"] = best(keep(1), reps)
    out["keep_n-1"] = best(keep(max(1, n - 1)), reps)
    return out


def llama_bench(path: Path, rows: list[int], threads: int) -> dict:
    sys.path.insert(0, str(ROOT / "bench"))
    import peer

    exe = peer.ensure("avx2") / "llama-bench"  # the AVX2-only build of the peer
    cmd = [str(exe), "-m", str(path), "-t", str(threads), "-n", "32", "-p", ",".join(map(str, rows)), "-r", "3", "-o", "json"]
    res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    out = {}
    for r in res:
        key = "tg" if r["n_gen"] else f"pp{r['n_prompt']}"
        out[key] = r["avg_ts"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="the 0.8B-shape file to use, written there when absent")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", default="1,2,3,4,5,6,7,8,9,12,17")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--llama", action="store_true", help="also run llama-bench on the same file")
    args = ap.parse_args()
    rows = [int(x) for x in args.rows.split(",")]
    tmp = None
    path = args.model
    if path is None:
        tmp = tempfile.TemporaryDirectory()
        path = Path(tmp.name) / "qwen35-0.8b-shape.gguf"
    if not path.exists():
        t = time.perf_counter()
        write_tiny_model(path, TinySpec(**SHAPE_08B))
        print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.0f} s", file=sys.stderr)

    res = {}
    for mode in ("snapshot", "recompute"):
        m = quickdraft.Model(path, n_ctx=128, threads=args.threads)
        m.set_rollback(mode, 17)
        mib = m.recurrent_state_bytes / 2**20
        res[mode] = {n: rollback_row(m, n, args.reps) for n in rows}
        res[mode]["mib"] = mib
        del m
    print(f"Qwen3.5-0.8B shape, Q8_0, {args.threads} thread(s), ISA {quickdraft.current_isa()}; ms, best of {args.reps}")
    print(f"recurrent state + rollback memory: snapshot {res['snapshot']['mib']:.0f} MiB, "
          f"recompute {res['recompute']['mib']:.0f} MiB (window 17)")
    print(f"{'rows':>4} | {'snapshot verify':>15} {'keep 1':>7} {'keep n-1':>8} | {'recompute verify':>16} {'keep 1':>7} {'keep n-1':>8}")
    for n in rows:
        s, r = res["snapshot"][n], res["recompute"][n]
        print(f"{n:>4} | {s['verify']:>15.1f} {s['keep1']:>7.2f} {s['keep_n-1']:>8.2f} | "
              f"{r['verify']:>16.1f} {r['keep1']:>7.2f} {r['keep_n-1']:>8.2f}")

    # Decode: one row after the prefix, tokens/s, to set beside llama-bench's tg.
    m = quickdraft.Model(path, n_ctx=128, threads=args.threads)
    dec = res["snapshot"][1]["verify"] if 1 in rows else rollback_row(m, 1, args.reps)["verify"]
    print(f"\nours: decode {1e3 / dec:.1f} t/s; verify (snapshot) " +
          ", ".join(f"{n} rows {n * 1e3 / res['snapshot'][n]['verify']:.1f} t/s" for n in rows if n > 1))
    if args.llama:
        lb = llama_bench(path, [n for n in rows if n > 1], args.threads)
        print("llama.cpp (llama-bench): tg32 {:.1f} t/s; ".format(lb.get("tg", float("nan"))) +
              ", ".join(f"pp{n} {lb[f'pp{n}']:.1f} t/s" for n in rows if n > 1 and f"pp{n}" in lb))
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()

"""Decode and prompt throughput of quickdraft's forward pass on the real models.

    python bench/decode.py                       # every cached model, 1 and 2 threads
    python bench/decode.py --models qwen2.5-coder-0.5b --threads 2 --decode 64 --prompt 256

decode tok/s: one token per eval call (the plain decoding loop), after a 16-token prompt.
prompt tok/s: one eval call over `--prompt` tokens, logits of the last position only.
Each figure is the best of `--repeat` runs. The llama.cpp column is llama-bench's tg128 / pp512
measured on this machine and recorded in ../shared/PEERS.md (2 threads; tg also at 1 thread),
not re-run here.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import quickdraft  # noqa: E402
from quickdraft import models  # noqa: E402

# (threads) -> (prompt tok/s, decode tok/s) from ../shared/PEERS.md; None where not measured.
LLAMA_CPP = {
    "smollm2-135m": {1: (None, 143.0), 2: (451.0, 143.0)},
    "qwen2.5-coder-0.5b": {1: (None, 46.0), 2: (315.0, 58.1)},
    "qwen2.5-coder-1.5b": {1: (None, 25.8), 2: (167.0, 33.9)},
}


def bench(key: str, threads: int, n_decode: int, n_prompt: int, repeat: int) -> tuple[float, float]:
    m = quickdraft.Model(models.cached_path(key), n_ctx=max(n_prompt, 16 + n_decode) + 1, threads=threads)
    rng = np.random.default_rng(0)
    ids = rng.integers(100, min(m.n_vocab, 30000), max(n_prompt, 16 + n_decode))
    m.eval_last(ids[:4])  # warm-up: page the weights in, start the pool
    best_prompt = best_decode = 0.0
    for _ in range(repeat):
        m.reset()
        t = time.perf_counter()
        m.eval_last(ids[:n_prompt])
        best_prompt = max(best_prompt, n_prompt / (time.perf_counter() - t))
        m.reset()
        m.eval_last(ids[:16])
        t = time.perf_counter()
        for i in range(16, 16 + n_decode):
            m.eval_last(ids[i:i + 1])
        best_decode = max(best_decode, n_decode / (time.perf_counter() - t))
    return best_prompt, best_decode


def fmt(x) -> str:
    return f"{x:8.1f}" if x else "       -"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="*", default=list(models.KNOWN_MODELS))
    ap.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--decode", type=int, default=32, help="tokens decoded one at a time")
    ap.add_argument("--prompt", type=int, default=128, help="tokens in the prompt-processing call")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    print(f"{'model':22} {'thr':>3} | {'prompt t/s':>10} {'llama.cpp':>9} | {'decode t/s':>10} {'llama.cpp':>9} {'ratio':>6}")
    for key in a.models:
        if not models.is_cached(key):
            print(f"{key:22} not cached; run: quickdraft fetch {key}")
            continue
        for th in a.threads:
            pp, tg = bench(key, th, a.decode, a.prompt, a.repeat)
            ref_pp, ref_tg = LLAMA_CPP.get(key, {}).get(th, (None, None))
            ratio = f"{tg / ref_tg:6.2f}" if ref_tg else "     -"
            print(f"{key:22} {th:3d} | {pp:10.1f} {fmt(ref_pp):>9} | {tg:10.1f} {fmt(ref_tg):>9} {ratio}", flush=True)


if __name__ == "__main__":
    main()

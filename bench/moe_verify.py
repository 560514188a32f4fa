"""How the verify step's cost grows with its rows on a mixture-of-experts model, against a dense
model with the same active weights per token.

    python bench/moe_verify.py [--experts 32 --used 4 --threads 2]

Builds two synthetic Q8_0 models with tests/fixtures/tiny_models.py (qwen3moe: `experts` experts
of n_ff_exp 512, `used` per token; qwen3: a dense n_ff of used x 512), then times one eval of n
rows after a 32-token prefix (the verify step of n - 1 drafted tokens), best of 9, and prints
verify(n) in ms, its ratio to verify(1), and how many experts per layer the batch read. A dense
verify reads every weight once whatever n; an MoE verify reads each chosen expert once for all
rows routed to it, so its cost follows the number of distinct experts the n rows choose.
"""

from __future__ import annotations

import argparse
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


def verify_ms(path: Path, n: int, threads: int, reps: int = 9) -> float:
    m = quickdraft.Model(path, n_ctx=128, threads=threads)
    rng = np.random.default_rng(n)
    prefix = rng.integers(0, 4096, 32)
    times = []
    for _ in range(reps):
        m.reset()
        m.eval(prefix)
        ids = rng.integers(0, 4096, n)
        t = time.perf_counter()
        m.eval(ids)
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.min(times))  # the least disturbed run: the machine may be shared


def experts_read(path: Path, n: int, n_layer: int) -> float:
    m = quickdraft.Model(path, n_ctx=128, threads=1)
    _, items = m._ctx.trace_eval(np.random.default_rng(n).integers(0, 4096, n))
    return sum(1 for name, _, _ in items if name == "ffn_moe_gate") / n_layer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--used", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    common = dict(n_vocab=4096, n_embd=1024, n_head=8, n_head_kv=2, head_dim=128, n_layer=4, wtype="Q8_0", seed=3)
    with tempfile.TemporaryDirectory() as d:
        moe = write_tiny_model(Path(d) / "moe.gguf", TinySpec(arch="qwen3moe", n_ff=args.used * 512, n_expert=args.experts,
                                                              n_expert_used=args.used, n_ff_exp=512, **common))
        dense = write_tiny_model(Path(d) / "dense.gguf", TinySpec(arch="qwen3", n_ff=args.used * 512, **common))
        print(f"isa {quickdraft._core.current_isa()}, {args.threads} threads; MoE {args.experts} experts, "
              f"{args.used} per token, n_ff_exp 512; dense n_ff {args.used * 512}")
        print(f"{'n':>3} {'dense ms':>9} {'x n=1':>6} {'MoE ms':>8} {'x n=1':>6} {'experts read / layer':>21}")
        base = {}
        for n in (1, 2, 4, 8, 16):
            td, tm = verify_ms(dense, n, args.threads), verify_ms(moe, n, args.threads)
            base.setdefault("d", td)
            base.setdefault("m", tm)
            print(f"{n:3d} {td:9.2f} {td / base['d']:6.2f} {tm:8.2f} {tm / base['m']:6.2f} "
                  f"{experts_read(moe, n, 4):21.1f}")


if __name__ == "__main__":
    main()

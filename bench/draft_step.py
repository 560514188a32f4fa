"""What one draft step costs next to one target step, per draft lever: a single-token forward
pass of the draft model (requantized or not, layers skipped or not, a draft head of some size)
and of the target, timed in turns so load changes on a shared machine hit each alike.

    QD_FORCE_ISA=avx2 python bench/draft_step.py
    QD_FORCE_ISA=avx2 python bench/draft_step.py --quant none,q4_0 --head 8192,16384,32768,0 --skip ';12'

Prints per configuration the median ms of a step at a context of --pos tokens, the ratio to
the target's step (the c_d / c_v that the draft length trades against acceptance), and how often
its top-1 token is the target's over the positions of a code text (teacher-forced).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from quickdraft import _core  # noqa: E402
from quickdraft.models import resolve  # noqa: E402

TEXT = ("def merge_sort(items: list[int]) -> list[int]:\n    \"\"\"Sort a list with merge sort.\"\"\"\n"
        "    if len(items) <= 1:\n        return items\n    mid = len(items) // 2\n"
        "    left = merge_sort(items[:mid])\n    right = merge_sort(items[mid:])\n")
STOP_IDS = [151643, 151645]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="qwen2.5-coder-1.5b")
    p.add_argument("--draft", default="qwen2.5-coder-0.5b")
    p.add_argument("--quant", default="none,q4_0")
    p.add_argument("--head", default="32768", help="draft head sizes (0: the full output layer)")
    p.add_argument("--skip", default="", help="';'-separated layer sets the draft skips")
    p.add_argument("--threads", type=int, default=1,
                   help="threads per context (every configuration has its own context and pool: with more "
                        "than one, idle pools' workers compete with the one being timed)")
    p.add_argument("--pos", type=int, default=128, help="context length at which a step is timed")
    p.add_argument("--reps", type=int, default=15)
    args = p.parse_args(argv)

    tok = _core.Tokenizer(str(resolve(args.target))) if hasattr(_core, "Tokenizer") else None
    text_ids = list(tok.encode(TEXT, False, False)) if tok else list(range(100, 160))
    prefix = (text_ids * (args.pos // len(text_ids) + 1))[: args.pos]

    target = _core.LoadedModel(str(resolve(args.target)))
    models = {q: _core.LoadedModel(str(resolve(args.draft)), requantize="" if q == "none" else q)
              for q in args.quant.split(",")}
    configs = {"target": _core.Context(target, args.pos + args.reps + 8, args.threads)}
    for q, m in models.items():
        for h in [int(x) for x in args.head.split(",")]:
            for sk in args.skip.split(";"):
                layers = [int(i) for i in sk.split(",") if i]
                c = _core.Context(m, args.pos + args.reps + 8, args.threads)
                c.set_head_subset(h, STOP_IDS)
                c.skip_layers = layers
                configs[f"draft {q} head {h or 'all'}" + (f" skip {sk}" if layers else "")] = c

    # Agreement with the target: the same top-1 at every position of the text (teacher-forced,
    # a proxy for greedy acceptance).
    want = np.argmax(configs["target"].eval(text_ids), axis=1)
    configs["target"].reset()
    agree = {}
    for name, c in configs.items():
        if name == "target":
            continue
        agree[name] = float(np.mean(np.argmax(c.eval(text_ids), axis=1) == want))
        c.reset()

    times = {name: [] for name in configs}
    for c in configs.values():
        c.feed(prefix)
    for i in range(args.reps):
        for name, c in configs.items():
            t = time.perf_counter()
            c.eval([text_ids[i % len(text_ids)]], last_only=True)
            times[name].append(time.perf_counter() - t)
    t_target = statistics.median(times["target"])
    print(f"ISA {_core.current_isa()}, {args.threads} threads, step at position {args.pos}, median of {args.reps}")
    print(f"{'configuration':<36} {'ms/step':>8} {'vs target':>9} {'= target':>11}")
    for name, ts in times.items():
        m = statistics.median(ts)
        a = f"{100 * agree[name]:10.1f}%" if name in agree else f"{'-':>11}"
        print(f"{name:<36} {1e3 * m:8.2f} {m / t_target:8.2f}x {a}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

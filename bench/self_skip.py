"""Which layers should self-speculation skip? Top-1 agreement of skip sets with the full target.

    python bench/self_skip.py                                       # the engine's default set
    python bench/self_skip.py --skip "default;6,9,12,15,18,21,24" --prompts code,repetitive

For each prompt of bench/speculative.py, the target writes --tokens tokens greedily (the text a
greedy speculative run must reproduce). Then, at every position of that text, each skip set
predicts the next token the way the self drafter does: a view of the target's context
(Context.skipping_view) that attends to the full model's keys and values of everything before
and runs only the layers it keeps. The share of positions where its argmax is the target's token
is the acceptance of a one-token draft; longer drafts chain it, so it bounds what a set can win.
--own-cache also scores each set with a cache of its own (every position evaluated with the
layers skipped, as self-drafting worked before 2026-12-04), for comparison.

A set pays when agreement a and the drafted token's cost c (about the share of the weights it
runs: the "runs" column counts its layers; the output layer runs too) beat a plain step: with a verify of 2 rows costing v2 plain steps, one
drafted token pays when (1 + a) / (c + v2) > 1. Not a timing: agreement does not depend on
the machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # bench/tokenize.py
sys.path.insert(0, str(HERE.parent / "python"))
sys.path.append(str(HERE))

import quickdraft  # noqa: E402
from quickdraft import Engine, _core, models  # noqa: E402
from speculative import PROMPTS, chat_prompt  # noqa: E402


def agreement_view(m: quickdraft.Model, seq: list[int], n0: int, skip: list[int]) -> float:
    """One-token drafts from a view of the target's cache at every position of seq[n0:]."""
    base = m.new_context(n_ctx=len(seq) + 1)
    base.feed(seq[:n0 - 1])
    view = base.skipping_view(skip)
    hits = 0
    for p in range(n0 - 1, len(seq) - 1):
        view.truncate(base.n_past)
        hits += int(np.argmax(view.eval_last([seq[p]]))) == seq[p + 1]
        base.feed([seq[p]])
    return hits / (len(seq) - n0)


def agreement_own_cache(m: quickdraft.Model, seq: list[int], n0: int, skip: list[int]) -> float:
    ctx = m.new_context(n_ctx=len(seq) + 1)
    ctx.skip_layers = skip
    logits = ctx.eval(seq[:-1])[n0 - 1:]
    return float(np.mean(np.argmax(logits, axis=1) == np.array(seq[n0:])))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default=models.DEFAULT_TARGET)
    p.add_argument("--skip", default="default", help='";"-separated sets of ","-separated layers, or "default"')
    p.add_argument("--prompts", default=",".join(PROMPTS))
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--own-cache", action="store_true", help="also score each set with a cache of its own")
    args = p.parse_args(argv)

    engine = Engine(args.target, n_ctx=2048, threads=args.threads)
    m = quickdraft.Model(args.target, n_ctx=2048, threads=args.threads)
    sets = [_core.default_skip_layers(m.n_layer) if s.strip() == "default" else [int(i) for i in s.split(",") if i.strip()]
            for s in args.skip.split(";")]
    print(f"target {args.target} ({m.n_layer} layers), {args.tokens} greedy tokens per prompt")
    print(f"{'prompt':<11} {'skipped layers':<40} {'runs':>5} {'agreement':>9}" + ("  own cache" if args.own_cache else ""))
    for name in args.prompts.split(","):
        prompt = chat_prompt(engine, PROMPTS[name])
        ids = engine.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
        c = engine.generate(ids, max_tokens=args.tokens, temperature=0, ignore_eos=True)
        seq, n0 = list(ids) + list(c.tokens), len(ids)
        for skip in sets:
            line = (f"{name:<11} {','.join(map(str, skip)):<40} {m.n_layer - len(skip):>2}/{m.n_layer:<2} "
                    f"{agreement_view(m, seq, n0, skip):9.3f}")
            if args.own_cache:
                line += f"  {agreement_own_cache(m, seq, n0, skip):9.3f}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

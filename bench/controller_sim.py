"""What the draft-length controller costs or wins, by acceptance, on a simulated machine.

    python bench/controller_sim.py                                  # this session's AVX2 Zen 4 costs
    python bench/controller_sim.py --curve 1,1.22,1.58,1.99,2.9,3.67 --rows 1,2,3,4,6,8 --draft 0.25

Drives the engine's own controller (`quickdraft._core._testing.DraftLength`) with synthetic
costs: a verify of n rows costs curve(n) plain steps (linear between the given points), each
drafted token `--draft` steps, and each drafted token is accepted with probability a, independently
(seeded). Every timing is scaled by a log-normal noise factor. For each acceptance it reports the
tokens per unit of time as a multiple of plain decoding's, in two settings:

- fresh: a new controller per generation, which reads an 8-token warm-up and then --tokens tokens
  (how bench/compare.py runs each engine, in a process of its own);
- session: one controller over --gens generations of --tokens tokens (bench/speculative.py, a chat
  session), the first two left out.

A drafter that never pays shows what exploration (probes, the drafts a lucky probe restarts)
costs; one that pays shows how much of the possible gain the controller finds. The default costs
are the 1.5B target's verify curve and the self drafter's token (0.56 of a step) with forced AVX2
on Zen 4 in slow memory (docs/benchmarks.md, fifteenth session). Not a timing of this machine.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from quickdraft import _core  # noqa: E402


def interpolate(rows: list[int], costs: list[float]):
    def c_v(n: int) -> float:
        if n >= rows[-1]:
            return costs[-1] + (costs[-1] - costs[-2]) * (n - rows[-1]) / (rows[-1] - rows[-2])
        i = next(i for i in range(1, len(rows)) if n <= rows[i])
        return costs[i - 1] + (costs[i] - costs[i - 1]) * (n - rows[i - 1]) / (rows[i] - rows[i - 1])

    return c_v


def generate(ctl, rng: random.Random, a: float, draft: float, c_v, tokens: int, noise: float) -> float:
    """One generation of `tokens` tokens; returns its cost per token in plain steps."""
    ctl.new_sequence()
    spent, made = 0.0, 0
    while made < tokens:
        k = ctl.next(0)
        f = math.exp(rng.gauss(0.0, noise))
        cost = c_v(k + 1) * f
        if k:
            ctl.record_draft(0, k, draft * f, draft * f if k > 1 else -1.0)
            cost += k * draft * f
        kept = 0
        while kept < k and rng.random() < a:
            kept += 1
        ctl.record_verify(0, k + 1, kept, c_v(k + 1) * f)
        spent += cost
        made += kept + 1
    return spent / made


def calibrate(ctl, rng: random.Random, rows: int, draft: float, c_v, noise: float) -> None:
    """The engine's warm-up at load: forwards of 1..rows rows timed once each, and a draft token
    twice (the first timing of a draft is dropped)."""
    for n in range(1, rows + 1):
        ctl.record_forward(n, c_v(n) * math.exp(rng.gauss(0.0, noise)))
    for _ in range(2 if rows else 0):
        ctl.record_draft(0, 1, draft * math.exp(rng.gauss(0.0, noise)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1,2,4,8,16", help="row counts of the verify curve's points")
    ap.add_argument("--curve", default="1,1.11,1.37,2.02,3.88", help="verify cost at those rows, in plain steps")
    ap.add_argument("--draft", type=float, default=0.56, help="a drafted token's cost, in plain steps")
    ap.add_argument("--hint", type=float, default=None, help="the drafter's cost hint (default: --draft)")
    ap.add_argument("--accept", default="0.2,0.35,0.5,0.72,0.85,0.95")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--fresh", type=int, default=400, help="fresh generations per acceptance")
    ap.add_argument("--gens", type=int, default=200, help="generations of the session per acceptance")
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--noise", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calibrate", type=int, default=0,
                    help="controllers first learn the verify of 1..N rows and a draft token as timed by the "
                         "engine's warm-up at load; 0: not")
    args = ap.parse_args()
    c_v = interpolate([int(v) for v in args.rows.split(",")], [float(v) for v in args.curve.split(",")])
    hint = args.draft if args.hint is None else args.hint
    print(f"verify curve {args.curve} at rows {args.rows}; a drafted token {args.draft} of a step (hint {hint}); "
          f"{args.tokens}-token generations; tokens per unit of time / plain decoding's")
    print(f"{'acceptance':>10} {'fresh':>7} {'session':>8}")
    for a in (float(v) for v in args.accept.split(",")):
        rng = random.Random(args.seed)
        fresh = []
        for _ in range(args.fresh):
            ctl = _core._testing.DraftLength(1, args.draft_max)
            ctl.set_cost_hint(0, hint, 0)
            calibrate(ctl, rng, args.calibrate, args.draft, c_v, args.noise)
            generate(ctl, rng, a, args.draft, c_v, 8, args.noise)
            fresh.append(generate(ctl, rng, a, args.draft, c_v, args.tokens, args.noise))
        ctl = _core._testing.DraftLength(1, args.draft_max)
        ctl.set_cost_hint(0, hint, 0)
        calibrate(ctl, rng, args.calibrate, args.draft, c_v, args.noise)
        session = [generate(ctl, rng, a, args.draft, c_v, args.tokens, args.noise) for _ in range(args.gens)][2:]
        print(f"{a:10.2f} {len(fresh) / sum(fresh):7.3f} {len(session) / sum(session):8.3f}")


if __name__ == "__main__":
    main()

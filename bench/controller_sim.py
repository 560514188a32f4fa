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

With --real, acceptance is not drawn but read from real drafts: the target's greedy text for each
of bench/speculative.py's prompts (and bench/draft_head_misses.py's), and at each of its positions
the draft model's greedy draft of --draft-max tokens after the text so far (requantized to Q4_0,
its head as the engine's), each token with its probability (cached in --drafts-json). A draft
ends at its first token below --p-min, as the engine's. For each text it prints the controller's
rate (fresh: the warm-up's timings, then the text) and each fixed draft length's, as multiples of
plain decoding's, and the controller's share of the best fixed length's:

    QD_FORCE_ISA=avx2 python bench/controller_sim.py --real --rows 1,2,3,4,6,8,9 \
        --curve 1,1.30,1.50,1.94,2.47,2.98,3.91 --draft 0.30
"""

from __future__ import annotations

import argparse
import json
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
    ap.add_argument("--real", action="store_true", help="replay real drafts instead of drawing acceptance")
    ap.add_argument("--p-min", type=float, default=0.7, help="--real: a draft ends at its first token below this")
    ap.add_argument("--drafts-json", default=str(Path(__file__).resolve().parent / "out" / "real_drafts.json"),
                    help="--real: the recorded drafts, made if absent (the texts differ by ISA: delete it to record "
                         "them again)")
    args = ap.parse_args()
    if args.real:
        return replay_real(args)
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


def record_drafts(depth: int) -> dict:
    """{prompt: (steps)}, steps[t] = ([probability of each of the draft's tokens], how many of them
    the target's text follows) at each position t of the target's greedy text."""
    import numpy as np

    from quickdraft import Engine, models

    sys.path.append(str(Path(__file__).resolve().parent))  # after the standard library (bench/tokenize.py)
    from draft_head_misses import EXTRA
    from speculative import PROMPTS, chat_prompt

    target = Engine(str(models.resolve("qwen2.5-coder-1.5b")), n_ctx=2048, threads=2)
    draft = _core.LoadedModel(str(models.resolve("qwen2.5-coder-0.5b")), requantize="q4_0")
    out = {}
    for name, text in {**PROMPTS, **EXTRA}.items():
        prompt = chat_prompt(target, text)
        ids = list(target.tokenize(prompt)) if isinstance(prompt, str) else list(prompt)
        made = list(target.generate(ids, max_tokens=160, temperature=0).tokens)
        ctx = _core.Context(draft, 2048, 2)
        ctx.set_head_subset(32768, [151643, 151645])
        seq, n0, steps = ids + made, len(ids), []
        ctx.feed(seq[: n0 - 1])
        for t in range(len(made)):
            ctx.truncate(n0 - 1 + t)
            logits, toks, probs = ctx.eval([seq[n0 - 1 + t]], last_only=True), [], []
            for i in range(depth):
                toks.append(int(np.argmax(logits)))
                probs.append(1.0 / float(np.exp((logits - logits[toks[-1]]).astype(np.float64)).sum()))
                if i + 1 < depth:
                    logits = ctx.eval([toks[-1]], last_only=True)
            followed = next((i for i in range(depth) if t + i >= len(made) or toks[i] != made[t + i]), depth)
            steps.append((probs, followed))
        out[name] = steps
        print(f"recorded {name}: {len(made)} tokens", flush=True)
    return out


def replay(steps, choose, c_v, draft: float, p_min: float, ctl=None) -> float:
    """Tokens per plain step over one text, choose() giving each step's draft length; the
    controller (ctl) is told every step's costs."""
    t, cost = 0, 0.0
    while t < len(steps):
        probs, followed = steps[t]
        k = choose()
        j = next((i + 1 for i in range(k) if probs[i] < p_min), k)  # the draft ends at an unsure token
        if ctl is not None:
            if j:
                ctl.record_draft(0, j, draft, draft if j > 1 else -1.0)
            ctl.record_verify(0, j + 1, min(followed, j), c_v(j + 1), j - (probs[j - 1] < p_min) if j else 0)
        cost += c_v(j + 1) + j * draft
        t += min(followed, j) + 1
    return len(steps) / cost


def replay_real(args) -> None:
    path = Path(args.drafts_json)
    if path.exists():
        drafts = json.loads(path.read_text())
    else:
        drafts = record_drafts(args.draft_max)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(drafts))
    c_v = interpolate([int(v) for v in args.rows.split(",")], [float(v) for v in args.curve.split(",")])
    hint = args.draft if args.hint is None else args.hint
    depth = min(args.draft_max, min(len(p) for steps in drafts.values() for p, _ in steps))
    print(f"verify curve {args.curve} at rows {args.rows}; a drafted token {args.draft} of a step; p_min {args.p_min}; "
          f"tokens per unit of time / plain decoding's")
    print(f"{'text':<11} {'controller':>10} " + " ".join(f"{'k=' + str(k):>6}" for k in range(1, depth + 1))
          + f" {'best k':>6} {'ctl / best':>10}")
    shares = []
    for name, steps in drafts.items():
        fixed = [replay(steps, lambda k=k: k, c_v, args.draft, args.p_min) for k in range(depth + 1)]
        ctl = _core._testing.DraftLength(1, depth)
        ctl.set_cost_hint(0, hint, 0)
        calibrate(ctl, random.Random(args.seed), args.calibrate or 4, args.draft, c_v, 0.0)
        ctl.new_sequence()
        got = replay(steps, lambda: ctl.next(0), c_v, args.draft, args.p_min, ctl)
        best = max(range(depth + 1), key=lambda k: fixed[k])
        shares.append(got / fixed[best])
        print(f"{name:<11} {got / fixed[0]:10.3f} " + " ".join(f"{f / fixed[0]:6.3f}" for f in fixed[1:])
              + f" {best:6d} {got / fixed[best]:10.3f}")
    print(f"geometric mean of ctl / best: {math.exp(sum(map(math.log, shares)) / len(shares)):.3f}")


if __name__ == "__main__":
    main()

"""Drafting rules judged without a clock: real drafts, costed with a fixed cost curve.

    python bench/draft_cost_model.py                                   # model and self, p_min x draft_max
    python bench/draft_cost_model.py --drafters model --p-min 0.5,0.7 --draft-max 2,4 --prompts code,chat
    python bench/draft_cost_model.py --rows 1,2,4,8 --curve 1,1.2,1.6,2.7 --draft-cost model=0.4,self=0.6   # your costs
    python bench/draft_cost_model.py --controller --drafters model --p-min 0.7   # the controller on real drafts

Each engine drafts draft_max tokens every step (adaptive=False), greedy, 128 tokens per prompt,
so its drafts and the target's verdicts depend on the models and the text alone, never on the
machine's timing. Each step's draft length (the generation's histogram) is then costed in
plain steps: a verify of n rows costs curve(n) (linear between the given points), each drafted
token one draft step (a model drafter evaluates the last accepted token and every drafted token
but the last). The cells are the generation's tokens over that cost: its speedup over plain
decoding on a machine with those costs.

On this project's VM a timed comparison of two drafting rules needs many turns to resolve a few
per cent (the memory's read rate switches between two phases within seconds); this one resolves
any difference in what is drafted and kept, exactly, and says nothing about the costs
themselves. The presets are the forced-AVX2 curves of the 1.5B target on the Zen 4 VM
(docs/benchmarks.md: slow memory, fifteenth session; fast memory, sixteenth) with the draft
token costs timed there (the 0.5B at q4_0, self-drafting's default layers); --rows, --curve and
--draft-cost give another machine's (bench/compare.py prints the verify curve, bench/speculative.py
the draft's time per token).

--controller replays the engine's draft-length controller (`_core._testing.DraftLength`, driven
as bench/controller_sim.py drives it, its timings the same costs with 5 % noise) over the draft
model's real drafts: at every position of the target's greedy output the draft model's own greedy
draft of the longest draft_max (`quickdraft.Model`: the stored weights with the full output layer,
not the engine's requantized draft with its trimmed head), each token's probability, and how far
the output follows it. A draft of k tokens under p_min is then the first of those that p_min lets
through, so every policy runs on the same drafts: the controller's modelled speedup against the
best fixed draft_max's, fresh (a controller per generation, after the engine's warm-up timings)
and in a session (one controller over 60 generations); and the same controller not told which
drafted tokens were unsure (one acceptance for all, as before the twentieth session).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from quickdraft import Engine, Model, _core, models  # noqa: E402

# Each of the two takes its own folder off sys.path on import, so the folder goes back before each.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from speculative import PROMPTS, chat_prompt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from controller_sim import calibrate, interpolate  # noqa: E402

PHASES = {  # verify rows, verify cost in plain steps, a drafted token's cost per drafter
    "slow": ([1, 2, 4, 8, 16], [1, 1.11, 1.37, 2.02, 3.88], {"model": 0.35, "self": 0.56}),
    "fast": ([1, 2, 3, 4, 8, 16], [1, 1.32, 1.70, 2.13, 3.83, 7.16], {"model": 0.45, "self": 0.71}),
}


def speedup(hist: list[int], tokens: int, c_v, draft: float) -> float:
    """Tokens over the cost of the steps, in plain steps (a plain step: c_v(1) = 1)."""
    return tokens / sum(n * (c_v(k + 1) + k * draft) for k, n in enumerate(hist) if n)


def record_drafts(target: str, draft: str, prompts: list[str], max_tokens: int, k: int, threads: int) -> dict:
    """Per prompt, at every position t of the target's greedy output: the draft model's greedy draft
    of k tokens after the text up to t, each token's probability, and how many of them the output
    continues with ("p", "m")."""
    eng = Engine(target, n_ctx=2048, threads=threads)
    dm = Model(draft, n_ctx=2048, threads=threads)
    traces = {}
    for name in prompts:
        text = chat_prompt(eng, PROMPTS[name])
        out = list(eng.generate(text, max_tokens=max_tokens, temperature=0).tokens)
        ids = list(eng.tokenize(text)) if isinstance(text, str) else list(text)
        seq, n0 = ids + out, len(ids)
        dm.truncate(0)
        dm.feed(seq[:n0 - 1])
        steps = []
        for t in range(len(out)):
            dm.truncate(n0 - 1 + t)
            logits = dm.eval_last([seq[n0 - 1 + t]])
            toks, probs = [], []
            for i in range(k):
                x = int(np.argmax(logits))
                toks.append(x)
                probs.append(1.0 / float(np.exp((logits - logits[x]).astype(np.float64)).sum()))
                if i + 1 < k:
                    logits = dm.eval_last([x])
            m = 0
            while m < k and t + m < len(out) and toks[m] == out[t + m]:
                m += 1
            steps.append({"p": probs, "m": m})
        traces[name] = steps
    return traces


def draft_length(step: dict, k: int, p_min: float) -> int:
    """The tokens a draft of at most k proposes: it ends at its first token below p_min."""
    for i in range(k):
        if step["p"][i] < p_min:
            return i + 1
    return k


def replay_fixed(steps: list, k: int, p_min: float, c_v, draft: float) -> float:
    """Modelled speedup of drafting k tokens every step over these drafts."""
    t, cost = 0, 0.0
    while t < len(steps):
        j = draft_length(steps[t], k, p_min)
        cost += c_v(j + 1) + j * draft
        t += min(steps[t]["m"], j) + 1
    return len(steps) / cost


def replay_controller(ctl, rng: random.Random, steps: list, p_min: float, c_v, draft: float, noise: float = 0.05,
                      confidence: bool = True):
    """One generation over these drafts with the controller choosing each step's length; returns
    (tokens, cost in plain steps). confidence=False withholds which drafted tokens were unsure."""
    ctl.new_sequence()
    t, cost = 0, 0.0
    while t < len(steps):
        f = math.exp(rng.gauss(0.0, noise))
        j = draft_length(steps[t], ctl.next(0), p_min)
        m = min(steps[t]["m"], j)
        if j:
            ctl.record_draft(0, j, draft * f, draft * f if j > 1 else -1.0)
        ctl.record_verify(0, j + 1, m, c_v(j + 1) * f, (j - (steps[t]["p"][j - 1] < p_min) if j else 0) if confidence else -1)
        cost += (c_v(j + 1) + j * draft) * f
        t += m + 1
    return len(steps), cost


def controller_report(traces: dict, phases: dict, p_mins: list, lengths: list, draft_max: int) -> None:
    print(f"\nthe controller on the 0.5B's real drafts (draft_max {draft_max}): modelled speedup, "
          f"{' / '.join(traces)}; best fixed draft_max in brackets")
    for phase, (rows, curve, draft_cost) in phases.items():
        c_v, d = interpolate(rows, curve), draft_cost["model"]
        for p in p_mins:
            best = []
            for steps in traces.values():
                k, v = max(((k, replay_fixed(steps, k, p, c_v, d)) for k in lengths), key=lambda kv: kv[1])
                best.append(f"{v:.2f} ({k})")
            cells = []
            for confidence in (True, False):
                fresh, session = [], []
                for steps in traces.values():
                    rng, made, spent = random.Random(0), 0, 0.0
                    for _ in range(40):
                        ctl = _core._testing.DraftLength(1, draft_max)
                        ctl.set_cost_hint(0, d, 0)
                        calibrate(ctl, rng, 4, d, c_v, 0.05)
                        replay_controller(ctl, rng, steps[:8], p, c_v, d, confidence=confidence)
                        n, c = replay_controller(ctl, rng, steps, p, c_v, d, confidence=confidence)
                        made, spent = made + n, spent + c
                    fresh.append(made / spent)
                    ctl = _core._testing.DraftLength(1, draft_max)
                    ctl.set_cost_hint(0, d, 0)
                    calibrate(ctl, rng, 4, d, c_v, 0.05)
                    runs = [replay_controller(ctl, rng, steps, p, c_v, d, confidence=confidence) for _ in range(60)][2:]
                    session.append(sum(n for n, _ in runs) / sum(c for _, c in runs))
                cells.append(f"fresh {'/'.join(f'{v:.2f}' for v in fresh)}, session {'/'.join(f'{v:.2f}' for v in session)}")
            print(f"  {phase:>5}, p_min {p}: best fixed {' / '.join(best)}; controller {cells[0]}; "
                  f"not told which tokens were unsure {cells[1]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft", default="qwen2.5-coder-0.5b", help="the draft model of the model drafter")
    ap.add_argument("--drafters", default="model,self")
    ap.add_argument("--prompts", default="code,chat,repetitive")
    ap.add_argument("--p-min", default="0.3,0.5,0.7,0.9")
    ap.add_argument("--draft-max", default="2,3,4,6")
    ap.add_argument("--rows", default=None, help="with --curve and --draft-cost: this machine's costs instead of "
                                                 "the presets (row counts of the verify curve's points)")
    ap.add_argument("--curve", default=None, help="verify cost at those rows, in plain steps (bench/compare.py's curve)")
    ap.add_argument("--draft-cost", default=None, help="a drafted token's cost in plain steps, per drafter: model=0.4,self=0.6")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--controller", action="store_true",
                    help="only the draft-length controller's replay over the draft model's real drafts")
    ap.add_argument("--controller-max", type=int, default=8, help="the controller's draft_max (the engine's default)")
    args = ap.parse_args(argv)
    phases = PHASES
    if args.rows or args.curve or args.draft_cost:
        if not (args.rows and args.curve and args.draft_cost):
            ap.error("--rows, --curve and --draft-cost go together")
        costs = dict(item.split("=", 1) for item in args.draft_cost.split(",") if "=" in item)
        if missing := set(args.drafters.split(",")) - set(costs):
            ap.error(f"--draft-cost has no cost for {', '.join(sorted(missing))} (drafter=cost, ...)")
        phases = {"given": ([int(v) for v in args.rows.split(",")], [float(v) for v in args.curve.split(",")],
                            {d: float(c) for d, c in costs.items()})}
    target = str(models.resolve(args.target))
    prompts = args.prompts.split(",")
    p_mins = [float(v) for v in args.p_min.split(",")]
    lengths = [int(v) for v in args.draft_max.split(",")]
    if args.controller:
        traces = record_drafts(target, str(models.resolve(args.draft)), prompts, args.max_tokens,
                               max(args.controller_max, *lengths), args.threads)
        controller_report(traces, phases, p_mins, sorted(set(lengths) | {1}), args.controller_max)
        return 0
    runs = {}  # (drafter, k, p_min, prompt) -> (histogram, tokens, acceptance)
    for drafter in args.drafters.split(","):
        draft = str(models.resolve(args.draft)) if drafter == "model" else drafter
        for k in lengths:
            for p in p_mins:
                eng = Engine(target, draft=draft, n_ctx=2048, threads=args.threads, draft_max=k, p_min=p,
                             adaptive=False)
                for name in prompts:
                    s = eng.generate(chat_prompt(eng, PROMPTS[name]), max_tokens=args.max_tokens, temperature=0).stats
                    runs[drafter, k, p, name] = (list(s.draft_length_histogram), s.generated_tokens, s.acceptance_rate)
                del eng
    print(f"target {args.target}, draft {args.draft}, greedy, {args.max_tokens} tokens, draft_max every step; "
          f"cells: modelled speedup over plain decoding, {' / '.join(prompts)}")
    for drafter in args.drafters.split(","):
        for phase, (rows, curve, draft_cost) in phases.items():
            c_v = interpolate(rows, curve)
            print(f"\n{drafter}, {phase + ' memory' if phase in PHASES else 'given costs'} (verify {'/'.join(map(str, curve))} at rows {'/'.join(map(str, rows))}, "
                  f"a drafted token {draft_cost[drafter]})")
            print(f"{'draft_max':>9} " + " ".join(f"{'p_min ' + str(p):>16}" for p in p_mins))
            for k in lengths:
                cells = ["/".join(f"{speedup(*runs[drafter, k, p, n][:2], c_v, draft_cost[drafter]):.2f}" for n in prompts)
                         for p in p_mins]
                print(f"{k:>9} " + " ".join(f"{c:>16}" for c in cells))
        print(f"\n{drafter}, acceptance and mean draft length")
        for k in lengths:
            cells = []
            for p in p_mins:
                cell = []
                for n in prompts:
                    hist, _, acc = runs[drafter, k, p, n]
                    steps = sum(hist[1:])
                    cell.append(f"{100 * acc:.0f}%:{sum(i * c for i, c in enumerate(hist)) / max(1, steps):.1f}")
                cells.append(" ".join(cell))
            print(f"{k:>9} " + "  ".join(f"{c:>22}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())

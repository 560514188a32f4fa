"""Drafting rules judged without a clock: real drafts, costed with a fixed cost curve.

    python bench/draft_cost_model.py                                   # model and self, p_min x draft_max
    python bench/draft_cost_model.py --drafters model --p-min 0.5,0.7 --draft-max 2,4 --prompts code,chat
    python bench/draft_cost_model.py --rows 1,2,4,8 --curve 1,1.2,1.6,2.7 --draft-cost model=0.4,self=0.6   # your costs

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
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from quickdraft import Engine, models  # noqa: E402

# Each of the two takes its own folder off sys.path on import, so the folder goes back before each.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from speculative import PROMPTS, chat_prompt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from controller_sim import interpolate  # noqa: E402

PHASES = {  # verify rows, verify cost in plain steps, a drafted token's cost per drafter
    "slow": ([1, 2, 4, 8, 16], [1, 1.11, 1.37, 2.02, 3.88], {"model": 0.35, "self": 0.56}),
    "fast": ([1, 2, 3, 4, 8, 16], [1, 1.32, 1.70, 2.13, 3.83, 7.16], {"model": 0.45, "self": 0.71}),
}


def speedup(hist: list[int], tokens: int, c_v, draft: float) -> float:
    """Tokens over the cost of the steps, in plain steps (a plain step: c_v(1) = 1)."""
    return tokens / sum(n * (c_v(k + 1) + k * draft) for k, n in enumerate(hist) if n)


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

"""Predicted outputs: rewrite a ~60-line source file with a one-line change, with and without
the file as the prediction, and print tokens/s side by side.

    python bench/predicted.py                                  # Qwen2.5-Coder-1.5B, 2 threads
    python bench/predicted.py --target smollm2-135m --draft ngram --max-tokens 700
    python bench/predicted.py --draft qwen2.5-coder-0.5b       # the draft model where the prediction misses

The task: bench/data/inventory.py, with "Rename the method `to_reorder` to `needing_reorder`"
(one line). Greedy decoding; the text with the prediction must equal the text without it
(the run fails otherwise). Rows: plain decoding (no drafter, no prediction), the drafter alone
(when --draft is given), and the prediction over each. The engine stays loaded and the rows take
turns for --reps rounds, so load changes on a shared machine hit each alike; each cell is the
median. The ratio is to plain decoding.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from quickdraft import Engine, models  # noqa: E402

SOURCE = Path(__file__).resolve().parent / "data" / "inventory.py"
TASK = "Rename the method `to_reorder` to `needing_reorder`, and its use in `demo`. Reply with the whole file only."


def messages(source: str) -> list:
    return [{"role": "system", "content": "You are a careful code editor. You reply with the complete edited file in "
                                          "one ```python code block and nothing else."},
            {"role": "user", "content": f"{TASK}\n\n```python\n{source}```"}]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="qwen2.5-coder-1.5b")
    p.add_argument("--draft", default=None, help="a drafter under the prediction: ngram or a draft model")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=800)
    p.add_argument("--draft-max", type=int, default=8)
    p.add_argument("--reps", type=int, default=1)
    args = p.parse_args(argv)

    source = SOURCE.read_text()
    prediction = f"```python\n{source}```"
    draft = args.draft if args.draft in (None, "ngram", "self") else str(models.resolve(args.draft))
    engine = Engine(str(models.resolve(args.target)), draft=draft, threads=args.threads, draft_max=args.draft_max,
                    n_ctx=4096)
    msgs = messages(source)
    rows = [("plain", dict(drafter="none"))]
    if draft is not None:
        rows.append((f"{args.draft}", {}))
    rows.append(("prediction", dict(drafter="none", prediction=prediction)))
    if draft is not None:
        rows.append((f"prediction + {args.draft}", dict(prediction=prediction)))

    results = {name: [] for name, _ in rows}
    texts = {}
    engine.chat(msgs, max_tokens=8, temperature=0)  # warm up: page in the weights, fill the prompt cache
    for _ in range(args.reps):
        for name, kw in rows:
            c = engine.chat(msgs, max_tokens=args.max_tokens, temperature=0, **kw)
            results[name].append(c)
            texts.setdefault(name, c.text)
    base = texts["plain"]
    for name, text in texts.items():
        if text != base:
            print(f"FAIL: the text of '{name}' differs from plain decoding's", file=sys.stderr)
            return 1
    edited = "needing_reorder" in base
    print(f"{args.target}, {args.threads} threads, {len(results['plain'][0].tokens)} tokens generated "
          f"({'edit made' if edited else 'edit NOT made'}), {SOURCE.name}: {len(source.splitlines())} lines, "
          f"median of {args.reps}")
    plain_tps = statistics.median(c.stats.tokens_per_second for c in results["plain"])
    print(f"{'row':<28} {'tok/s':>8} {'vs plain':>9} {'steps':>6} {'pred acc':>9} {'pred rej':>9}")
    for name, _ in rows:
        cs = results[name]
        tps = statistics.median(c.stats.tokens_per_second for c in cs)
        s = cs[-1].stats
        print(f"{name:<28} {tps:8.1f} {tps / plain_tps:8.2f}x {s.steps:6d} {s.accepted_prediction_tokens:9d} "
              f"{s.rejected_prediction_tokens:9d}")
    engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

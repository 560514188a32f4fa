"""How often a draft head cannot propose the target's next token: ids past the head, first seen.

    python bench/draft_head_misses.py                        # the target's greedy text on 8 prompts
    python bench/draft_head_misses.py --heads 32768,65536 --tokens 400

A draft model's head (`Engine(draft_head=...)`, the default 32768 rows) scores ids below the head
size plus every id its context has evaluated (the prompt, then the text). A token that the target
writes for the first time with an id past the head gets logit -inf in the draft, so the draft
cannot propose it there: its draft ends early or goes wrong. After that the id is in the head, so
a long-lived engine misses it once; a fresh engine's first generation meets every one (docs/
benchmarks.md, twenty-sixth session). For each prompt the target writes --tokens tokens greedily;
this counts, per head size, the first occurrences in that text of ids at or past the head and not
in the prompt, per 100 tokens, and lists them for the default head. Not a timing: the counts
depend on the text only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # bench/tokenize.py
sys.path.insert(0, str(HERE.parent / "python"))
sys.path.append(str(HERE))

from quickdraft import Engine, models  # noqa: E402
from speculative import PROMPTS, chat_prompt  # noqa: E402

# Five more requests beside bench/speculative.py's three: other languages, prose, a story.
EXTRA = {
    "rust": "Write a Rust function that parses a CSV line into fields, handling quoted fields, with unit tests.",
    "sql": "Write SQL to create tables for a library (books, members, loans) and a query for overdue loans.",
    "explain": "Explain how a hash map works and when its operations are slow.",
    "js": "Write a JavaScript debounce function and show how to use it with an input field.",
    "story": "Write a short story about a lighthouse keeper who finds a message in a bottle.",
}
DEFAULT_HEAD = 32768


def first_seen_past(prompt: list[int], text: list[int], head: int) -> list[tuple[int, int]]:
    """(position in text, id) of each id >= head that neither the prompt nor the text before it holds."""
    seen, out = set(prompt), []
    for i, t in enumerate(text):
        if t >= head and t not in seen:
            out.append((i, t))
        seen.add(t)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default=models.DEFAULT_TARGET)
    p.add_argument("--prompts", default=",".join([*PROMPTS, *EXTRA]))
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--heads", default="16384,24576,32768,40960,49152,65536,100000")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)

    heads = [int(h) for h in args.heads.split(",")]
    engine = Engine(args.target, n_ctx=2048, threads=args.threads)
    texts = {**PROMPTS, **EXTRA}
    runs = []
    for name in args.prompts.split(","):
        prompt = chat_prompt(engine, texts[name])
        ids = list(engine.tokenize(prompt)) if isinstance(prompt, str) else list(prompt)
        out = list(engine.generate(ids, max_tokens=args.tokens, temperature=0, ignore_eos=True).tokens)
        runs.append((name, ids, out))
        missed = first_seen_past(ids, out, DEFAULT_HEAD)
        shown = ", ".join(f"{t} {engine.tokenizer.decode([t])!r} at {i}" for i, t in missed)
        print(f"{name:<11} {len(out)} tokens; past {DEFAULT_HEAD}, first seen: {shown or '-'}", flush=True)
    total = sum(len(out) for _, _, out in runs)
    print(f"\n{args.target}, {len(runs)} prompts, {total} greedy tokens: first occurrences past the head per 100 tokens")
    for h in heads:
        n = sum(len(first_seen_past(ids, out, h)) for _, ids, out in runs)
        print(f"  head {h:>6}: {100 * n / total:5.2f}  ({n})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

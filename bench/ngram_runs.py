"""How often an n-gram lookup's proposal is right, by the length of the run it matched.

The target's greedy text on new-text prompts (code, chat) and on prompts whose answer copies
the prompt (a table to continue, files to rewrite). At every position of that text, the lookup
takes the earlier place whose preceding tokens match the text so far for the longest run
(NgramDrafter's copy mode, the most recent of equals) and proposes the 8 tokens that followed
it. The table gives, by run length and kind of prompt, how many positions had such a run, the
share whose first proposed token was the target's, and the mean number of proposed tokens the
target would have kept. It is the evidence for NgramDrafter::kCopyRun: short runs in new text
are chance, right about half the time, while a copy's are right almost always.

    python bench/ngram_runs.py [--target qwen2.5-coder-1.5b] [--tokens 256]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
sys.path.append(str(Path(__file__).resolve().parent))  # last: nothing here shadows the standard library

import speculative as sp  # noqa: E402  (bench/speculative.py: its prompts)

from quickdraft import Engine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = (ROOT / "python" / "quickdraft" / "cli.py").read_text()[:2000]
NEW = {
    "code": sp.PROMPTS["code"],
    "chat": sp.PROMPTS["chat"],
    "lru": "Write a Python class implementing an LRU cache with get, put and a capacity, with docstrings.",
    "csv": "Write a C function that parses a CSV line into fields, handling quoted fields with commas.",
    "bst": "Implement binary search tree insertion, deletion and in-order traversal in Rust.",
    "tcp": "What are the main differences between TCP and UDP? Answer in a few paragraphs.",
    "hash": "Explain how a hash map handles collisions, for a beginner.",
    "plan": "Give me a plan to learn linear algebra in three months.",
    "json": "Produce a JSON array of 8 fictional employees with name, age, department, email and salary fields.",
    "sql": "Write SQL to create tables for a library: books, authors, members, loans, with foreign keys and indexes.",
    "tests": "Write pytest tests for a function `slugify(s: str) -> str` that lowercases, strips and replaces "
             "spaces with dashes.",
    "explain": "Explain what this code does, function by function:\n\n" + SOURCE[:1500],
}
COPY = {
    "repetitive": sp.PROMPTS["repetitive"],
    "hints": "Add type hints to every function in this code and return the whole file:\n\n" + SOURCE,
    "docstrings": "Write docstrings for the functions in this code; return the code with them:\n\n" + SOURCE[:1800],
}
ENOUGH = 64  # NgramDrafter's cap on a run's length
BUCKETS = (2, 3, 4, 6, 8, 12, 16, 32, 64)
PROPOSED = 8


def longest_run(h: list[int]) -> tuple[int, int]:
    """(run, continuation start) of the longest earlier match of h's end, (0, -1) if none."""
    best, best_at = 0, -1
    for at in range(len(h) - 1, 0, -1):
        run = 0
        while run < ENOUGH and at - 1 - run >= 0 and h[at - 1 - run] == h[len(h) - 1 - run]:
            run += 1
        if run > best:
            best, best_at = run, at
    return best, best_at


def tabulate(prompt: list[int], text: list[int], table: dict) -> None:
    for i in range(len(text)):
        h = prompt + text[:i]
        run, at = longest_run(h)
        if run < BUCKETS[0]:
            continue
        kept = 0
        while kept < PROPOSED and i + kept < len(text) and at + kept < len(h) and h[at + kept] == text[i + kept]:
            kept += 1
        bucket = max(b for b in BUCKETS if run >= b)
        table.setdefault(bucket, []).append(kept)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="qwen2.5-coder-1.5b")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=str(ROOT / "bench" / "out" / "ngram_runs.json"))
    args = ap.parse_args()
    engine = Engine(args.target, threads=args.threads)
    tables: dict[str, dict] = {"new text": {}, "copies": {}}
    for kind, prompts in (("new text", NEW), ("copies", COPY)):
        for name, text in prompts.items():
            prompt = engine.tokenize(sp.chat_prompt(engine, text), add_special=False)
            out = engine.generate(prompt, max_tokens=args.tokens, temperature=0.0)
            tabulate(prompt, list(out.tokens), tables[kind])
            print(f"{kind:8s} {name:10s} prompt {len(prompt):4d} tokens, answer {len(out.tokens)}", flush=True)
    print(f"\n{args.target}, greedy, {args.tokens} tokens a prompt: the longest earlier run matching the text so far")
    print(f"{'prompts':9s} {'run':>6s} {'positions':>9s} {'first right':>11s} {'kept of ' + str(PROPOSED):>9s}")
    summary = {}
    for kind, table in tables.items():
        for b in BUCKETS:
            v = table.get(b, [])
            if not v:
                continue
            upper = BUCKETS[BUCKETS.index(b) + 1] - 1 if b != BUCKETS[-1] else None
            label = f"{b}-{upper}" if upper and upper > b else (f"{b}" if upper else f"{b}+")
            first = sum(1 for k in v if k) / len(v)
            mean = sum(v) / len(v)
            print(f"{kind:9s} {label:>6s} {len(v):9d} {first:10.0%} {mean:9.2f}")
            summary.setdefault(kind, {})[label] = {"positions": len(v), "first_right": first, "mean_kept": mean}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"target": args.target, "tokens": args.tokens, "runs": summary}, indent=1))
    print(f"saved {args.json}")


if __name__ == "__main__":
    main()

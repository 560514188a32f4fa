"""Plain vs speculative decoding on code / chat / repetitive prompts, one table.

    python bench/speculative.py                                   # Qwen2.5-Coder 1.5B <- 0.5B, 2 threads
    python bench/speculative.py --target smollm2-135m --draft smollm2-135m --drafters ngram,self,model
    python bench/speculative.py --temperature 0.7 --seed 1 --json bench/out/spec.json
    QD_FORCE_ISA=avx2 python bench/speculative.py --drafters model --draft-quant none,q4_0 --draft-head 16384,32768 --reps 3
    python bench/speculative.py --drafters model --prompts long --reps 3     # a question after 3000 tokens of code

The prompt "long" (not among the defaults) asks for a function after --long-tokens tokens of this
repository's own Python source, as a chat about a document: the long context a decode and each
verify attend over, and an answer whose opening is harder to draft than its body. The prompt
"edit" (not among the defaults either) asks to rewrite the first --edit-tokens tokens of a file:
an answer that repeats a prompt mostly outside a draft model's window (draft_window).

Draft levers (model and hybrid drafters): --draft-quant (requantize the draft at load),
--draft-head (output rows the draft scores; 0 = all) and --draft-skip (layers the draft skips,
";"-separated sets of ","-separated layers) each take a list; every combination is one more
engine, named by the values that differ from the defaults ("model q4_0 h16384 s12,13"). --self-skip
does the same for the layers self-drafting skips (empty set: `default_skip_layers`).

Prints, per prompt: plain tokens/s, then per drafter its tokens/s, the ratio to plain, the
acceptance rate, the mean number of draft tokens accepted per round, the mean draft length and
the draft's time per drafted token (ms, catching up on accepted tokens included), then where the generation's time went (prompt processing apart): draft, verify, sampling and
other (the loop's own work, emitting, detokenizing: the generation's time less the three), and
last the time end to end (prompt processing, a draft model's prefill included, and generation)
with its ratio to plain decoding's (median of each turn's own ratio), and for a drafter with two
sources (the hybrid's model and n-gram, a windowed draft model's lookup) each one's kept / drafted.
All engines stay loaded and take turns, so load changes on a shared machine hit each alike;
with --reps N each cell shows the median of N runs, and "vs plain" the median of N ratios, each
run against the plain run of its own turn. --control adds a second plain engine (its own copy
of the weights, as every engine has): its "vs plain" is what a ratio reads with nothing changed.
On this project's VM, whose memory switches speed within seconds, that A/A ratio read 0.995-1.08
as a median of 6 turns (Zen 4, forced AVX2, 2026-12-08): a drafter within a few percent of 1.0x
needs many turns, not three.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# bench/ holds tokenize.py, which would shadow the standard library's tokenize module.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from quickdraft import Engine, _core  # noqa: E402


def _machine_module():
    """bench/machine.py, by path (bench/ is off sys.path, see above)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("qd_bench_machine", Path(__file__).resolve().parent / "machine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


machine = _machine_module()

PROMPTS = {
    "code": "Write a Python function `merge_sort(items)` that sorts a list with merge sort, with a docstring "
            "and type hints, then a second function that checks it on random lists.\n\n```python\n",
    "chat": "Explain to a new employee, in a friendly tone, why the office is switching from paper forms to an "
            "online system, and what will change in their daily work.",
    "repetitive": "Fill in the table, one line per month, keeping exactly this format.\n"
                  "| month | days | quarter |\n|---|---|---|\n| January | 31 | Q1 |\n| February | 28 | Q1 |\n",
}


LONG_QUESTION = "\n\nWrite a function `merge(a, b)` that merges two sorted lists, in the style of the code above."
EDIT_REQUEST = ("\n\nRewrite the code above in full, with a one-line comment above each function. Keep everything "
                "else exactly as it is.")


def long_prompt_text(engine: Engine, n_tokens: int) -> str:
    """This repository's Python sources, cut at n_tokens tokens, then LONG_QUESTION."""
    root = Path(__file__).resolve().parents[1] / "python" / "quickdraft"
    source = "\n\n".join(f.read_text() for f in sorted(root.glob("*.py")))
    ids = engine.tokenize(source, add_special=False)[:n_tokens]
    return "```python\n" + engine.detokenize(ids) + "\n```" + LONG_QUESTION


def edit_prompt_text(engine: Engine, n_tokens: int) -> str:
    """The first n_tokens tokens of this repository's python/quickdraft/chat.py, then EDIT_REQUEST:
    an answer that rewrites a file, most of it before a draft model's window."""
    source = (Path(__file__).resolve().parents[1] / "python" / "quickdraft" / "chat.py").read_text()
    ids = engine.tokenize(source, add_special=False)[:n_tokens]
    return "```python\n" + engine.detokenize(ids) + "\n```" + EDIT_REQUEST


def prompt_text(engine: Engine, name: str, args, rep: int, texts: dict | None = None) -> str:
    """The prompt `name` (from texts where given, else PROMPTS); long and edit ones begin with the
    take's number, so that no engine finds one in its prompt cache and the end-to-end column counts
    every prefill."""
    if name == "long":
        return f"(take {rep})\n" + long_prompt_text(engine, args.long_tokens)
    if name == "edit":
        return f"(take {rep})\n" + edit_prompt_text(engine, args.edit_tokens)
    return (texts or PROMPTS)[name]


def chat_prompt(engine: Engine, text: str):
    try:
        return engine.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
    except Exception:  # no chat template: plain text
        return text


def drafter_arg(name: str, draft: str):
    return {"none": None, "ngram": "ngram", "self": "self", "model": draft, "hybrid": ("hybrid", draft)}[name]


def layer_sets(text: str) -> list[list[int]]:
    """";"-separated sets of ","-separated layers ("" is the empty set: none skipped, or the default)."""
    return [[int(i) for i in s.split(",") if i] for s in text.split(";")]


def skip_name(layers: list[int]) -> str:
    return " s" + ",".join(map(str, layers)) if layers else ""


def lever_variants(args) -> list[tuple[str, dict]]:
    """(name suffix, Engine keyword arguments) for every combination of the draft levers."""
    quants = [None if q in ("", "none") else q for q in args.draft_quant.split(",")]
    heads = [None if h in ("", "auto") else int(h) for h in args.draft_head.split(",")]
    out = []
    for q in quants:
        for h in heads:
            for sk in layer_sets(args.draft_skip):
                name = "".join([f" {q}" if q and q != "auto" else "", f" h{h}" if h is not None else "", skip_name(sk)])
                out.append((name, dict(draft_quant=q or "none", draft_head=h, draft_skip=sk or None)))
    return out


def self_variants(args) -> list[tuple[str, dict]]:
    """(name suffix, Engine keyword arguments) for each layer set --self-skip gives the self drafter."""
    return [(skip_name(sk), dict(skip_layers=sk or None)) for sk in layer_sets(args.self_skip)]


def run(args, texts: dict | None = None) -> list[dict]:
    """All engines stay loaded and take turns per prompt and repetition, so that a change in
    the machine's load hits every drafter alike; each cell reports its median run. texts: prompt
    texts by name, instead of PROMPTS (bench/compare.py's own prompts)."""
    engines = {}
    prompt_names = args.prompts.split(",")
    n_ctx = args.n_ctx
    for name, n in (("long", args.long_tokens), ("edit", args.edit_tokens)):
        if name in prompt_names:
            n_ctx = max(n_ctx, n + args.max_tokens + 256)
    for drafter in ["none"] + [d for d in args.drafters.split(",") if d and d != "none"]:
        variants = (lever_variants(args) if drafter in ("model", "hybrid")
                    else self_variants(args) if drafter == "self" else [("", {})])
        for suffix, levers in variants:
            engines[drafter + suffix] = Engine(args.target, draft=drafter_arg(drafter, args.draft), n_ctx=n_ctx,
                                               threads=args.threads, draft_max=args.draft_max, p_min=args.p_min,
                                               adaptive=not args.fixed, **levers)
    if args.control:  # a second plain engine: its ratio to the first is the noise every ratio carries
        engines["none (control)"] = Engine(args.target, draft=None, n_ctx=n_ctx, threads=args.threads)
    kw = dict(max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed, ignore_eos=True)
    for engine in engines.values():
        engine.generate("Hello", **{**kw, "max_tokens": 4})  # warm-up: page cache, thread pools
    runs: dict = {}
    order = list(engines.items())
    for rep in range(args.reps):
        for p, name in enumerate(prompt_names):
            text = prompt_text(engines["none"], name, args, rep, texts)
            # each turn starts one engine later: a place in the turn (first after another prompt's
            # runs, say) favours no engine
            turn = (rep * len(prompt_names) + p) % len(order)
            for drafter, engine in order[turn:] + order[:turn]:
                c = engine.generate(chat_prompt(engine, text), **kw)
                s = c.stats
                runs.setdefault((name, drafter), []).append(dict(
                    prompt=name, drafter=drafter, tokens=s.generated_tokens, tps=s.tokens_per_second,
                    acceptance=s.acceptance_rate, mean_accepted=s.mean_accepted_length,
                    mean_draft=(s.drafted / s.steps if s.steps else 0.0), drafted=s.drafted,
                    draft_ms=(1e3 * s.time_draft / s.drafted if s.drafted else 0.0), text=c.text,
                    sources=sources_text(s),
                    time_draft=s.time_draft, time_verify=s.time_verify, time_sampling=s.time_sampling,
                    time_generate=s.time_generate, time_total=s.time_prompt + s.time_generate,
                    time_other=max(0.0, s.time_generate - s.time_draft - s.time_verify - s.time_sampling)))
                print(f"  rep {rep} {drafter:>22} {name:<11} {s.tokens_per_second:7.2f} tok/s  "
                      f"accept {100 * s.acceptance_rate:5.1f} % drafted {s.drafted} lengths {list(s.draft_length_histogram)} "
                      f"kept/drafted {sources_text(s) or '-'}", file=sys.stderr, flush=True)
    rows = []
    for (name, _), cell in runs.items():
        # The ratio to plain pairs each run with the plain run of its own turn (the same phase of a
        # shared machine's load), then takes the median: steadier than a ratio of two medians.
        plain = runs[(name, "none")]
        ratios = sorted(r["tps"] / p["tps"] for r, p in zip(cell, plain) if p["tps"] > 0)
        totals = sorted(p["time_total"] / r["time_total"] for r, p in zip(cell, plain) if r["time_total"] > 0)
        row = sorted(cell, key=lambda r: r["tps"])[len(cell) // 2]
        row["vs_plain"] = ratios[len(ratios) // 2] if ratios else float("nan")
        row["total_vs_plain"] = totals[len(totals) // 2] if totals else float("nan")
        rows.append(row)
    return rows


def sources_text(s) -> str:
    """Each draft source's kept / drafted tokens ("draft 95/112 ngram 0/7"): which source a
    drafter with two (the hybrid; a windowed draft model's lookup) drafted from, and how well."""
    if len(s.source_names) < 2:
        return ""
    return " ".join(f"{n} {a}/{d}" for n, d, a in zip(s.source_names, s.source_drafted, s.source_accepted))


SHARES = ("time_draft", "time_verify", "time_sampling", "time_other")


def share(part: float, total: float) -> str:
    return f"{100 * part / total:5.1f}%" if total > 0 else "-"


def print_table(rows, args) -> None:
    plain_text = {r["prompt"]: r["text"] for r in rows if r["drafter"] == "none"}
    print(f"target {args.target}, draft {args.draft}, {args.threads} threads, {args.max_tokens} tokens, "
          f"temperature {args.temperature}, draft_max {args.draft_max}{' fixed' if args.fixed else ''}, p_min {'default' if args.p_min is None else args.p_min}, "
          f"ISA {_core.current_isa()}, median of {args.reps}")
    w = max([8] + [len(r["drafter"]) for r in rows])
    print(f"{'prompt':<11} {'drafter':<{w}} {'tok/s':>8} {'vs plain':>9} {'accept':>7} {'acc/round':>9} "
          f"{'draft len':>9} {'ms/draft':>8} {'time':>7} {'draft':>6} {'verify':>6} {'sample':>6} {'other':>6} "
          f"{'same text':>9} {'total':>7} {'vs plain':>8}  by source, kept/drafted")
    order = {d: i for i, d in enumerate(dict.fromkeys(r["drafter"] for r in rows))}
    for r in sorted(rows, key=lambda r: (r["prompt"], order[r["drafter"]])):
        print(f"{r['prompt']:<11} {r['drafter']:<{w}} {r['tps']:8.2f} {r['vs_plain']:8.2f}x {100 * r['acceptance']:6.1f}% "
              f"{r['mean_accepted']:9.2f} {r['mean_draft']:9.2f} {r['draft_ms']:8.2f} {r['time_generate']:6.2f}s "
              + " ".join(f"{share(r[key], r['time_generate']):>6}" for key in SHARES)
              + f" {'yes' if r['text'] == plain_text.get(r['prompt']) else 'NO':>9}"
              + f" {r['time_total']:6.2f}s {r['total_vs_plain']:7.2f}x  {r['sources']}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="qwen2.5-coder-1.5b")
    p.add_argument("--draft", default="qwen2.5-coder-0.5b", help="draft model for the model / hybrid drafters")
    p.add_argument("--drafters", default="ngram,self,model,hybrid")
    p.add_argument("--prompts", default=",".join(PROMPTS), help=f"among {', '.join(PROMPTS)}, long and edit")
    p.add_argument("--long-tokens", type=int, default=3000, help="tokens of source before the long prompt's question")
    p.add_argument("--edit-tokens", type=int, default=600, help="tokens of the file the edit prompt asks to rewrite")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--n-ctx", type=int, default=1024)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--draft-max", type=int, default=8)
    p.add_argument("--p-min", type=float, default=None, help="default: the engine's (0.9 for self, 0.7 for the others)")
    p.add_argument("--draft-quant", default="auto",
                   help="draft requantization types, e.g. none,q4_0 (auto: the Engine's default, Q4_0)")
    p.add_argument("--draft-head", default="auto", help="draft head sizes, e.g. auto,8192,16384,0 (0: all)")
    p.add_argument("--draft-skip", default="", help="layer sets the draft skips, e.g. ';12;8,16' (empty: none)")
    p.add_argument("--self-skip", default="", help="layer sets self-drafting skips, e.g. ';6,9,12' (empty: the default set)")
    p.add_argument("--fixed", action="store_true",
                   help="draft draft_max tokens every step (p_min still stops early) instead of lengths chosen "
                        "from measured time: greedy acceptance is then the same on any machine, under any load")
    p.add_argument("--reps", type=int, default=1, help="runs per cell (the median is shown)")
    p.add_argument("--control", action="store_true",
                   help="add a second plain engine, \"none (control)\": its ratio to plain is the A/A spread of the ratios")
    p.add_argument("--json", default=None, help="also write the rows to this file")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    # the memory's read rate before and after the runs: this VM's memory changes speed within minutes
    read = [machine.read_bandwidth(args.threads)]
    rows = run(args)
    read.append(machine.read_bandwidth(args.threads))
    print(f"CPU {machine.cpu_model()}; read bandwidth {read[0]:.1f} GB/s before the runs, {read[1]:.1f} after")
    print_table(rows, args)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        Path(args.json).write_text(json.dumps(dict(args=vars(args), cpu=machine.cpu_model(), read_GBps=read,
                                                   isa=_core.current_isa(), rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `quickdraft` command line: run, chat, bench, serve, inspect, fetch, models."""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from . import _checks, models

DEFAULT_PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a docstring and a short test."

BENCH_PROMPTS = {
    "code": "Write a Python function that checks whether a number is prime, then a function that lists the primes below n.",
    "chat": "Tell me about the history of the city of Lyon in a few paragraphs.",
    "repetitive": "Repeat the following list exactly three times: apple, banana, cherry, date, elderberry, fig, grape.",
}

_DRAFT_COLOR = "\033[36m"
_RESET = "\033[0m"


def _add_model_args(p: argparse.ArgumentParser, draft_default: str | None) -> None:
    p.add_argument("--target", "-m", default=models.DEFAULT_TARGET,
                   help=f"target model: path, key or hf://owner/repo/file.gguf (default {models.DEFAULT_TARGET})")
    default_help = draft_default or "none"
    if draft_default == "auto":
        pairs = ", ".join(f"{d} for {t}" for t, d in models.KNOWN_PAIRS.items())
        default_help = f"the known draft model of the target ({pairs}), else ngram"
    p.add_argument("--draft", "-d", default=draft_default,
                   help="drafter: a model (path/key/hf://), 'hybrid:MODEL' (n-gram lookup over the whole context "
                        f"beside the model), 'ngram', 'self', 'mtp', or 'none' (default: {default_help})")
    p.add_argument("--threads", "-t", type=int, default=None,
                   help="CPU threads (default: one per core, SMT siblings counted once)")
    p.add_argument("--n-ctx", type=int, default=4096, help="context length in tokens (default 4096)")
    p.add_argument("--draft-max", type=int, default=None, help="most tokens drafted per step")
    p.add_argument("--draft-quant", default=None, metavar="TYPE",
                   help="requantize the draft model's wider weight matrices to TYPE at load "
                        "(default: q4_0, measured faster end to end; none: as stored)")
    p.add_argument("--draft-window", default=None, metavar="N",
                   help="a draft model reads only the prompt's last N tokens, drafting from the rest by lookup "
                        "(default 256: a long prompt's draft prefill would cost more than speculation wins back; "
                        "all: the whole prompt)")


def resolve_draft(draft):
    """Engine's draft= for --draft: None, a drafter name, a model's path, or ("hybrid", path)."""
    if draft in (None, "none"):
        return None
    if draft in ("ngram", "self", "mtp"):
        return draft
    if draft.startswith("hybrid:"):
        return "hybrid", str(models.resolve(draft[len("hybrid:"):]))
    return str(models.resolve(draft))


def draft_model_kwargs(args, draft) -> dict:
    """Engine keyword arguments of --draft-quant and --draft-window, for a draft model only."""
    if draft in (None, "ngram", "self", "mtp"):
        return {}
    kw = {}
    if args.draft_quant:
        kw["draft_quant"] = args.draft_quant
    if args.draft_window is not None:
        try:
            kw["draft_window"] = None if args.draft_window == "all" else int(args.draft_window)
        except ValueError:
            raise ValueError(f"--draft-window takes a token count or 'all', got {args.draft_window!r}") from None
    return kw


def _add_sampling_args(p: argparse.ArgumentParser, temperature: float) -> None:
    p.add_argument("--max-tokens", "-n", type=int, default=256, help="most tokens to generate (default 256)")
    p.add_argument("--temperature", "--temp", type=float, default=temperature,
                   help=f"sampling temperature; 0 = greedy (default {temperature})")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--min-p", type=float, default=None)
    p.add_argument("--repeat-penalty", type=float, default=None)
    p.add_argument("--seed", type=int, default=None, help="RNG seed: same seed and settings, same output")
    p.add_argument("--stop", action="append", default=None, help="stop string (repeatable)")


def _sampling_kwargs(args) -> dict:
    kw = {"max_tokens": args.max_tokens, "temperature": args.temperature, "seed": args.seed, "stop": args.stop}
    for name in ("top_k", "top_p", "min_p", "repeat_penalty"):
        v = getattr(args, name)
        if v is not None:
            kw[name] = v
    return kw


def _make_engine(args, draft: str | None = "__args__"):
    from .engine import Engine

    if draft == "__args__":
        if args.draft == "auto":
            args.draft = models.default_draft(args.target)
        draft = args.draft
    t0 = time.perf_counter()
    target = str(models.resolve(args.target))
    draft = resolve_draft(draft)
    kw = {"n_ctx": args.n_ctx, "threads": args.threads, **draft_model_kwargs(args, draft)}
    if args.draft_max is not None:
        kw["draft_max"] = args.draft_max
    print(f"loading {args.target}" + (f" with drafter {args.draft}" if draft else "") + " ...", end="", file=sys.stderr,
          flush=True)
    with warnings.catch_warnings(record=True) as caught:  # shown after the "loading" line
        warnings.simplefilter("always")
        try:
            engine = Engine(target, draft=draft, **kw)
        except BaseException:
            print(file=sys.stderr)  # end the "loading" line before the error
            raise
    print(f" done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    for w in caught:
        print(f"quickdraft: warning: {w.message}", file=sys.stderr)
    return engine


def _fmt_stats(stats) -> str:
    def g(name, default=0):
        return getattr(stats, name, default) if not isinstance(stats, dict) else stats.get(name, default)

    drafted, accepted = g("drafted"), g("accepted")
    rate = g("acceptance_rate", accepted / drafted if drafted else 0.0)
    return (f"{g('generated_tokens')} tokens, {g('tokens_per_second'):.1f} tok/s, "
            f"drafted {drafted}, accepted {accepted} ({100 * rate:.0f} %)")


def _stream_to_stdout(pieces, show_draft: bool):
    color = show_draft and sys.stdout.isatty()
    last = None
    for piece in pieces:
        last = piece
        text = piece.text
        if color and getattr(piece, "from_draft", False):
            text = _DRAFT_COLOR + text + _RESET
        sys.stdout.write(text)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return last


def _prompt_for(engine, text: str, raw: bool):
    if raw or engine.tokenizer.chat_template is None:  # no template (base model): plain text
        return text
    return engine.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)


def _cmd_run(args) -> int:
    text = _checks.text("prompt", args.prompt or DEFAULT_PROMPT)  # before loading: argv may hold any bytes
    engine = _make_engine(args)
    prompt = _prompt_for(engine, text, args.raw)
    it = engine.stream(prompt, **_sampling_kwargs(args))
    try:
        _stream_to_stdout(it, args.show_draft)
    except KeyboardInterrupt:
        it.close()
        print("\n[interrupted]", file=sys.stderr)
    completion = it.completion if hasattr(it, "completion") else None
    stats = completion.stats if completion is not None else engine.last_stats
    print(f"[{args.draft or 'none'}] {_fmt_stats(stats)}, finish: "
          f"{completion.finish_reason if completion is not None else '-'}", file=sys.stderr)
    if args.compare and args.draft not in (None, "none"):
        plain = _make_engine(args, draft=None)
        c = plain.generate(prompt, **_sampling_kwargs(args))
        tps_spec = getattr(stats, "tokens_per_second", 0.0)
        tps_plain = getattr(c.stats, "tokens_per_second", 0.0)
        print(f"[plain] {_fmt_stats(c.stats)}", file=sys.stderr)
        if tps_plain:
            print(f"speedup over plain decoding: {tps_spec / tps_plain:.2f}x", file=sys.stderr)
    return 0


def _cmd_chat(args) -> int:
    engine = _make_engine(args)
    messages: list[dict] = []
    if args.system:
        messages.append({"role": "system", "content": args.system})
    print("quickdraft chat: /reset clears history, /stats shows the last reply's stats, /exit quits.", file=sys.stderr)
    last_stats = None
    while True:
        try:
            line = input("> ") if sys.stdin.isatty() else sys.stdin.readline()
        except (EOFError, KeyboardInterrupt):
            break
        if not sys.stdin.isatty() and line == "":
            break
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if line.strip() == "/exit":
            break
        if line.strip() == "/reset":
            messages = messages[:1] if args.system else []
            print("[history cleared]", file=sys.stderr)
            continue
        if line.strip() == "/stats":
            print(_fmt_stats(last_stats) if last_stats is not None else "[no reply yet]", file=sys.stderr)
            continue
        messages.append({"role": "user", "content": line})
        it = engine.stream_chat(messages, **_sampling_kwargs(args))
        reply = []
        try:
            for piece in it:
                reply.append(piece.text)
                sys.stdout.write(piece.text)
                sys.stdout.flush()
        except KeyboardInterrupt:
            it.close()
            print("\n[interrupted]", file=sys.stderr)
        sys.stdout.write("\n")
        completion = getattr(it, "completion", None)
        last_stats = completion.stats if completion is not None else None
        messages.append({"role": "assistant", "content": "".join(reply)})
    return 0


def _cmd_bench(args) -> int:
    prompts = dict(BENCH_PROMPTS)
    if args.prompt:
        prompts = {f"prompt{i}": p for i, p in enumerate(args.prompt)}
    drafters = args.drafters.split(",") if args.drafters != "auto" else [models.default_draft(args.target), "ngram", "self"]
    drafters = list(dict.fromkeys(drafters))
    rows = []
    for drafter in ["none"] + [d for d in drafters if d != "none"]:
        engine = _make_engine(args, draft=None if drafter == "none" else drafter)
        for name, text in prompts.items():
            prompt = _prompt_for(engine, text, args.raw)
            c = engine.generate(prompt, **_sampling_kwargs(args))
            rows.append((drafter, name, c.stats))
        engine.close()
    plain = {name: s.tokens_per_second for d, name, s in rows if d == "none"}
    print(f"{'drafter':<22} {'prompt':<12} {'tok/s':>8} {'vs plain':>9} {'accept':>7} {'mean acc len':>12}")
    for drafter, name, s in rows:
        ratio = s.tokens_per_second / plain[name] if plain.get(name) else float("nan")
        mean_len = getattr(s, "mean_accepted_length", float("nan"))
        print(f"{drafter:<22} {name:<12} {s.tokens_per_second:8.1f} {ratio:8.2f}x {100 * s.acceptance_rate:6.0f}% "
              f"{mean_len:12.2f}")
    return 0


def _cmd_serve(args) -> int:
    from .server.run import main as serve_main  # imports starlette and uvicorn only when serving

    return serve_main(args)


def _cmd_inspect(args) -> int:
    from .inspect import inspect

    print(inspect(models.resolve(args.file)))
    return 0


def _cmd_fetch(args) -> int:
    for key in args.keys:
        print(models.fetch(key))
    return 0


def _cmd_models(args) -> int:
    print(f"cache: {models.cache_dir()}")
    for key, m in models.KNOWN_MODELS.items():
        state = "cached" if models.is_cached(key) else "not fetched"
        print(f"  {key:<20} {m.size / 1e6:7.0f} MB  {state:<11}  {m.description}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="quickdraft",
        description="Exact speculative decoding for GGUF models on the CPU. "
                    "Models are given as a path, a known key (see `quickdraft models`) or hf://owner/repo/file.gguf.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("run", help="stream a speculative generation (default: the Qwen2.5-Coder 0.5B -> 1.5B pair; "
                                   "other targets draft with ngram)")
    s.add_argument("prompt", nargs="?", default=None, help="prompt text (default: a coding request)")
    _add_model_args(s, "auto")
    _add_sampling_args(s, temperature=0.0)
    s.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    s.add_argument("--show-draft", action="store_true", help="colour the tokens that came from the drafter")
    s.add_argument("--compare", action="store_true", help="also run plain decoding and print the speedup")
    s.set_defaults(func=_cmd_run)

    s = sub.add_parser("chat", help="interactive multi-turn chat with the model's chat template")
    _add_model_args(s, "auto")
    _add_sampling_args(s, temperature=0.7)
    s.add_argument("--system", default=None, help="system message")
    s.set_defaults(func=_cmd_chat)

    s = sub.add_parser("bench", help="plain vs speculative decoding on built-in or given prompts")
    _add_model_args(s, None)
    _add_sampling_args(s, temperature=0.0)
    s.add_argument("--drafters", default="auto",
                   help="comma-separated drafters to compare with plain decoding (default: the target's known "
                        "draft model if it has one, ngram, self)")
    s.add_argument("--prompt", action="append", default=None, help="a prompt (repeatable; default: code/chat/repetitive)")
    s.add_argument("--raw", action="store_true", help="send prompts without the chat template")
    s.set_defaults(func=_cmd_bench)

    s = sub.add_parser("serve", help="an OpenAI-compatible HTTP server (needs quickdraft[server])")
    _add_model_args(s, None)
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    s.add_argument("--api-key", default=None,
                   help="require Authorization: Bearer KEY (default: $QUICKDRAFT_API_KEY, else none)")
    s.add_argument("--model-name", default=None, help="the model id clients send (default: the target's name)")
    s.add_argument("--queue", type=int, default=8, help="requests that may wait while one runs; more get 429 (default 8)")
    s.add_argument("--max-tokens", type=int, default=4096,
                   help="most tokens per request, and the default when a request sets none (default 4096)")
    s.add_argument("--max-body", type=int, default=8 << 20, help="largest request body in bytes (default 8 MiB)")
    s.set_defaults(func=_cmd_serve)

    s = sub.add_parser("inspect", help="summarise a GGUF file (path, model key or hf:// URL)")
    s.add_argument("file")
    s.set_defaults(func=_cmd_inspect)

    s = sub.add_parser("fetch", help="download known models into the cache")
    s.add_argument("keys", nargs="+", metavar="KEY", choices=list(models.KNOWN_MODELS))
    s.set_defaults(func=_cmd_fetch)

    s = sub.add_parser("models", help="list known model keys and what is cached")
    s.set_defaults(func=_cmd_models)
    return p


def _warning_line(message, category, filename, lineno, line=None) -> str:
    return f"quickdraft: warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    """Runs a command; a bad argument, file or model is one "quickdraft: error: ..." line and exit 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 1
    from ._core import QuickdraftError

    warnings.formatwarning = _warning_line  # warnings for the user, not source lines
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except MemoryError as e:
        print(f"quickdraft: error: out of memory{': ' + str(e) if str(e) else ''}", file=sys.stderr)
        return 2
    except (ValueError, OSError, QuickdraftError) as e:  # GGUFError, ChatTemplateError are ValueErrors
        print(f"quickdraft: error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"quickdraft: error: {e} (this build lacks that part of the engine)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

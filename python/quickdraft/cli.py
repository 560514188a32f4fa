"""The `quickdraft` command line."""

from __future__ import annotations

import argparse
import sys

from . import models


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
    p = argparse.ArgumentParser(prog="quickdraft", description="Exact speculative decoding for GGUF models on the CPU.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("inspect", help="summarise a GGUF file (path, model key or hf:// URL)")
    s.add_argument("file")
    s.set_defaults(func=_cmd_inspect)

    s = sub.add_parser("fetch", help="download known models into the cache")
    s.add_argument("keys", nargs="+", metavar="KEY", choices=list(models.KNOWN_MODELS))
    s.set_defaults(func=_cmd_fetch)

    s = sub.add_parser("models", help="list known model keys and what is cached")
    s.set_defaults(func=_cmd_models)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except (ValueError, FileNotFoundError) as e:
        print(f"quickdraft: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

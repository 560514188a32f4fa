"""``quickdraft serve``: binds the address, prints the URL, loads the model and serves."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from .app import Server, ServerConfig


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def model_name(target: str) -> str:
    """The id clients send as "model": a known key as is, a file's name without .gguf."""
    from .. import models

    if target in models.KNOWN_MODELS:
        return target
    name = Path(str(target)).name
    return name[:-5] if name.endswith(".gguf") else name


def serve(config: ServerConfig) -> int:
    """Serves until interrupted. Port 0 picks a free port (the printed URL has it)."""
    import uvicorn

    server = Server(config)
    sock = _bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"quickdraft serve: http://{shown}:{port}/v1  model {server.model_name!r}, drafter "
          f"{config.drafter_kind}, queue {config.queue}; loading ...", flush=True)
    uv = uvicorn.Server(uvicorn.Config(server.app(), log_level=os.environ.get("QD_SERVER_LOG", "warning"),
                                       lifespan="on", timeout_graceful_shutdown=5))
    uv.run(sockets=[sock])
    return 0


def main(args) -> int:
    """The CLI's entry (cli.py parses the arguments)."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        print('quickdraft serve needs the server extra: pip install "quickdraft[server]"', file=sys.stderr)
        return 2
    from .. import models
    from ..cli import draft_model_kwargs, resolve_draft

    target = str(models.resolve(args.target))
    draft = resolve_draft(args.draft)
    kw = draft_model_kwargs(args, draft)
    config = ServerConfig(target=target, draft=draft, model_name=args.model_name or model_name(args.target),
                          host=args.host, port=args.port, api_key=args.api_key or os.environ.get("QUICKDRAFT_API_KEY"),
                          queue=args.queue, max_tokens=args.max_tokens, max_body=args.max_body, n_ctx=args.n_ctx,
                          threads=args.threads, draft_max=args.draft_max or 8, engine_kwargs=kw)
    if config.max_tokens < 1 or config.queue < 0 or config.max_body < 1:
        print("quickdraft serve: --max-tokens and --max-body must be >= 1, --queue >= 0", file=sys.stderr)
        return 2
    return serve(config)

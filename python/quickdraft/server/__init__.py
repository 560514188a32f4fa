"""quickdraft's OpenAI-compatible HTTP server (``quickdraft serve``; ``pip install "quickdraft[server]"``).

    from quickdraft.server import ServerConfig, create_app
    app = create_app(ServerConfig(target="smollm2-135m-instruct-q4_1.gguf", draft="ngram"))

``create_app`` returns a Starlette ASGI app (run it with uvicorn); the model loads on startup on
the engine's own worker thread. Details: docs/server.md.
"""

from .app import Server, ServerConfig, create_app
from .protocol import APIError, Limits

__all__ = ["APIError", "Limits", "Server", "ServerConfig", "create_app"]

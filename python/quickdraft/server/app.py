"""The ASGI application: OpenAI-compatible routes over one Worker.

    POST /v1/chat/completions   messages through the model's chat template
    POST /v1/completions        raw text (or token ids)
    GET  /v1/models             the one model served
    GET  /health                200 when ready, 503 while loading
    GET  /metrics               Prometheus text

Streaming is server-sent events: ``data: {chunk}`` lines and ``data: [DONE]``. A client that
disconnects (streamed or not) has its generation cancelled within one engine step.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Optional, Union

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from . import protocol
from .metrics import Metrics
from .protocol import APIError, GenRequest, Limits
from .worker import Job, NotReady, QueueFull, Worker


@dataclass
class ServerConfig:
    """What ``quickdraft serve`` was told: the model, the address, and the limits."""

    target: str
    draft: Union[None, str, tuple] = None  # None, "ngram", "self", "mtp", a draft model or ("hybrid", model)
    model_name: str = ""               # the id clients send as "model" (default: the target's name)
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: Optional[str] = None
    queue: int = 8                     # requests that may wait while one runs
    max_tokens: int = 4096             # per request, and the default when a request sets none
    max_body: int = 8 << 20            # bytes of request body
    n_ctx: int = 4096
    threads: Optional[int] = None
    draft_max: int = 8
    engine_kwargs: dict = field(default_factory=dict)

    @property
    def drafter_kind(self) -> str:
        if self.draft in (None, "none"):
            return "none"
        if isinstance(self.draft, tuple):  # ("hybrid", path)
            return self.draft[0]
        return self.draft if self.draft in ("ngram", "self", "mtp") else "model"


def _error(e: APIError, headers: Optional[dict] = None) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status, headers=headers)


def _sse(obj) -> bytes:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


class AuthMiddleware:
    """401 for any request but /health without ``Authorization: Bearer <key>``."""

    def __init__(self, app, key: str):
        self.app = app
        self.expected = f"Bearer {key}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] != "/health":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                err = APIError(401, "Incorrect API key provided: send Authorization: Bearer <key> (quickdraft serve "
                                    "--api-key)", None, "invalid_api_key")
                await _error(err, {"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Server:
    """The routes, the worker and the metrics of one served model."""

    def __init__(self, config: ServerConfig, worker: Optional[Worker] = None):
        self.config = config
        self.model_name = config.model_name or "quickdraft"
        self.created = int(time.time())
        kinds = ["none", "ngram"] + ([config.drafter_kind] if config.drafter_kind not in ("none", "ngram") else [])
        self.limits = Limits(max_tokens=config.max_tokens, draft_max=config.draft_max, drafters=tuple(kinds))
        self.metrics = Metrics(self._gauges)
        self.worker = worker or Worker(self._load, config.queue, self._done)

    def _load(self):
        from ..engine import Engine

        return Engine(self.config.target, draft=self.config.draft, n_ctx=self.config.n_ctx,
                      threads=self.config.threads, draft_max=self.config.draft_max, **self.config.engine_kwargs)

    def _done(self, job: Job, completion) -> None:
        self.metrics.generation(completion, time.monotonic() - job.enqueued)

    def _gauges(self) -> dict:
        w = self.worker
        return {"quickdraft_queue_waiting": ("Requests waiting for the engine.", w.waiting),
                "quickdraft_queue_running": ("Requests the engine is generating (0 or 1).", w.running),
                "quickdraft_queue_capacity": ("Requests that may wait (quickdraft serve --queue).", w.queue_size),
                "quickdraft_ready": ("1 once the model is loaded.", int(w.state == "ready"))}

    # -- plain routes ------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        state = self.worker.state
        if state == "ready":
            return JSONResponse({"status": "ok", "model": self.model_name})
        body = {"status": state}
        if self.worker.error:
            body["error"] = self.worker.error
        return JSONResponse(body, status_code=503 if state == "loading" else 500)

    async def metrics_route(self, request: Request) -> Response:
        return PlainTextResponse(self.metrics.render(), media_type="text/plain; version=0.0.4")

    def _model_object(self) -> dict:
        return {"id": self.model_name, "object": "model", "created": self.created, "owned_by": "quickdraft"}

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [self._model_object()]})

    async def model(self, request: Request) -> Response:
        name = request.path_params["model"]
        if name != self.model_name:
            raise self._unknown_model(name)
        return JSONResponse(self._model_object())

    def _unknown_model(self, name: str) -> APIError:
        return APIError(404, f"The model `{name}` does not exist; this server serves `{self.model_name}`",
                        "model", "model_not_found")

    # -- generation --------------------------------------------------------------------------
    async def chat(self, request: Request) -> Response:
        return await self._generate(request, "/v1/chat/completions", protocol.parse_chat)

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, "/v1/completions", protocol.parse_completion)

    async def _body(self, request: Request) -> bytes:
        limit = self.config.max_body
        too_big = APIError(413, f"the request body is larger than this server's limit of {limit} bytes "
                                "(quickdraft serve --max-body)", None, "request_too_large")
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise too_big
        chunks, size = [], 0
        async for part in request.stream():
            size += len(part)
            if size > limit:
                raise too_big
            chunks.append(part)
        return b"".join(chunks)

    async def _generate(self, request: Request, endpoint: str, parse) -> Response:
        try:
            req = parse(protocol.parse_json(await self._body(request)), self.limits)
            if req.model != self.model_name:
                raise self._unknown_model(req.model)
            job = Job(req, asyncio.get_running_loop())
            try:
                self.worker.submit(job)
            except QueueFull:
                raise APIError(429, f"the server is busy: {self.worker.queue_size} requests are waiting already "
                                    "(quickdraft serve --queue); retry later", None, "queue_full") from None
            except NotReady as e:
                raise APIError(503, str(e), None, "model_loading") from None
        except APIError as e:
            self.metrics.request(endpoint, e.status)
            return _error(e, {"Retry-After": "1"} if e.status in (429, 503) else None)

        watcher = asyncio.create_task(self._watch_disconnect(request, job))
        try:
            kind, value = await job.events.get()
        except asyncio.CancelledError:
            self._cancel(job, watcher)
            raise
        if kind != "started":
            self._cancel(job, watcher)
            status = value.status if kind == "error" else 499
            self.metrics.request(endpoint, status)
            return _error(value) if kind == "error" else Response(status_code=499)
        self.metrics.request(endpoint, 200)
        rid, created = protocol.new_id(req.kind), protocol.now()
        echo = value if req.echo else ""
        if req.stream:
            return StreamingResponse(self._events(job, watcher, rid, created, echo), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        try:
            texts = [echo]
            while True:
                kind, value = await job.events.get()
                if kind == "piece":
                    texts.append(value)
                elif kind == "done":
                    job.finished = True
                    return JSONResponse(protocol.response(req, rid, created, "".join(texts), value))
                elif kind == "error":
                    job.finished = True
                    return _error(value)
                else:  # the client left
                    return Response(status_code=499)
        finally:
            self._cancel(job, watcher)

    async def _events(self, job: Job, watcher: asyncio.Task, rid: str, created: int, echo: str):
        req = job.req
        try:
            if req.kind == "chat":
                yield _sse(protocol.chunk(req, rid, created, "", role=True))
            elif echo:
                yield _sse(protocol.chunk(req, rid, created, echo))
            while True:
                kind, value = await job.events.get()
                if kind == "piece":
                    if value:
                        yield _sse(protocol.chunk(req, rid, created, value))
                elif kind == "done":
                    job.finished = True
                    finish = protocol.FINISH_REASONS.get(value.finish_reason, "stop")
                    spec = protocol.speculative(value.stats)
                    yield _sse(protocol.chunk(req, rid, created, None if req.kind == "chat" else "", finish,
                                              spec=spec))
                    if req.include_usage:
                        yield _sse(protocol.chunk(req, rid, created, no_choice=True,
                                                  usage_obj=protocol.usage(value.stats, len(value.tokens))))
                    yield b"data: [DONE]\n\n"
                    return
                elif kind == "error":
                    job.finished = True
                    yield _sse(value.body())
                    yield b"data: [DONE]\n\n"
                    return
                else:  # the client left
                    return
        finally:
            self._cancel(job, watcher)

    async def _watch_disconnect(self, request: Request, job: Job) -> None:
        """Cancels job when its client disconnects (the body has been read: the next message is that)."""
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                if not job.finished:
                    self.metrics.cancel()
                    self.worker.cancel(job)
                    job.events.put_nowait(("gone", None))
                return

    def _cancel(self, job: Job, watcher: asyncio.Task) -> None:
        watcher.cancel()
        if not job.finished:
            job.finished = True
            self.worker.cancel(job)

    # -- the application ---------------------------------------------------------------------
    def app(self) -> Starlette:
        async def http_error(request: Request, exc: HTTPException) -> Response:
            code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
            return _error(APIError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", None, code))

        async def api_error(request: Request, exc: APIError) -> Response:
            return _error(exc)

        async def server_error(request: Request, exc: Exception) -> Response:
            return _error(APIError(500, f"internal error: {exc}", None, "internal_error"))

        routes = [
            Route("/health", self.health),
            Route("/metrics", self.metrics_route),
            Route("/v1/models", self.models),
            Route("/v1/models/{model:path}", self.model),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
        ]
        @contextlib.asynccontextmanager
        async def lifespan(app):
            self.worker.start()  # loads the model on the worker thread: /health is 503 until then
            yield
            await asyncio.to_thread(self.worker.stop)

        app = Starlette(routes=routes, exception_handlers={HTTPException: http_error, APIError: api_error,
                                                           Exception: server_error}, lifespan=lifespan)
        if self.config.api_key:
            app.add_middleware(AuthMiddleware, key=self.config.api_key)
        return app


def create_app(config: ServerConfig) -> Starlette:
    """The ASGI app for config (the model loads on startup, /health says when it is ready)."""
    return Server(config).app()

"""The one thread that owns the engine, and the bounded FIFO queue in front of it.

One engine serves one sequence at a time, so every generation runs here, in arrival order;
the event loop only queues requests and relays what comes back. Engine steps release the
GIL, so /health and /metrics answer while a long prompt is being processed. A cancelled job
(its client went away) stops within one engine step: the engine is cancelled if the job is
running, and the job is dropped if it is still waiting.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import Callable, Optional

from .protocol import APIError, GenRequest


class QueueFull(Exception):
    """Every queue slot is taken."""


class NotReady(Exception):
    """The engine is still loading (or failed to load)."""


class Job:
    """One request on its way through the worker. Events arrive on ``events`` (an asyncio queue
    of the loop that made the job): ("started", prompt_text), ("piece", text), ("done", Completion),
    ("error", APIError), ("dropped", None)."""

    def __init__(self, req: GenRequest, loop: asyncio.AbstractEventLoop):
        self.req = req
        self.events: asyncio.Queue = asyncio.Queue()
        self.cancelled = threading.Event()
        self.finished = False  # set on the loop when "done", "error" or "dropped" was read
        self.enqueued = time.monotonic()
        self.started: Optional[float] = None
        self._loop = loop

    def push(self, kind: str, value=None) -> None:
        """From the worker thread: hands an event to the request's event loop."""
        try:
            self._loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))
        except RuntimeError:  # the loop has closed (server shutting down)
            pass


class Worker:
    """Loads the engine on its own thread, then serves queued jobs one at a time."""

    def __init__(self, load: Callable[[], object], queue_size: int, on_done: Callable = None):
        if queue_size < 0:
            raise ValueError(f"the queue size must be >= 0, got {queue_size}")
        self.queue_size = queue_size
        self.state = "loading"      # "ready", "failed"
        self.error: Optional[str] = None
        self.engine = None
        self._load = load
        self._on_done = on_done or (lambda job, completion: None)
        self._cv = threading.Condition()
        self._waiting: deque = deque()
        self._current: Optional[Job] = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="quickdraft-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Cancels the running job, drops the waiting ones and ends the thread."""
        with self._cv:
            self._stopping = True
            for job in self._waiting:
                job.push("dropped")
            self._waiting.clear()
            if self._current is not None and self.engine is not None:
                self.engine.cancel()
            self._cv.notify_all()
        self._thread.join(timeout)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def running(self) -> int:
        return 1 if self._current is not None else 0

    def submit(self, job: Job) -> None:
        """Queues job; QueueFull when every slot is taken, NotReady while loading."""
        with self._cv:
            if self.state != "ready" or self._stopping:
                raise NotReady(self.error or "the model is still loading")
            # The running job holds the engine and queue_size more may wait for it; while the
            # engine is idle the first job in line takes the running slot.
            if len(self._waiting) >= self.queue_size + (self._current is None):
                raise QueueFull()
            self._waiting.append(job)
            self._cv.notify()

    def cancel(self, job: Job) -> None:
        """Thread-safe: stops job within one engine step, or drops it from the queue."""
        with self._cv:
            job.cancelled.set()
            if job in self._waiting:
                self._waiting.remove(job)
                job.push("dropped")
            elif self._current is job and self.engine is not None:
                self.engine.cancel()

    # -- the worker thread ---------------------------------------------------------------------
    def _run(self) -> None:
        try:
            engine = self._load()
        except BaseException as e:  # a bad model file must not take the server down silently
            with self._cv:
                self.state, self.error = "failed", f"the model failed to load: {e}"
            return
        with self._cv:
            self.engine, self.state = engine, "ready"
        while True:
            with self._cv:
                while not self._waiting and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
                job = self._current = self._waiting.popleft()
            try:
                self._serve(job)
            except BaseException as e:  # the worker must outlive any one request
                job.push("error", APIError(500, f"generation failed: {e}", None, "internal_error"))
            finally:
                with self._cv:
                    self._current = None

    def _serve(self, job: Job) -> None:
        req, engine = job.req, self.engine
        job.started = time.monotonic()
        try:
            prompt = _prompt_text(engine, req)
            stream = (engine.stream_chat(req.messages, **req.options) if req.kind == "chat"
                      else engine.stream(prompt, **req.options))
        except (ValueError, TypeError) as e:  # bad input: a prompt too long, a template that refuses the messages
            param = "prediction" if "prediction" in str(e) else "messages" if req.kind == "chat" else "prompt"
            job.push("error", APIError(400, str(e), param))
            return
        except Exception as e:  # never the server's end: the next request is served
            job.push("error", APIError(500, f"generation failed to start: {e}", None, "internal_error"))
            return
        job.push("started", prompt)
        try:
            if job.cancelled.is_set():  # cancelled before start(), which cleared the engine's flag
                engine.cancel()      # the first step then finishes "cancelled"
            for piece in stream:
                job.push("piece", piece.text)
                if job.cancelled.is_set():
                    break
            stream.close()
            completion = stream.completion
            self._on_done(job, completion)
        except Exception as e:
            stream.close()
            job.push("error", APIError(500, f"generation failed: {e}", None, "internal_error"))
            return
        job.push("done", completion)


def _prompt_text(engine, req: GenRequest) -> str:
    """The text the completion echoes (completions) or "" (chat: rendered by stream_chat)."""
    if req.kind == "chat":
        return ""
    if isinstance(req.prompt, str):
        return req.prompt
    return engine.detokenize(req.prompt)

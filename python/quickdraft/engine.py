"""Speculative generation from Python: ``Engine``, ``Completion``, ``Piece``.

The loop itself (draft, one batched verify, accept, truncate) runs in C++ (``_core.Engine``, qd::Engine);
this module turns arguments into native options, steps the loop with the GIL released, and
hands back text. Each native step is one prefill chunk or one draft-verify round, so closing a
stream or pressing Ctrl-C stops within one step and keeps everything produced so far.

Basic use::

    from quickdraft import Engine
    with Engine("qwen2.5-coder-1.5b", draft="qwen2.5-coder-0.5b") as engine:
        out = engine.generate("def fib(n):", max_tokens=64, temperature=0)
        print(out.text, out.stats.tokens_per_second, out.stats.acceptance_rate)
        for piece in engine.stream("Write a haiku about caches.", seed=1):
            print(piece.text, end="", flush=True)
"""

from __future__ import annotations

import collections
import os
import secrets
import threading
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

from . import _checks, _core

Prompt = Union[str, Sequence[int]]

DRAFTERS = ("none", "ngram", "self", "model", "hybrid", "mtp")


@dataclass
class Piece:
    """Text and tokens accepted in one go; ``from_draft``: drafted tokens the target kept."""

    text: str
    tokens: list
    from_draft: bool


# What a generation drafted, accepted and spent its time on: the C++ struct qd::Stats
# (include/quickdraft/engine.h), read in place.
Stats = _core.Stats


@dataclass
class Completion:
    """A finished generation. finish_reason: "eos", "length", "stop", "context" or "cancelled"."""

    text: str
    tokens: list
    finish_reason: str
    stats: Stats


class Stream:
    """An iterator of Pieces from Engine.stream(); ``.completion`` once it has ended or been
    closed (None before). While it is open it holds its engine: other threads' calls wait until it
    is exhausted, closed or garbage-collected."""

    def __init__(self, engine: "Engine", core, release: Callable[[], None]):
        self.completion: Optional[Completion] = None
        self._engine = engine
        self._core = core
        self._release: Optional[Callable[[], None]] = release  # None once the generation has ended
        self._pending: collections.deque = collections.deque()
        self._step_lock = threading.Lock()  # a close() from another thread waits for the step in flight

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Piece:
        while not self._pending:
            with self._step_lock:
                if self._release is None:
                    raise StopIteration
                if self._core.finished:
                    self._end()
                    raise StopIteration
                try:
                    chunks = self._core.step()
                except BaseException:  # Ctrl-C, a bad file: keep what was produced, free the engine
                    self._end()
                    raise
            self._pending.extend(chunks)
        text, tokens, from_draft = self._pending.popleft()
        return Piece(text, tokens, from_draft)

    def close(self) -> None:
        """Stops the generation within one step, keeping what was produced."""
        if self._release is None:
            return
        self._core.cancel()  # the step in flight, if any, is the last
        with self._step_lock:
            self._end()

    def _end(self) -> None:
        # Called with _step_lock held: records the completion, then hands the engine on.
        release, self._release = self._release, None
        if release is None:
            return
        try:
            core = self._core
            if not core.finished:
                core.cancel()
                core.step()  # records "cancelled" and releases held-back text
            self.completion = self._engine._completion(core)
            self._engine.last_completion = self.completion
        finally:
            self._pending.clear()
            release()

    def __del__(self) -> None:
        # A stream dropped while open must not keep its engine busy forever.
        try:
            if self._release is not None:
                self._end()
        except Exception:
            pass

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Engine:
    """A target model with an optional drafter, generating text by speculative decoding.

    target: a GGUF path, a known model key, ``hf://...``, or a ``quickdraft.Model``.
    draft: None (plain decoding), "ngram" (prompt lookup), "self" (the target with layers
    skipped, beside the same lookup of copies as the hybrid's; a file with multi-token-prediction
    layers, qwen35's nextn, drafts with them instead),
    "mtp" (those layers: the model's own MTP head drafts from its hidden states), a draft model
    (path / key / Model), or ("hybrid", model): a lookup of copies over the whole context beside the
    model, each step drafting from whichever of the two the controller expects to pay more. A copy
    is a match of 8 tokens or more: shorter ones in new text are chance, and the model drafts
    them better (docs/benchmarks.md, "The hybrid's n-gram drafts only copies").
    draft_max: the most tokens drafted per step; the actual length adapts to measured costs
    and acceptance (``adaptive=False`` always drafts draft_max). p_min: a model drafter ends
    a draft at its first token whose top probability is below this, that token included (its
    logits are paid for already, and verifying it costs little). None: 0.9 for "self", 0.7 for
    the others, which drafted the most per cost on real drafts (docs/benchmarks.md, "A draft
    ends at its first unsure token"). skip_layers: the layers "self" skips (default:
    ``quickdraft._core.default_skip_layers(n_layer)``). ngram_min / ngram_max: suffix lengths
    the "ngram" drafter matches (not the hybrid's copies). draft_head: a model drafter ("self" too) computes its output layer
    only for the first draft_head token ids, the stop tokens and the ids that occur in the text
    (None: 32768 when the draft vocabulary has 65536 tokens or more, else all; 0: all); a draft
    model's output rows past the head are then neither requantized nor repacked at load, only
    read when their ids join the head (the 0.5B's output layer: 17 MB instead of 77). The
    output is unchanged, only the drafts: the target verifies with its full output layer.
    draft_quant: a GGML type name ("q4_0"): a draft model's weight matrices stored in a wider type
    (Q5_0, Q8_0, Q6_K...) are requantized to it at load, a cheaper step for a little acceptance
    (an embedding with a separate output layer is only looked up, and keeps its type).
    "auto" (the default): q4_0 for a draft model, which measured faster end to end on every
    prompt on AVX2 and AVX-512 (docs/benchmarks.md, "Draft levers"), except the target's own
    file (a model drafting for itself accepts every token); None or "none": as stored. draft_skip: layers a draft model skips (as "self" skips skip_layers). Both
    change only the drafts: the target's weights are never touched. draft_window: a draft model
    reads only the last draft_window tokens of a prompt (None: all of it). Its prefill would
    otherwise cost, before the first token, about a third of the target's own prompt time (a 0.5B
    draft for a 1.5B target), which a long prompt's answer does not win back; the drafts lose
    little (docs/benchmarks.md, "The draft model reads the end of a long prompt"). The prompt
    before the window is drafted from by a lookup of copies (as the hybrid's), a second source
    ("lookup" in Stats.source_names) used where the output repeats it (a file being rewritten)
    and the controller expects it to pay more than the model.

    n_ctx: tokens of KV cache (ValueError, with the bytes needed, when it cannot be allocated; a
    warning when it exceeds the target's trained context). threads: None (one per core this
    process may use: a core's SMT siblings count once, as in llama.cpp) or >= 1; more than the
    CPUs it may use is capped to them, with a warning, since extra threads only compete for the
    same cores. mmap: map the GGUF files (the default: pages are read on demand and shared with
    the page cache) or, with False, read them into memory, so that a model file truncated or
    rewritten while the engine runs cannot affect it. A mapped file is checked at each
    generation's start (GGUFError when it changed); a truncation in the middle of one ends the
    process with a message naming the file (the mapped bytes are gone).

    Threads: an Engine may be shared by several threads. Its calls serialize: a generate(),
    chat() or stream() started while another thread's generation runs, or while another
    thread's stream is still open, waits for it (an open stream holds the engine until it is
    exhausted, closed or garbage-collected). A thread that starts a call while a stream *it*
    opened on the same engine is still open gets RuntimeError("engine busy ...") instead of
    waiting for itself forever. cancel() is the exception: it never waits, and stops whichever
    generation is running.

    Greedy output (temperature=0) is token-for-token the target's own greedy output. Sampled
    output has exactly the target's distribution. Passing ``seed=`` when sampling makes the text
    reproducible, and the same whatever drafts it: every token is drawn by an exponential race
    fixed by the seed and its position (the draft's tokens too, so that they mostly agree with the
    target's draws), and a drafted token is kept only where the target's own draw is that token.
    So the text is plain decoding's with that seed, for any drafter, draft_max and load; the draft
    lengths still adapt to measured time. It keeps a drafted token nearly as often as speculative
    sampling does without a seed (docs/benchmarks.md, "Seeded sampling").
    """

    def __init__(
        self,
        target,
        draft=None,
        *,
        n_ctx: int = 4096,
        threads: Optional[int] = None,
        draft_max: int = 8,
        p_min: Optional[float] = None,
        adaptive: bool = True,
        skip_layers: Optional[Sequence[int]] = None,
        ngram_min: int = 2,
        ngram_max: int = 4,
        draft_head: Optional[int] = None,
        draft_quant: Optional[str] = "auto",
        draft_skip: Optional[Sequence[int]] = None,
        draft_window: Optional[int] = 256,
        mmap: bool = True,
    ):
        kind, draft_path = _draft_kind(draft)
        if p_min is None:
            p_min = 0.9 if kind == "self" else 0.7
        opt = _options(n_ctx, draft_max, p_min, adaptive, ngram_min, ngram_max)
        head = -1 if draft_head is None else _checks.int32("draft_head", draft_head)
        if head < -1 or (head == -1 and draft_head is not None):
            raise ValueError(f"draft_head must be None, 0 (the full layer) or a token count, got {draft_head!r}")
        opt.draft_head = head
        opt.draft_path = draft_path
        opt.drafter = getattr(_core.DrafterKind, kind)
        opt.skip_layers = [_checks.int32("skip_layers[]", i) for i in skip_layers or []]
        self._target_path = _model_path(target)
        opt.draft_quant = _draft_quant(draft_quant, kind, opt.draft_path, self._target_path)
        opt.draft_skip = [_checks.int32("draft_skip[]", i) for i in draft_skip or []]
        window = 0 if draft_window is None else _checks.int32("draft_window", draft_window)  # 0: all
        if window < 1 and draft_window is not None:
            raise ValueError(f"draft_window must be None (the whole prompt) or >= 1, got {draft_window!r}")
        opt.draft_window = window
        opt.threads = _checks.threads(threads)
        opt.mmap = bool(mmap)
        self._init(_core.Engine(self._target_path, opt))
        _checks.warn_n_ctx_train(opt.n_ctx, self._core.n_ctx_train, os.path.basename(self._target_path))

    @classmethod
    def _from_core(cls, core) -> "Engine":
        """Wraps an existing native engine (tests build them over table models)."""
        self = cls.__new__(cls)
        self._init(core)
        return self

    def _init(self, core) -> None:
        self._core = core
        self._tokenizer = None
        self._lock = threading.Lock()  # held by the running generation or open stream
        self._owner: Optional[int] = None  # the thread that holds it
        self.last_completion: Optional[Completion] = None

    # -- properties ---------------------------------------------------------------------
    @property
    def drafter(self) -> str:
        return self._engine().drafter

    @property
    def n_ctx(self) -> int:
        return self._engine().n_ctx

    @property
    def warm_up_seconds(self) -> float:
        """Seconds the load's warm-up took: with an adaptive drafter, the engine times the
        target's forward of a few rows and the drafter's step once loaded, so that the first
        generation drafts from this machine's costs instead of learning them (0.0: none)."""
        return self._engine().warm_up_seconds

    def __repr__(self) -> str:
        if self._core is None:
            return "Engine(closed)"
        return f"Engine(drafter={self._core.drafter!r}, n_ctx={self._core.n_ctx})"

    # -- text ---------------------------------------------------------------------------
    @property
    def tokenizer(self):
        """The target's ``quickdraft.Tokenizer`` (chat templates, special ids)."""
        if self._tokenizer is None:
            from .tokenizer import Tokenizer

            path = getattr(self, "_target_path", None)
            if path is None or not self._engine().has_tokenizer:
                raise _core.UnsupportedError("this engine's target has no tokenizer")
            self._tokenizer = Tokenizer(path)
        return self._tokenizer

    def tokenize(self, text: str, add_special: bool = True) -> list:
        """Token ids of a prompt: BOS added when the model asks for it (add_special), and
        control-token text such as "<|im_start|>" read as those tokens (chat templates)."""
        return self._engine().tokenize(_checks.text("text", text), add_special, True)

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Text of token ids (invalid UTF-8 becomes U+FFFD)."""
        core = self._engine()
        return core.detokenize(_checks.token_ids(tokens, core.n_vocab, "tokens"))

    # -- generation -----------------------------------------------------------------------
    def generate(self, prompt: Prompt, max_tokens: int = 256, temperature: float = 0.8, **kw) -> Completion:
        """Generates a completion (see stream() for the arguments). On Ctrl-C the partial
        completion is kept in ``engine.last_completion`` and on the exception as ``.completion``."""
        pieces = self.stream(prompt, max_tokens=max_tokens, temperature=temperature, **kw)
        try:
            for _ in pieces:
                pass
        except KeyboardInterrupt as e:
            pieces.close()
            e.completion = pieces.completion
            raise
        return pieces.completion

    def chat(self, messages: Sequence[dict], **kw) -> Completion:
        """generate() on messages rendered with the target's chat template."""
        return self.generate(self._chat_prompt(messages), **kw)

    def stream_chat(self, messages: Sequence[dict], **kw) -> "Stream":
        """stream() on messages rendered with the target's chat template."""
        return self.stream(self._chat_prompt(messages), **kw)

    def _chat_prompt(self, messages) -> str:
        return self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True)

    def stream(
        self,
        prompt: Prompt,
        max_tokens: int = 256,
        temperature: float = 0.8,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        repeat_penalty: float = 1.0,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        penalty_last_n: int = 64,
        seed: Optional[int] = None,
        stop: Union[None, str, Sequence[str]] = None,
        ignore_eos: bool = False,
        prediction: Optional[Prompt] = None,
        drafter: Optional[str] = None,
        draft_max: Optional[int] = None,
        adaptive: bool = True,
    ) -> "Stream":
        """Yields Pieces as the target accepts them. temperature=0 is greedy; seed=None picks
        a random seed (in ``stats.seed``); stop strings end generation and are not emitted.
        Closing the iterator (or Ctrl-C) stops within one step; ``engine.last_completion``
        then holds what was produced, with finish_reason "cancelled".

        prediction: the text (or token ids) the output is expected to be, e.g. the file being
        edited: drafted from where the output matches it, with the drafter elsewhere. It never
        changes the output, only the speed; ``stats.accepted_prediction_tokens`` and
        ``rejected_prediction_tokens`` count its drafted tokens kept and refused. drafter /
        draft_max: this call's drafting, within what the engine loaded: "none", "ngram", or the
        engine's own kind ("model", "self", "hybrid"); a draft_max up to the engine's.
        adaptive=False: this call drafts draft_max tokens every step wherever the drafter finds
        them, whatever the measured costs say (True: the engine's own choice)."""
        core = self._engine()
        if isinstance(prompt, str):
            ids = list(self.tokenize(_checks.text("prompt", prompt)))
        else:
            ids = _checks.token_ids(prompt, core.n_vocab)
        temperature = _checks.temperature(temperature)
        # An explicit seed when sampling asks for reproducible text: every token is then the race's
        # draw at its position, which no draft length (chosen from timings) can move. Greedy output
        # is the target's argmax path whatever the draft length.
        reproducible = seed is not None and temperature > 0
        seed = secrets.randbits(63) if seed is None else _checks.seed(seed)
        opt = _core.GenerateOptions()
        s = opt.sampling
        num, i32 = _checks.number, _checks.INT32_MAX
        s.temperature, s.top_k = temperature, _checks.integer("top_k", top_k, 0, i32)
        s.top_p, s.min_p = num("top_p", top_p), num("min_p", min_p)
        s.repeat_penalty, s.presence_penalty = num("repeat_penalty", repeat_penalty), num("presence_penalty", presence_penalty)
        s.frequency_penalty = num("frequency_penalty", frequency_penalty)
        s.penalty_last_n, s.seed = _checks.integer("penalty_last_n", penalty_last_n, -1, i32), seed
        opt.max_tokens = _checks.integer("max_tokens", max_tokens, 0, i32)
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        opt.stop = [_checks.text(f"stop[{i}]", x) for i, x in enumerate(stops)]
        opt.ignore_eos = bool(ignore_eos)
        opt.reproducible = reproducible
        if prediction is not None:
            opt.prediction = (core.tokenize(_checks.text("prediction", prediction), False, False)
                              if isinstance(prediction, str) else _checks.token_ids(prediction, core.n_vocab, "prediction"))
        if drafter is not None:
            opt.drafter = str(drafter)
        if draft_max is not None:
            opt.draft_max = int(draft_max)
        opt.adaptive = bool(adaptive)
        return self._run(core, ids, opt)

    def _run(self, core, ids, opt) -> "Stream":
        # Validate and start eagerly, so bad arguments raise at the call, not at first next().
        # The prompt is a str or token ids (bytes are refused), a seed in [0, 2**64); the
        # stream holds the engine until it ends (see the class docstring).
        release = self._acquire()
        try:
            core = self._engine()  # closed while this call waited?
            core.start(ids, opt)
            self.last_completion = None
            return Stream(self, core, release)
        except BaseException:
            release()
            raise

    def _acquire(self) -> Callable[[], None]:
        """Waits for the engine (GIL released) and returns the function that hands it back."""
        me = threading.get_ident()
        if self._owner == me:
            raise RuntimeError(
                "engine busy: this thread has a stream of this engine still open; iterate it to the end "
                "or close() it (with engine.stream(...) as s: ... closes it) before starting another "
                "generation, or use a second Engine")
        self._lock.acquire()
        self._owner = me
        done = False

        def release() -> None:
            nonlocal done
            if not done:
                done = True
                self._owner = None
                self._lock.release()

        return release

    def _completion(self, core) -> Completion:
        return Completion(core.text, list(core.generated), core.finish_reason, core.stats())

    @property
    def last_stats(self) -> Optional[Stats]:
        """Stats of the last finished (or cancelled) generation."""
        return self.last_completion.stats if self.last_completion else None

    def cancel(self) -> None:
        """Thread-safe: the running generation stops at its next step."""
        if self._core is not None:
            self._core.cancel()

    # -- lifetime -------------------------------------------------------------------------
    def _engine(self):
        if self._core is None:
            raise ValueError("the engine is closed")
        return self._core

    def close(self) -> None:
        """Frees the models and caches (also on ``with`` exit); an open stream keeps them until it ends."""
        self._core = None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _options(n_ctx, draft_max, p_min, adaptive, ngram_min, ngram_max):
    opt = _core.EngineOptions()
    opt.n_ctx, opt.draft_max = _checks.n_ctx(n_ctx), _checks.int32("draft_max", draft_max)
    opt.p_min, opt.adaptive = _checks.number("p_min", p_min), bool(adaptive)
    opt.ngram_min, opt.ngram_max = _checks.int32("ngram_min", ngram_min), _checks.int32("ngram_max", ngram_max)
    return opt


def _model_path(m) -> str:
    """A path for a Model object, a path, a key or an hf:// URL."""
    path = getattr(m, "path", None)
    if path is not None and not isinstance(m, (str, os.PathLike)):
        return os.fspath(path)
    from .models import resolve

    return os.fspath(resolve(m))


DEFAULT_DRAFT_QUANT = "q4_0"


def _draft_quant(value, kind: str, draft_path: str, target_path: str) -> str:
    """EngineOptions.draft_quant ("" = as stored) for draft_quant= and the drafter kind."""
    if value is None or value == "none":
        return ""
    if value == "auto":
        if kind not in ("model", "hybrid") or os.path.realpath(draft_path) == os.path.realpath(target_path):
            return ""
        return DEFAULT_DRAFT_QUANT
    return str(value)


def _draft_kind(draft):
    """(drafter kind name, draft path) for _core.EngineOptions."""
    if draft is None or draft == "none":
        return "none", ""
    if isinstance(draft, str) and draft in ("ngram", "self", "mtp"):
        return draft, ""
    if isinstance(draft, tuple) and len(draft) == 2 and draft[0] == "hybrid":
        return "hybrid", _model_path(draft[1])
    return "model", _model_path(draft)

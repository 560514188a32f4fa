"""quickdraft.Model: a GGUF model loaded in place, with a KV-cached context for evaluation.

    m = quickdraft.Model("qwen2.5-coder-0.5b", n_ctx=4096)
    logits = m.eval([151644, 872])        # float32 [2, n_vocab], continuing from m.n_past
    m.truncate(1)                         # drop the last position from the KV cache
    draft = m.new_context()               # another sequence over the same weights
    view = m.skipping_view([4, 6, 8])     # the same sequence with layers skipped, over m's cache

The weights are memory-mapped, not copied (``mmap=False`` reads them into memory instead);
every context has its own KV cache (F16) and its own thread pool, but for a skipping view, which
uses its base's. ``eval`` releases the GIL while it runs.
"""

from __future__ import annotations

import os
from typing import Iterable, Optional, Sequence, Union

import numpy as np

from . import _checks, _core
from .models import resolve

Ids = Union[Sequence[int], np.ndarray]


class Context:
    """A sequence (KV cache + scratch) over a loaded model's shared weights."""

    def __init__(self, model: "Model", n_ctx: Optional[int] = None, threads: Optional[int] = None):
        self._model = model
        n_ctx = model.n_ctx if n_ctx is None else _checks.n_ctx(n_ctx)
        threads = model._threads if threads is None else _checks.threads(threads)
        self._ctx = _core.Context(model._weights, n_ctx, threads)

    @property
    def model(self) -> "Model":
        """The Model whose weights this context runs."""
        return self._model

    @property
    def n_ctx(self) -> int:
        """Most positions this context can hold."""
        return self._ctx.n_ctx

    @property
    def n_past(self) -> int:
        """Positions currently in the KV cache."""
        return self._ctx.n_past

    @property
    def threads(self) -> int:
        """Threads this context computes with."""
        return self._ctx.n_threads

    def eval(self, ids: Ids) -> np.ndarray:
        """Evaluate ids after the current KV state; float32 logits [len(ids), n_vocab]."""
        return self._ctx.eval(ids)

    def eval_last(self, ids: Ids) -> np.ndarray:
        """Like eval, but only the last position's logits, [n_vocab] (skips the other output rows)."""
        return self._ctx.eval(ids, last_only=True)

    def feed(self, ids: Ids) -> None:
        """Append ids to the KV cache without computing any logits (prompt prefill)."""
        self._ctx.feed(ids)

    def truncate(self, n_past: int) -> None:
        """Keep the first n_past positions of the KV cache and drop the rest.

        A hybrid recurrent model (qwen35) can return only to 0 or to n_past >= truncate_floor
        (positions inside its rollback window); ValueError otherwise."""
        self._ctx.truncate(int(n_past))

    @property
    def truncate_floor(self) -> int:
        """The smallest n_past > 0 truncate() accepts now (0 for a transformer: any)."""
        return self._ctx.truncate_floor

    def set_rollback(self, mode: str, window: int) -> None:
        """Recurrent models: how the state returns to a position of the last `window` ones,
        'snapshot' (a copy per position) or 'recompute' (replay from the last eval's start); resets."""
        self._ctx.set_rollback(str(mode), int(window))

    @property
    def rollback(self) -> tuple[str, int]:
        """(mode, window) of the recurrent state's rollback; window 0 for a transformer."""
        return self._ctx.rollback_mode, self._ctx.rollback_window

    @property
    def recurrent_state_bytes(self) -> int:
        """Memory held by the recurrent state and its rollback copies (0 for a transformer)."""
        return self._ctx.recurrent_state_bytes

    def reset(self) -> None:
        """Empty the KV cache."""
        self._ctx.reset()

    @property
    def skip_layers(self) -> list[int]:
        """Layers this context skips (self-speculation); set before evaluating anything."""
        return list(self._ctx.skip_layers)

    @skip_layers.setter
    def skip_layers(self, layers: Iterable[int]) -> None:
        self._ctx.skip_layers = [int(i) for i in layers]

    def skipping_view(self, skip_layers: Iterable[int]) -> "Context":
        """Self-speculation's drafter: a context that runs only the layers not in skip_layers over
        this one's KV cache, with no cache of its own. It attends to this context's keys and
        values below this context's n_past (``view.truncate(ctx.n_past)`` moves it there, with
        nothing to evaluate) and writes its own after them, which this context overwrites as it
        evaluates those positions; it cannot evaluate before this context's n_past."""
        view = Context.__new__(Context)
        view._model = self._model
        view._ctx = self._ctx.skipping_view([int(i) for i in skip_layers])
        return view


class Model(Context):
    """A GGUF model (path or known key) and its default context.

    ``Model(path, n_ctx=4096, threads=None, mmap=True)``: threads None means one per core this
    process may use (a core's SMT siblings count once), and more than its CPUs is capped to them
    (with a warning); ``mmap=False`` reads the file into memory, so that truncating or rewriting
    it while in use cannot affect the model.
    """

    def __init__(self, path: Union[str, os.PathLike], n_ctx: int = 4096, threads: Optional[int] = None,
                 mmap: bool = True):
        n_ctx = _checks.n_ctx(n_ctx)
        self._threads = _checks.threads(threads)
        self.path = resolve(path)
        self._weights = _core.LoadedModel(str(self.path), mmap=bool(mmap))
        self._model = self
        self._ctx = _core.Context(self._weights, n_ctx, self._threads)
        self._tokenizer = None
        _checks.warn_n_ctx_train(n_ctx, self._weights.n_ctx_train, os.path.basename(str(self.path)))

    @property
    def arch(self) -> str:
        """general.architecture: one of quickdraft._core.SUPPORTED_ARCHS ('llama', 'qwen2', ...)."""
        return self._weights.arch

    @property
    def n_vocab(self) -> int:
        return self._weights.n_vocab

    @property
    def n_ctx_train(self) -> int:
        """Context length the model was trained with (from the GGUF metadata; 0 if absent)."""
        return self._weights.n_ctx_train

    @property
    def n_layer(self) -> int:
        return self._weights.n_layer

    @property
    def n_embd(self) -> int:
        return self._weights.n_embd

    @property
    def hparams(self) -> dict:
        """Every hyperparameter the forward pass uses, as read from the file."""
        return self._weights.hparams

    @property
    def matrix_storage(self) -> dict:
        """{GGUF tensor name: (address, bytes, layout)} of every weight matrix as computed with
        (layout 'rows8' for the copies repacked at load, 'gguf' for matrices read as stored)."""
        return self._weights.matrix_storage

    @property
    def tokenizer(self):
        """The model's tokenizer, built from the same GGUF file."""
        if self._tokenizer is None:
            from .tokenizer import Tokenizer

            self._tokenizer = Tokenizer(self.path)
        return self._tokenizer

    def new_context(self, n_ctx: Optional[int] = None, threads: Optional[int] = None) -> Context:
        """Another context (own KV cache) over the same weights; n_ctx defaults to this one's."""
        return Context(self, n_ctx, threads)

    def __repr__(self) -> str:
        return (f"quickdraft.Model({str(self.path)!r}, arch={self.arch!r}, n_layer={self.n_layer}, "
                f"n_embd={self.n_embd}, n_vocab={self.n_vocab}, n_ctx={self.n_ctx})")

"""Tokenizer read from a GGUF file's metadata: encode, decode, stream, chat templates."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from . import _core, chat


class StreamDecoder:
    """Turns token ids into text one at a time; never splits a UTF-8 character.

    ``"".join(d.feed(i) for i in ids) + d.flush() == tokenizer.decode(ids)``.
    """

    def __init__(self, core: _core.StreamDecoder):
        self._d = core

    def feed(self, token_id: int) -> str:
        """Text completed by this token (possibly empty)."""
        try:
            return self._d.feed(token_id)
        except TypeError:
            raise ValueError(f"token id {token_id!r} is out of range") from None

    def flush(self) -> str:
        """What is still held back (an incomplete character becomes U+FFFD); then reset."""
        return self._d.flush()

    def reset(self) -> None:
        """Forget held-back bytes; the next token starts a new text."""
        self._d.reset()


class Tokenizer:
    """The tokenizer of a GGUF model, built from its ``tokenizer.ggml.*`` metadata only.

    Token ids match llama.cpp's for SentencePiece (Gemma-3) and byte-level BPE (Qwen2.5,
    SmolLM2, Llama-3, GPT-2) vocabularies.
    """

    def __init__(self, path: str | os.PathLike):
        """``path``: a GGUF file, or a known model key such as ``"qwen2.5-coder-0.5b"``."""
        s = os.fspath(path)
        if not os.path.exists(s):
            from .models import KNOWN_MODELS, resolve

            if s in KNOWN_MODELS or s.startswith("hf://"):
                s = os.fspath(resolve(s))
        self._t = _core.Tokenizer(s)

    @classmethod
    def from_core(cls, core: _core.Tokenizer) -> Tokenizer:
        """Wraps a ``_core.Tokenizer`` (e.g. the one a loaded model holds)."""
        self = cls.__new__(cls)
        self._t = core
        return self

    # --- ids <-> text -------------------------------------------------------------------
    def encode(self, text: str, add_special: bool = False, parse_special: bool = False) -> list[int]:
        """Token ids of ``text``. ``add_special`` adds BOS/EOS where the model's metadata asks
        for them; ``parse_special`` recognises control-token text such as ``<|im_start|>``."""
        return self._t.encode(text, add_special, parse_special)

    def decode(self, ids: Iterable[int], special: bool = False) -> str:
        """Text of ``ids``; invalid UTF-8 becomes U+FFFD. Control tokens are rendered only with
        ``special=True``. Raises ValueError for an id outside the vocabulary."""
        ids = ids if isinstance(ids, (list, tuple)) else list(ids)
        try:
            return self._t.decode(ids, special)
        except TypeError:
            self._check_ids(ids)
            raise

    def token_to_piece(self, token_id: int, special: bool = True) -> bytes:
        """The raw bytes one token stands for (may be part of a UTF-8 character)."""
        self._check_ids([token_id])
        return self._t.token_to_piece(token_id, special)

    def stream_decoder(self, special: bool = False) -> StreamDecoder:
        """A fresh incremental detokenizer."""
        return StreamDecoder(_core.StreamDecoder(self._t, special))

    def _check_ids(self, ids: Sequence[Any]) -> None:
        n = self._t.n_vocab
        for i in ids:
            if not isinstance(i, int) or not 0 <= i < n:
                raise ValueError(f"token id {i!r} is out of range (vocabulary of {n} tokens)")

    # --- vocabulary facts -----------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._t.n_vocab

    @property
    def bos_id(self) -> int | None:
        return self._t.bos_id

    @property
    def eos_id(self) -> int | None:
        return self._t.eos_id

    @property
    def eot_id(self) -> int | None:
        """The end-of-turn token (e.g. ``<|im_end|>``, ``<end_of_turn>``)."""
        return self._t.eot_id

    @property
    def eot_ids(self) -> list[int]:
        """Every id that ends generation (EOS, end-of-turn and the like), ascending."""
        return list(self._t.eog_ids)

    def is_eog(self, token_id: int) -> bool:
        """True for end-of-generation ids (EOS and every end-of-turn token)."""
        return self._t.is_eog(token_id)

    @property
    def add_bos(self) -> bool:
        return self._t.add_bos

    @property
    def add_eos(self) -> bool:
        return self._t.add_eos

    @property
    def model(self) -> str:
        """``tokenizer.ggml.model``: ``"llama"`` (SentencePiece) or ``"gpt2"`` (byte-level BPE)."""
        return self._t.model

    @property
    def pre(self) -> str:
        """``tokenizer.ggml.pre`` (the BPE pre-tokenizer), ``""`` for SentencePiece."""
        return self._t.pre

    def token_type(self, token_id: int) -> int:
        """GGUF token type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte."""
        self._check_ids([token_id])
        return self._t.token_type(token_id)

    def token_text(self, token_id: int) -> str:
        """The token's text as stored in the GGUF file."""
        self._check_ids([token_id])
        return self._t.token_text(token_id).decode("utf-8", "replace")

    def special_token_text(self, token_id: int | None) -> str:
        """Text of a special token for templates ("" when there is none)."""
        return "" if token_id is None else self.token_text(token_id)

    # --- chat ----------------------------------------------------------------------------
    @property
    def chat_template(self) -> str | None:
        """``tokenizer.chat_template`` (a Jinja template), or None when the model has none."""
        return self._t.chat_template

    def apply_chat_template(self, messages: Sequence[dict], add_generation_prompt: bool = True,
                            template: str | None = None, **kwargs: Any) -> str:
        """Renders ``messages`` with the model's chat template (or ``template``)."""
        return chat.render(self, messages, add_generation_prompt=add_generation_prompt, template=template, **kwargs)

    def __repr__(self) -> str:
        return f"Tokenizer(model={self.model!r}, pre={self.pre!r}, vocab_size={self.vocab_size})"

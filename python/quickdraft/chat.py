"""Chat templates: render a model's ``tokenizer.chat_template`` (Jinja) in a sandbox.

The environment mirrors what Hugging Face ``apply_chat_template`` offers templates:
``raise_exception``, ``strftime_now``, a ``tojson`` that does not HTML-escape, the
``loopcontrols`` extension, ``trim_blocks``/``lstrip_blocks``, and the variables ``messages``,
``tools``, ``add_generation_prompt``, ``bos_token``, ``eos_token`` (plus any extra keyword).

A template comes with the model file, so it renders under limits (chat_sandbox.py): at most
``time_limit`` seconds (default ``DEFAULT_TIME_LIMIT``, 2 s) and ``max_chars`` characters of
output or of any one string it builds (default ``DEFAULT_MAX_CHARS``, 1,000,000). Set the module
defaults (``quickdraft.chat.DEFAULT_TIME_LIMIT = 10``) or pass either to ``render``. Every
failure inside a template, a limit included, raises ``ChatTemplateError`` with the reason.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext

from . import chat_sandbox
from .chat_sandbox import LimitedEnvironment, LimitExceeded

DEFAULT_TIME_LIMIT = chat_sandbox.DEFAULT_TIME_LIMIT
DEFAULT_MAX_CHARS = chat_sandbox.DEFAULT_MAX_CHARS


class ChatTemplateError(ValueError):
    """A chat template is missing, does not compile, or rejected the conversation."""


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: Any = None, sort_keys: bool = False) -> str:
    # Like transformers: plain json.dumps (Jinja's own tojson escapes <, >, & and ').
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    chat_sandbox.check_format(str(fmt), "strftime_now")
    return datetime.now().strftime(fmt)


@functools.lru_cache(maxsize=32)
def _compile(template: str) -> jinja2.Template:
    env = LimitedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.set_filter("tojson", _tojson)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(template)
    except jinja2.TemplateSyntaxError as e:
        raise ChatTemplateError(f"chat template does not compile: {e} (line {e.lineno})") from None


def _source_of(tokenizer_or_metadata: Any) -> tuple[str | None, str, str]:
    """(template, bos_token, eos_token) from a Tokenizer or a GGUF metadata dict."""
    if isinstance(tokenizer_or_metadata, Mapping):
        md = tokenizer_or_metadata
        tokens = md.get("tokenizer.ggml.tokens") or []

        def text(key: str) -> str:
            i = md.get(key)
            return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else ""

        return (md.get("tokenizer.chat_template"), text("tokenizer.ggml.bos_token_id"),
                text("tokenizer.ggml.eos_token_id"))
    t = tokenizer_or_metadata  # a quickdraft.Tokenizer or a bare _core.Tokenizer

    def special(i: int | None) -> str:
        if i is None:
            return ""
        text = t.token_text(i)
        return text.decode("utf-8", "replace") if isinstance(text, bytes) else text

    return t.chat_template, special(t.bos_id), special(t.eos_id)


def render(tokenizer_or_metadata: Any, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True,
           template: str | None = None, tools: Sequence[Mapping[str, Any]] | None = None, *,
           time_limit: float | None = None, max_chars: int | None = None, **kwargs: Any) -> str:
    """Renders ``messages`` (``[{"role": ..., "content": ...}, ...]``) to the prompt text.

    ``tokenizer_or_metadata`` is a ``quickdraft.Tokenizer`` or a GGUF metadata dict; ``template``
    overrides the model's own. ``time_limit`` (seconds) and ``max_chars`` bound the rendering
    (None: ``DEFAULT_TIME_LIMIT``, ``DEFAULT_MAX_CHARS``). Raises ChatTemplateError (a ValueError)
    when there is no template (e.g. for a base model such as Gemma-3-270M) and for every failure
    inside one, a limit included.
    """
    own, bos_token, eos_token = _source_of(tokenizer_or_metadata)
    source = template if template is not None else own
    if not source:
        raise ChatTemplateError(
            "this model has no chat template (tokenizer.chat_template is absent: a base model, not a chat "
            "model); pass template=... to render a conversation anyway, or encode plain text")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or "role" not in m:
            raise ChatTemplateError(f"messages[{i}] must be a mapping with a 'role' key, got {m!r}")
    variables = {"bos_token": bos_token, "eos_token": eos_token, **kwargs}
    time_limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    max_chars = DEFAULT_MAX_CHARS if max_chars is None else max_chars
    chat_sandbox.check_limits(time_limit, max_chars)
    try:
        with chat_sandbox.limits(time_limit, max_chars):
            chunks = _compile(source).generate(messages=list(messages), tools=tools,
                                               add_generation_prompt=add_generation_prompt, **variables)
            return chat_sandbox.render_limited(chunks)
    except ChatTemplateError:
        raise
    except LimitExceeded as e:
        raise ChatTemplateError(f"chat template stopped: {e}") from None
    except jinja2.TemplateError as e:
        raise ChatTemplateError(f"chat template failed: {e}") from None
    except RecursionError:
        raise ChatTemplateError("chat template failed: it recursed too deeply (RecursionError)") from None
    except MemoryError:
        raise ChatTemplateError("chat template failed: it ran out of memory (MemoryError)") from None
    except Exception as e:  # OverflowError, ZeroDivisionError, TypeError... raised by the template's code
        raise ChatTemplateError(f"chat template failed: {type(e).__name__}: {e}") from None

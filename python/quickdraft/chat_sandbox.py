"""The limits a chat template renders under: a time limit and a size limit.

A chat template comes with the model file, so it is untrusted code. Jinja's sandbox already
blocks attribute escapes and caps ``range()``; on top of it:

* **Time**: rendering (and compiling) stops after ``time_limit`` seconds: a watchdog raises
  ``LimitExceeded`` in the rendering thread, which Python delivers between two bytecodes.
* **Size**: the output stops at ``max_chars`` characters, and the operations that can build a
  huge value in one step (C code that no time limit interrupts) are checked *before* they run:
  ``*``, ``**``, ``%``, ``+`` and ``~`` on strings, lists and integers, integer arguments of
  filters and calls (``center(10**10)``), ``replace`` and ``expandtabs``, and widths in
  format strings.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import math
import re
import threading
from typing import Any, Iterator

from jinja2.compiler import CodeGenerator
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range
from jinja2.utils import _PassArg

DEFAULT_TIME_LIMIT = 2.0  # seconds per render
DEFAULT_MAX_CHARS = 1_000_000  # characters of output, and of any one string a template builds


class LimitExceeded(Exception):
    """A template went past a limit (chat.render turns it into ChatTemplateError)."""


_max_chars: contextvars.ContextVar[int] = contextvars.ContextVar("max_chars", default=DEFAULT_MAX_CHARS)


def _size(n: int, what: str) -> None:
    limit = _max_chars.get()
    if n > limit:
        raise LimitExceeded(f"{what} would be {n} long, over the limit of {limit} (max_chars)")


def _int_bits(x: Any) -> float:
    return abs(x).bit_length() if isinstance(x, int) else 0


def _check_int_arg(x: Any, where: str) -> None:
    limit = _max_chars.get()
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) > limit:
        raise LimitExceeded(f"{where} was given the integer {x}, over the limit of {limit} (max_chars)")


_NUMBER = re.compile(r"\d+")


def check_format(fmt: str, where: str) -> None:
    """Widths and precisions in a format string ("%10000000000s", "{:>10000000000}")."""
    for m in _NUMBER.finditer(fmt):
        if len(m.group()) > 12:
            _size(10**12, f"a width in {where}")
        _size(int(m.group()), f"a width in {where}")


def _check_binop(op: str, a: Any, b: Any) -> None:
    seqs = (str, list, tuple)
    if op == "*":
        if isinstance(a, seqs) and isinstance(b, int):
            _size(len(a) * max(b, 0), "the result of '*'")
        elif isinstance(b, seqs) and isinstance(a, int):
            _size(len(b) * max(a, 0), "the result of '*'")
        elif isinstance(a, int) and isinstance(b, int):
            _size((_int_bits(a) + _int_bits(b)) // 4, "the digits of the result of '*'")
    elif op == "**" and isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
        _size(int(b * math.log10(abs(a))), "the digits of the result of '**'")
    elif op == "+" and isinstance(a, seqs) and isinstance(b, seqs):
        _size(len(a) + len(b), "the result of '+'")
    elif op == "%" and isinstance(a, str):
        check_format(a, "a '%' format")
        for x in b if isinstance(b, tuple) else (b,):
            _check_int_arg(x, "a '%' format")


def _check_replace(s: Any, args: tuple, kwargs: dict) -> None:
    if not isinstance(s, str) or len(args) < 2:
        return
    old, new = str(args[0]), str(args[1])
    count = s.count(old) if old else len(s) + 1
    if len(args) > 2 and isinstance(args[2], int) and args[2] >= 0:
        count = min(count, args[2])
    _size(len(s) + count * (len(new) - len(old)), "the result of replace()")


def _check_call(obj: Any, args: tuple, kwargs: dict) -> None:
    if obj is safe_range:  # capped by the sandbox itself (MAX_RANGE)
        return
    name = getattr(obj, "__name__", "a call")
    for x in (*args, *kwargs.values()):
        _check_int_arg(x, name + "()")
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, str):
        if name == "replace":
            _check_replace(owner, args, kwargs)
        elif name == "expandtabs":
            size = args[0] if args else kwargs.get("tabsize", 8)
            if isinstance(size, int):
                _size(len(owner) * max(size, 1), "the result of expandtabs()")


def _guard_filter(f: Any, name: str) -> Any:
    skip = 2 if _PassArg.from_obj(f) is not None else 1  # the context (if passed), then the value

    @functools.wraps(f)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        for x in (*args[skip:], *kwargs.values()):
            _check_int_arg(x, f"the '{name}' filter")
        if name == "replace" and len(args) > skip:
            _check_replace(args[skip - 1], args[skip:], kwargs)
        if name == "format" and len(args) >= skip:
            check_format(str(args[skip - 1]), "the 'format' filter")
        return f(*args, **kwargs)

    return guarded


class _CodeGenerator(CodeGenerator):
    def visit_Concat(self, node: Any, frame: Any) -> None:  # '~' through environment.concat_checked
        self.write("environment.concat_checked((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class LimitedEnvironment(ImmutableSandboxedEnvironment):
    """ImmutableSandboxedEnvironment whose size-making operations are checked first."""

    code_generator_class = _CodeGenerator
    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.filters = {name: _guard_filter(f, name) for name, f in self.filters.items()}

    def set_filter(self, name: str, f: Any) -> None:
        self.filters[name] = _guard_filter(f, name)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        _check_call(__obj, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Any:  # str.format is wrapped when it is looked up
        if getattr(value, "__name__", "") in ("format", "format_map") and isinstance(getattr(value, "__self__", None), str):
            check_format(value.__self__, "str.format")
        return super().wrap_str_format(value)

    @staticmethod
    def concat_checked(items: tuple) -> str:
        parts = [str(x) for x in items]
        _size(sum(map(len, parts)), "the result of '~'")
        return "".join(parts)


def render_limited(chunks: Iterator[str]) -> str:
    """Joins a template's output, stopping at max_chars."""
    out, n, limit = [], 0, _max_chars.get()
    for c in chunks:
        n += len(c)
        if n > limit:
            raise LimitExceeded(f"the output is longer than the limit of {limit} characters (max_chars)")
        out.append(c)
    return "".join(out)


def _set_async_exc(tid: int, exc: Any) -> None:
    """Raises exc in thread tid at its next bytecode; None clears one not yet delivered."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), None if exc is None else ctypes.py_object(exc))


class _Timeout(BaseException):
    """Raised into the rendering thread by the watchdog (BaseException: no template catches it)."""


def check_limits(time_limit: Any, max_chars: Any) -> None:
    """ValueError unless time_limit > 0 (seconds) and max_chars is a positive integer."""
    if not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValueError(f"time_limit must be > 0 seconds, got {time_limit!r}")
    if not (isinstance(max_chars, int) and max_chars > 0):
        raise ValueError(f"max_chars must be a positive integer, got {max_chars!r}")


@contextlib.contextmanager
def limits(time_limit: float, max_chars: int) -> Iterator[None]:
    """Runs the block under both limits (see check_limits); LimitExceeded when one is passed."""
    token = _max_chars.set(max_chars)
    tid = threading.get_ident()
    lock = threading.Lock()
    state = {"done": False, "fired": False}

    def fire() -> None:
        with lock:
            if not state["done"]:
                state["fired"] = True
                _set_async_exc(tid, _Timeout)

    timer = threading.Timer(time_limit, fire)
    timer.daemon = True
    try:
        try:
            timer.start()
            yield
        finally:
            with lock:
                state["done"] = True
            timer.cancel()
            if state["fired"]:
                _set_async_exc(tid, None)  # not delivered yet: drop it
            _max_chars.reset(token)
    except _Timeout:
        raise LimitExceeded(f"rendering took longer than the time limit of {time_limit:g} s (time_limit)") from None

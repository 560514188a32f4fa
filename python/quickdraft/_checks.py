"""Argument checks at the Python boundary: a bad value raises a ValueError (or TypeError) that names
the argument and its range, before pybind11 can turn it into "incompatible function arguments"."""

from __future__ import annotations

import operator
import os
import warnings
from typing import Any, Optional, Sequence

INT32_MAX = 2**31 - 1
UINT64_END = 2**64
THREADS_MAX = 1024  # qd::ThreadPool::kMaxThreads


def integer(name: str, value: Any, lo: int, hi: int) -> int:
    """value as an int in [lo, hi] (an integral float is accepted, as int() would)."""
    try:
        i = operator.index(value)
    except TypeError:
        if isinstance(value, float) and value.is_integer():
            i = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if not lo <= i <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {i}")
    return i


def int32(name: str, value: Any) -> int:
    """An int the native side can hold (it checks the value's own range)."""
    return integer(name, value, -(2**31), INT32_MAX)


def number(name: str, value: Any) -> float:
    """value as a float (ValueError for values a float cannot hold)."""
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name} is too large for a float: {value!r}") from None
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None


def seed(value: Any) -> int:
    """A sampler seed: an integer in [0, 2**64)."""
    try:
        s = operator.index(value)
    except TypeError:
        raise TypeError(f"seed must be an integer in [0, 2**64) or None, got {value!r}") from None
    if not 0 <= s < UINT64_END:
        raise ValueError(f"seed must be an integer in [0, 2**64) or None, got {s}")
    return s


def temperature(value: Any) -> float:
    t = number("temperature", value)
    if not t >= 0.0:  # also NaN
        raise ValueError(f"temperature must be >= 0 (0: greedy), got {value!r}")
    return t


def text(name: str, value: Any) -> str:
    """A str that UTF-8 can encode (no lone surrogates, which is how Python holds undecodable bytes)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"{name} is {type(value).__name__}; decode it to str first "
                        f"(e.g. {name}.decode('utf-8'))")
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        ch, at = value[e.start], e.start
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            why = (f"the byte 0x{ord(ch) - 0xDC00:02x} at index {at}, which is not UTF-8 (Python keeps undecodable "
                   "bytes, such as those of a command-line argument, as lone surrogates)")
        else:
            why = f"a lone surrogate {ch!r} at index {at}"
        raise ValueError(f"{name} cannot be encoded as UTF-8: it holds {why}; pass valid text "
                         "(decode bytes with errors='replace')") from None
    return value


def token_ids(value: Sequence[Any], n_vocab: int, name: str = "prompt") -> list:
    """A list of token ids in [0, n_vocab): a bytes prompt is a TypeError, not ids."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"{name} is {type(value).__name__}, not text or token ids: decode it to str "
                        f"({name}.decode('utf-8')) or pass a list of ints to give token ids")
    if isinstance(value, str):
        raise TypeError(f"{name} must be a list of token ids here, got a str")
    ids = []
    for i, t in enumerate(value):
        try:
            t = operator.index(t)
        except TypeError:
            raise TypeError(f"{name}[{i}] must be an int token id, got {t!r}") from None
        if not 0 <= t < n_vocab:
            raise ValueError(f"{name}[{i}]: token id {t} is outside the vocabulary [0, {n_vocab})")
        ids.append(t)
    return ids


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads(value: Optional[int]) -> int:
    """threads: None (0 for the native side: one per core, SMT siblings counted once) or >= 1, capped at
    the CPU count."""
    if value is None:
        return 0
    n = integer("threads", value, -(2**63), 2**63)
    if n < 1:
        raise ValueError(f"threads must be None (one per core) or >= 1, got {n}")
    cpus = cpu_count()
    if n > cpus:
        warnings.warn(f"threads={n} is more than the {cpus} CPUs this process can use; using {cpus} "
                      "(more threads than CPUs only slows decoding down)", RuntimeWarning, stacklevel=3)
        return cpus
    return n


def n_ctx(value: Any) -> int:
    return integer("n_ctx", value, 1, INT32_MAX)


def warn_n_ctx_train(n: int, n_train: int, what: str) -> None:
    """One warning when n_ctx exceeds the trained context, as llama.cpp gives."""
    if n_train and n > n_train:
        warnings.warn(f"n_ctx {n} is larger than the {n_train} tokens {what} was trained with; "
                      f"output past {n_train} tokens may degrade", RuntimeWarning, stacklevel=3)

"""Shared fixtures: real models from the cache (fetched on demand) and the reference data."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from quickdraft import models


@pytest.fixture(autouse=True)
def _sigint_handler_restored():
    """Every test ends with the SIGINT handler it started with. Servers and event loops (uvicorn,
    asyncio) swap it; one left behind (SIG_DFL / SIG_IGN) makes a later Ctrl-C test's
    interrupt_main() do nothing, and that test hangs (seen once in a fresh-clone CI run)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)
    yield
    if signal.getsignal(signal.SIGINT) is not before and before is not None:
        signal.signal(signal.SIGINT, before)

# llama.cpp reference outputs, copied from ../shared/reference/ (see its README.md there) so that
# a clone tests against them wherever it lives.
REFERENCE_DIR = Path(__file__).resolve().parent / "data" / "llamacpp_reference"
REQUIRE = os.environ.get("QD_REQUIRE_MODELS") == "1"  # CI: a missing model fails instead of skipping


def _get_model(key: str) -> Path:
    if models.is_cached(key):
        return models.cached_path(key)
    try:
        return models.fetch(key, quiet=True)
    except Exception as e:  # offline or registry unreachable
        msg = f"real model {key} unavailable ({e}); fetch it with: quickdraft fetch {key}"
        if REQUIRE:
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture(scope="session")
def model_path():
    """model_path(key) -> Path of a real model in the cache, fetched when missing."""
    cache: dict[str, Path] = {}

    def get(key: str) -> Path:
        if key not in cache:
            cache[key] = _get_model(key)
        return cache[key]

    return get


def load_reference(key: str, name: str) -> dict:
    """../shared/reference/<key>/<name>.json (llama.cpp outputs)."""
    path = REFERENCE_DIR / key / f"{name}.json"
    if not path.exists():
        msg = f"reference data {path} not found"
        if REQUIRE:
            pytest.fail(msg)
        pytest.skip(msg)
    return json.loads(path.read_text())

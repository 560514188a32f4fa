"""Every llama.cpp reference case (../shared/reference/*/tokenize.json): ids and detok, exactly."""

from __future__ import annotations

import json

import pytest

from conftest import REFERENCE_DIR, load_reference
from quickdraft import Tokenizer

MODELS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]


def _case_ids():
    out = []
    for key in MODELS:
        path = REFERENCE_DIR / key / "tokenize.json"
        n = len(json.loads(path.read_text())["cases"]) if path.exists() else 1
        out += [(key, i) for i in range(n)]
    return out


@pytest.fixture(scope="module")
def tokenizers(model_path):
    cache: dict[str, Tokenizer] = {}

    def get(key: str) -> Tokenizer:
        if key not in cache:
            cache[key] = Tokenizer(model_path(key))
        return cache[key]

    return get


@pytest.mark.real
@pytest.mark.parametrize("key,index", _case_ids())
def test_reference_case(tokenizers, key, index):
    case = load_reference(key, "tokenize")["cases"][index]
    tok = tokenizers(key)
    ids = tok.encode(case["text"], add_special=case["add_special"], parse_special=case["parse_special"])
    assert ids == case["ids"], f"text={case['text']!r}"
    assert tok.decode(case["ids"]) == case["detok"]

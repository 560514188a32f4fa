"""Multilingual ids against llama.cpp's own tokenizer, recorded in tests/data/llamacpp_tokenize.json
by tests/reference/record_llamacpp_tokenize.py (llama-tokenize from the llama-cpp-python 0.3.36 sources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quickdraft import Tokenizer
from reference.record_llamacpp_tokenize import MODELS, chat_text
from test_tokenizer_multilingual import TEXTS

RECORDED = json.loads((Path(__file__).parent / "data" / "llamacpp_tokenize.json").read_text())["models"]


@pytest.mark.real
@pytest.mark.parametrize("key", MODELS)
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_against_llama_tokenize(model_path, key, name):
    tok = Tokenizer(model_path(key))
    expected = RECORDED[key][name]
    assert tok.encode(TEXTS[name]) == expected["plain"]
    assert tok.encode(chat_text(TEXTS[name]), parse_special=True) == expected["special"]

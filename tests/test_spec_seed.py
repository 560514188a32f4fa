"""Same seed and settings -> same output, for every drafter, whatever the timings."""

from __future__ import annotations

import pytest

import quickdraft

PROMPT = "Once upon a time, in a small village by the sea,"


@pytest.mark.real
@pytest.mark.parametrize("draft", [None, "ngram", "self", "model"])
def test_same_seed_same_text(model_path, draft):
    path = model_path("smollm2-135m")
    d = str(path) if draft == "model" else draft
    kw = dict(max_tokens=40, temperature=0.9, top_p=0.95, seed=1234)
    with quickdraft.Engine(path, draft=d, threads=2) as a:
        first = a.generate(PROMPT, **kw).tokens
        again = a.generate(PROMPT, **kw).tokens  # prompt cache now warm
    with quickdraft.Engine(path, draft=d, threads=1) as b:  # other engine, other timings
        other = b.generate(PROMPT, **kw).tokens
    assert first == again == other
    assert len(first) == 40 or first[-1] in quickdraft.Tokenizer(path).eot_ids


@pytest.mark.real
def test_other_seed_other_text(model_path):
    path = model_path("smollm2-135m")
    with quickdraft.Engine(path, draft="ngram", threads=2) as e:
        texts = {tuple(e.generate(PROMPT, max_tokens=24, temperature=1.0, seed=s).tokens) for s in range(4)}
    assert len(texts) > 1

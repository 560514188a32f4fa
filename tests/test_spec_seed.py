"""Same seed and settings -> same output, for every drafter, whatever the timings: plain
decoding's output with that seed (each token is the race's draw at its position)."""

from __future__ import annotations

import pytest

import quickdraft

PROMPT = "Once upon a time, in a small village by the sea,"


KW = dict(max_tokens=40, temperature=0.9, top_p=0.95, seed=1234)


@pytest.fixture(scope="module")
def plain_text(model_path):
    with quickdraft.Engine(model_path("smollm2-135m"), threads=2) as e:
        return e.generate(PROMPT, **KW).tokens


@pytest.mark.real
@pytest.mark.parametrize("draft", [None, "ngram", "self", "model"])
def test_same_seed_same_text(model_path, plain_text, draft):
    path = model_path("smollm2-135m")
    d = str(path) if draft == "model" else draft
    with quickdraft.Engine(path, draft=d, threads=2) as a:
        first = a.generate(PROMPT, **KW)
        again = a.generate(PROMPT, **KW).tokens  # prompt cache now warm
        shorter = a.generate(PROMPT, draft_max=2, **KW).tokens
    with quickdraft.Engine(path, draft=d, threads=1, adaptive=False) as b:  # other engine, timings, lengths
        other = b.generate(PROMPT, **KW)
    assert first.tokens == again == shorter == other.tokens == plain_text
    assert len(plain_text) == 40 or plain_text[-1] in quickdraft.Tokenizer(path).eot_ids
    assert draft in (None, "ngram") or other.stats.drafted > 0  # (the n-gram finds no repeats in this story)


@pytest.mark.real
def test_other_seed_other_text(model_path):
    path = model_path("smollm2-135m")
    with quickdraft.Engine(path, draft="ngram", threads=2) as e:
        texts = {tuple(e.generate(PROMPT, max_tokens=24, temperature=1.0, seed=s).tokens) for s in range(4)}
    assert len(texts) > 1

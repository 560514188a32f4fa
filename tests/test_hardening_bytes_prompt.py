"""Issue 12 F4: a bytes prompt was taken as token ids (b"Hello" -> [72, 101, 108, 108, 111]). Now
bytes and bytearray raise TypeError saying to decode them or pass a list of ints; a list of ints
stays the way to pass token ids."""

from __future__ import annotations

import numpy as np
import pytest

from quickdraft import Engine, _core
from reference.spec_reference import Params, greedy_table, random_table

V = 128


@pytest.fixture(scope="module")
def engine_and_table():
    table = random_table(np.random.default_rng(5), V)
    cfg = _core.EngineOptions()
    cfg.n_ctx, cfg.draft_max, cfg.adaptive = 256, 4, False
    return Engine._from_core(_core._testing.engine_from_tables(table, None, None, cfg)), table


@pytest.mark.parametrize("prompt", [b"Hello", bytearray(b"Hello"), memoryview(b"Hello")])
def test_bytes_prompts_are_refused(engine_and_table, prompt):
    eng, table = engine_and_table
    with pytest.raises(TypeError, match=r"decode it to str .* or pass a list of ints"):
        eng.generate(prompt, max_tokens=8, temperature=0)
    with pytest.raises(TypeError, match="decode it"):
        eng.stream(prompt, max_tokens=8)
    ids = [72, 101, 108, 108, 111]  # what b"Hello" used to mean, still available as a list
    out = eng.generate(ids, max_tokens=8, temperature=0)
    assert out.tokens == greedy_table(table, ids, 8, Params(temperature=0.0))


def test_token_ids_must_be_ints_in_the_vocabulary(engine_and_table):
    eng, _ = engine_and_table
    with pytest.raises(TypeError, match=r"prompt\[1\] must be an int token id, got 'a'"):
        eng.generate([1, "a"], max_tokens=2)
    with pytest.raises(ValueError, match=rf"prompt\[0\]: token id 2147483648 is outside the vocabulary \[0, {V}\)"):
        eng.generate([2**31], max_tokens=2)
    with pytest.raises(ValueError, match=r"prompt\[2\]: token id -1"):
        eng.generate([1, 2, -1], max_tokens=2)
    assert eng.generate(np.array([1, 2, 3]), max_tokens=3, temperature=0).finish_reason == "length"


@pytest.mark.real
def test_issue_reproducer_on_smollm2(model_path):
    e = Engine(model_path("smollm2-135m"), draft="ngram", threads=1)
    with pytest.raises(TypeError, match="bytes"):
        e.generate(b"Hello")
    assert e.generate("Hello", max_tokens=8, temperature=0).text == e.generate(
        e.tokenize("Hello"), max_tokens=8, temperature=0).text

"""Issue 12, weak messages: bad values are caught at the Python boundary with ValueErrors that name
the argument and its range, instead of pybind11's "incompatible function arguments" TypeError
or a silent fallback (a negative temperature used to be greedy)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import quickdraft
from quickdraft import Engine, _core
from fixtures.tiny_models import TinySpec, write_tiny_model
from reference.spec_reference import Params, greedy_table, random_table

V = 16
PROMPT = [1, 5, 2, 7, 1]


@pytest.fixture(scope="module")
def table_engine():
    table = random_table(np.random.default_rng(9), V)
    cfg = _core.EngineOptions()
    cfg.n_ctx, cfg.draft_max, cfg.adaptive = 256, 4, False
    return Engine._from_core(_core._testing.engine_from_tables(table, "ngram", None, cfg)), table


@pytest.mark.parametrize("seed", [-1, 2**64, 2**70])
def test_seeds_outside_uint64(table_engine, seed):
    eng, _ = table_engine
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*64\)"):
        eng.generate(PROMPT, max_tokens=4, seed=seed)


def test_the_largest_seed_works(table_engine):
    eng, _ = table_engine
    out = eng.generate(PROMPT, max_tokens=4, temperature=0.7, seed=2**64 - 1)
    assert out.stats.seed == 2**64 - 1 and len(out.tokens) == 4


def test_negative_temperature_is_an_error_not_greedy(table_engine):
    eng, table = table_engine
    for t in (-0.5, -1, float("nan")):
        with pytest.raises(ValueError, match=r"temperature must be >= 0 \(0: greedy\)"):
            eng.generate(PROMPT, max_tokens=4, temperature=t)
    assert eng.generate(PROMPT, max_tokens=6, temperature=0).tokens == greedy_table(table, PROMPT, 6, Params(temperature=0.0))


def test_native_sampler_refuses_negative_temperature_too():
    p = _core.SamplerParams()
    p.temperature = -1.0
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        p.validate()


@pytest.mark.parametrize("kw, match", [
    ({"max_tokens": 2**31}, r"max_tokens must be in \[0, 2147483647\]"),
    ({"top_k": 2**40}, r"top_k must be in \[0, 2147483647\]"),
    ({"penalty_last_n": -2}, r"penalty_last_n must be in \[-1, 2147483647\]"),
    ({"top_p": 10**400}, "top_p is too large for a float"),
])
def test_integer_and_float_ranges(table_engine, kw, match):
    eng, _ = table_engine
    args = {"max_tokens": 4, **kw}
    with pytest.raises(ValueError, match=match):
        eng.generate(PROMPT, **args)


def test_strings_that_utf8_cannot_encode(table_engine):
    eng, _ = table_engine
    with pytest.raises(ValueError, match=r"prompt cannot be encoded as UTF-8: it holds a lone surrogate '\\ud800' at index 2"):
        eng.generate("ab\ud800", max_tokens=4)
    with pytest.raises(ValueError, match=r"stop\[1\] cannot be encoded as UTF-8"):
        eng.generate(PROMPT, max_tokens=4, stop=["ok", "\udcff"])
    with pytest.raises(ValueError, match=r"text cannot be encoded as UTF-8: it holds the byte 0xff at index 0"):
        eng.tokenize("\udcff")


def test_token_ids_at_or_above_2_31(table_engine):
    eng, _ = table_engine
    with pytest.raises(ValueError, match=rf"prompt\[1\]: token id 2147483648 is outside the vocabulary \[0, {V}\)"):
        eng.generate([1, 2**31], max_tokens=4)
    with pytest.raises(ValueError, match=r"tokens\[0\]: token id 4294967296"):
        eng.detokenize([2**32])


def test_n_ctx_outside_int32(tmp_path):
    path = write_tiny_model(tmp_path / "t.gguf", TinySpec())
    for n in (2**31, 99999999999, 0):
        with pytest.raises(ValueError, match=r"n_ctx must be in \[1, 2147483647\]"):
            Engine(path, n_ctx=n)
        with pytest.raises(ValueError, match=r"n_ctx must be in \[1, 2147483647\]"):
            quickdraft.Model(path, n_ctx=n)


def test_n_ctx_the_kv_cache_cannot_hold_says_the_bytes(tmp_path):
    spec = TinySpec(n_embd=256, n_head=4, n_head_kv=4, n_layer=8)
    path = write_tiny_model(tmp_path / "t.gguf", spec)
    n = 2**31 - 1
    need = 2 * 2 * spec.n_layer * n * spec.n_head_kv * spec.hd
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # above the trained context
        for make in (lambda: Engine(path, n_ctx=n, threads=1), lambda: quickdraft.Model(path, n_ctx=n, threads=1)):
            with pytest.raises(ValueError, match=rf"n_ctx {n} needs a KV cache of {need} bytes \(16.0 TiB.*smaller n_ctx"):
                make()
    assert quickdraft.Model(path, n_ctx=64, threads=1).eval([1, 2]).shape == (2, spec.n_vocab)


def test_n_ctx_above_the_trained_context_warns_once(tmp_path):
    spec = TinySpec(n_ctx_train=512)
    path = write_tiny_model(tmp_path / "t.gguf", spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Engine(path, n_ctx=512, threads=1)
        quickdraft.Model(path, n_ctx=100, threads=1)
        e = Engine(path, n_ctx=1024, threads=1)
        e.generate([1, 2, 3], max_tokens=3)
        e.generate([1, 2, 3], max_tokens=3)
    msgs = [str(w.message) for w in caught]
    assert msgs == ["n_ctx 1024 is larger than the 512 tokens t.gguf was trained with; output past 512 tokens may "
                    "degrade"], msgs
    assert caught[0].category is RuntimeWarning


def test_the_engine_still_works_after_each_refusal(table_engine):
    eng, table = table_engine
    for bad in ({"seed": -1}, {"temperature": -1}, {"max_tokens": 2**31}, {"stop": ["\ud800"]}):
        with pytest.raises(ValueError):
            eng.generate(PROMPT, **{"max_tokens": 4, **bad})
    assert eng.generate(PROMPT, max_tokens=8, temperature=0).tokens == greedy_table(table, PROMPT, 8, Params(temperature=0.0))

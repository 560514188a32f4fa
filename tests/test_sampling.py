"""Logit processing and sampling against the numpy oracle in reference/spec_reference.py."""

from __future__ import annotations

import numpy as np
import pytest

from quickdraft import _core
from reference.spec_reference import Params, chi_square_check, process

CASES = {
    "plain": Params(temperature=1.0),
    "temperature": Params(temperature=0.6),
    "top_k": Params(temperature=1.0, top_k=5),
    "top_p": Params(temperature=0.8, top_p=0.7),
    "min_p": Params(temperature=1.2, min_p=0.1),
    "all_filters": Params(temperature=0.9, top_k=12, top_p=0.9, min_p=0.02),
    "repeat_penalty": Params(temperature=1.0, repeat_penalty=1.3, penalty_last_n=6),
    "presence_frequency": Params(temperature=1.0, presence_penalty=0.7, frequency_penalty=0.4),
    "penalty_whole_history": Params(temperature=1.0, repeat_penalty=1.5, penalty_last_n=-1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_processing_matches_oracle(name):
    prm = CASES[name]
    rng = np.random.default_rng(len(name))
    for trial in range(5):
        logits = (rng.standard_normal(40) * 3).astype(np.float32)
        history = [int(t) for t in rng.integers(0, 40, size=12)]
        got = _core._testing.process_logits(logits, history, prm.native(_core))
        want = process(logits, history, prm)
        np.testing.assert_array_equal(got > 0, want > 0, err_msg=f"support differs ({name}, trial {trial})")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_greedy_is_argmax_after_penalties():
    logits = np.array([1.0, 3.0, 2.9, -1.0], dtype=np.float32)
    prm = Params(temperature=0.0, repeat_penalty=1.1)
    got = _core._testing.process_logits(logits, [1], prm.native(_core))
    np.testing.assert_array_equal(got, process(logits, [1], prm))
    assert got[2] == 1.0  # 3.0 / 1.1 < 2.9


def test_ties_go_to_the_lowest_id():
    logits = np.array([0.5, 2.0, 2.0, 2.0], dtype=np.float32)
    got = _core._testing.process_logits(logits, [], Params(temperature=0.0).native(_core))
    assert got.tolist() == [0.0, 1.0, 0.0, 0.0]
    got = _core._testing.process_logits(logits, [], Params(temperature=1.0, top_k=2).native(_core))
    assert got[3] == 0.0 and got[1] == got[2] == pytest.approx(0.5)


def test_top_p_over_a_large_vocabulary():
    # The partial sort grows its head: exercise the case where 64 entries are not enough.
    rng = np.random.default_rng(7)
    logits = (rng.standard_normal(5000) * 0.3).astype(np.float32)
    prm = Params(temperature=1.0, top_p=0.95)
    got = _core._testing.process_logits(logits, [], prm.native(_core))
    want = process(logits, [], prm)
    assert abs(int((got > 0).sum()) - int((want > 0).sum())) <= 1  # float32 vs float64 at the edge
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("name", ["plain", "top_p", "all_filters"])
def test_sampler_distribution(name):
    prm = CASES[name]
    logits = (np.random.default_rng(3).standard_normal(16) * 1.5).astype(np.float32)
    samples = _core._testing.sample_tokens(logits, [], prm.native(_core), 40000, 12345)
    chi_square_check(samples, process(logits, [], prm))


def test_same_seed_same_samples():
    logits = np.linspace(-1, 1, 10).astype(np.float32)
    prm = Params(temperature=1.0).native(_core)
    a = _core._testing.sample_tokens(logits, [], prm, 200, 99)
    b = _core._testing.sample_tokens(logits, [], prm, 200, 99)
    c = _core._testing.sample_tokens(logits, [], prm, 200, 100)
    assert a == b
    assert a != c


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("top_p", 0.0, "top_p"),
        ("top_p", 1.5, "top_p"),
        ("top_k", -1, "top_k"),
        ("min_p", 1.0, "min_p"),
        ("repeat_penalty", 0.0, "repeat_penalty"),
        ("temperature", float("nan"), "temperature"),
    ],
)
def test_bad_settings_raise(field, value, match):
    prm = _core.SamplerParams()
    setattr(prm, field, value)
    with pytest.raises(ValueError, match=match):
        prm.validate()

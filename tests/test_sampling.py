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


def test_softmax_over_the_whole_float_range():
    # The sampler's own exp (a polynomial the compiler vectorizes): within float rounding of the
    # float64 softmax wherever the result is a normal float, and 0 where it would be subnormal.
    x = np.concatenate([[0.0], -np.geomspace(1e-6, 87.2, 20000), [-87.4, -95.0, -104.0, -1e4, -3e38]]).astype(np.float32)
    got = _core._testing.process_logits(x, [], Params(temperature=1.0).native(_core)).astype(np.float64)
    want = np.exp(x.astype(np.float64)) / np.exp(x.astype(np.float64)).sum()
    normal = want > 1e-37  # the normalized probability too (the sum is in the thousands)
    np.testing.assert_allclose(got[normal], want[normal], rtol=2e-6)
    assert (got[x < -87.3] == 0).all() and normal.sum() > 19000


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



# The exponential race (sampling/race.h): a draw fixed by (seed, position), the same uniform per
# token id whatever the distribution.


@pytest.mark.parametrize("name", ["plain", "temperature", "top_p", "all_filters"])
def test_race_draws_follow_the_distribution(name):
    prm = CASES[name]
    logits = (np.random.default_rng(5).standard_normal(16) * 1.5).astype(np.float32)
    samples = _core._testing.race_tokens(logits, [], prm.native(_core), 40000, 1000, 17)
    chi_square_check(samples, process(logits, [], prm))


def test_race_over_a_large_vocabulary_follows_the_distribution():
    # Most tokens fall below the bound that spares their logarithm: the ones it spares must be
    # the ones that cannot win. A peaked head and a long tail, the shape of an LLM's softmax.
    rng = np.random.default_rng(8)
    logits = (rng.standard_normal(5000) * 2.5).astype(np.float32)
    logits[:6] += 9.0
    prm = Params(temperature=0.8)
    want = process(logits, [], prm)
    samples = np.array(_core._testing.race_tokens(logits, [], prm.native(_core), 40000, 7, 3))
    head = np.arange(6)
    chi_square_check(np.where(np.isin(samples, head), samples, 6), np.append(want[head], want[6:].sum()))


def race_agreement_reference(p, q, n, rng):
    """How often two distributions' exponential races pick the same token when they share each
    token's uniform (numpy, independent of the engine's hash)."""
    e = -np.log(rng.random((n, len(p))))
    with np.errstate(divide="ignore"):
        return float(np.mean(np.argmin(e / p, axis=1) == np.argmin(e / q, axis=1)))


def test_race_couples_two_distributions_at_one_position():
    rng = np.random.default_rng(9)
    lp = (rng.standard_normal(32) * 2).astype(np.float32)
    lq = (lp + rng.standard_normal(32).astype(np.float32) * 0.8).astype(np.float32)
    prm = Params(temperature=1.0)
    p, q = process(lp, [], prm), process(lq, [], prm)
    n = 40000
    a = np.array(_core._testing.race_tokens(lp, [], prm.native(_core), n, 0, 11))
    b = np.array(_core._testing.race_tokens(lq, [], prm.native(_core), n, 0, 11))
    agree = float(np.mean(a == b))
    tv = 0.5 * np.abs(p - q).sum()
    # The coupling's agreement, as an independent race gives it; never below (1 - tv) / (1 + tv),
    # never above speculative sampling's 1 - tv.
    assert agree == pytest.approx(race_agreement_reference(p, q, n, rng), abs=0.015)
    assert (1 - tv) / (1 + tv) - 0.01 < agree < 1 - tv + 0.01
    # Other positions draw independently: the same distribution at two positions agrees about
    # as often as two independent draws (sum of p^2), not always.
    c = np.array(_core._testing.race_tokens(lp, [], prm.native(_core), n, 0, 12))
    assert float(np.mean(a == c)) == pytest.approx(float((p * p).sum()), abs=0.015)


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

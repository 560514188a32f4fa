"""The verifier alone: greedy acceptance and the speculative-sampling rule over fixed p and q.

_verify_trials draws a draft from q (processed like p) and verifies it, many times. With rows
that do not depend on the prefix, the first emitted token must follow p[0], and the second
(when the step emits one) p[1]: the chi-square test checks both, with q far from p.
"""

from __future__ import annotations

import numpy as np
import pytest

from quickdraft import _core
from reference.spec_reference import SETTINGS, Params, chi_square_check, process

V = 12
N = 40000


def _rows(seed: int, k: int):
    rng = np.random.default_rng(seed)
    p = (rng.standard_normal((k + 1, V)) * 2).astype(np.float32)
    # q: a mix of p's own logits and noise, so acceptance is partial and the residual matters.
    q = (0.5 * p[:k] + rng.standard_normal((k, V)) * 2).astype(np.float32)
    return p, q


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_sampling_reproduces_target_distribution(setting):
    prm = SETTINGS[setting]
    p, q = _rows(11, 3)
    out = _core._testing.verify_trials(p, q, prm.native(_core), N, 2024)
    want0 = process(p[0], [0], prm)
    chi_square_check(out[:, 0], want0)
    # Second token: only emitted when the first draft token was accepted, and then it is a
    # sample from row 1 (row 1 does not depend on the first token here).
    second = out[:, 1][out[:, 1] >= 0]
    assert len(second) > 5000, "too few accepted first tokens to test the second position"
    chi_square_check(second, process(p[1], [0], prm))


def test_accepts_more_when_q_is_close_to_p():
    prm = Params(temperature=1.0)
    p, q_far = _rows(5, 1)
    near = _core._testing.verify_trials(p, p[:1].copy(), prm.native(_core), 4000, 1)
    far = _core._testing.verify_trials(p, q_far, prm.native(_core), 4000, 1)
    assert (near[:, 1] >= 0).mean() == 1.0  # q == p: every draft token is accepted
    assert (far[:, 1] >= 0).mean() < 0.9


def test_rejected_draft_token_never_reappears_when_q_one_hot():
    # Greedy drafting under sampling verification is the q = one-hot case: a rejected x
    # has residual max(p - 1{x}, 0), which is 0 at x.
    prm = Params(temperature=1.0)
    p, q = _rows(8, 1)
    q = np.full((1, V), -30.0, dtype=np.float32)
    q[0, 3] = 30.0  # q is (numerically) one-hot at 3
    out = _core._testing.verify_trials(p, q, prm.native(_core), N, 9)
    rejected = out[:, 1] < 0
    assert not np.any(out[rejected, 0] == 3)
    chi_square_check(out[:, 0], process(p[0], [0], prm))


def test_greedy_accepts_the_matching_prefix():
    prm = Params(temperature=0.0)
    p, q = _rows(3, 4)
    target = [int(np.argmax(r)) for r in p]
    q = np.full((4, V), -5.0, dtype=np.float32)
    for i, t in enumerate(target[:2] + [(target[2] + 1) % V, target[3]]):
        q[i, t] = 5.0
    out = _core._testing.verify_trials(p, q, prm.native(_core), 3, 0)
    # Draft = target[0], target[1], wrong, ... -> keep two, then the target's own third token.
    for row in out:
        assert row.tolist() == target[:3] + [-1, -1]

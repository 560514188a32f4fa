"""The draft-length controller: k maximises (1 - a^(k+1)) / (1 - a) / (c_d + (k-1) c_s + c_v(k+1)).

The oracle evaluates that formula directly from the controller's own acceptance estimate and
the costs fed to it; costs here are synthetic numbers, not timings.
"""

from __future__ import annotations

import pytest

from quickdraft import _core


def best_k(alpha, c_d, c_v, kmax, c_s=None):
    c_s = c_d if c_s is None else c_s

    def rate(k):
        return (1 - alpha ** (k + 1)) / (1 - alpha) / ((c_d + (k - 1) * c_s if k else 0) + c_v(k + 1))

    return max(range(kmax + 1), key=rate)


def feed(ctl, c_d, c_v, kmax, accept_prob, steps=300, c_s=None):
    """Drives the controller: every draft token is accepted with accept_prob (deterministically
    spread), costs exactly c_d per token (or c_d for the first and c_s for each further one) and
    c_v(n) per verify."""
    credit = 0.0
    for _ in range(steps):
        k = ctl.next(0)
        if k:
            if c_s is None:
                ctl.record_draft(0, k, c_d)
            else:
                ctl.record_draft(0, k, c_d, c_s if k > 1 else -1.0)
        n = 0
        while n < k:
            credit += accept_prob
            if credit < 1.0:
                break
            credit -= 1.0
            n += 1
        ctl.record_verify(0, k + 1, n, c_v(k + 1))
    return ctl


def c_v_flat(n):
    return 1.0 + 0.08 * (n - 1)


def c_v_steep(n):
    return 1.0 + 0.5 * (n - 1)


@pytest.mark.parametrize(
    "accept,c_d,c_v",
    [(0.9, 0.05, c_v_flat), (0.9, 0.3, c_v_flat), (0.6, 0.05, c_v_flat), (0.9, 0.05, c_v_steep), (0.3, 0.4, c_v_flat)],
)
def test_choice_maximises_expected_rate(accept, c_d, c_v):
    kmax = 10
    ctl = feed(_core._testing.DraftLength(1, kmax), c_d, c_v, kmax, accept)
    # The controller measured every row count it used; compare with the exact formula at its
    # own acceptance estimate, using the true costs.
    k = ctl.next(0)
    want = best_k(ctl.alpha(0), c_d, c_v, kmax)
    assert k == want or ctl.rate(0, k) >= 0.97 * ctl.rate(0, want)


@pytest.mark.parametrize("accept", [0.93, 0.8])
def test_first_token_cost_apart(accept):
    """A model drafter's first token pays its catch-up (10 units against 8.5 a step, as on the
    Qwen pair): longer drafts are cheaper per token than k * c_d, and the choice follows."""
    kmax = 8
    c_d, c_s = 0.40, 0.34

    def c_v(n):
        return 1.0 + 0.1 * (n - 1)

    ctl = feed(_core._testing.DraftLength(1, kmax), c_d, c_v, kmax, accept, c_s=c_s)
    assert ctl.draft_cost(0) == pytest.approx(c_d, rel=0.05)
    assert ctl.step_cost(0) == pytest.approx(c_s, rel=0.05)
    k = ctl.next(0)
    want = best_k(ctl.alpha(0), c_d, c_v, kmax, c_s=c_s)
    assert k == want or ctl.rate(0, k) >= 0.97 * ctl.rate(0, want)
    # the rate the controller expects is the formula's, with both costs
    a = ctl.alpha(0)
    assert ctl.rate(0, 4) == pytest.approx((1 - a**5) / (1 - a) / (c_d + 3 * c_s + c_v(5)), rel=0.05)


def test_useless_drafts_switch_speculation_off_and_probe_ever_less():
    ctl = _core._testing.DraftLength(1, 8, True, 4)
    probes = []
    for step in range(3000):
        k = ctl.next(0)
        if k:
            probes.append(step)
            ctl.record_draft(0, k, 0.8)
        ctl.record_verify(0, k + 1, 0, c_v_steep(k + 1))
    assert 3 <= len(probes) <= 12  # the opening drafts, then rare probes
    gaps = [b - a for a, b in zip(probes, probes[1:])]
    assert all(g2 >= g1 for g1, g2 in zip(gaps[3:], gaps[4:])), gaps  # probes thin out
    assert max(gaps) >= 500


def test_good_cheap_drafts_use_long_drafts():
    ctl = feed(_core._testing.DraftLength(1, 8), 0.02, c_v_flat, 8, 0.97)
    assert ctl.alpha(0) > 0.9
    assert ctl.next(0) >= 6


def test_acceptance_estimate_tracks_changes():
    ctl = feed(_core._testing.DraftLength(1, 8), 0.05, c_v_flat, 8, 0.95)
    high = ctl.alpha(0)
    feed(ctl, 0.05, c_v_flat, 8, 0.2, steps=100)
    assert ctl.alpha(0) < high - 0.3


def test_verify_cost_interpolates_measured_points():
    ctl = _core._testing.DraftLength(1, 8)
    assert ctl.verify_cost(3) < 0
    ctl.record_verify(0, 1, 0, 1.0)
    ctl.record_verify(0, 5, 4, 3.0)
    c1, c5 = ctl.verify_cost(1), ctl.verify_cost(5)
    assert c5 > 2 * c1
    assert ctl.verify_cost(3) == pytest.approx((c1 + c5) / 2)
    assert ctl.verify_cost(7) > c5  # extrapolated upward


def test_a_load_change_keeps_the_cost_shape():
    # Costs learned at one machine load; then everything runs 3x slower, measured only at the
    # row count in use. The ratios that decide k must stay, and the level must follow.
    ctl = feed(_core._testing.DraftLength(1, 8), 0.05, c_v_flat, 8, 0.9)
    k = ctl.next(0)
    assert k > 0
    ratio = ctl.verify_cost(1) / ctl.verify_cost(k + 1)
    draft_ratio = ctl.draft_cost(0) / ctl.verify_cost(k + 1)
    for _ in range(40):
        ctl.record_draft(0, k, 3 * 0.05)
        ctl.record_verify(0, k + 1, k, 3 * c_v_flat(k + 1))
    assert ctl.verify_cost(k + 1) == pytest.approx(3 * c_v_flat(k + 1), rel=0.1)
    assert ctl.verify_cost(1) / ctl.verify_cost(k + 1) == pytest.approx(ratio, rel=0.12)
    assert ctl.draft_cost(0) / ctl.verify_cost(k + 1) == pytest.approx(draft_ratio, rel=0.12)
    k2, want = ctl.next(0), best_k(ctl.alpha(0), 0.05, c_v_flat, 8)  # scaling costs keeps the argmax
    assert k2 == want or ctl.rate(0, k2) >= 0.97 * ctl.rate(0, want)


def test_probe_interval_follows_the_probe_cost():
    cheap = feed(_core._testing.DraftLength(1, 8), 0.0001, c_v_flat, 8, 0.0, steps=50)  # n-gram-like
    dear = feed(_core._testing.DraftLength(1, 8), 0.6, c_v_flat, 8, 0.0, steps=50)  # a draft model
    cheap.new_sequence()
    dear.new_sequence()
    assert cheap.probe_interval(0) < dear.probe_interval(0)
    # ~5 % of the time: a probe costing 2 c_d + c_v(3) - c_v(1) every interval steps of c_v(1)
    cost = 2 * dear.draft_cost(0) + dear.verify_cost(3) - dear.verify_cost(1)
    assert abs(dear.probe_interval(0) - cost / (0.05 * dear.verify_cost(1))) <= 1


def test_fixed_length_when_not_adaptive():
    ctl = _core._testing.DraftLength(1, 6, False)
    feed(ctl, 5.0, c_v_steep, 6, 0.0, steps=20)
    assert ctl.next(0) == 6


def test_bad_draft_max():
    with pytest.raises(ValueError, match="draft_max"):
        _core._testing.DraftLength(1, -1)


def test_one_unlucky_early_timing_fades():
    ctl = _core._testing.DraftLength(1, 8)
    ctl.record_draft(0, 4, 20 * 0.05)  # the first draft ran while the machine was busy
    ctl.record_verify(0, 5, 4, c_v_flat(5))
    for _ in range(30):
        ctl.record_draft(0, 4, 0.05)
        ctl.record_verify(0, 5, 4, c_v_flat(5))
    assert ctl.draft_cost(0) / ctl.verify_cost(5) < 1.5 * 0.05 / c_v_flat(5)


def test_one_failed_first_draft_is_probed_again_soon():
    """The first token of an answer is often refused: one failed draft (a = 0.4) must not
    park speculation for the probe budget's interval while there is next to no evidence."""
    ctl = _core._testing.DraftLength(1, 8, True, 4)
    for _ in range(3):
        ctl.record_verify(0, 1, 0, 0.025)  # plain steps: a cost, no acceptance evidence
    ctl.record_draft(0, 4, 0.4 * 0.025, 0.34 * 0.025)
    ctl.record_verify(0, 5, 0, c_v_flat(5) * 0.025)  # refused at once
    assert ctl.alpha(0) < 0.5
    assert ctl.probe_interval(0) == 4
    steps_to_probe = next(i for i in range(1, 50) if ctl.next(0) > 0)
    assert steps_to_probe <= 4
    # with evidence the budget rules again: a draft model refused every time probes rarely
    for _ in range(10):
        ctl.record_draft(0, 2, 0.4 * 0.025, 0.34 * 0.025)
        ctl.record_verify(0, 3, 0, c_v_flat(3) * 0.025)
    assert ctl.probe_interval(0) > 4


def test_optimism_fades_with_evidence():
    """With little evidence the choice plans with more than the point estimate of a (longer
    drafts judge more tokens a step); with a full window of evidence, with the estimate itself."""
    def c_v(n):
        return 1.0 + 0.1 * (n - 1)

    thin = _core._testing.DraftLength(1, 8)
    thin.record_verify(0, 1, 0, c_v(1))
    thin.record_draft(0, 2, 0.4, 0.34)
    thin.record_verify(0, 2, 1, c_v(2))
    thin.record_verify(0, 2, 1, c_v(2))
    thin.record_verify(0, 2, 1, c_v(2))
    thin.record_verify(0, 2, 0, c_v(2))
    assert thin.next(0) > best_k(thin.alpha(0), 0.4, c_v, 8, c_s=0.34)
    full = feed(_core._testing.DraftLength(1, 8), 0.4, c_v, 8, 0.8, c_s=0.34)
    k = full.next(0)
    want = best_k(full.alpha(0), 0.4, c_v, 8, c_s=0.34)
    assert k == want or full.rate(0, k) >= 0.97 * full.rate(0, want)


def test_one_slow_timing_of_a_row_count_leans_on_the_others():
    """A row count timed once, slowly (a cold start, a busy machine), must not set its cost
    alone: its estimate leans on the line through the other row counts until it has its own
    history, and then follows that history."""
    ctl = _core._testing.DraftLength(1, 8)
    for _ in range(6):
        for n in (1, 2, 3, 4, 6, 7, 8, 9):
            ctl.record_verify(0, n, 0, c_v_flat(n))
    ctl.record_verify(0, 5, 0, 2 * c_v_flat(5))
    assert c_v_flat(5) < ctl.verify_cost(5) < 1.5 * c_v_flat(5)
    for _ in range(40):
        ctl.record_verify(0, 5, 0, 1.3 * c_v_flat(5))
    assert ctl.verify_cost(5) == pytest.approx(1.3 * c_v_flat(5), rel=0.08)

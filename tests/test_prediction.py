"""Predicted outputs (Engine.generate(..., prediction=)) and per-call drafting (drafter=,
draft_max=): the output never changes, only where the drafts come from.

Table models (reference/spec_reference) give the exact greedy output and token distribution;
SmolLM2 checks the byte-identical text on a real model and tokenizer.
"""

from __future__ import annotations

import numpy as np
import pytest

import quickdraft
from quickdraft import _core
from reference.spec_reference import SETTINGS, Params, chi_square_check, greedy_table, random_table, table_marginals
from test_spec_loop import PROMPT, table_engine

V = 8


@pytest.fixture(scope="module")
def tables():
    rng = np.random.default_rng(99)
    target = random_table(rng, V)
    near = (target + rng.standard_normal(target.shape).astype(np.float32) * 0.7).astype(np.float32)
    return target, near


@pytest.mark.parametrize("drafter", [None, "ngram", "hybrid"])
def test_exact_prediction_is_accepted_whole_and_changes_nothing(tables, drafter):
    target, near = tables
    want = greedy_table(target, PROMPT, 40, Params(temperature=0.0))
    draft = {None: None, "ngram": "ngram", "hybrid": ("hybrid", near)}[drafter]
    out = table_engine(target, draft, draft_max=4).generate(PROMPT, max_tokens=40, temperature=0.0, prediction=want)
    s = out.stats
    assert out.tokens == want
    assert s.source_names[-1] == "prediction"
    assert s.rejected_prediction_tokens == 0
    # Every step drafts from the prediction: each emits 4 drafted tokens and the target's own.
    assert s.accepted_prediction_tokens >= 40 - 40 // 5 - 1
    assert s.source_drafted[-1] == s.accepted_prediction_tokens
    assert s.prediction_tokens == len(want)


def test_wrong_prediction_falls_back_and_changes_nothing(tables):
    target, near = tables
    want = greedy_table(target, PROMPT, 60, Params(temperature=0.0))
    wrong = list(want)
    for i in (10, 11, 30):  # an edit: the prediction differs from the output in places
        wrong[i] = (wrong[i] + 1) % V
    eng = table_engine(target, ("hybrid", near), draft_max=4)
    out = eng.generate(PROMPT, max_tokens=60, temperature=0.0, prediction=wrong)
    s = out.stats
    assert out.tokens == want
    assert s.rejected_prediction_tokens > 0 and s.accepted_prediction_tokens > 20
    assert s.source_names == ["draft", "ngram", "prediction"]
    assert sum(s.source_drafted) == s.drafted and sum(s.source_accepted) == s.accepted
    # The same engine without a prediction: same tokens, no prediction counts.
    plain = eng.generate(PROMPT, max_tokens=60, temperature=0.0)
    assert plain.tokens == want and plain.stats.accepted_prediction_tokens == 0
    assert plain.stats.source_names == ["draft", "ngram"]


def test_unrelated_prediction_changes_nothing(tables):
    target, _ = tables
    want = greedy_table(target, PROMPT, 30, Params(temperature=0.0))
    out = table_engine(target).generate(PROMPT, max_tokens=30, temperature=0.0, prediction=[3] * 50)
    assert out.tokens == want


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_sampling_with_a_prediction_keeps_the_target_distribution(tables, setting):
    prm = SETTINGS[setting]
    target = tables[0]
    eng = table_engine(target, "ngram", draft_max=3)
    opt = _core.GenerateOptions()
    opt.max_tokens = 3
    opt.sampling = prm.native(_core)
    opt.prediction = greedy_table(target, PROMPT, 3, Params(temperature=0.0))
    out = _core._testing.sample_many(eng._core, PROMPT, opt, 20000, 11)
    margins = table_marginals(target, PROMPT, 3, prm)
    chi_square_check(out[:, 0], margins[0])
    chi_square_check(out[:, 2], margins[2])
    assert eng._core.stats().source_drafted[-1] > 0


def test_per_call_drafter_and_draft_max(tables):
    target, near = tables
    want = greedy_table(target, PROMPT, 40, Params(temperature=0.0))
    eng = table_engine(target, ("hybrid", near), draft_max=4)
    for drafter, name in (("none", "none"), ("ngram", "ngram"), ("model", "draft"), ("hybrid", "hybrid"), (None, "hybrid")):
        out = eng.generate(PROMPT, max_tokens=40, temperature=0.0, drafter=drafter)
        assert out.tokens == want, drafter
        assert out.stats.drafter == name
        assert (out.stats.drafted == 0) == (drafter == "none")
    out = eng.generate(PROMPT, max_tokens=40, temperature=0.0, drafter="model", draft_max=2)
    assert out.tokens == want and max(i for i, n in enumerate(out.stats.draft_length_histogram) if n) <= 2
    out = eng.generate(PROMPT, max_tokens=40, temperature=0.0, draft_max=0)
    assert out.tokens == want and out.stats.drafted == 0
    with pytest.raises(ValueError, match="'self' is not loaded"):
        eng.generate(PROMPT, max_tokens=4, drafter="self")
    with pytest.raises(ValueError, match="unknown drafter"):
        eng.generate(PROMPT, max_tokens=4, drafter="magic")
    with pytest.raises(ValueError, match="draft_max"):
        eng.generate(PROMPT, max_tokens=4, draft_max=5)
    with pytest.raises(ValueError, match="prediction"):
        eng.generate(PROMPT, max_tokens=4, prediction=[V])
    # A plain engine drafts by n-gram on request, but has no model to draft with.
    plain = table_engine(target)
    assert plain.generate(PROMPT, max_tokens=40, temperature=0.0, drafter="ngram").tokens == want
    with pytest.raises(ValueError, match="'model' is not loaded"):
        plain.generate(PROMPT, max_tokens=4, drafter="model")


def test_a_call_may_fix_the_draft_length(tables):
    """adaptive=False drafts draft_max every step on an adaptive engine, whatever its controller
    learned (here a draft model as dear as the target: it mostly stops drafting); the text stays
    the target's."""
    target, near = tables
    want = greedy_table(target, PROMPT, 40, Params(temperature=0.0))
    eng = table_engine(target, ("model", near), draft_max=4, adaptive=True)
    assert eng.generate(PROMPT, max_tokens=40, temperature=0.0).tokens == want
    for k in (4, 2):
        out = eng.generate(PROMPT, max_tokens=40, temperature=0.0, draft_max=k, adaptive=False)
        h = out.stats.draft_length_histogram
        assert out.tokens == want
        # Every step drafts k tokens but where fewer are left to emit (the last one or two steps).
        assert h[k] >= out.stats.steps - 2 and sum(h[k + 1:]) == 0, h


@pytest.mark.real
def test_greedy_text_is_byte_identical_with_a_prediction(model_path):
    with quickdraft.Engine(model_path("smollm2-135m"), threads=2) as engine:
        messages = [{"role": "user", "content": "Write a Python function that returns the square of a number."}]
        plain = engine.chat(messages, max_tokens=80, temperature=0)
        assert len(plain.tokens) > 20
        edited = plain.text.replace("def ", "def my_", 1) + "\nAn extra tail the model never writes."
        for prediction in (plain.text, edited, "nothing alike at all"):
            out = engine.chat(messages, max_tokens=80, temperature=0, prediction=prediction)
            assert out.text == plain.text and out.tokens == plain.tokens
        exact = engine.chat(messages, max_tokens=80, temperature=0, prediction=plain.text)
        assert exact.stats.accepted_prediction_tokens >= len(plain.tokens) // 2
        assert exact.stats.rejected_prediction_tokens <= 2


@pytest.mark.real
def test_each_calls_prediction_is_judged_on_its_own(model_path):
    """An adaptive engine (a server's, shared by its requests) that learned from a wrong prediction
    that predictions do not pay still takes up the next call's exact one at its first step: a
    call's prediction restarts the controller's evidence on predictions, its first step probes, and
    the prediction, once followed, is drafted in full. So on any machine the exact call drafts
    draft_max at every step but the first (a probe) and the last (the tokens left)."""
    with quickdraft.Engine(model_path("smollm2-135m"), threads=2, draft_max=8) as engine:
        prompt = engine.tokenizer.apply_chat_template(
            [{"role": "user", "content": "Write a Python function that reverses a linked list, with comments."}],
            add_generation_prompt=True)
        n = 64
        ref = engine.generate(prompt, max_tokens=n, temperature=0, drafter="none").tokens
        assert len(ref) == n
        rng = np.random.default_rng(0)
        for _ in range(2):
            wrong = [int(rng.integers(100, 20000)) if i % 3 == 2 else t for i, t in enumerate(ref)]
            assert engine.generate(prompt, max_tokens=n, temperature=0, prediction=wrong).tokens == ref
            exact = engine.generate(prompt, max_tokens=n, temperature=0, prediction=ref)
            assert exact.tokens == ref
            s = exact.stats
            assert s.rejected_prediction_tokens == 0
            # a probe of 2 (3 tokens), 8 drafts a step (9 tokens) while 9 more are left, then the rest
            assert s.accepted_prediction_tokens == 2 + 8 * ((n - 3) // 9) + ((n - 3) % 9 - 1), list(s.draft_length_histogram)

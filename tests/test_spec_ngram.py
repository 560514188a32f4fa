"""The n-gram lookup (NgramDrafter::find) against a pure-Python statement of its rules.

Two modes:
- suffix matching (the "ngram" drafter): the most recent earlier occurrence of the history's
  last n tokens, n from ngram_max down to ngram_min;
- copies (min_run > 0: the hybrid's n-gram and a windowed draft model's lookup): the earlier
  place whose preceding tokens match the history's end for the longest run, at least min_run
  tokens, the most recent of equal runs. Short matches in new text are chance ones, which the
  draft model beside it drafts better (docs/benchmarks.md, eleventh session).
"""

from __future__ import annotations

import numpy as np
import pytest

from quickdraft import _core
from test_spec_loop import table_engine, tables  # noqa: F401  (a fixture)
from reference.spec_reference import Params, greedy_table

T = _core._testing
ANYWHERE = 1 << 30
ENOUGH = 64  # runs are measured up to this length: longer ones predict no better


def find_suffix(h, n_min, n_max, before):
    for n in range(min(n_max, len(h) - 1), n_min - 1, -1):
        for start in range(min(len(h) - n - 1, before - n - 1), -1, -1):
            if h[start:start + n] == h[len(h) - n:]:
                return start + n
    return -1


def run_before(h, at):
    run = 0
    while run < ENOUGH and at - 1 - run >= 0 and h[at - 1 - run] == h[len(h) - 1 - run]:
        run += 1
    return run


def find_copy(h, min_run, before):
    best, best_run = -1, min_run - 1
    for at in range(min(len(h) - 1, before - 1), 0, -1):
        run = run_before(h, at)
        if run > best_run:
            best, best_run = at, run
    return best


@pytest.mark.parametrize("vocab", [2, 3, 6])
def test_find_matches_the_reference(vocab):
    rng = np.random.default_rng(vocab)
    checked = {"suffix": 0, "copy": 0}
    for _ in range(400):
        h = [int(t) for t in rng.integers(0, vocab, int(rng.integers(0, 90)))]
        if vocab == 2 and rng.random() < 0.3:  # long periodic runs, past ENOUGH
            h = (h[:5] or [1]) * 40
        before = ANYWHERE if rng.random() < 0.5 else int(rng.integers(0, len(h) + 2))
        n_min = int(rng.integers(1, 4))
        n_max = n_min + int(rng.integers(0, 3))
        got = T.ngram_find(h, n_min=n_min, n_max=n_max, min_run=0, before=before)
        assert got == find_suffix(h, n_min, n_max, before), (h, n_min, n_max, before)
        checked["suffix"] += got >= 0
        for min_run in (1, 3, T.NGRAM_COPY_RUN):
            got = T.ngram_find(h, min_run=min_run, before=before)
            assert got == find_copy(h, min_run, before), (h, min_run, before)
            checked["copy"] += got >= 0
    assert checked["suffix"] > 100 and checked["copy"] > 100  # the cases were not all "no match"


@pytest.mark.parametrize("min_run", [0, 8])
def test_a_proposal_is_no_longer_than_its_match(min_run):
    """A proposal copies what followed the match, at most k tokens and at most as many as the
    match's run: a 2-token chance match proposes 2 (its first token is right about half the time
    in new text, and further ones rarely), a copy proposes all k."""
    rng = np.random.default_rng(5 + min_run)
    proposed = []
    for _ in range(300):
        h = [int(t) for t in rng.integers(0, 4, int(rng.integers(2, 70)))]
        if rng.random() < 0.3:
            h = h + h[: int(rng.integers(1, len(h)))]  # the end copies the start
        k = int(rng.integers(0, 10))
        got = T.ngram_propose(h, k, min_run=min_run)
        at = find_copy(h, min_run, ANYWHERE) if min_run else find_suffix(h, 2, 4, ANYWHERE)
        want = [] if at < 0 or k == 0 else h[at:at + min(k, run_before(h, at))]
        assert got == want, (h, k, at)
        proposed.append(len(got))
    assert max(proposed) >= 8 and 0 < min(x for x in proposed if x) <= 2  # both kinds occurred


def test_copies_skip_chance_matches_and_follow_the_longest_run():
    copy_run = T.NGRAM_COPY_RUN
    source = list(range(100, 100 + 2 * copy_run))  # a passage, later copied
    head = source[:copy_run + 2]  # the output is copying the passage
    chance = [7, 8] + head[-3:] + [55]  # head's last 3 tokens, once more, then elsewhere
    h = [1, 2] + source + [3] + chance + [4] + head
    at = 2 + copy_run + 2  # continuation after head in the passage
    assert T.ngram_find(h, min_run=copy_run) == at and h[at] == source[copy_run + 2]
    # Suffix matching takes the most recent 4-gram, which here is the passage's, but with n_max 3
    # the more recent chance match.
    assert T.ngram_find(h) == at
    assert T.ngram_find(h, n_min=2, n_max=3) == h.index(55)
    # Chance matches alone (runs of 2-3 tokens): suffix matching drafts, copies do not.
    new_text = [5, 6, 7, 1, 2, 8, 9, 5, 6, 7, 3, 4, 1, 2]
    assert T.ngram_find(new_text) == 5 and T.ngram_find(new_text, min_run=copy_run) == -1
    # Not yet a copy: a run one token short of copy_run.
    h_short = [1] + source + [3] + source[:copy_run - 1]
    assert T.ngram_find(h_short, min_run=copy_run) == -1
    assert T.ngram_find(h_short + [source[copy_run - 1]], min_run=copy_run) == 1 + copy_run
    # `before`: only continuations that start before it.
    assert T.ngram_find(h, min_run=copy_run, before=at) == -1
    assert T.ngram_find(h, min_run=copy_run, before=at + 1) == at


def test_hybrid_drafts_a_copy_of_the_prompt_by_lookup(tables):  # noqa: F811
    """The hybrid's n-gram source drafts the prompt's text where the output repeats it: the prompt
    holds the target's own greedy text after two tokens s, then noise, then s again. Greedy output
    stays the target's."""
    target, near = tables
    rng = np.random.default_rng(11)
    s = [int(t) for t in rng.integers(0, 8, 2)]
    text = greedy_table(target, s, 60, Params(temperature=0.0))
    prompt = s + text + [int(t) for t in rng.integers(0, 8, 30)] + s
    want = greedy_table(target, prompt, 40, Params(temperature=0.0))
    assert want[:20] == text[:20]  # the premise: the output repeats the prompt's start
    for adaptive in (False, True):
        out = table_engine(target, ("hybrid", near), adaptive=adaptive).generate(prompt, max_tokens=40, temperature=0.0)
        assert out.tokens == want
        st = out.stats
        assert st.source_names == ["draft", "ngram"]
        assert st.source_drafted[1] >= 10 and st.source_accepted[1] >= 0.8 * st.source_drafted[1], (
            st.source_drafted, st.source_accepted)

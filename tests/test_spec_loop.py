"""The speculative loop end to end on tiny table models (reference/spec_reference.random_table).

A table model's next-token logits depend on the previous and current token, and its "KV
cache" is the list of tokens it has seen, so the exact greedy output and the exact
distribution of every generated token are computable in numpy: these are the oracles.
"""

from __future__ import annotations

import numpy as np
import pytest

from quickdraft import Engine, _core
from reference.spec_reference import (SETTINGS, Params, chi_square_check, greedy_table, random_table, table_logits,
                                      table_marginals)

V = 8


def table_engine(target, draft=None, *, pieces=None, stop_ids=(), n_ctx=256, draft_max=4, p_min=0.0, adaptive=False,
                 ngram_min=1, ngram_max=4, max_lag=64, window=None):
    cfg = _core.EngineOptions()
    cfg.draft_max_lag = max_lag
    if window is not None:
        cfg.draft_window = window
    cfg.n_ctx, cfg.draft_max, cfg.p_min, cfg.adaptive = n_ctx, draft_max, p_min, adaptive
    cfg.ngram_min, cfg.ngram_max, cfg.stop_ids = ngram_min, ngram_max, list(stop_ids)
    return Engine._from_core(_core._testing.engine_from_tables(target, draft, pieces, cfg))


@pytest.fixture(scope="module")
def tables():
    rng = np.random.default_rng(1234)
    target = random_table(rng, V)
    near = (target + rng.standard_normal(target.shape).astype(np.float32) * 0.7).astype(np.float32)
    return target, near


def drafters(tables):
    target, near = tables
    return {
        "none": None,
        "ngram": "ngram",
        "model": near,
        "self": target.copy(),
        "hybrid": ("hybrid", near),
    }


PROMPT = [1, 5, 2, 7, 1]


@pytest.mark.parametrize("drafter", ["none", "ngram", "model", "self", "hybrid"])
@pytest.mark.parametrize("penalty", [False, True])
def test_greedy_speculative_equals_greedy_plain(tables, drafter, penalty):
    prm = Params(temperature=0.0, repeat_penalty=1.3 if penalty else 1.0, penalty_last_n=8)
    want = greedy_table(tables[0], PROMPT, 60, prm)
    for adaptive in (False, True):
        eng = table_engine(tables[0], drafters(tables)[drafter], adaptive=adaptive)
        out = eng.generate(PROMPT, max_tokens=60, temperature=0.0, repeat_penalty=prm.repeat_penalty,
                           penalty_last_n=8)
        assert out.tokens == want
        assert out.finish_reason == "length"
        if drafter != "none" and not adaptive:
            assert out.stats.drafted > 0


@pytest.mark.parametrize("hybrid", [False, True], ids=["model", "hybrid"])
def test_draft_model_reads_the_end_of_a_long_prompt(tables, hybrid):
    """draft_window: the draft model's prefill reads only the prompt's last tokens. A table model's
    logits depend on the last two tokens only, so every window drafts exactly what the whole
    prompt does, if the window is the prompt's end; the output stays the target's own. (The model
    drafter's lookup over the prompt before its window drafts only copies, runs of 8 tokens or
    more, which this random prompt has none of.)"""
    target, near = tables
    prompt = [int(t) for t in np.random.default_rng(7).integers(0, V, 120)]
    draft = ("hybrid", near) if hybrid else near
    want = greedy_table(target, prompt, 40, Params(temperature=0.0))
    runs = {}
    for window in (1, 5, 1 << 30):
        eng = table_engine(target, draft, window=window)
        out = eng.generate(prompt, max_tokens=40, temperature=0.0)
        assert out.tokens == want
        assert out.stats.draft_prompt_tokens == min(window, len(prompt) - 1)
        runs[window] = (out.stats.drafted, out.stats.accepted)
        # The next turn extends the text: the draft model reads only what is new to its cache
        # (the turn's 3 tokens and what it did not draft itself), never more than the window.
        prompt2 = prompt + out.tokens + [3, 1, 4]
        out2 = eng.generate(prompt2, max_tokens=20, temperature=0.0)
        assert out2.tokens == greedy_table(target, prompt2, 20, Params(temperature=0.0))
        assert 0 < out2.stats.draft_prompt_tokens <= min(window, len(out.tokens) + 3)
    assert runs[1] == runs[5] == runs[1 << 30] and runs[1][1] > 0


@pytest.mark.parametrize("adaptive", [False, True], ids=["fixed", "adaptive"])
def test_a_windowed_draft_model_drafts_the_prompt_it_did_not_read_by_lookup(tables, adaptive):
    """A draft model that reads only the prompt's end drafts by n-gram lookup where the output
    repeats the prompt's start (a file being rewritten): its second source, "lookup". The
    prompt holds the target's own greedy text after two tokens s, then noise, then s again: the
    output repeats that text, which lies before the window. Greedy output stays the target's."""
    target, near = tables
    rng = np.random.default_rng(11)
    s = [int(t) for t in rng.integers(0, V, 2)]
    text = greedy_table(target, s, 60, Params(temperature=0.0))
    prompt = s + text + [int(t) for t in rng.integers(0, V, 30)] + s
    want = greedy_table(target, prompt, 40, Params(temperature=0.0))
    assert want[:20] == text[:20]  # the premise: the output repeats the prompt's start
    out = table_engine(target, near, window=8, adaptive=adaptive, ngram_min=2).generate(prompt, max_tokens=40, temperature=0.0)
    assert out.tokens == want
    st = out.stats
    assert st.source_names == ["draft", "lookup"] and st.draft_prompt_tokens == 8
    assert st.source_drafted[1] >= 10 and st.source_accepted[1] >= 0.8 * st.source_drafted[1], (st.source_drafted, st.source_accepted)
    # A window holding the whole prompt leaves the lookup nothing to read, repeats or not.
    wide = table_engine(target, near, window=200, adaptive=adaptive, ngram_min=2).generate(prompt, max_tokens=40, temperature=0.0)
    assert wide.tokens == want and wide.stats.source_drafted[1] == 0 and wide.stats.drafted > 0
    # Reading the whole prompt (window 0), the model has no lookup: it sees the text itself.
    whole = table_engine(target, near, window=0, adaptive=adaptive, ngram_min=2).generate(prompt, max_tokens=40, temperature=0.0)
    assert whole.tokens == want and whole.stats.source_names == ["draft"]


@pytest.mark.parametrize("setting", ["greedy", "t1"])
def test_lagging_model_drafter_restarts_from_recent_tokens(tables, setting):
    # In the hybrid drafter the model falls behind while n-gram proposals are used; with
    # max_lag 2 it then restarts from the last 2 tokens. Output must not change.
    target, near = tables
    if setting == "greedy":
        want = greedy_table(target, PROMPT, 60, Params(temperature=0.0))
        out = table_engine(target, ("hybrid", near), max_lag=2).generate(PROMPT, max_tokens=60, temperature=0.0)
        assert out.tokens == want
        return
    prm = SETTINGS["t1"]
    eng = table_engine(target, ("hybrid", near), max_lag=2, draft_max=3)
    opt = _core.GenerateOptions()
    opt.max_tokens = 4
    opt.sampling = prm.native(_core)
    out = _core._testing.sample_many(eng._core, PROMPT, opt, 20000, 5)
    chi_square_check(out[:, 3], table_marginals(target, PROMPT, 4, prm)[3])


def test_model_drafting_for_itself_accepts_everything(tables):
    eng = table_engine(tables[0], tables[0].copy(), draft_max=5)
    out = eng.generate(PROMPT, max_tokens=50, temperature=0.0)
    s = out.stats
    assert s.drafted > 30 and s.accepted == s.drafted and s.acceptance_rate == 1.0
    assert s.accepted_histogram[5] > 0 and sum(s.accepted_histogram) == s.steps


def greedy_draft_lengths(target, draft, prompt, n_gen, draft_max, p_min):
    """Each step's draft length in a greedy generation with draft_max every step, from the
    definitions: the draft follows its table's argmax and ends at its first token whose softmax
    probability is below p_min, that token included; the target keeps the agreeing prefix and
    adds its own next token. Also every draft token's probability, to keep clear of p_min."""
    seq, lengths, tops = list(prompt), [], []
    while len(seq) - len(prompt) < n_gen:
        k = min(draft_max, n_gen - (len(seq) - len(prompt)) - 1)
        ctx = list(seq)
        for _ in range(k):
            logits = table_logits(draft, ctx, len(ctx) - 1).astype(np.float64)
            p = np.exp(logits - logits.max())
            ctx.append(int(np.argmax(logits)))
            tops.append(p.max() / p.sum())
            if tops[-1] < p_min:
                break
        lengths.append(len(ctx) - len(seq))
        for x in ctx[len(seq):]:
            if int(np.argmax(table_logits(target, seq, len(seq) - 1))) != x:
                break
            seq.append(x)
        seq.append(int(np.argmax(table_logits(target, seq, len(seq) - 1))))
    return lengths, np.array(tops)


@pytest.mark.parametrize("p_min", [0.0, 0.45, 0.7, 0.95])
def test_a_draft_ends_at_its_first_unsure_token(tables, p_min):
    target, near = tables
    lengths, tops = greedy_draft_lengths(target, near, PROMPT, 60, 4, p_min)
    assert p_min == 0.0 or np.abs(tops - p_min).min() > 1e-4  # no token sits on the line (float32 softmax)
    eng = table_engine(target, near, draft_max=4, p_min=p_min)
    out = eng.generate(PROMPT, max_tokens=60, temperature=0.0)
    assert out.tokens == greedy_table(target, PROMPT, 60, Params(temperature=0.0))
    s = out.stats
    assert s.draft_length_histogram == np.bincount(lengths, minlength=len(s.draft_length_histogram)).tolist()
    assert s.drafted == sum(lengths)
    if 0.0 < p_min < 0.9:  # the rule is exercised: some drafts end early
        assert sum(s.draft_length_histogram[1:4]) > 0


@pytest.mark.parametrize("setting", sorted(SETTINGS) + ["penalties"])
@pytest.mark.parametrize("drafter", ["none", "model", "model p_min", "ngram", "hybrid"])
def test_sampled_tokens_follow_the_target_distribution(tables, drafter, setting):
    prm = SETTINGS.get(setting) or Params(temperature=0.9, repeat_penalty=1.4, presence_penalty=0.3, top_k=6)
    target = tables[0]
    n_gen, n = 3, 20000
    # "model p_min": drafts that end at an unsure token (which one depends on the sampled q)
    eng = table_engine(target, drafters(tables)[drafter.split()[0]], draft_max=3, adaptive=(drafter == "hybrid"),
                       p_min=0.6 if "p_min" in drafter else 0.0)
    opt = _core.GenerateOptions()
    opt.max_tokens = n_gen
    opt.sampling = prm.native(_core)
    out = _core._testing.sample_many(eng._core, PROMPT, opt, n, 77)
    margins = table_marginals(target, PROMPT, n_gen, prm)
    chi_square_check(out[:, 0], margins[0])
    chi_square_check(out[:, 2], margins[2])
    if drafter in ("model", "model p_min", "ngram"):  # fixed draft length: the last run drafted too
        assert eng._core.stats().drafted > 0


def test_same_seed_same_output(tables):
    eng = table_engine(tables[0], tables[1], draft_max=3)
    a = eng.generate(PROMPT, max_tokens=40, temperature=1.0, seed=5).tokens
    b = eng.generate(PROMPT, max_tokens=40, temperature=1.0, seed=5).tokens
    c = eng.generate(PROMPT, max_tokens=40, temperature=1.0, seed=6).tokens
    assert a == b and a != c


@pytest.mark.parametrize("setting", sorted(SETTINGS) + ["penalties"])
def test_seeded_text_is_the_targets_own_whatever_drafts_it(tables, setting):
    # A seed draws every token by the race at its position: drafted tokens are kept where the
    # target's own draw agrees, so the text is plain decoding's with that seed, for any drafter,
    # draft length and controller.
    prm = SETTINGS.get(setting) or Params(temperature=0.9, repeat_penalty=1.4, presence_penalty=0.3, top_k=6)
    kw = dict(max_tokens=50, temperature=prm.temperature, top_p=prm.top_p, top_k=prm.top_k,
              repeat_penalty=prm.repeat_penalty, presence_penalty=prm.presence_penalty)
    for seed in (5, 6):
        want = table_engine(tables[0]).generate(PROMPT, seed=seed, **kw).tokens
        assert len(want) == 50
        drafted = 0
        for drafter in ("ngram", "model", "self", "hybrid"):
            for draft_max, adaptive, p_min in ((1, False, 0.0), (3, False, 0.6), (6, True, 0.0)):
                eng = table_engine(tables[0], drafters(tables)[drafter], draft_max=draft_max, adaptive=adaptive,
                                   p_min=p_min)
                out = eng.generate(PROMPT, seed=seed, **kw)
                assert out.tokens == want, (drafter, draft_max, adaptive, p_min)
                drafted += out.stats.drafted
        assert drafted > 0
    other = table_engine(tables[0], tables[1]).generate(PROMPT, seed=7, **kw).tokens
    assert other != want


@pytest.mark.parametrize("drafter", ["none", "model", "ngram"])
def test_seeded_tokens_follow_the_target_distribution(tables, drafter):
    prm = SETTINGS["t1"]
    eng = table_engine(tables[0], drafters(tables)[drafter], draft_max=3)
    opt = _core.GenerateOptions()
    opt.max_tokens = 3
    opt.sampling = prm.native(_core)
    opt.reproducible = True
    out = _core._testing.sample_many(eng._core, PROMPT, opt, 20000, 77)
    margins = table_marginals(tables[0], PROMPT, 3, prm)
    chi_square_check(out[:, 0], margins[0])
    chi_square_check(out[:, 2], margins[2])
    if drafter != "none":  # fixed draft length: the last run drafted too
        assert eng._core.stats().drafted > 0


def test_the_race_keeps_about_as_many_drafted_tokens_as_speculative_sampling(tables):
    # The race couples the draft's draw with the target's at each position: it keeps a drafted
    # token nearly as often as the min(1, p / q) test (the optimum), never more.
    prm = SETTINGS["t1"]
    rates = {}
    for reproducible in (False, True):
        eng = table_engine(tables[0], tables[1], draft_max=3)
        opt = _core.GenerateOptions()
        opt.max_tokens = 24
        opt.sampling = prm.native(_core)
        opt.reproducible = reproducible
        drafted = accepted = 0
        for seed in range(300):
            opt.sampling.seed = seed
            _core._testing.sample_many(eng._core, PROMPT, opt, 1, seed)
            s = eng._core.stats()
            drafted, accepted = drafted + s.drafted, accepted + s.accepted
        rates[reproducible] = accepted / drafted
    assert 0.85 * rates[False] < rates[True] < rates[False] + 0.02, rates


def _pieces(rng):
    letters = "abcdefgh"
    return ["".join(rng.choice(list(letters), size=rng.integers(1, 4))) for _ in range(V)]


@pytest.mark.parametrize("drafter", ["none", "model", "ngram"])
def test_stop_string_spanning_tokens_and_chunks(tables, drafter):
    rng = np.random.default_rng(4)
    pieces = _pieces(rng)
    want_tokens = greedy_table(tables[0], PROMPT, 40, Params(temperature=0.0))
    full = "".join(pieces[t] for t in want_tokens)
    # A stop string that starts inside token 5's text and ends inside a later token's.
    start = len("".join(pieces[t] for t in want_tokens[:5])) + len(pieces[want_tokens[5]]) - 1
    stop = full[start : start + 4]
    cut = full.find(stop)
    eng = table_engine(tables[0], drafters(tables)[drafter], pieces=pieces)
    seen = []
    for piece in eng.stream(PROMPT, max_tokens=40, temperature=0.0, stop=["zzzz", stop]):
        seen.append(piece.text)
        assert stop not in "".join(seen)
    out = eng.last_completion
    assert out.finish_reason == "stop"
    assert out.text == full[:cut] == "".join(seen)
    assert out.tokens == want_tokens[: len(out.tokens)]
    assert len("".join(pieces[t] for t in out.tokens)) >= cut + len(stop)


def test_text_is_held_back_only_while_it_may_start_a_stop_string(tables):
    pieces = _pieces(np.random.default_rng(4))
    want = greedy_table(tables[0], PROMPT, 20, Params(temperature=0.0))
    full = "".join(pieces[t] for t in want)
    eng = table_engine(tables[0], None, pieces=pieces)
    out = eng.generate(PROMPT, max_tokens=20, temperature=0.0, stop=[full[-2:] + "q"])  # never completes
    assert out.finish_reason == "length" and out.text == full


def test_eos_ends_generation(tables):
    want = greedy_table(tables[0], PROMPT, 40, Params(temperature=0.0))
    eos = want[6]
    first = want.index(eos)
    for drafter in ("none", "model", "ngram"):
        eng = table_engine(tables[0], drafters(tables)[drafter], stop_ids=[eos])
        out = eng.generate(PROMPT, max_tokens=40, temperature=0.0)
        assert out.finish_reason == "eos"
        assert out.tokens == want[:first]
        out = eng.generate(PROMPT, max_tokens=40, temperature=0.0, ignore_eos=True)
        assert out.finish_reason == "length" and out.tokens == want


def test_context_full(tables):
    n_ctx = 20
    want = greedy_table(tables[0], PROMPT, 40, Params(temperature=0.0))
    for drafter in ("none", "model", "hybrid"):
        eng = table_engine(tables[0], drafters(tables)[drafter], n_ctx=n_ctx)
        out = eng.generate(PROMPT, max_tokens=100, temperature=0.0)
        assert out.finish_reason == "context"
        # The last generated token needs no KV slot of its own.
        assert len(PROMPT) + len(out.tokens) == n_ctx + 1
        assert out.tokens == want[: len(out.tokens)]


def test_close_keeps_what_was_produced(tables):
    eng = table_engine(tables[0], tables[1], pieces=_pieces(np.random.default_rng(2)))
    it = eng.stream(PROMPT, max_tokens=200, temperature=0.0)
    got = []
    for piece in it:
        got += piece.tokens
        if len(got) >= 5:
            break
    it.close()
    out = eng.last_completion
    assert out.finish_reason == "cancelled"
    assert out.tokens == got
    assert out.tokens == greedy_table(tables[0], PROMPT, len(got), Params(temperature=0.0))
    # The engine stays usable, and reuses the cache for a prompt extending the last one.
    prompt2 = PROMPT + got
    out2 = eng.generate(prompt2, max_tokens=10, temperature=0.0)
    assert out2.stats.prompt_tokens_cached > len(PROMPT)
    assert out2.tokens == greedy_table(tables[0], prompt2, 10, Params(temperature=0.0))


def test_cancel_from_the_consumer(tables):
    eng = table_engine(tables[0], tables[1])
    produced = []
    for piece in eng.stream(PROMPT, max_tokens=200, temperature=0.0):
        produced += piece.tokens
        eng.cancel()
    out = eng.last_completion
    assert out.finish_reason == "cancelled" and out.tokens == produced and 0 < len(produced) < 200


def test_ctrl_c_stops_generate_and_keeps_tokens(tables):
    import _thread
    import threading

    import signal

    eng = table_engine(tables[0], None, n_ctx=10_000_000)
    # interrupt_main() does nothing while SIGINT is ignored or at SIG_DFL, which an earlier test in
    # the same process may have left behind: Python's own handler for the duration, and a watchdog
    # that cancels (and so fails the test) rather than letting a lost interrupt hang the run.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    watchdog = threading.Timer(60.0, eng.cancel)
    timer.start()
    watchdog.start()
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            eng.generate(PROMPT, max_tokens=9_000_000, temperature=0.0, ignore_eos=True)
    finally:
        timer.cancel()
        watchdog.cancel()
        signal.signal(signal.SIGINT, previous)
    out = info.value.completion
    assert out is eng.last_completion
    assert out.finish_reason == "cancelled" and len(out.tokens) > 0
    assert out.tokens[:50] == greedy_table(tables[0], PROMPT, 50, Params(temperature=0.0))[: len(out.tokens[:50])]


def test_bad_arguments(tables):
    eng = table_engine(tables[0], "ngram", n_ctx=16)
    with pytest.raises(ValueError, match="no tokens"):
        eng.generate([], max_tokens=4)
    with pytest.raises(ValueError, match="context"):
        eng.generate([1] * 17, max_tokens=4)
    with pytest.raises(ValueError, match="vocabulary"):
        eng.generate([1, V], max_tokens=4)
    with pytest.raises(ValueError, match="tokenizer"):
        eng.generate([1, 2], max_tokens=4, stop=["x"])
    with pytest.raises(ValueError, match="top_p"):
        eng.generate([1, 2], max_tokens=4, top_p=0.0)
    assert eng.generate([1, 2], max_tokens=0).finish_reason == "length"


def test_stream_pieces_mark_drafted_tokens(tables):
    pieces = _pieces(np.random.default_rng(3))
    eng = table_engine(tables[0], tables[0].copy(), pieces=pieces, draft_max=4)
    got = list(eng.stream(PROMPT, max_tokens=30, temperature=0.0))
    out = eng.last_completion
    assert [t for p in got for t in p.tokens] == out.tokens
    assert "".join(p.text for p in got) == out.text == "".join(pieces[t] for t in out.tokens)
    drafted = sum(len(p.tokens) for p in got if p.from_draft)
    assert drafted == out.stats.accepted > 0
    assert all(len(p.tokens) == 1 for p in got if not p.from_draft)  # the target's own token

"""Issue 12 F1: one Engine shared by several threads. Calls serialize (the second waits), a stream
holds the engine until it ends, and the thread that holds an open stream gets RuntimeError
instead of waiting for itself. Nothing returns None or is emptied by another thread's call."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

from quickdraft import Engine, _core
from reference.spec_reference import Params, greedy_table, random_table

V = 8
PROMPTS = ([1, 5, 2, 7, 1], [3, 3, 4], [6, 0, 2, 2, 5, 1], [7])


def table_engine(target, draft=None, n_ctx=512):
    cfg = _core.EngineOptions()
    cfg.n_ctx, cfg.draft_max, cfg.adaptive, cfg.ngram_min = n_ctx, 4, False, 1
    return Engine._from_core(_core._testing.engine_from_tables(target, draft, None, cfg))


@pytest.fixture(scope="module")
def target():
    return random_table(np.random.default_rng(77), V)


def expected(target, prompt, n):
    return greedy_table(target, list(prompt), n, Params(temperature=0.0))


@pytest.fixture
def switch_often():
    """Threads hand the GIL over every few microseconds, so that calls interleave even on table
    models, whose generations take a millisecond."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def run_threads(fns, timeout=60.0):
    """Runs each fn in a daemon thread; fails (instead of hanging) when one does not finish."""
    errors = []

    def wrap(fn):
        def go():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
        return go

    ts = [threading.Thread(target=wrap(f), daemon=True) for f in fns]
    for t in ts:
        t.start()
    deadline = time.monotonic() + timeout
    for t in ts:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in ts), f"threads still running after {timeout} s: a deadlock"
    if errors:
        raise errors[0]


def test_two_threads_generating_both_get_their_completion(target, switch_often):
    eng = table_engine(target, "ngram", n_ctx=4096)
    out = {}
    both = threading.Barrier(2)

    def call(p):
        both.wait()
        out[tuple(p)] = eng.generate(p, max_tokens=3000, temperature=0)

    run_threads([lambda p=p: call(p) for p in PROMPTS[:2]])
    for p in PROMPTS[:2]:
        c = out[tuple(p)]
        assert c is not None, "a caller got None"
        assert c.tokens == expected(target, p, 3000) and c.finish_reason == "length"


def test_a_stream_and_a_generate_in_two_threads_do_not_empty_each_other(target):
    eng = table_engine(target, target.copy())
    got = {}
    started = threading.Event()

    def streamer():
        s = eng.stream(PROMPTS[0], max_tokens=30, temperature=0)
        started.set()
        pieces = []
        for piece in s:
            pieces.append(piece)
            time.sleep(0.005)  # a slow consumer: the other thread must wait, not cut in
        got["stream"] = (pieces, s.completion)

    def generator():
        started.wait(10)
        got["generate"] = eng.generate(PROMPTS[1], max_tokens=30, temperature=0)

    run_threads([streamer, generator])
    pieces, done = got["stream"]
    assert done is not None and pieces, "the stream yielded nothing or lost its completion"
    assert [t for p in pieces for t in p.tokens] == done.tokens == expected(target, PROMPTS[0], 30)
    assert got["generate"].tokens == expected(target, PROMPTS[1], 30)


def test_the_thread_holding_an_open_stream_gets_engine_busy(target):
    eng = table_engine(target)
    s = eng.stream(PROMPTS[0], max_tokens=20, temperature=0)
    first = next(s)
    with pytest.raises(RuntimeError, match="engine busy"):
        eng.generate(PROMPTS[1], max_tokens=5)
    with pytest.raises(RuntimeError, match="engine busy"):
        eng.stream(PROMPTS[1], max_tokens=5)
    rest = list(s)  # the open stream is unharmed
    assert first.tokens + [t for p in rest for t in p.tokens] == expected(target, PROMPTS[0], 20)
    assert eng.generate(PROMPTS[1], max_tokens=5, temperature=0).tokens == expected(target, PROMPTS[1], 5)


def test_closed_or_dropped_streams_free_the_engine(target):
    eng = table_engine(target)
    s = eng.stream(PROMPTS[0], max_tokens=50, temperature=0)
    next(s)
    s.close()
    assert s.completion.finish_reason == "cancelled"
    s = eng.stream(PROMPTS[0], max_tokens=50, temperature=0)  # never iterated
    del s
    s = eng.stream(PROMPTS[0], max_tokens=50, temperature=0)
    next(s)
    del s
    assert eng.generate(PROMPTS[2], max_tokens=9, temperature=0).tokens == expected(target, PROMPTS[2], 9)


def test_a_waiting_thread_runs_when_the_stream_is_closed_from_another_thread(target):
    eng = table_engine(target)
    s = eng.stream(PROMPTS[0], max_tokens=10_000, temperature=0, ignore_eos=True)
    next(s)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("c", eng.generate(PROMPTS[3], max_tokens=6, temperature=0)),
                         daemon=True)
    t.start()
    time.sleep(0.2)
    assert t.is_alive(), "the second call did not wait for the open stream"
    s.close()
    t.join(30)
    assert not t.is_alive() and got["c"].tokens == expected(target, PROMPTS[3], 6)


def test_stress_many_threads_mixed_calls_bounded_in_time(target, switch_often):
    eng = table_engine(target, "ngram")
    want = {tuple(p): expected(target, p, 24) for p in PROMPTS}
    bad = []
    stop_at = time.monotonic() + 8.0
    calls = [0]

    def worker(k):
        i = 0
        while time.monotonic() < stop_at:
            p = PROMPTS[(k + i) % len(PROMPTS)]
            if (k + i) % 3 == 0:
                with eng.stream(p, max_tokens=24, temperature=0) as s:
                    tokens = [t for piece in s for t in piece.tokens]
                c = s.completion
                if c is None or tokens != c.tokens:
                    bad.append((k, i, "stream", tokens, c))
            else:
                c = eng.generate(p, max_tokens=24, temperature=0)
                tokens = c.tokens if c is not None else None
            if tokens != want[tuple(p)]:
                bad.append((k, i, p, tokens))
            i += 1
            calls[0] += 1

    run_threads([lambda k=k: worker(k) for k in range(6)], timeout=60)
    assert not bad, f"{len(bad)} wrong results, first: {bad[0]}"
    assert calls[0] >= 12
    assert eng.generate(PROMPTS[0], max_tokens=24, temperature=0).tokens == want[tuple(PROMPTS[0])]


@pytest.mark.real
def test_issue_reproducer_on_smollm2(model_path):
    path = model_path("smollm2-135m")
    e = Engine(path, draft="ngram", threads=1)
    prompts = ("The capital of France is", "def fibonacci(n):")
    alone = {p: e.generate(p, max_tokens=24, temperature=0).text for p in prompts}
    out = {}
    run_threads([lambda p=p: out.__setitem__(p, e.generate(p, max_tokens=24, temperature=0)) for p in prompts],
                timeout=120)
    for p in prompts:
        assert out[p] is not None, "a caller got None"
        assert out[p].text == alone[p]
    assert e.generate(prompts[0], max_tokens=24, temperature=0).text == alone[prompts[0]]

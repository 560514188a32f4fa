"""Speculative decoding on the synthetic hybrid model (qwen35: Gated DeltaNet layers whose state
is rolled back to the accepted prefix of every verify batch, model/recurrent_state.h), with each
drafter: n-gram lookup, a smaller qwen35 as the draft model, and the file's MTP head.

Oracles: greedy plain decoding by one Model.eval per token (speculation must reproduce it token
for token); for the MTP drafter, the numpy reference's MTP head (reference/numpy_qwen35.py) fed
as llama.cpp's draft-mtp feeds it (row p: the token at p and the trunk's output-normed hidden
state of p - 1, zeros at p = 0; drafted positions: the head's own state), which fixes every
draft token and so the exact drafted / accepted counts; for sampling, the target's marginal
distributions enumerated from plain evals (chi-square)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import quickdraft
from quickdraft import Engine, _core
from fixtures.tiny_models import TinySpec, write_tiny_model
from reference.numpy_qwen35 import NumpyQwen35
from reference.spec_reference import SETTINGS, Params, chi_square_check, process

PROMPT = [3, 17, 5, 3, 17, 9, 40, 3, 17]
DRAFTS = {"none": None, "ngram": "ngram", "mtp": "mtp", "self": "self"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("q35spec")
    target = write_tiny_model(d / "target.gguf", TinySpec(arch="qwen35", n_layer=8, n_vocab=64, n_mtp=1, seed=1))
    draft = write_tiny_model(d / "draft.gguf", TinySpec(arch="qwen35", n_layer=4, n_vocab=64, seed=2))
    return target, draft


def argmax_loop(path, prompt, n):
    m = quickdraft.Model(str(path), n_ctx=256, threads=2)
    logits = m.eval(list(prompt))
    out = []
    for _ in range(n):
        out.append(int(np.argmax(logits[-1])))
        logits = m.eval([out[-1]])
    return out


@pytest.mark.parametrize("drafter", ["none", "ngram", "model", "mtp", "self"])
def test_greedy_speculative_equals_plain(files, drafter):
    target, draft = files
    want = argmax_loop(target, PROMPT, 40)
    for adaptive in (False, True):
        eng = Engine(str(target), draft=DRAFTS.get(drafter, str(draft)), n_ctx=256, threads=2, draft_max=6,
                     p_min=0.0, adaptive=adaptive, ngram_min=1)
        assert eng.drafter == {"self": "mtp", "model": "draft"}.get(drafter, drafter)
        out = eng.generate(PROMPT, max_tokens=40, temperature=0.0)
        assert out.tokens == want, f"{drafter}, adaptive={adaptive}"
        if drafter != "none" and not adaptive:
            assert out.stats.drafted > 0


def mtp_oracle_proposals(path, prompt, n_gen, k):
    """The proposals of greedy MTP speculation with a fixed draft length k, from the numpy
    reference: each step drafts min(k, tokens left - 1) tokens by chaining the MTP head."""
    ref = NumpyQwen35(path)
    full = list(prompt) + argmax_loop(path, prompt, n_gen)
    h = ref.hidden(full)
    n, end, proposals = len(prompt), len(prompt) + n_gen, []
    while n < end:
        kk = min(k, end - n - 1)
        if kk <= 0:
            n += 1
            continue
        toks = full[:n]
        hp = [np.zeros(h.shape[1])] + [h[p] for p in range(n - 1)]  # row p pairs with h of p - 1
        drafts = []
        for _ in range(kk):
            logits, hn = ref.mtp_logits(toks + drafts, np.array(hp))
            drafts.append(int(np.argmax(logits[-1])))
            hp.append(hn[-1])  # the next drafted row pairs with the head's own state
        proposals.append(drafts)
        n += next((i for i, d in enumerate(drafts) if d != full[n + i]), kk) + 1
    return proposals


@pytest.mark.parametrize("k", [1, 3])
def test_mtp_drafts_are_the_reference_heads(files, k):
    """Every draft token, step by step, is the reference head's: it pairs each position with the
    right hidden state across verify batches, rejections and its own drafted positions."""
    target, _ = files
    opt = _core.EngineOptions()
    opt.n_ctx, opt.threads, opt.draft_max, opt.p_min, opt.adaptive = 256, 2, k, 0.0, False
    got = _core._testing.mtp_proposals(str(target), PROMPT, opt, 40)
    want = mtp_oracle_proposals(target, PROMPT, 40, k)
    assert got == want
    eng = Engine(str(target), draft="mtp", n_ctx=256, threads=2, draft_max=k, p_min=0.0, adaptive=False)
    stats = eng.generate(PROMPT, max_tokens=40, temperature=0.0).stats
    assert stats.drafted == sum(map(len, want))


def test_mtp_logits_match_the_reference(files):
    target, _ = files
    ids = np.random.default_rng(3).integers(0, 64, 24)
    m = quickdraft.Model(str(target), n_ctx=64, threads=2)
    _, h = m._ctx.eval_hidden(ids)
    ref = NumpyQwen35(target)
    assert np.abs(h - ref.hidden(ids)).max() < 1e-3
    h_prev = np.concatenate([np.zeros((1, h.shape[1]), np.float32), h[:-1]])
    head = _core.MtpHead(m._weights, 64, 2)
    got, got_h = head.eval(ids[:10], h_prev[:10])  # in two evals, continuing from its KV cache
    got2, got_h2 = head.eval(ids[10:], h_prev[10:])
    want, want_h = ref.mtp_logits(ids, h_prev.astype(np.float64))
    got, got_h = np.concatenate([got, got2]), np.concatenate([got_h, got_h2])
    assert np.abs(got - want).max() / want.std() < 5e-3 and np.mean(got.argmax(-1) == want.argmax(-1)) == 1.0
    assert np.abs(got_h - want_h).max() < 1e-3


def test_bad_draft_max_is_named(files):
    target, _ = files
    with pytest.raises(ValueError, match="draft_max must be in"):
        Engine(str(target), draft="mtp", n_ctx=64, draft_max=-2)


def test_mtp_needs_nextn_layers(files):
    _, draft = files
    with pytest.raises(quickdraft.UnsupportedError, match="nextn"):
        Engine(str(draft), draft="mtp", n_ctx=64)
    assert Engine(str(draft), draft="self", n_ctx=64).drafter == "self"  # no MTP layers: skipped layers


def test_chat_turn_prefix_reuse(files):
    """A second prompt extending the first turn reuses the state; one diverging far back starts over."""
    target, _ = files
    eng = Engine(str(target), draft="mtp", n_ctx=256, threads=2, draft_max=4, p_min=0.0)
    first = eng.generate(PROMPT, max_tokens=12, temperature=0.0)
    turn2 = PROMPT + first.tokens + [7, 8, 9]
    second = eng.generate(turn2, max_tokens=12, temperature=0.0)
    assert second.stats.prompt_tokens_cached >= len(PROMPT) + len(first.tokens) - 1
    assert second.tokens == argmax_loop(target, turn2, 12)
    other = PROMPT[:3] + [1, 2, 3, 4]
    third = eng.generate(other, max_tokens=12, temperature=0.0)
    assert third.stats.prompt_tokens_cached == 0  # before the rollback window: evaluated again
    assert third.tokens == argmax_loop(target, other, 12)


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    d = tmp_path_factory.mktemp("q35chi")
    target = write_tiny_model(d / "t.gguf", TinySpec(arch="qwen35", n_layer=4, n_vocab=16, n_mtp=1, seed=3))
    draft = write_tiny_model(d / "d.gguf", TinySpec(arch="qwen35", n_layer=4, n_vocab=16, seed=4))
    return target, draft


def marginals(path, prompt, n_gen, prm):
    """The target's distribution of each generated token, by enumerating every earlier path."""
    m = quickdraft.Model(str(path), n_ctx=64, threads=1)
    out, paths = [], {(): 1.0}
    for _ in range(n_gen):
        dist, nxt = np.zeros(m.n_vocab), {}
        for seq, w in paths.items():
            m.reset()
            p = process(m.eval(list(prompt) + list(seq))[-1], list(prompt) + list(seq), prm)
            dist += w * p
            for t in np.flatnonzero(p > 1e-12):
                nxt[seq + (int(t),)] = w * p[t]
        out.append(dist)
        paths = nxt
    return out


@pytest.mark.parametrize("setting", sorted(SETTINGS))
@pytest.mark.parametrize("drafter", ["mtp", "model", "ngram"])
def test_sampled_tokens_follow_the_target_distribution(small_vocab, drafter, setting):
    target, draft = small_vocab
    prm = SETTINGS[setting]
    prompt = [3, 5, 3, 5, 3]
    eng = Engine(str(target), draft={"model": str(draft)}.get(drafter, drafter), n_ctx=64, threads=2, draft_max=3,
                 p_min=0.0, adaptive=False, ngram_min=1)
    opt = _core.GenerateOptions()
    opt.max_tokens = 3
    opt.sampling = prm.native(_core)
    out = _core._testing.sample_many(eng._core, prompt, opt, 20000, 77)
    margins = marginals(target, prompt, 3, prm)
    chi_square_check(out[:, 0], margins[0])
    chi_square_check(out[:, 2], margins[2])
    assert eng._core.stats().drafted > 0

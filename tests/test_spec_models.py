"""Speculative decoding on real forward passes: tiny random GGUF models built at test time,
and the real SmolLM2 / Qwen2.5-Coder files. Oracle: greedy plain decoding (the same target
without a drafter) and an argmax loop over quickdraft.Model.eval; speculation must reproduce
it token for token, whatever the drafter."""

from __future__ import annotations

import numpy as np
import pytest

import quickdraft
from quickdraft import Engine
from fixtures.tiny_models import TinySpec, write_tiny_model

DRAFTERS = ["none", "ngram", "self", "model", "hybrid"]


def argmax_loop(path, prompt, n):
    """Greedy continuation with one Model.eval per token (no speculation anywhere)."""
    m = quickdraft.Model(str(path), n_ctx=256, threads=2)
    logits = m.eval(list(prompt))
    out = []
    for _ in range(n):
        t = int(np.argmax(logits[-1]))
        out.append(t)
        logits = m.eval([t])
    return out


def need_text(engine):
    if not engine._core.has_tokenizer:
        pytest.skip("this build has no tokenizer yet")
    return engine


def engine_for(target, drafter, draft_path=None, **kw):
    draft = {"none": None, "ngram": "ngram", "self": "self", "model": draft_path, "hybrid": ("hybrid", draft_path)}[drafter]
    return Engine(str(target), draft=draft, **kw)


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    target = write_tiny_model(d / "target.gguf", TinySpec(arch="qwen2", n_layer=4, n_vocab=64, wtype="Q8_0", seed=1))
    # A draft of the same family with other weights: partial acceptance.
    draft = write_tiny_model(d / "draft.gguf", TinySpec(arch="qwen2", n_layer=2, n_vocab=64, wtype="Q8_0", seed=2))
    return target, draft


PROMPT = [3, 17, 5, 3, 17, 9, 40, 3, 17]


@pytest.mark.parametrize("drafter", DRAFTERS)
def test_tiny_greedy_speculative_equals_plain(tiny_pair, drafter):
    target, draft = tiny_pair
    want = argmax_loop(target, PROMPT, 24)
    for adaptive in (False, True):
        eng = engine_for(target, drafter, draft, n_ctx=256, threads=2, draft_max=4, p_min=0.0, adaptive=adaptive,
                         skip_layers=[1, 2], ngram_min=1)
        out = eng.generate(PROMPT, max_tokens=24, temperature=0.0)
        assert out.tokens == want, f"{drafter} adaptive={adaptive}"
        if drafter != "none" and not adaptive:
            assert out.stats.drafted > 0


def test_self_drafts_copies_of_the_context_by_lookup(tiny_pair):
    """Beside its skipped layers, "self" drafts by a lookup of copies (runs of 8+ tokens), as the
    hybrid does beside a draft model: a prompt holding the target's own greedy text after two
    tokens s, then noise, then s again, is answered by repeating that text, and the lookup drafts
    it. Greedy output stays the target's; the per-call names keep to what the engine loaded."""
    target, _ = tiny_pair
    rng = np.random.default_rng(5)
    s = [int(t) for t in rng.integers(0, 64, 2)]
    text = argmax_loop(target, s, 40)
    prompt = s + text + [int(t) for t in rng.integers(0, 64, 20)] + s
    want = argmax_loop(target, prompt, 30)
    assert want[:20] == text[:20]  # the premise: the output repeats the prompt's start
    eng = Engine(str(target), draft="self", n_ctx=256, threads=2, draft_max=4, skip_layers=[1, 2], adaptive=False)
    assert eng.drafter == "self"
    out = eng.generate(prompt, max_tokens=30, temperature=0.0)
    assert out.tokens == want
    st = out.stats
    assert st.source_names == ["self", "ngram"]
    assert st.source_drafted[1] >= 10 and st.source_accepted[1] >= 0.8 * st.source_drafted[1], (
        st.source_drafted, st.source_accepted)
    assert eng.generate(prompt, max_tokens=30, temperature=0.0, drafter="self").tokens == want
    for other in ("model", "hybrid"):
        with pytest.raises(ValueError, match="not loaded in this engine"):
            eng.generate(prompt, max_tokens=4, drafter=other)


def test_tiny_model_drafting_for_itself_accepts_everything(tiny_pair):
    target, _ = tiny_pair
    eng = Engine(str(target), draft=str(target), n_ctx=256, threads=2, draft_max=5, p_min=0.0, adaptive=False)
    out = eng.generate(PROMPT, max_tokens=30, temperature=0.0)
    assert out.stats.drafted >= 20 and out.stats.accepted == out.stats.drafted


def test_tiny_sampling_same_seed_same_output(tiny_pair):
    target, draft = tiny_pair
    eng = Engine(str(target), draft=str(draft), n_ctx=256, threads=2, draft_max=3, p_min=0.0, adaptive=False)
    a = eng.generate(PROMPT, max_tokens=20, temperature=0.9, top_p=0.95, seed=11).tokens
    b = eng.generate(PROMPT, max_tokens=20, temperature=0.9, top_p=0.95, seed=11).tokens
    assert a == b and len(a) == 20


# Architectures added after llama / qwen2 / gemma3 (which the pair above and test_draft_* cover):
# a 2-layer draft for a 4-layer, wider target of the same family, and the n-gram drafter.
FAMILY_EXTRA = {"qwen3": dict(head_dim=32), "smollm3": {}, "phi3": dict(longrope=True, rope_orig_ctx=128),
                "qwen3moe": dict(head_dim=32)}


@pytest.fixture(scope="module", params=list(FAMILY_EXTRA))
def family_pair(request, tmp_path_factory):
    arch, extra = request.param, FAMILY_EXTRA[request.param]
    d = tmp_path_factory.mktemp(arch)
    target = write_tiny_model(d / "target.gguf", TinySpec(arch=arch, n_layer=4, n_embd=96, n_ff=128, n_vocab=64,
                                                          wtype="Q8_0", seed=1, **extra))
    draft = write_tiny_model(d / "draft.gguf", TinySpec(arch=arch, n_layer=2, n_vocab=64, wtype="Q8_0", seed=2,
                                                        **extra))
    return target, draft


@pytest.mark.parametrize("drafter", ["model", "ngram"])
def test_family_greedy_speculative_equals_plain(family_pair, drafter):
    target, draft = family_pair
    want = argmax_loop(target, PROMPT, 24)
    eng = engine_for(target, drafter, draft, n_ctx=256, threads=2, draft_max=4, p_min=0.0, adaptive=False,
                     ngram_min=1)
    out = eng.generate(PROMPT, max_tokens=24, temperature=0.0)
    assert out.tokens == want
    assert out.stats.drafted > 0


def test_family_model_drafting_for_itself_accepts_everything(family_pair):
    target, _ = family_pair
    eng = Engine(str(target), draft=str(target), n_ctx=256, threads=2, draft_max=5, p_min=0.0, adaptive=False)
    out = eng.generate(PROMPT, max_tokens=30, temperature=0.0)
    assert out.stats.drafted >= 20 and out.stats.accepted == out.stats.drafted


@pytest.mark.parametrize("drafter", ["model", "hybrid"])
def test_target_ids_the_draft_lacks_are_fed_as_a_stand_in(tmp_path, drafter):
    # A target with ids past the draft's vocabulary (appended special tokens, compat.h): prompts
    # and outputs holding them still draft (the draft sees a stand-in) and equal plain decoding.
    target = write_tiny_model(tmp_path / "t.gguf", TinySpec(arch="qwen3", n_layer=3, n_vocab=80, wtype="Q8_0", seed=1))
    draft = write_tiny_model(tmp_path / "d.gguf", TinySpec(arch="qwen3", n_layer=2, n_vocab=64, wtype="Q8_0", seed=2))
    prompt = [3, 70, 5, 79, 17, 64, 3, 70, 5]
    want = argmax_loop(target, prompt, 24)
    eng = engine_for(target, drafter, draft, n_ctx=256, threads=2, draft_max=4, p_min=0.0, adaptive=False, ngram_min=1)
    out = eng.generate(prompt, max_tokens=24, temperature=0.0)
    assert out.tokens == want and out.stats.drafted > 0


def test_tiny_vocab_mismatch_raises(tmp_path):
    a = write_tiny_model(tmp_path / "a.gguf", TinySpec(n_vocab=64))
    # Tokenizer-less files compare by nothing but ids; a GGUF with tokens vs one without fails.
    import gguf

    w = gguf.GGUFWriter(str(tmp_path / "tok.gguf"), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(64)])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(quickdraft.IncompatibleModelsError):
        quickdraft._core.check_compatible(str(a), str(tmp_path / "tok.gguf"))


# -- real models ------------------------------------------------------------------------------

@pytest.mark.real
def test_incompatible_real_pair_raises(model_path):
    with pytest.raises(quickdraft.IncompatibleModelsError, match="tokenizer.ggml.pre|token"):
        Engine(model_path("smollm2-135m"), draft=str(model_path("qwen2.5-coder-0.5b")), n_ctx=128)


@pytest.mark.real
@pytest.mark.parametrize("drafter", ["ngram", "self", "model"])
def test_smollm2_greedy_speculative_equals_plain(model_path, drafter):
    path = model_path("smollm2-135m")
    prompt = "def fibonacci(n):\n    if n < 2:\n        return n\n"
    plain = need_text(Engine(path, n_ctx=256, threads=2)).generate(prompt, max_tokens=24, temperature=0.0)
    eng = engine_for(path, drafter, str(path), n_ctx=256, threads=2, draft_max=4, p_min=0.0, adaptive=False)
    out = eng.generate(prompt, max_tokens=24, temperature=0.0)
    assert out.tokens == plain.tokens and out.text == plain.text
    if drafter == "model":  # SmolLM2 drafting for itself
        assert out.stats.drafted > 0 and out.stats.accepted == out.stats.drafted


@pytest.mark.real
def test_smollm2_stop_string_and_stream(model_path):
    path = model_path("smollm2-135m")
    eng = need_text(Engine(path, draft="ngram", n_ctx=256, threads=2, draft_max=4, p_min=0.0, adaptive=False))
    prompt = "List the numbers from one to ten: one, two,"
    full = eng.generate(prompt, max_tokens=24, temperature=0.0)
    assert full.text.strip()
    stop = full.text[len(full.text) // 2 : len(full.text) // 2 + 3]
    pieces = list(eng.stream(prompt, max_tokens=24, temperature=0.0, stop=stop))
    out = eng.last_completion
    assert out.finish_reason == "stop"
    assert out.text == full.text[: full.text.find(stop)] == "".join(p.text for p in pieces)


@pytest.mark.real
@pytest.mark.slow
def test_qwen_pair_greedy_speculative_equals_plain(model_path):
    target, draft = model_path("qwen2.5-coder-1.5b"), model_path("qwen2.5-coder-0.5b")
    prompt = "def quicksort(arr):\n"
    plain = need_text(Engine(target, n_ctx=128, threads=2)).generate(prompt, max_tokens=12, temperature=0.0)
    eng = Engine(target, draft=str(draft), n_ctx=128, threads=2, draft_max=4, p_min=0.0, adaptive=False)
    out = eng.generate(prompt, max_tokens=12, temperature=0.0)
    assert out.tokens == plain.tokens
    assert out.stats.drafted > 0 and out.stats.accepted > 0


def _model_marginals(path, prompt, n_gen, prm):
    """Exact distribution of each generated token by enumerating paths with Model.eval."""
    from reference.spec_reference import process

    m = quickdraft.Model(str(path), n_ctx=64, threads=1)
    v = m.n_vocab
    margins = [np.zeros(v) for _ in range(n_gen)]
    paths = {tuple(): 1.0}
    for j in range(n_gen):
        nxt = {}
        for gen, w in paths.items():
            seq = list(prompt) + list(gen)
            m.reset()
            p = process(m.eval(seq)[-1], seq, prm)
            for t in np.flatnonzero(p):
                margins[j][t] += w * p[t]
                nxt[gen + (int(t),)] = w * p[t]
        paths = nxt
    return margins


@pytest.mark.parametrize("setting", ["t1", "t0.7_top_p0.9"])
def test_tiny_vocab_sampled_tokens_follow_the_target(tmp_path_factory, setting):
    from reference.spec_reference import SETTINGS, chi_square_check

    prm = SETTINGS[setting]
    d = tmp_path_factory.mktemp("tinyvocab")
    target = write_tiny_model(d / "t.gguf", TinySpec(arch="llama", n_layer=2, n_vocab=16, n_embd=32, n_ff=48, seed=5))
    draft = write_tiny_model(d / "d.gguf", TinySpec(arch="llama", n_layer=1, n_vocab=16, n_embd=32, n_ff=48, seed=6))
    prompt, n_gen, n = [1, 2, 3], 3, 20000
    eng = Engine(str(target), draft=str(draft), n_ctx=64, threads=1, draft_max=2, p_min=0.0, adaptive=False)
    opt = quickdraft._core.GenerateOptions()
    opt.max_tokens = n_gen
    opt.sampling = prm.native(quickdraft._core)
    out = quickdraft._core._testing.sample_many(eng._core, prompt, opt, n, 99)
    margins = _model_marginals(target, prompt, n_gen, prm)
    chi_square_check(out[:, 0], margins[0])
    chi_square_check(out[:, 2], margins[2])
    s = eng._core.stats()
    assert s.drafted > 0 and 0 < s.accepted


@pytest.mark.real
def test_smollm2_chat_stops_at_end_of_turn(model_path):
    eng = need_text(Engine(model_path("smollm2-135m"), draft="ngram", n_ctx=512, threads=2))
    msgs = [{"role": "user", "content": "Say hello in one short sentence."}]
    out = eng.chat(msgs, max_tokens=48, temperature=0.0)
    assert out.text.strip() and out.finish_reason in ("eos", "length")
    assert "<|im_end|>" not in out.text and "<|im_start|>" not in out.text
    pieces = list(eng.stream_chat(msgs, max_tokens=48, temperature=0.0))
    assert "".join(p.text for p in pieces) == out.text  # the cached prompt changes nothing
    assert eng.last_completion.stats.prompt_tokens_cached > 0


@pytest.mark.real
@pytest.mark.parametrize("drafter", ["self", "model", "hybrid"])
def test_warm_up_at_load_times_costs_and_leaves_no_trace(model_path, drafter):
    """An adaptive drafter's engine times the target and the drafter once loaded (warm_up_seconds
    > 0) and leaves their caches empty: its first generation reuses nothing from the warm-up and
    reproduces plain decoding token for token. Engines that weigh no drafts skip it."""
    path = model_path("smollm2-135m")
    prompt = "def fibonacci(n):\n    if n < 2:\n        return n\n"
    plain_engine = need_text(Engine(path, n_ctx=256, threads=2))
    assert plain_engine.warm_up_seconds == 0.0
    assert engine_for(path, drafter, str(path), n_ctx=256, threads=2, adaptive=False).warm_up_seconds == 0.0
    plain = plain_engine.generate(prompt, max_tokens=24, temperature=0.0)
    eng = engine_for(path, drafter, str(path), n_ctx=256, threads=2)
    assert eng.warm_up_seconds > 0.0
    out = eng.generate(prompt, max_tokens=24, temperature=0.0)
    assert out.tokens == plain.tokens and out.text == plain.text
    assert out.stats.prompt_tokens_cached == 0


@pytest.mark.real
def test_p_min_defaults_to_0_9_for_self_and_0_7_for_a_draft_model(model_path):
    """p_min=None takes the drafter's default (docs/benchmarks.md, "A draft ends at its first unsure
    token"). Fixed-length greedy drafts show which one: their lengths differ between 0.7 and 0.9."""
    path = model_path("smollm2-135m")
    prompt = "def fibonacci(n):\n    if n < 2:\n        return n\n"

    def lengths(draft, p_min):
        eng = Engine(path, draft=draft, n_ctx=256, threads=2, draft_max=4, adaptive=False, p_min=p_min)
        return eng.generate(prompt, max_tokens=48, temperature=0.0).stats.draft_length_histogram

    for draft, default in (("self", 0.9), (str(path), 0.7)):
        by_p_min = {p: lengths(draft, p) for p in (0.7, 0.9)}
        assert by_p_min[0.7] != by_p_min[0.9]
        assert lengths(draft, None) == by_p_min[default]

"""The draft head (Context.set_head_subset): a drafter's output layer computed only for the first
n_top ids, the `always` ids and the ids the context has evaluated. Oracle: the same context's full
output layer. Computed logits must be the same bits, every other logit -inf; and speculation
with a draft head must still reproduce plain greedy decoding token for token."""

from __future__ import annotations

import numpy as np
import pytest

from quickdraft import Engine, _core
from fixtures.tiny_models import TinySpec, write_tiny_model

PROMPT = [3, 17, 5, 3, 17, 9, 40, 3, 17, 70, 81]


@pytest.fixture(scope="module", params=[0.0, 30.0], ids=["plain", "softcap"])
def tiny(request, tmp_path_factory):
    spec = TinySpec(arch="gemma3", n_layer=2, n_vocab=96, wtype="Q8_0", logit_softcap=request.param, seed=3)
    return write_tiny_model(tmp_path_factory.mktemp("head") / "m.gguf", spec)


def contexts(path):
    lm = _core.LoadedModel(str(path))
    return _core.Context(lm, 64, 2), _core.Context(lm, 64, 2)


def test_subset_logits_are_the_full_layer_bits(tiny):
    full, sub = contexts(tiny)
    sub.set_head_subset(16, [90])
    assert sub.head_subset == 16
    want = full.eval(PROMPT)
    got = sub.eval(PROMPT)
    computed = sorted(set(range(16)) | {90} | set(PROMPT))
    np.testing.assert_array_equal(got[:, computed], want[:, computed])
    rest = np.setdiff1d(np.arange(96), computed)
    assert np.all(got[:, rest] == -np.inf)
    assert np.isfinite(want).all()


@pytest.mark.parametrize("otype", ["Q4_K", "Q6_K"])
def test_subset_of_an_output_stored_in_chunks_is_the_full_layer_bits(tmp_path, otype):
    """An output matrix of Q4_K or Q6_K, which the rows8 layout stores in chunks of 64 rows
    (cpu/rows8_order.h): the head's first ids (16, inside the first chunk) and its extra ids (a
    padded group of their own) read the same bits as the full layer, whichever ISA repacks. 96 ids:
    a whole chunk and one of 32 rows; 512 columns: two blocks a row, so that a chunk read at the
    wrong stride shows. (The first ids read as a view of 16 rows took the chunk's blocks at the
    stride of 2 groups, and a view of rows not a multiple of 8 never ended.)"""
    spec = TinySpec(arch="qwen2", n_layer=1, n_vocab=96, n_embd=512, n_ff=64, wtype="Q8_0", tied=False,
                    output_type=otype, seed=4)
    path = write_tiny_model(tmp_path / "m.gguf", spec)
    full, sub = contexts(path)
    sub.set_head_subset(16, [90])
    want = full.eval(PROMPT)
    got = sub.eval(PROMPT)
    computed = sorted(set(range(16)) | {90} | set(PROMPT))
    np.testing.assert_array_equal(got[:, computed], want[:, computed])
    assert np.all(got[:, np.setdiff1d(np.arange(96), computed)] == -np.inf)
    assert np.isfinite(want).all()


def test_ids_join_the_head_when_evaluated(tiny):
    full, sub = contexts(tiny)
    sub.set_head_subset(8)
    first = sub.eval([1, 2, 3], last_only=True)
    assert first[50] == -np.inf
    full.eval([1, 2, 3])
    got = sub.eval([50], last_only=True)
    want = full.eval([50], last_only=True)
    assert got[50] == want[50] and np.isfinite(got[50])
    assert got[51] == -np.inf


def test_full_layer_again_and_bad_ids(tiny):
    full, sub = contexts(tiny)
    sub.set_head_subset(8)
    sub.set_head_subset(0)
    assert sub.head_subset == 0
    np.testing.assert_array_equal(sub.eval(PROMPT), full.eval(PROMPT))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        sub.set_head_subset(8, [96])


@pytest.mark.parametrize("head", [None, 0, 8, 13, 40])
def test_speculation_with_a_draft_head_equals_plain(tmp_path_factory, head):
    d = tmp_path_factory.mktemp("pair")
    target = write_tiny_model(d / "t.gguf", TinySpec(arch="qwen2", n_layer=3, n_vocab=96, wtype="Q8_0", seed=1))
    draft = write_tiny_model(d / "d.gguf", TinySpec(arch="qwen2", n_layer=2, n_vocab=96, wtype="Q8_0", seed=1))
    plain = Engine(str(target), n_ctx=128, threads=2).generate(PROMPT, max_tokens=20, temperature=0.0)
    eng = Engine(str(target), draft=str(draft), n_ctx=128, threads=2, draft_max=4, p_min=0.0, adaptive=False,
                 draft_head=head)
    out = eng.generate(PROMPT, max_tokens=20, temperature=0.0)
    assert out.tokens == plain.tokens
    assert out.stats.drafted > 0


def test_negative_draft_head_is_refused(tmp_path):
    target = write_tiny_model(tmp_path / "t.gguf", TinySpec(arch="qwen2", n_vocab=96, seed=1))
    with pytest.raises(ValueError, match="draft_head"):
        Engine(str(target), draft="self", draft_head=-5)


@pytest.mark.real
@pytest.mark.slow
def test_qwen_draft_head_keeps_the_real_logits(model_path):
    """On the real 0.5B draft (151936 ids, the default head of 32768): the computed logits are
    the full layer's, and the draft's greedy choice agrees with the full head's where it is
    inside the head (how often it is outside is what acceptance pays for)."""
    lm = _core.LoadedModel(str(model_path("qwen2.5-coder-0.5b")))
    full, sub = _core.Context(lm, 256, 2), _core.Context(lm, 256, 2)
    sub.set_head_subset(32768, [151643, 151645])
    ids = [750, 3974, 10231, 2890, 982, 262, 471, 2890, 421, 2890, 2651, 220, 16, 770, 3974, 10231]
    want, got = full.eval(ids), sub.eval(ids)
    cols = np.isfinite(got[0])
    assert cols.sum() == 32768 + 2 + len({i for i in ids if i >= 32768})
    np.testing.assert_array_equal(got[:, cols], want[:, cols])
    inside = cols[np.argmax(want, axis=1)]
    assert np.array_equal(np.argmax(got, axis=1)[inside], np.argmax(want, axis=1)[inside])


@pytest.mark.parametrize("requantize, otype", [("", "Q8_0"), ("q4_0", "Q8_0"), ("", "Q6_K")])
def test_a_model_loaded_for_its_draft_head_computes_the_same_bits(tmp_path, requantize, otype):
    """LoadedModel(output_rows=40): only the output layer's first 64 rows (40 rounded up to a chunk)
    are requantized and repacked; the ids past them that join the head (`always`, evaluated) are
    read from the stored matrix, requantized row by row as the load would have. Oracle: the same
    head on the model loaded whole. 200 ids, so that the stored rows past 64 are most of them."""
    spec = TinySpec(arch="qwen2", n_layer=1, n_vocab=200, n_embd=512, n_ff=64, wtype="Q8_0", tied=False,
                    output_type=otype, seed=5)
    path = str(write_tiny_model(tmp_path / "m.gguf", spec))
    prompt = [3, 17, 120, 5, 199, 64, 63, 150, 17]
    whole = _core.Context(_core.LoadedModel(path, requantize=requantize), 64, 2)
    part = _core.Context(_core.LoadedModel(path, requantize=requantize, output_rows=40), 64, 2)
    for c in (whole, part):
        c.set_head_subset(40, [180])
    want, got = whole.eval(prompt), part.eval(prompt)
    computed = sorted(set(range(40)) | {180} | set(prompt))
    np.testing.assert_array_equal(got[:, computed], want[:, computed])
    assert np.all(got[:, np.setdiff1d(np.arange(200), computed)] == -np.inf)
    assert np.isfinite(want[:, computed]).all()


def test_a_model_loaded_for_its_draft_head_refuses_a_larger_one(tmp_path):
    spec = TinySpec(arch="qwen2", n_layer=1, n_vocab=200, wtype="Q8_0", tied=False, seed=5)
    path = str(write_tiny_model(tmp_path / "m.gguf", spec))
    lm = _core.LoadedModel(path, output_rows=40)
    c = _core.Context(lm, 64, 2)
    # Without set_head_subset a context computes the rows it has: the first 64 and what it evaluates.
    got = c.eval([3, 150], last_only=True)
    assert np.isfinite(got[:64]).all() and np.isfinite(got[150]) and got[100] == -np.inf
    whole = _core.Context(_core.LoadedModel(path), 64, 2)
    np.testing.assert_array_equal(got[:64], whole.eval([3, 150], last_only=True)[:64])
    for n_top in (0, 65, 199):
        with pytest.raises(ValueError, match="output_rows"):
            c.set_head_subset(n_top)
    c.set_head_subset(64)  # the rows it computes: allowed
    tied = write_tiny_model(tmp_path / "tied.gguf", TinySpec(arch="qwen2", n_layer=1, n_vocab=200, wtype="Q8_0", seed=5))
    c = _core.Context(_core.LoadedModel(str(tied), output_rows=40), 64, 2)
    c.set_head_subset(0)  # a tied output is the embedding too: loaded whole
    assert np.isfinite(c.eval([3], last_only=True)).all()


@pytest.mark.real
def test_the_engine_loads_its_draft_for_the_head(model_path):
    """The 0.5B draft of the default pair scores a head of 32768 ids: loaded so, its output layer
    holds those rows only (17 MB as Q4_0 instead of 77)."""
    whole = _core.LoadedModel(str(model_path("qwen2.5-coder-0.5b")), requantize="q4_0")
    part = _core.LoadedModel(str(model_path("qwen2.5-coder-0.5b")), requantize="q4_0", output_rows=32768)
    size = lambda lm: lm.matrix_storage["output.weight"][1]
    assert size(part) * 4 < size(whole)
    eng = Engine(str(model_path("qwen2.5-coder-1.5b")), draft=str(model_path("qwen2.5-coder-0.5b")), n_ctx=256,
                 threads=2, draft_quant="q4_0", adaptive=False, draft_max=4)
    stats = eng.generate("def fib(n):", max_tokens=24, temperature=0.0).stats
    assert stats.drafted > 0 and stats.acceptance_rate > 0.5  # its drafts still agree with the target

"""quickdraft.Model's API and its errors: bad arguments, context limits, unsupported or
malformed models. Errors leave the context as it was."""

from __future__ import annotations

import numpy as np
import pytest

import quickdraft
from quickdraft import GGUFError, UnsupportedError
from fixtures.tiny_models import TinySpec, write_tiny_model


@pytest.fixture
def tiny(tmp_path):
    spec = TinySpec(arch="qwen2", n_layer=2)
    return write_tiny_model(tmp_path / "tiny.gguf", spec), spec


def test_properties(tiny):
    path, spec = tiny
    m = quickdraft.Model(path, n_ctx=32, threads=1)
    assert (m.arch, m.n_vocab, m.n_layer, m.n_embd) == ("qwen2", spec.n_vocab, spec.n_layer, spec.n_embd)
    assert (m.n_ctx, m.n_ctx_train, m.n_past, m.threads) == (32, spec.n_ctx_train, 0, 1)
    assert m.hparams["n_head_kv"] == spec.n_head_kv and m.hparams["rope_neox"] is True
    assert "qwen2" in repr(m)
    assert quickdraft.Model(path).n_ctx == 4096


def test_matrix_storage_names_every_weight_matrix_with_its_bytes(model_path):
    """What a decode streams (bench/compare.py's ceiling): every 2-D tensor of the file (the
    gguf package's reading), each with the file's byte count whether repacked at load or not."""
    import gguf

    path = model_path("smollm2-135m")
    want = {t.name: int(t.n_bytes) for t in gguf.GGUFReader(path).tensors if len(t.shape) == 2}
    storage = quickdraft.Model(path, n_ctx=32, threads=1).matrix_storage
    assert {name: b for name, (_, b, _) in storage.items()} == want
    assert {layout for _, _, layout in storage.values()} <= {"rows8", "gguf"}


def test_eval_accepts_lists_and_numpy_integers(tiny):
    path, _ = tiny
    m = quickdraft.Model(path, n_ctx=32)
    a = m.eval([1, 2, 3])
    m.reset()
    b = m.eval(np.array([1, 2, 3], dtype=np.uint16))
    assert np.array_equal(a, b)
    with pytest.raises(TypeError):
        m.eval([1.5, 2.0])


def test_empty_and_out_of_vocab_raise_and_change_nothing(tiny):
    path, spec = tiny
    m = quickdraft.Model(path, n_ctx=32)
    m.eval([1, 2])
    for bad in ([], [5, spec.n_vocab], [-1], [2**40]):
        with pytest.raises(ValueError, match="no tokens|outside the vocabulary"):
            m.eval(bad)
        assert m.n_past == 2


def test_context_limit_raises_and_leaves_state_unchanged(tiny):
    path, _ = tiny
    ids = list(range(1, 11))
    m = quickdraft.Model(path, n_ctx=8)
    m.eval(ids[:5])
    with pytest.raises(ValueError, match="exceed n_ctx 8"):
        m.eval(ids[5:9])
    assert m.n_past == 5
    after = m.eval(ids[5:8])  # exactly fills the context
    assert m.n_past == 8
    fresh = quickdraft.Model(path, n_ctx=8).eval(ids[:8])
    assert np.array_equal(after, fresh[5:])
    with pytest.raises(ValueError, match="exceed n_ctx"):
        m.eval([1])


def test_truncate_bounds(tiny):
    path, _ = tiny
    m = quickdraft.Model(path, n_ctx=16)
    m.eval([1, 2, 3])
    for bad in (-1, 4):
        with pytest.raises(ValueError, match="truncate"):
            m.truncate(bad)
    m.truncate(3)
    m.truncate(0)
    assert m.n_past == 0


def test_bad_n_ctx(tiny):
    path, _ = tiny
    with pytest.raises(ValueError, match="n_ctx"):
        quickdraft.Model(path, n_ctx=0)


def test_skip_layers(tiny):
    path, _ = tiny
    m = quickdraft.Model(path, n_ctx=16)
    full = m.eval([1, 2, 3])
    draft = m.new_context()
    draft.skip_layers = [1, 1]
    assert draft.skip_layers == [1]
    skipped = draft.eval([1, 2, 3])
    assert not np.array_equal(skipped, full)
    with pytest.raises(ValueError, match="layer 7"):
        draft.skip_layers = [7]
    draft.skip_layers = []  # layer 1 has no KV for the first 3 positions now
    with pytest.raises(ValueError, match="reset"):
        draft.eval([4])
    draft.reset()
    assert np.array_equal(draft.eval([1, 2, 3]), full)


def test_skipping_view_attends_to_the_base_cache(tmp_path):
    # Oracle: a context with its own cache that evaluated the prefix with every layer, then
    # skips layer 1: the view must give the same bits without evaluating the prefix itself.
    path = write_tiny_model(tmp_path / "m.gguf", TinySpec(arch="qwen2", n_layer=3))
    prefix, more = [5, 9, 2, 7], [4, 8, 3]
    m = quickdraft.Model(path, n_ctx=16, threads=1)
    m.eval(prefix)
    view = m.skipping_view([1])
    assert view.skip_layers == [1] and view.n_past == 0
    view.truncate(m.n_past)
    got = view.eval(more)
    oracle = m.new_context()
    oracle.eval(prefix)
    oracle.skip_layers = [1]
    assert np.array_equal(got, oracle.eval(more))
    full = m.new_context()
    full.eval(prefix)
    assert not np.array_equal(got, full.eval(more))
    # The view wrote at positions 4-6; the base overwrites them as it evaluates them.
    assert np.array_equal(m.eval(more + [1]), quickdraft.Model(path, n_ctx=16).eval(prefix + more + [1])[4:])
    # Behind the base it would overwrite the base's keys and values: refused.
    view.truncate(2)
    with pytest.raises(ValueError, match=r"before its base's 8.*truncate\(8\)"):
        view.eval([1])
    with pytest.raises(ValueError, match="truncate"):
        view.truncate(9)
    view.truncate(8)
    assert view.eval_last([6]).shape == (m.n_vocab,)
    m.eval([2])  # the base moved on (over the view's position 8): the view must truncate first
    with pytest.raises(ValueError, match=r"stale; truncate\(9\) first"):
        view.eval([3])
    with pytest.raises(ValueError, match="must skip some layers"):
        m.skipping_view([])
    with pytest.raises(ValueError, match="layer 3"):
        m.skipping_view([3])
    with pytest.raises(ValueError, match="view of a view"):
        view.skipping_view([2])
    del m  # the view keeps the base's context alive
    view.truncate(9)
    assert view.eval([1]).shape == (1, oracle.model.n_vocab)


def test_unsupported_architecture_names_itself_and_the_supported_list(tmp_path):
    import gguf

    path = tmp_path / "mamba.gguf"
    w = gguf.GGUFWriter(str(path), "mamba")
    w.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(UnsupportedError, match=r"'mamba'.*supported: llama, qwen2, gemma3"):
        quickdraft.Model(path)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_unsupported_rope_scaling_names_itself(tmp_path, arch):
    path = write_tiny_model(tmp_path / "m.gguf", TinySpec(arch=arch, rope_scaling="longrope", rope_factor=4.0))
    with pytest.raises(UnsupportedError, match=rf"rope scaling type 'longrope' is not supported for architecture {arch} "
                                               r"\(supported: none, linear, yarn\)"):
        quickdraft.Model(path)


def test_rope_scaling_is_reported(tmp_path):
    spec = TinySpec(arch="qwen2", rope_scaling="yarn", rope_factor=4.0, rope_orig_ctx=128)
    hp = quickdraft.Model(write_tiny_model(tmp_path / "m.gguf", spec)).hparams
    assert (hp["rope_scaling"], hp["rope_freq_scale"], hp["rope_n_ctx_orig"]) == ("yarn", 0.25, 128)


def test_missing_tensor_is_named(tmp_path):
    path = write_tiny_model(tmp_path / "m.gguf", TinySpec(arch="llama", omit=["blk.1.ffn_up.weight"]))
    with pytest.raises(GGUFError, match="missing tensor 'blk.1.ffn_up.weight'"):
        quickdraft.Model(path)


def test_missing_qwen2_bias_is_named(tmp_path):
    path = write_tiny_model(tmp_path / "m.gguf", TinySpec(arch="qwen2", omit=["blk.0.attn_k.bias"]))
    with pytest.raises(GGUFError, match="blk.0.attn_k.bias"):
        quickdraft.Model(path)


def test_misshaped_tensor_is_named(tmp_path):
    spec = TinySpec(arch="gemma3", reshape={"blk.0.attn_q_norm.weight": (8,)})
    path = write_tiny_model(tmp_path / "m.gguf", spec)
    with pytest.raises(GGUFError, match=r"'blk.0.attn_q_norm.weight' has shape \[8\], expected \[16\]"):
        quickdraft.Model(path)


def test_tensor_type_without_dequantization_is_named(tmp_path):
    import gguf

    spec = TinySpec(arch="llama", omit=["blk.0.attn_v.weight"])
    path = write_tiny_model(tmp_path / "m.gguf", spec)
    # Rewrite with an I8 matrix where attn_v belongs: a valid GGUF type nobody computes with.
    reader = gguf.GGUFReader(str(path))
    path2 = tmp_path / "i8.gguf"
    w = gguf.GGUFWriter(str(path2), "llama")
    for key, f in reader.fields.items():
        if key.startswith("llama."):
            v = f.contents()
            (w.add_float32 if isinstance(v, float) else w.add_uint32)(key, v)
    for t in reader.tensors:
        w.add_tensor(t.name, np.asarray(t.data).reshape(tuple(int(d) for d in reversed(t.shape))))
    kv_dim = spec.n_head_kv * spec.hd
    w.add_tensor("blk.0.attn_v.weight", np.ones((kv_dim, spec.n_embd), dtype=np.int8))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(UnsupportedError, match="'blk.0.attn_v.weight' has type I8"):
        quickdraft.Model(path2)


def test_missing_hyperparameter_is_named(tmp_path):
    import gguf

    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_embedding_length(32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(GGUFError, match="llama.block_count"):
        quickdraft.Model(path)


def test_trace_eval_returns_the_intermediates_of_the_same_forward(tiny):
    """Context.trace_eval (the hook of bench/layer_diff.py): the logits eval gives, and every
    layer's intermediates under llama.cpp's graph names, each [n, width]; the trace then stops."""
    path, spec = tiny
    ctx = quickdraft._core.Context(quickdraft._core.LoadedModel(str(path)), 32, 1)
    plain = ctx.eval([1, 2, 3])
    ctx.reset()
    logits, items = ctx.trace_eval([1, 2, 3])
    assert np.array_equal(logits, plain)
    by_name = {(name, il): a for name, il, a in items}
    for il in range(spec.n_layer):
        for name in ("attn_norm", "Qcur", "Kcur", "Vcur", "kqv_out", "ffn_inp", "ffn_act", "l_out"):
            assert by_name[(name, il)].shape[0] == 3, (name, il)
        assert by_name[("l_out", il)].shape == (3, spec.n_embd)
    # l_out of layer 0 is the residual stream: embedding + attention out + feed-forward out
    emb, att, ffn = by_name[("embd", -1)], by_name[("attn_out", 0)], by_name[("ffn_out", 0)]
    np.testing.assert_array_equal(by_name[("ffn_inp", 0)], emb + att)
    np.testing.assert_array_equal(by_name[("l_out", 0)], emb + att + ffn)
    ctx.reset()
    assert np.array_equal(ctx.eval([1, 2, 3]), plain)  # no trace left behind

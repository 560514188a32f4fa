"""Mixture of experts (qwen3moe): a verify batch reads each chosen expert once for all the rows
routed to it, and the routing is llama.cpp's (softmax, top-k best first, weights renormalised).
The forward pass itself is checked against llama.cpp (test_forward_llamacpp.py) and the numpy
oracle (test_forward_tiny.py); batch invariance and KV rollback in test_forward_invariance.py."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

import quickdraft
from fixtures.tiny_models import TinySpec, write_tiny_model


@pytest.fixture(scope="module")
def moe_model(tmp_path_factory):
    spec = TinySpec(arch="qwen3moe", n_layer=2, head_dim=32, n_expert=16, n_expert_used=3, n_ff_exp=64, wtype="Q8_0",
                    seed=4)
    return write_tiny_model(tmp_path_factory.mktemp("moe") / "moe.gguf", spec), spec


@pytest.mark.parametrize("n", [1, 2, 5, 16])
def test_batch_reads_each_chosen_expert_once(moe_model, n):
    path, spec = moe_model
    ids = np.random.default_rng(n).integers(0, spec.n_vocab, n)
    m = quickdraft.Model(path, n_ctx=64, threads=2)
    _, items = m._ctx.trace_eval(ids)
    reads = defaultdict(list)  # layer -> rows of each expert read, in expert order
    chosen = {}
    for name, il, a in items:
        if name == "ffn_moe_gate":
            reads[il].append(a.shape[0])
        elif name == "ffn_moe_probs":
            assert np.allclose(a.sum(axis=1), 1.0, atol=1e-5)
            chosen[il] = np.argsort(-a, axis=1, kind="stable")[:, :spec.n_expert_used]
    for il in range(spec.n_layer):
        experts, counts = np.unique(chosen[il], return_counts=True)
        # One read (one matmul of all its rows) per distinct chosen expert, none for the others.
        assert reads[il] == counts.tolist(), f"layer {il}: expert reads {reads[il]}, routed rows {counts.tolist()}"
        assert sum(reads[il]) == n * spec.n_expert_used and len(reads[il]) == len(experts) <= spec.n_expert


def test_routes_differ_between_tokens(moe_model):
    """The synthetic router is not degenerate: 16 tokens reach most of the 16 experts."""
    path, spec = moe_model
    ids = np.arange(16) * 5 % spec.n_vocab
    _, items = quickdraft.Model(path, n_ctx=64, threads=2)._ctx.trace_eval(ids)
    counts = [len([1 for name, il, _ in items if name == "ffn_moe_gate" and il == layer]) for layer in range(2)]
    assert min(counts) >= 8, counts


def test_missing_expert_count_is_named(tmp_path):
    import gguf

    spec = TinySpec(arch="qwen3moe", head_dim=32)
    path = write_tiny_model(tmp_path / "m.gguf", spec)
    # Rewrite without the expert keys: copy every field but them.
    r = gguf.GGUFReader(str(path))
    w = gguf.GGUFWriter(str(tmp_path / "bad.gguf"), "qwen3moe")
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "qwen3moe.expert_count"):
            continue
        w.add_key_value(key, f.contents(), f.types[0], f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None)
    for t in r.tensors:
        w.add_tensor(t.name, np.asarray(t.data), raw_shape=[int(d) for d in reversed(t.shape)], raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(quickdraft.GGUFError, match="missing metadata key 'qwen3moe.expert_count'"):
        quickdraft.Model(tmp_path / "bad.gguf")

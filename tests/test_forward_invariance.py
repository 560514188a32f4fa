"""Invariants the speculative loop relies on, bit for bit: a position's logits do not depend on
the batch it was evaluated in nor on the thread count, and truncating the KV cache then
evaluating new tokens equals evaluating them on a fresh context."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType

import quickdraft
from quickdraft import _core
from fixtures.tiny_models import ARCHS, TinySpec, write_tiny_model

N = 40  # positions per sequence


def model_file(tmp_path, arch: str, wtype: str = "F32"):
    if not _core.type_info(int(GGMLQuantizationType[wtype]))[3]:
        pytest.skip(f"this build cannot dequantize {wtype} yet")
    # A window shorter than the sequence, so Gemma 3's local layers really slide here.
    extra = {"sliding_window": 9, "swa_pattern": 2} if arch == "gemma3" else {}
    if arch == "phi3":
        extra = {"longrope": True, "rope_orig_ctx": 32}
    n_layer = 4 if arch == "qwen35" else 3  # qwen35: three Gated DeltaNet layers and a gated attention one
    spec = TinySpec(arch=arch, wtype=wtype, n_layer=n_layer, n_head=4, n_head_kv=2, **extra)
    return write_tiny_model(tmp_path / f"{arch}-{wtype}.gguf", spec), spec


def eval_in_batches(model: quickdraft.Model, ids: np.ndarray, batch: int) -> np.ndarray:
    model.reset()
    return np.concatenate([model.eval(ids[i:i + batch]) for i in range(0, len(ids), batch)])


@pytest.mark.parametrize("wtype", ["F32", "F16", "Q8_0", "Q4_0"])
@pytest.mark.parametrize("arch", ARCHS)
def test_batch_and_thread_invariance(tmp_path, arch, wtype):
    path, spec = model_file(tmp_path, arch, wtype)
    ids = np.random.default_rng(3).integers(0, spec.n_vocab, N)
    one = quickdraft.Model(path, n_ctx=64, threads=1)
    alone = eval_in_batches(one, ids, 1)  # every position evaluated on its own
    two = quickdraft.Model(path, n_ctx=64, threads=2)
    assert np.array_equal(eval_in_batches(two, ids, 1), alone), "threads 1 vs 2 differ"
    for batch in range(2, 17):
        for model in (one, two):
            got = eval_in_batches(model, ids, batch)
            same = np.all(got == alone, axis=1)
            assert same.all(), f"batch {batch}, {model.threads} threads: positions {np.flatnonzero(~same)} differ"


@pytest.mark.parametrize("arch", ["qwen2", "gemma3"])
def test_long_context_real_head_size(tmp_path, arch):
    """Attention at real head sizes (128: whole vector registers, several per row) over more keys
    than one conversion chunk (32) holds, in verify-sized and prompt-sized batches that share
    each converted chunk among their rows, with a window that cuts chunks mid-way."""
    extra = {"sliding_window": 45, "swa_pattern": 2} if arch == "gemma3" else {}
    spec = TinySpec(arch=arch, n_embd=128, n_head=6, n_head_kv=2, head_dim=128, n_layer=2, **extra)
    path = write_tiny_model(tmp_path / f"{arch}-hd128.gguf", spec)
    ids = np.random.default_rng(5).integers(0, spec.n_vocab, 150)
    m = quickdraft.Model(path, n_ctx=160, threads=2)
    alone = eval_in_batches(m, ids, 1)
    for batch in (3, 8, 16, 150):
        got = eval_in_batches(m, ids, batch)
        same = np.all(got == alone, axis=1)
        assert same.all(), f"batch {batch}: positions {np.flatnonzero(~same)} differ"
    assert np.array_equal(eval_in_batches(quickdraft.Model(path, n_ctx=160, threads=3), ids, 7), alone)


@pytest.mark.parametrize("arch", ARCHS)
def test_verify_batch_after_decode_equals_decode(tmp_path, arch):
    """The speculative pattern: decode some tokens one by one, then verify k+1 at once."""
    path, spec = model_file(tmp_path, arch)
    ids = np.random.default_rng(4).integers(0, spec.n_vocab, 30)
    m = quickdraft.Model(path, n_ctx=64, threads=2)
    alone = eval_in_batches(m, ids, 1)
    m.reset()
    m.eval(ids[:10])
    verify = m.eval(ids[10:19])
    assert np.array_equal(verify, alone[10:19])
    m.truncate(13)  # accept 3 of the 9, continue from there
    assert np.array_equal(m.eval(ids[13:30]), alone[13:30])


@pytest.mark.parametrize("arch", ARCHS)
def test_kv_rollback_equals_fresh_eval(tmp_path, arch):
    path, spec = model_file(tmp_path, arch)
    rng = np.random.default_rng(5)
    a, b, c = (rng.integers(0, spec.n_vocab, n) for n in (12, 9, 15))
    m = quickdraft.Model(path, n_ctx=64, threads=2)
    m.eval(np.concatenate([a, b]))
    m.truncate(len(a))
    assert m.n_past == len(a)
    after_rollback = m.eval(c)
    fresh = quickdraft.Model(path, n_ctx=64, threads=2).eval(np.concatenate([a, c]))
    assert np.array_equal(after_rollback, fresh[len(a):])


def test_last_only_and_feed_match_full_eval(tmp_path):
    path, spec = model_file(tmp_path, "qwen2")
    ids = np.random.default_rng(6).integers(0, spec.n_vocab, 20)
    m = quickdraft.Model(path, n_ctx=64, threads=2)
    full = m.eval(ids)
    m.reset()
    assert np.array_equal(m.eval_last(ids), full[-1])
    m.reset()
    m.feed(ids[:15])
    assert m.n_past == 15
    assert np.array_equal(m.eval(ids[15:]), full[15:])


def test_contexts_share_weights_and_are_independent(tmp_path):
    path, spec = model_file(tmp_path, "llama")
    ids = np.random.default_rng(7).integers(0, spec.n_vocab, 16)
    m = quickdraft.Model(path, n_ctx=64, threads=1)
    ctx = m.new_context(n_ctx=32, threads=2)
    assert ctx.n_ctx == 32 and ctx.threads == 2 and ctx.model is m
    full = m.eval(ids)
    assert ctx.n_past == 0
    assert np.array_equal(ctx.eval(ids[:10]), full[:10])
    assert m.n_past == 16 and ctx.n_past == 10
    m.truncate(4)
    assert np.array_equal(ctx.eval(ids[10:]), full[10:])

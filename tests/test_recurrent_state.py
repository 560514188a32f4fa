"""The sequence state of a hybrid recurrent model (qwen35): its Gated DeltaNet layers' recurrent
and conv1d state returns to any position of its rollback window, bit for bit, in both rollback
modes (snapshot: a state per position; recompute: replay from the last eval's start), and a
truncation outside the window is refused rather than computed wrong.

Oracle: a fresh context evaluating the same tokens (eval(A+B), truncate(len A), eval(C) must
equal eval(A+C)); the fresh context's logits are themselves checked against llama.cpp and the
numpy reference in test_forward_llamacpp.py / test_forward_tiny.py."""

from __future__ import annotations

import numpy as np
import pytest

import quickdraft
from fixtures.tiny_models import TinySpec, write_tiny_model

MODES = ["snapshot", "recompute"]


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    spec = TinySpec(arch="qwen35", n_layer=4, n_vocab=64, wtype="Q8_0", seed=5)
    return write_tiny_model(tmp_path_factory.mktemp("q35") / "q35.gguf", spec), spec


def fresh(path, ids):
    return quickdraft.Model(path, n_ctx=128, threads=2).eval(ids)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n_b", [1, 2, 9, 17])
def test_truncate_inside_the_last_batch_equals_fresh_eval(hybrid, mode, n_b):
    path, spec = hybrid
    rng = np.random.default_rng(n_b)
    a, b, c = (rng.integers(0, spec.n_vocab, n) for n in (11, n_b, 7))
    m = quickdraft.Model(path, n_ctx=128, threads=2)
    m.set_rollback(mode, 17)
    m.eval(a)
    m.eval(b)  # a verify batch of n_b rows, all rejected
    m.truncate(len(a))
    assert m.n_past == len(a)
    assert np.array_equal(m.eval(c), fresh(path, np.concatenate([a, c]))[len(a):])


@pytest.mark.parametrize("mode", MODES)
def test_every_accepted_prefix_of_a_verify_batch(hybrid, mode):
    """The loop's pattern: verify [last] + 8 drafts, keep 1 + n of them, continue."""
    path, spec = hybrid
    rng = np.random.default_rng(1)
    prompt, batch, rest = rng.integers(0, spec.n_vocab, 10), rng.integers(0, spec.n_vocab, 9), rng.integers(0, spec.n_vocab, 5)
    m = quickdraft.Model(path, n_ctx=128, threads=2)
    m.set_rollback(mode, 9)
    for keep in range(0, 10):
        m.reset()
        m.eval(prompt)
        m.eval(batch)
        m.truncate(len(prompt) + keep)
        want = fresh(path, np.concatenate([prompt, batch[:keep], rest]))[len(prompt) + keep:]
        assert np.array_equal(m.eval(rest), want), f"keep {keep}"


def test_snapshot_window_spans_several_evals(hybrid):
    """Snapshot mode keeps the last `window` positions whatever evals produced them."""
    path, spec = hybrid
    ids = np.random.default_rng(2).integers(0, spec.n_vocab, 30)
    m = quickdraft.Model(path, n_ctx=128, threads=2)
    m.set_rollback("snapshot", 6)
    for t in ids[:20]:
        m.eval([t])  # plain decoding, one position per eval
    assert m.truncate_floor == 14
    m.truncate(15)
    m.truncate(14)  # twice, going further back
    assert np.array_equal(m.eval(ids[14:30]), fresh(path, ids)[14:30])


def test_recompute_returns_only_inside_the_last_eval(hybrid):
    path, spec = hybrid
    ids = np.random.default_rng(3).integers(0, spec.n_vocab, 24)
    m = quickdraft.Model(path, n_ctx=128, threads=2)
    m.set_rollback("recompute", 8)
    m.eval(ids[:10])
    m.eval(ids[10:16])
    assert m.truncate_floor == 10
    m.truncate(14)
    m.truncate(12)  # a second rollback replays from the same saved state
    with pytest.raises(ValueError, match="earliest this recurrent"):
        m.truncate(9)
    assert m.n_past == 12
    assert np.array_equal(m.eval(ids[12:24]), fresh(path, ids)[12:24])


@pytest.mark.parametrize("mode", MODES)
def test_outside_the_window_is_refused_and_zero_always_works(hybrid, mode):
    path, spec = hybrid
    ids = np.random.default_rng(4).integers(0, spec.n_vocab, 40)
    m = quickdraft.Model(path, n_ctx=128, threads=2)
    m.set_rollback(mode, 4)
    m.eval(ids[:30])  # one eval longer than the window
    with pytest.raises(ValueError, match=r"truncate: n_past 10 is before position \d+"):
        m.truncate(10)
    assert m.n_past == 30  # state unchanged
    assert np.array_equal(m.eval(ids[30:40]), fresh(path, ids)[30:40])
    m.truncate(0)
    assert np.array_equal(m.eval(ids[:5]), fresh(path, ids[:5]))


def test_modes_compute_the_same_bits_and_report_their_memory(hybrid):
    path, spec = hybrid
    ids = np.random.default_rng(5).integers(0, spec.n_vocab, 20)
    out, size = {}, {}
    for mode in MODES:
        m = quickdraft.Model(path, n_ctx=128, threads=2)
        m.set_rollback(mode, 17)
        assert m.rollback == (mode, 17)
        out[mode] = np.concatenate([m.eval(ids[:7]), m.eval(ids[7:])])
        size[mode] = m.recurrent_state_bytes
    assert np.array_equal(out["snapshot"], out["recompute"])
    # 3 recurrent layers, 4 heads of 16 x 16 floats: 18 snapshot slots against 2 (+ the recorded inputs).
    state = 3 * 4 * 16 * 16 * 4
    assert size["snapshot"] >= 18 * state and size["recompute"] < 18 * state
    assert quickdraft.Model(write_tiny_model(path.parent / "qwen3.gguf", TinySpec(arch="qwen3")), n_ctx=64).rollback[1] == 0


def test_rollback_arguments(hybrid):
    path, _ = hybrid
    m = quickdraft.Model(path, n_ctx=64, threads=1)
    with pytest.raises(ValueError, match="snapshot' or 'recompute"):
        m.set_rollback("copy", 4)
    with pytest.raises(ValueError, match="window"):
        m.set_rollback("snapshot", 0)

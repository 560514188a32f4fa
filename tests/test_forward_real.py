"""Real models against llama.cpp's reference outputs (../shared/reference/<key>/).

Neither engine computes exact math: both round every matmul input to 8-bit blocks, and on these
models a single activation rounding the other way (float32 noise at a rounding boundary) moves a
top log-probability by up to ~0.1-0.3 nats downstream. Measured with float32 activations,
quickdraft matched the float64 numpy oracle to 1e-3 nats on SmolLM2; the differences to
llama.cpp below are of the size this rounding produces, so the tests check rates, and that
every disagreement is a near-tie, rather than every row (as the reference README advises).
"""

from __future__ import annotations

import numpy as np
import pytest

import quickdraft
from conftest import load_reference

REAL_MODELS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]

# Measured (8-bit activations): top-1 agreement 95.1 % (SmolLM2), 95.0 % (Gemma 3), 96.9 %
# (Qwen 0.5B), 97.5 % (Qwen 1.5B); every disagreement within 0.5 nats in llama.cpp's own top-5.
MIN_TOP1_AGREEMENT = 0.93
NEAR_TIE = 0.75  # nats between llama.cpp's top-1 and the token quickdraft ranks first
MAX_MEAN_ABS_DLOGP = 0.1  # measured 0.021-0.061


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


@pytest.fixture(scope="module")
def real_model(model_path):
    cache = {}

    def get(key: str) -> quickdraft.Model:
        if key not in cache:
            cache[key] = quickdraft.Model(model_path(key), n_ctx=512, threads=2)
        cache[key].reset()
        return cache[key]

    return get


@pytest.mark.real
@pytest.mark.parametrize("key", REAL_MODELS)
def test_teacher_forced_top1_agreement(real_model, key):
    ref = load_reference(key, "teacher")
    m = real_model(key)
    agree, total, dlogp, ties = 0, 0, [], []
    for case in ref["cases"]:
        m.reset()
        lp = log_softmax(m.eval(case["ids"]))
        for i, (top5, top5_lp) in enumerate(zip(case["top5_ids"], case["top5_logprobs"])):
            ours = int(lp[i].argmax())
            total += 1
            agree += ours == top5[0]
            dlogp.append(abs(lp[i, top5[0]] - top5_lp[0]))
            if ours != top5[0]:
                # How far below llama.cpp's top-1 llama.cpp put our choice (beyond its top 5: inf).
                ties.append(top5_lp[0] - top5_lp[top5.index(ours)] if ours in top5 else np.inf)
    rate, mean_d = agree / total, float(np.mean(dlogp))
    print(f"\n{key}: top-1 agreement {agree}/{total} = {rate:.1%}, mean |dlogp(top-1)| = {mean_d:.3f}, "
          f"disagreement margins {np.round(sorted(ties), 3).tolist()}")
    assert rate >= MIN_TOP1_AGREEMENT
    assert all(t <= NEAR_TIE for t in ties), f"a disagreement is not a near-tie: {sorted(ties)}"
    assert mean_d <= MAX_MEAN_ABS_DLOGP


@pytest.mark.real
@pytest.mark.parametrize("key", REAL_MODELS)
def test_greedy_continuations(real_model, key):
    """Greedy paths, checked by teacher forcing on llama.cpp's path: since a position's logits
    are the same in a batch as alone (test_forward_invariance), the argmax of each row is what
    quickdraft's own step-by-step greedy decoding picks, up to the first divergence."""
    ref = load_reference(key, "greedy")
    m = real_model(key)
    full, report = 0, []
    for case in ref["cases"]:
        prompt, greedy = case["prompt_ids"], case["greedy_ids"]
        m.reset()
        lp = log_softmax(m.eval(prompt + greedy)[len(prompt) - 1:len(prompt) - 1 + len(greedy)])
        ours = lp.argmax(axis=1)
        diverge = np.flatnonzero(ours != np.array(greedy))
        if len(diverge) == 0:
            full += 1
            report.append("full")
            continue
        i = int(diverge[0])
        gap = float(lp[i, ours[i]] - lp[i, greedy[i]])
        report.append(f"diverges at {i} (gap {gap:.3f})")
        assert gap <= NEAR_TIE, f"case {prompt[:5]}...: first divergence at {i} is not a near-tie ({gap:.3f} nats)"
    print(f"\n{key}: {full}/{len(ref['cases'])} greedy continuations match in full: {report}")
    assert full >= 1


def rss_anon_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise OSError("no RssAnon in /proc/self/status")


@pytest.mark.real
@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_weights_are_mapped_not_copied(model_path):
    """Loading and running the 1.1 GB Qwen 1.5B adds its KV cache and scratch to the process's
    private memory, not a copy of its weights (those stay file-backed pages of the mapping)."""
    path = model_path("qwen2.5-coder-1.5b")
    before = rss_anon_bytes()
    m = quickdraft.Model(path, n_ctx=256, threads=1)
    m.eval([785, 6722, 315])
    grown = rss_anon_bytes() - before
    kv_bytes = 2 * m.n_layer * 256 * m.hparams["n_head_kv"] * m.hparams["head_dim"] * 2
    assert grown < kv_bytes + 200e6, f"private memory grew by {grown / 1e6:.0f} MB for a {path.stat().st_size / 1e9:.1f} GB model"

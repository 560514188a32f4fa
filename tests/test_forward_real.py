"""Real models against llama.cpp's reference outputs (../shared/reference/<key>/).

quickdraft makes llama.cpp's low-precision steps (8-bit activation blocks with llama.cpp's
multiplier and FP16 block scales, F16 queries and softmax probabilities against the F16 KV
cache, ggml's F16 GELU table, float rope angles; not Q8_1's FP16 block sums), nor its summation
orders. These models amplify float32 noise chaotically: an activation that rounds to the other
8-bit step moves a top log-probability by up to ~0.1-0.3 nats downstream. Measured on the
teacher cases, quickdraft against *itself* with only the kernels' summation order changed
(QD_FORCE_ISA avx512 / avx2 / scalar) agrees on the top-1 token at 94.8-98.7 % of positions,
mean |d log p| 0.024-0.055 -- the same as against llama.cpp (95.0-98.1 %, 0.022-0.057).
llama.cpp itself is no closer: bench/teacher_floor.py replays the cases through its C API on this
machine; its prompt path (the whole case in one batch, flash attention off, as the reference was
made) reproduces the reference exactly, but its one-token decode path agrees at 96.2-97.5 % of
positions (mean |d log p| 0.019-0.054) and its flash-attention path at 95.6-98.7 %. 99 % would need
llama.cpp's exact prompt-path reduction orders at every batch size, so the tests check rates, and
that every disagreement is a near-tie, rather than every row (as the reference README advises).
"""

from __future__ import annotations

import numpy as np
import pytest

import quickdraft
from conftest import load_reference

REAL_MODELS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]

# Measured over the avx512 / avx2 / scalar kernels: top-1 agreement 94.8-97.0 % (SmolLM2),
# 95.6-98.1 % (Gemma 3), 96.2-98.1 % (Qwen 0.5B), 95.0-98.1 % (Qwen 1.5B); every disagreement
# in llama.cpp's own top-5, within 0.35-0.5 nats of its top-1 except one Gemma position under the
# scalar kernels (1.08 nats: there quickdraft's own log-prob of llama.cpp's top token spans -0.71
# (avx2) to -1.18 (scalar), summation order alone). The floor is the ISA-vs-ISA agreement.
MIN_TOP1_AGREEMENT = 0.93
NEAR_TIE = 1.25  # nats between llama.cpp's top-1 and the token quickdraft ranks first
MAX_MEAN_ABS_DLOGP = 0.1  # measured 0.022-0.058


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
    quickdraft's own step-by-step greedy decoding picks, up to the first divergence. How many of
    the 48-token paths match in full is reported, not asserted: with ~3 % of positions near-ties
    that summation order decides (see the module docstring) it is chance -- 0, 1 and 2 of 4 for
    Qwen 1.5B under the avx512, avx2 and scalar kernels. Asserted: each first divergence is a
    near-tie."""
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

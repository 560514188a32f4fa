"""Real models against llama.cpp's reference outputs (../shared/reference/<key>/).

The reference was made by llama.cpp's prompt path (each case in one batch, flash attention off) on
an x86 CPU with AVX-512. With the avx512 kernels quickdraft computes what that path computes, in
its order: the Q4_1/Q5_1/Q5_0/Q8_0 matmuls as ggml_vec_dot_q4_1_q8_1 and tinyBLAS do, Q4_K as the
repacked GEMM, Q6_K as the tiled K-quant matmul, Q8_1's FP16 block sums, rope with ggml's fused
multiply-add, the F16 attention matmuls' 16-lane sums and reduce tree, the softmax with
ggml_v_expf in 16-lane chunks and a double sum, ggml_v_silu, ggml's F16 GELU table. SmolLM2's
logits are then bit-identical to llama.cpp's; the other three differ only in the last (n mod 4)
positions of a case, where llama.cpp's repacked Q4_K switches to its one-row kernel (a position's
result may not depend on its place in the batch here: batch invariance). Measured with avx512:
100 % top-1 agreement on all four models, mean |d log p| 0.0000-0.0013.

Other ISAs (avx2, scalar, NEON) keep their own summation orders, and these models amplify float32
noise chaotically (an activation that rounds to the other 8-bit step moves a top log-probability
by up to ~0.1-0.3 nats downstream): there they agree at 94.8-98.7 %, every disagreement a
near-tie, which is also where llama.cpp's own one-token decode path lands against its prompt path
(96.2-97.5 %, bench/teacher_floor.py). The greedy reference was generated one token at a time,
that is by llama.cpp's decode path, whose orders differ from its prompt path: which continuations
match in full is reported, each first divergence asserted to be a near-tie.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import quickdraft
from conftest import load_reference

REAL_MODELS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]

# avx512 on the GGUF layout (QD_WEIGHT_LAYOUT=gguf: the reference's ISA, llama.cpp's orders; .ci/run
# reruns this file so): measured 100 % and mean |dlogp| <= 0.0013. Other kernels, avx512's repacked
# rows8 ones included: 94.8-97.0 % (SmolLM2), 95.6-98.1 % (Gemma 3), 96.2-98.1 % (Qwen 0.5B), 95.0-98.7 %
# (Qwen 1.5B); every disagreement in llama.cpp's own top-5, within 0.35-0.51 nats of its top-1.
EXACT = quickdraft._core.current_isa() == "avx512" and os.environ.get("QD_WEIGHT_LAYOUT") == "gguf"
MIN_TOP1_AGREEMENT = 0.99 if EXACT else 0.93
NEAR_TIE = 1.25  # nats between llama.cpp's top-1 and the token quickdraft ranks first
MAX_MEAN_ABS_DLOGP = 0.01 if EXACT else 0.1  # 0.0013 / 0.022-0.060


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
    the 48-token paths match in full is reported, not asserted: the reference followed llama.cpp's
    one-token decode path, whose summation orders differ from its prompt path's, so a near-tie may
    go either way (avx512: 3, 3, 3 and 1 of 4). Asserted: each first divergence is a near-tie."""
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


@pytest.mark.real
@pytest.mark.parametrize("isa", quickdraft._core.isa_available())
def test_load_memory(model_path, isa):
    """Loading and running the 1.1 GB Qwen 1.5B costs at most 1.1 x the file plus the KV cache of
    peak resident memory (VmHWM of a fresh interpreter, over its RSS before loading). Where the ISA's kernels read the weights as they are stored, the weights
    stay file-backed pages of the mapping: private memory grows by the KV cache and scratch only.
    Where they read them repacked, the copy replaces the mapped pages."""
    path = model_path("qwen2.5-coder-1.5b")
    code = (
        "import time, quickdraft\n"
        "def status(key):\n"
        "    return next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith(key + ':'))\n"
        "base_anon, base = status('RssAnon'), status('VmRSS')\n"
        "t = time.perf_counter()\n"
        f"m = quickdraft.Model({str(path)!r}, n_ctx=256, threads=1)\n"
        "load = time.perf_counter() - t\n"
        "m.eval([785, 6722, 315])\n"
        "kv = 2 * m.n_layer * 256 * m.hparams['n_head_kv'] * m.hparams['head_dim'] * 2\n"
        "print(status('RssAnon') - base_anon, status('VmHWM') - base, kv, load)\n")
    env = dict(__import__("os").environ, QD_FORCE_ISA=isa)
    out = __import__("subprocess").run([__import__("sys").executable, "-c", code], env=env, capture_output=True,
                                       text=True, check=True).stdout
    grown, peak, kv, load = (float(v) for v in out.split())
    size = path.stat().st_size
    print(f"\n{isa}: load {load:.2f} s, peak RSS {peak / 1e6:.0f} MB over the interpreter's, private +{grown / 1e6:.0f} MB, "
          f"file {size / 1e6:.0f} MB")
    assert peak <= 1.1 * size + kv, f"{isa}: peak RSS {peak / 1e6:.0f} MB for a {size / 1e6:.0f} MB file"
    if not quickdraft._core._testing.kernels.repacks(int(__import__("gguf").GGMLQuantizationType.Q4_K), isa):
        assert grown < kv + 200e6, f"{isa}: private memory grew by {grown / 1e6:.0f} MB: the weights were copied"

"""quickdraft's forward pass against llama.cpp's, on tiny random models of each architecture ×
weight type: the logits llama.cpp computed (tests/data/llamacpp_logits/, recorded by
tests/reference/record_llamacpp_logits.py) for models this test rebuilds from the same seeded spec.

Tolerances are on max |Δ logit| as a fraction of the standard deviation of llama.cpp's logits (8-9
on these models), per weight type, with the reasons (measured values in the table's comments, at
avx512 / avx2 / scalar kernels against llama.cpp's AVX2 build):
 * F32: both engines multiply float32 activations with the weights; only summation orders differ
   (~1e-6 relative), and a value within float32 error of a float16 rounding boundary (K/V in the
   cache, the roped queries, the softmax probabilities) may round the other way, which these sharp
   tiny models amplify to ~5e-4 of the std: tolerance 5e-3, as test_forward_tiny's float one.
 * F16: llama.cpp's CPU matmul converts the activations to float16 (F16's vec_dot type) where
   quickdraft keeps them float32: 2^-11 relative error per activation, up to 2.0e-2 of the std
   measured (smollm3). The numpy oracle, float32 activations too, differs from llama.cpp by the
   same 2.0e-2; rounding its activations to float16 shrinks that to 4.7e-3, which locates the
   cause: tolerance 5e-2.
 * Q8_0, Q4_0: both round activations to 8-bit blocks the same way, so rows agree to float32 noise
   (quickdraft's avx512 kernels, in llama.cpp's summation order, often to the bit), except where an
   activation lands within that noise of a rounding boundary and rounds the other way: one 8-bit
   step (max|x|/127 of its block) in one element, which these sharp tiny models amplify downstream.
   Measured up to 1.25e-1 of the std (phi3-short-q8_0 with avx2 / scalar kernels; its LongRoPE
   attn_factor 1.19 sharpens attention by 1.19^2), and the float64 numpy oracle with the same
   activation rounding differs from llama.cpp by the same 1.25e-1 there: tolerance 2e-1.
A wrong rope pairing, norm, mask or scale moves logits by O(1) std; top-1 must agree on >= 99 %.

Qwen3.5 (hybrid Gated DeltaNet): the same tolerances hold; the recurrence is float32 in both
engines (sequential per v head; llama.cpp's fused ggml_gated_delta_net), measured 1.7e-4..4.4e-4 (F32),
1.1e-2..1.2e-2 (F16), 0..4.9e-2 (Q8_0 / Q4_0) of the std, top-1 100 %. The MTP head is compared
the same way (test_mtp_head_matches_llamacpp): 0 on Q8_0 at avx512, up to 8.9e-2 (Q8_0, scalar), top-1
99.2-100 % (one near-tie flip in 128 rows).

Mixture of experts: routing is discrete, so a router near-tie (the k-th and (k+1)-th expert's
probabilities closer than the two engines' difference) would pick another expert on one side and
move that position by O(1). The routers are F32 in these files (as converted models keep them),
so router logits agree to float32 noise; the smallest margins here are 2e-6 to 6e-6 and no route
flips. On requantized Q4_K_M files (llama-quantize) flips do occur at margins of 1e-4..3e-4, where
the numpy oracle sides with llama.cpp at one position and with quickdraft at another: a failure
on a qwen3moe case reports the smallest router margin up to the worst position.
"""

from __future__ import annotations

import numpy as np
import pytest

import quickdraft
from fixtures.tiny_models import write_tiny_model
from quickdraft import _core
from reference.record_llamacpp_logits import CASES, N_CTX, OUT, load, load_mtp, spec_of, tensor_digest

TOLERANCE = {"F32": 5e-3, "F16": 5e-2, "Q8_0": 2e-1, "Q4_0": 2e-1}
MIN_TOP1 = 0.99


def test_every_case_is_recorded():
    missing = [c for c in CASES if not (OUT / f"{c}.npz").exists()]
    assert not missing, f"record them: python tests/reference/record_llamacpp_logits.py {' '.join(missing)}"


@pytest.mark.parametrize("case", list(CASES))
def test_logits_match_llamacpp(tmp_path, case):
    ids, want, meta = load(case)
    spec = spec_of(case)
    assert meta["spec"] == CASES[case], "the case's spec changed since it was recorded: re-record it"
    path = write_tiny_model(tmp_path / f"{case}.gguf", spec)
    assert tensor_digest(path) == meta["tensor_sha256"], "the seeded builder no longer rebuilds the recorded model"
    model = quickdraft.Model(path, n_ctx=N_CTX, threads=2)
    got = []
    for seq in ids:
        model.reset()
        got.append(model.eval(seq))
    got = np.stack(got)
    err = float(np.abs(got - want).max() / want.std())
    top1 = float(np.mean(got.argmax(-1) == want.argmax(-1)))
    print(f"\n{case}: top-1 {top1:.1%}, max |d logit| {np.abs(got - want).max():.4f} = {err:.1e} x std")
    assert top1 >= MIN_TOP1, f"top-1 agreement {top1:.1%} with llama.cpp"
    tol = TOLERANCE[spec.wtype]
    assert err <= tol, f"max |ours - llama.cpp| = {err:.2e} x std(llama.cpp), tolerance {tol:.0e}" + \
        router_note(model, ids, np.abs(got - want).max(-1))


MTP_CASES = [c for c in CASES if CASES[c].get("n_mtp")]


@pytest.mark.parametrize("case", MTP_CASES)
def test_mtp_head_matches_llamacpp(tmp_path, case):
    """qwen35's MTP head against llama.cpp's (an LLAMA_CONTEXT_TYPE_MTP context): row p is token p
    with the trunk's hidden state of p - 1 (zeros at p = 0), every row's logits compared, and the
    trunk's hidden states (h_nextn) themselves; same tolerances as the trunk's logits."""
    ids, _, meta = load(case)
    want_h, want = load_mtp(case)
    spec = spec_of(case)
    path = write_tiny_model(tmp_path / f"{case}.gguf", spec)
    assert tensor_digest(path) == meta["tensor_sha256"]
    model = quickdraft.Model(path, n_ctx=N_CTX, threads=2)
    got, got_h = [], []
    for seq in ids:
        model.reset()
        _, h = model._ctx.eval_hidden(seq)
        h_prev = np.concatenate([np.zeros((1, h.shape[1]), np.float32), h[:-1]])
        got.append(_core.MtpHead(model._weights, N_CTX, 2).eval(seq, h_prev)[0])
        got_h.append(h)
    got, got_h = np.stack(got), np.stack(got_h)
    err = float(np.abs(got - want).max() / want.std())
    top1 = float(np.mean(got.argmax(-1) == want.argmax(-1)))
    h_err = float(np.abs(got_h - want_h).max() / want_h.std())
    print(f"\n{case} MTP: top-1 {top1:.1%}, max |d logit| = {err:.1e} x std; hidden {h_err:.1e} x std")
    assert top1 >= MIN_TOP1 and err <= TOLERANCE[spec.wtype] and h_err <= TOLERANCE[spec.wtype]


def router_note(model, ids, row_err) -> str:
    """For a mixture of experts: the smallest top-k margin of the router up to the worst row."""
    if model.hparams.get("n_expert", 0) == 0:
        return ""
    s, pos = np.unravel_index(int(row_err.argmax()), row_err.shape)
    model.reset()
    _, items = model._ctx.trace_eval(ids[s])
    k = model.hparams["n_expert_used"]
    margins = [float(np.min(-np.diff(-np.sort(-a[:pos + 1], axis=1)[:, k - 1:k + 1], axis=1)))
               for name, _, a in items if name == "ffn_moe_probs"]
    return f"; smallest router margin up to sequence {s} position {pos}: {min(margins):.1e} (a near-tie route flip?)"

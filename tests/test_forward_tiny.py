"""quickdraft's forward pass against the numpy reference transformer, on tiny random GGUF models
of every architecture × weight type × GQA ratio × rope setting, built at test time (qwen35
against its own reference, reference/numpy_qwen35.py, with the sequential delta rule)."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType

import quickdraft
from quickdraft import _core
from fixtures.tiny_models import ARCHS, TinySpec, write_tiny_model
from reference.numpy_transformer import NumpyTransformer, oracle

WEIGHT_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")

# Logit tolerance, as a fraction of the standard deviation of the reference logits (8-10 here).
# Float weights (F32, F16, BF16) are multiplied with float32 activations; the oracle is exact
# float64 math except for the float16 roundings both engines make (llama.cpp's): K and V as the
# cache stores them, the roped queries and the softmax probabilities as the attention matmuls
# take them, GELU through ggml's float16 table:
#  * float32 accumulation instead of float64: ~1e-6 relative (observed 1e-6..2e-5 of the std);
#  * a value within float32 error of a float16 rounding boundary may round the other way: one
#    half-ulp (2^-11) in that element, which these sharp tiny models amplify to 1e-4..5e-4 of the
#    std, up to 1.9e-3 over the 300 positions of test_longer_than_one_micro_batch (4.7e-4 there
#    before queries and probabilities were rounded too): hence 5e-3.
# Block-quantized weights are multiplied with activations rounded to 8-bit blocks the way
# llama.cpp does it (scale stored as float16 for 32-blocks), and the oracle applies the same
# rounding (act_quant=True). Rows then agree to ~1e-6, except where an activation lands within
# float32 error of a rounding boundary and rounds the other way: one step (max|x|/127 of its
# block) in one element, which these deliberately sharp tiny models amplify to at most ~6e-2 of
# the std in that row and the rows attending to it. Without the activation rounding in the
# oracle the difference is 0.1-0.2 of the std; a wrong rope pair, mask, norm or scale moves
# logits by O(1).
TOLERANCE_FLOAT = 5e-3
TOLERANCE_QUANTIZED = 1e-1
FLOAT_TYPES = ("F32", "F16", "BF16")


def is_quantized(spec: TinySpec) -> bool:
    return any(t not in FLOAT_TYPES for t in (spec.wtype, spec.embd_type or spec.wtype))


def tolerance(spec: TinySpec) -> float:
    return TOLERANCE_QUANTIZED if is_quantized(spec) else TOLERANCE_FLOAT


def require_types(spec: TinySpec) -> None:
    for name in {spec.wtype, spec.embd_type or spec.wtype}:
        info = _core.type_info(int(GGMLQuantizationType[name]))
        if not info[3]:
            pytest.skip(f"this build cannot dequantize {name} yet")


def ids_for(spec: TinySpec, n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, spec.n_vocab, n)


def check_against_oracle(tmp_path, spec: TinySpec, n_tokens: int = 20, chunks=None, n_ctx: int = 256):
    require_types(spec)
    path = write_tiny_model(tmp_path / "tiny.gguf", spec)
    ids = ids_for(spec, n_tokens)
    ref = oracle(path, act_quant=is_quantized(spec)).logits(ids)
    model = quickdraft.Model(path, n_ctx=n_ctx, threads=2)
    if chunks is None:
        ours = model.eval(ids)
    else:  # several eval calls continuing from the KV cache
        bounds = np.cumsum([0, *chunks])
        ours = np.concatenate([model.eval(ids[a:b]) for a, b in zip(bounds[:-1], bounds[1:])])
    assert ours.dtype == np.float32 and ours.shape == (n_tokens, spec.n_vocab)
    err = float(np.abs(ours - ref).max() / ref.std())
    assert err <= tolerance(spec), f"max |ours - ref| = {err:.2e} x std(ref), tolerance {tolerance(spec):.0e}"


def arch_defaults(arch: str) -> dict:
    # Gemma 3 models get a short window with every second layer global, so 20 tokens exercise it;
    # Phi-3 models LongRoPE (the long factors: the context of 256 exceeds the original 128).
    if arch == "gemma3":
        return {"sliding_window": 6, "swa_pattern": 2}
    if arch == "phi3":
        return {"longrope": True, "rope_orig_ctx": 128, "rope_attn_factor": 1.19}
    if arch == "qwen35":  # layers 0-2 Gated DeltaNet, 3 gated attention; 4 v heads over 2 k heads
        return {"n_layer": 4}
    return {}


@pytest.mark.parametrize("wtype", WEIGHT_TYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_weight_types(tmp_path, arch, wtype):
    check_against_oracle(tmp_path, TinySpec(arch=arch, wtype=wtype, **arch_defaults(arch)))


@pytest.mark.parametrize("n_head_kv", [4, 2, 1], ids=["gqa1", "gqa2", "gqa4"])
@pytest.mark.parametrize("arch", ARCHS)
def test_gqa_ratios(tmp_path, arch, n_head_kv):
    check_against_oracle(tmp_path, TinySpec(arch=arch, n_head=4, n_head_kv=n_head_kv, **arch_defaults(arch)))


ROPE_SETTINGS = {
    "base500": dict(rope_base=500.0),
    "base1e6_linear4": dict(rope_base=1e6, rope_linear_factor=4.0),
    "partial_rot": dict(n_rot=8),  # head_dim 16: half of each head is not rotated
    # YaRN (Qwen2.5 / Qwen3 long context): pairs 0..3 ramp between the original and the scaled angle
    "yarn4": dict(rope_scaling="yarn", rope_factor=4.0, rope_orig_ctx=64),
    "linear2_attn_factor": dict(rope_scaling="linear", rope_factor=2.0, rope_attn_factor=0.8),
    "factor_without_type": dict(rope_factor=2.0),  # llama.cpp reads a missing type as linear
    "none_ignores_factor": dict(rope_scaling="none", rope_factor=8.0),
}


@pytest.mark.parametrize("rope", ROPE_SETTINGS)
@pytest.mark.parametrize("arch", ARCHS)
def test_rope_settings(tmp_path, arch, rope):
    # Normal vs NEOX pairing is fixed by the architecture (llama normal, qwen2/gemma3 NEOX).
    check_against_oracle(tmp_path, TinySpec(arch=arch, **{**arch_defaults(arch), **ROPE_SETTINGS[rope]}))


def test_llama_untied_output_and_separate_embedding_type(tmp_path):
    check_against_oracle(tmp_path, TinySpec(arch="llama", tied=False, embd_type="F16", n_head=8, n_head_kv=2))


def test_qwen2_head_dim_not_n_embd_over_n_head(tmp_path):
    check_against_oracle(tmp_path, TinySpec(arch="qwen2", n_head=4, n_head_kv=2, head_dim=32))


@pytest.mark.parametrize("window", [1, 4, 7])
def test_gemma3_sliding_window(tmp_path, window):
    check_against_oracle(tmp_path, TinySpec(arch="gemma3", n_layer=3, sliding_window=window, swa_pattern=3),
                         n_tokens=24)


def test_gemma3_default_pattern_every_sixth_layer_global(tmp_path):
    # No sliding_window_pattern key: layers 0-4 local, layer 5 global, layer 6 local.
    check_against_oracle(tmp_path, TinySpec(arch="gemma3", n_layer=7, sliding_window=3), n_tokens=12)


def test_gemma3_pattern_as_bool_array(tmp_path):
    check_against_oracle(tmp_path, TinySpec(arch="gemma3", n_layer=3, sliding_window=4,
                                            swa_pattern=[False, True, True]), n_tokens=16)


def test_gemma3_softcap_and_head_dim(tmp_path):
    check_against_oracle(tmp_path, TinySpec(arch="gemma3", head_dim=32, logit_softcap=5.0, sliding_window=8,
                                            swa_pattern=2))


@pytest.mark.parametrize("arch", ARCHS)
def test_incremental_eval_continues_from_kv_cache(tmp_path, arch):
    check_against_oracle(tmp_path, TinySpec(arch=arch, **arch_defaults(arch)), n_tokens=20, chunks=[7, 1, 1, 5, 6])


@pytest.mark.parametrize("n_ctx", [256, 257], ids=["short_factors", "long_factors"])
def test_phi3_longrope_factors_chosen_by_context_size(tmp_path, n_ctx):
    # Original context 256: a context of 257 (padded to 512 as llama.cpp pads it) takes the long ones.
    spec = TinySpec(arch="phi3", longrope=True, rope_orig_ctx=256, n_rot=12, head_dim=None, n_embd=64)
    require_types(spec)
    path = write_tiny_model(tmp_path / "phi3.gguf", spec)
    ids = ids_for(spec, 20)
    ref = NumpyTransformer(path, n_ctx=n_ctx).logits(ids)
    other = NumpyTransformer(path, n_ctx=256 if n_ctx == 257 else 257).logits(ids)
    ours = quickdraft.Model(path, n_ctx=n_ctx, threads=2).eval(ids)
    assert np.abs(ours - ref).max() / ref.std() <= TOLERANCE_FLOAT
    assert np.abs(ours - other).max() / ref.std() > 10 * TOLERANCE_FLOAT  # the factors matter here


def test_longer_than_one_micro_batch(tmp_path):
    # 300 positions span three internal micro-batches of 128.
    check_against_oracle(tmp_path, TinySpec(arch="qwen2", n_ctx_train=512), n_tokens=300, chunks=[130, 1, 169],
                         n_ctx=300)


def test_qwen35_longer_than_one_micro_batch(tmp_path):
    # The recurrent state and the conv1d's earlier rows carried across micro-batches of 128 and evals.
    check_against_oracle(tmp_path, TinySpec(arch="qwen35", n_layer=4, n_ctx_train=512), n_tokens=300,
                         chunks=[130, 1, 169], n_ctx=300)

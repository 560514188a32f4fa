"""Scalar dequantization of every supported type, bit for bit against gguf.quants."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

import quickdraft
from quickdraft import GGUFFile, _core

MODEL_KEYS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]

# Byte offsets of the fp16 scale fields inside one block: random bytes there could be NaN/Inf,
# whose propagation is not what this test is about, so they get finite random halves instead.
FP16_FIELDS = {
    QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q5_0: [0], QT.Q5_1: [0, 2], QT.Q8_0: [0],
    QT.Q2_K: [80, 82], QT.Q3_K: [108], QT.Q4_K: [0, 2], QT.Q5_K: [0, 2], QT.Q6_K: [208],
    QT.IQ4_NL: [0], QT.IQ4_XS: [0],
}
FP32_FIELDS = {QT.Q8_K: [0]}
QUANT_TYPES = [*FP16_FIELDS, *FP32_FIELDS]
FLOAT_TYPES = [QT.F32, QT.F16, QT.BF16]


def as_bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def assert_bit_equal(ours: np.ndarray, ref: np.ndarray) -> None:
    """Equal bit patterns (so -0.0 != 0.0 and every rounding counts)."""
    assert ours.dtype == np.float32
    assert ours.shape == ref.shape
    mism = np.flatnonzero(as_bits(ours).ravel() != as_bits(ref).ravel())
    assert mism.size == 0, f"{mism.size} elements differ, first at {mism[0]}: {ours.ravel()[mism[0]]!r} vs {ref.ravel()[mism[0]]!r}"


def reference(raw: np.ndarray, qtype: QT) -> np.ndarray:
    """gguf.quants.dequantize; for Q8_K (which gguf-py lacks) ggml's formula y = d * qs in numpy."""
    try:
        return gguf_dequantize(raw, qtype)
    except NotImplementedError:
        assert qtype == QT.Q8_K
        d = raw[:, :4].copy().view(np.float32)
        qs = raw[:, 4:4 + 256].view(np.int8).astype(np.float32)
        return d * qs


def random_blocks(qtype: QT, n_blocks: int, rng: np.random.Generator) -> np.ndarray:
    """(n_blocks, type_size) uint8: random payload bytes, finite random scales."""
    type_size = gguf.GGML_QUANT_SIZES[qtype][1]
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in FP16_FIELDS.get(qtype, []):
        bits = rng.integers(0, 0x10000, size=n_blocks, dtype=np.uint16)
        bits[(bits & 0x7C00) == 0x7C00] &= 0xBFFF  # exponent all ones -> a finite half
        raw[:, off:off + 2] = bits.view(np.uint8).reshape(n_blocks, 2)
    for off in FP32_FIELDS.get(qtype, []):
        vals = (rng.standard_normal(n_blocks) * 10.0 ** rng.integers(-6, 3, n_blocks)).astype(np.float32)
        raw[:, off:off + 4] = vals.view(np.uint8).reshape(n_blocks, 4)
    return raw


def ours(raw: np.ndarray, qtype: QT) -> np.ndarray:
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    n = raw.size // type_size * block_size
    return _core.dequantize(np.ascontiguousarray(raw).reshape(-1), int(qtype), n).reshape(-1, block_size)


@pytest.mark.parametrize("qtype", QUANT_TYPES, ids=lambda t: t.name)
def test_random_blocks_bit_exact(qtype):
    rng = np.random.default_rng(int(qtype))
    raw = random_blocks(qtype, 2048, rng)
    assert_bit_equal(ours(raw, qtype), reference(raw, qtype).reshape(raw.shape[0], -1))


@pytest.mark.parametrize("qtype", QUANT_TYPES, ids=lambda t: t.name)
def test_unaligned_source(qtype):
    """Blocks read from an odd address give the same floats (mmap'd tensors need not be aligned)."""
    raw = random_blocks(qtype, 16, np.random.default_rng(7))
    buf = np.zeros(raw.size + 1, np.uint8)
    buf[1:] = raw.reshape(-1)
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    got = _core.dequantize(buf[1:], int(qtype), 16 * block_size)
    assert_bit_equal(got, reference(raw, qtype).reshape(-1))


# ggml's block_q8_1 (ggml-common.h) is two fp16 scales and 32 int8: 36 bytes. gguf-py's
# GGML_QUANT_SIZES lists (32, 4 + 4 + 32), two float32 scales; Q8_1 only holds activations, so
# no file carries it and the two never met. ggml is the format's definition.
GGML_SIZES = {**gguf.GGML_QUANT_SIZES, QT.Q8_1: (32, 2 + 2 + 32)}


def test_type_table_matches_gguf():
    """Our block sizes are ggml's (gguf's, Q8_1 aside), and exactly the promised types can be dequantized."""
    supported = set(QUANT_TYPES) | set(FLOAT_TYPES)
    table = _core._testing.quant_types()
    for qtype in QT:
        info = _core.type_info(int(qtype))
        assert info is not None, qtype.name
        name, block_size, type_size, can_dequantize = info
        assert name == qtype.name
        assert table[int(qtype)] == (name, block_size, type_size)
        assert (block_size, type_size) == GGML_SIZES[qtype], qtype.name
        if qtype in supported:
            assert can_dequantize, qtype.name


def test_q8_1_block_is_36_bytes():
    """block_q8_1 = fp16 d, fp16 s, int8 qs[32] (quant/blocks.h, ggml-common.h)."""
    assert _core._testing.quant_types()[int(QT.Q8_1)] == ("Q8_1", 32, 36)


def test_f16_every_pattern():
    bits = np.arange(0x10000, dtype=np.uint32).astype(np.uint16)
    got = _core.dequantize(bits, int(QT.F16), bits.size)
    ref = gguf_dequantize(bits.view(np.uint8), QT.F16)
    nan = np.isnan(ref)
    assert_bit_equal(got[~nan], ref[~nan])  # numpy may quiet signalling NaNs; we only promise NaN
    assert np.isnan(got[nan]).all()


def test_bf16_every_pattern():
    bits = np.arange(0x10000, dtype=np.uint32).astype(np.uint16)
    got = _core.dequantize(bits, int(QT.BF16), bits.size)
    assert_bit_equal(got, gguf_dequantize(bits.view(np.uint8), QT.BF16).reshape(-1))


def test_f32_copies_bits():
    bits = np.random.default_rng(3).integers(0, 2**32, size=4096, dtype=np.uint32)
    assert_bit_equal(_core.dequantize(bits, int(QT.F32), bits.size), bits.view(np.float32))


QUANTIZABLE = [QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q8_0, QT.F16, QT.BF16]


@pytest.mark.parametrize("qtype", QUANTIZABLE, ids=lambda t: t.name)
def test_quantized_by_gguf(qtype):
    """Data quantized by gguf.quants.quantize, as real converters produce it."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((64, 256)) * rng.uniform(1e-3, 10, (64, 1))).astype(np.float32)
    x[3] = 0.0  # an all-zero block: d = 0
    q = gguf_quantize(x, qtype)
    got = _core.dequantize(np.ascontiguousarray(q).view(np.uint8).reshape(-1), int(qtype), x.size)
    assert_bit_equal(got.reshape(x.shape), gguf_dequantize(q, qtype))


def write_raw_tensors(path, tensors):
    """A GGUF file of raw quantized tensors: (name, qtype, raw bytes (rows, row_bytes))."""
    w = gguf.GGUFWriter(str(path), "llama")
    for name, qtype, raw in tensors:
        w.add_tensor(name, raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_gguf_file_tensor_every_type(tmp_path):
    """GGUFFile.tensor() returns the right shape and bits for a 2-D tensor of each type."""
    rng = np.random.default_rng(5)
    tensors = []
    for qtype in QUANT_TYPES:
        if qtype == QT.Q8_K:
            continue  # an activation type: gguf's writer/reader do not take it as a tensor
        block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
        rows, cols = 3, 2 * 256
        raw = random_blocks(qtype, rows * cols // block_size, rng).reshape(rows, -1)
        tensors.append((f"t.{qtype.name}", qtype, raw))
    path = write_raw_tensors(tmp_path / "types.gguf", tensors)
    with GGUFFile(path) as f:
        for name, qtype, raw in tensors:
            got = f.tensor(name)
            assert_bit_equal(got, gguf_dequantize(raw, qtype))


def test_unsupported_type_names_tensor_and_type(tmp_path):
    """IQ2_XXS is a valid GGUF type we cannot compute with: opening works, loading it fails clearly."""
    raw = np.zeros((2, 66 * 2), np.uint8)  # 2 rows of 512 elements
    path = write_raw_tensors(tmp_path / "iq2.gguf", [("blk.0.ffn_up.weight", QT.IQ2_XXS, raw)])
    with GGUFFile(path) as f:
        assert f.tensors[0].type == "IQ2_XXS"
        with pytest.raises(quickdraft.UnsupportedError, match=r"blk\.0\.ffn_up\.weight.*IQ2_XXS"):
            f.tensor("blk.0.ffn_up.weight")
    with pytest.raises(quickdraft.UnsupportedError, match="IQ2_XXS"):
        _core.dequantize(raw.reshape(-1), int(QT.IQ2_XXS), 512)


def pick_tensors(reader: gguf.GGUFReader):
    """Per type present: the smallest tensor (whole) and the largest (first rows only)."""
    by_type: dict[QT, list] = {}
    for t in reader.tensors:
        by_type.setdefault(t.tensor_type, []).append(t)
    for qtype, ts in sorted(by_type.items()):
        ts = sorted(ts, key=lambda t: int(t.n_elements))
        yield qtype, ts[0], ts[-1]


@pytest.mark.parametrize("key", MODEL_KEYS)
def test_real_tensors_bit_exact(key, model_path):
    path = model_path(key)
    reader = gguf.GGUFReader(path)
    seen = []
    with GGUFFile(path) as f:
        for qtype, small, large in pick_tensors(reader):
            seen.append(qtype.name)
            assert_bit_equal(f.tensor(small.name), gguf_dequantize(small.data, qtype))
            data = np.asarray(large.data)  # (..., bytes per row), or (..., cols) for F32
            rows = data.reshape(-1, data.shape[-1])[:64]
            n = int(large.shape[0]) * rows.shape[0]  # large.shape[0] is ne0, the row length
            got = _core.dequantize(np.ascontiguousarray(rows).view(np.uint8).reshape(-1), int(qtype), n)
            assert_bit_equal(got.reshape(rows.shape[0], -1), gguf_dequantize(rows, qtype))
    assert seen, f"{key}: no tensors"

"""GGUF reader: metadata and tensors against the gguf package as oracle."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

import quickdraft
from quickdraft import GGUFFile


def write_gguf(path, kv=(), tensors=(), arch="llama"):
    w = gguf.GGUFWriter(str(path), arch)
    for key, value, vtype in kv:
        w.add_key_value(key, value, vtype)
    for name, arr in tensors:
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_metadata_round_trip(tmp_path):
    VT = gguf.GGUFValueType
    kv = [
        ("t.u8", 200, VT.UINT8), ("t.i8", -5, VT.INT8), ("t.u16", 60000, VT.UINT16), ("t.i16", -30000, VT.INT16),
        ("t.u32", 4_000_000_000, VT.UINT32), ("t.i32", -2_000_000_000, VT.INT32), ("t.f32", 1.5, VT.FLOAT32),
        ("t.bool", True, VT.BOOL), ("t.str", "héllo ✓", VT.STRING), ("t.u64", 2**63 + 5, VT.UINT64),
        ("t.i64", -(2**62), VT.INT64), ("t.f64", 0.1, VT.FLOAT64),
        ("t.arr_i32", [1, -2, 3], VT.ARRAY), ("t.arr_str", ["a", "", "ü"], VT.ARRAY),
        ("t.nested", [[1, 2], [3]], VT.ARRAY),
    ]
    path = write_gguf(tmp_path / "m.gguf", kv=kv, tensors=[("w", np.arange(64, dtype=np.float32).reshape(2, 32))])
    with GGUFFile(path) as f:
        md = f.metadata
        assert f.version == 3
        assert md["general.architecture"] == "llama"
        for key, value, _ in kv:
            if isinstance(value, float):
                assert md[key] == pytest.approx(value)
            else:
                assert md[key] == value, key
        (t,) = f.tensors
        assert (t.name, t.shape, t.ne, t.type) == ("w", (2, 32), (32, 2), "F32")
        np.testing.assert_array_equal(f.tensor("w"), np.arange(64, dtype=np.float32).reshape(2, 32))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_tensor_table_matches_gguf_reader(tmp_path, dtype):
    rng = np.random.default_rng(0)
    arrs = {f"t{i}": rng.standard_normal((i + 1, 64)).astype(dtype) for i in range(5)}
    path = write_gguf(tmp_path / "m.gguf", tensors=arrs.items())
    ref = gguf.GGUFReader(str(path))
    with GGUFFile(path) as f:
        assert [t.name for t in f.tensors] == [t.name for t in ref.tensors]
        for ours, theirs in zip(f.tensors, ref.tensors):
            assert ours.ne == tuple(int(x) for x in theirs.shape)
            assert ours.nbytes == int(theirs.n_bytes)
            assert f.alignment + ours.offset >= 0
            np.testing.assert_array_equal(f.tensor(ours.name), np.asarray(theirs.data, dtype=np.float32).reshape(ours.shape))


def test_missing_file_raises():
    with pytest.raises(quickdraft.GGUFError, match="cannot open"):
        GGUFFile("/nonexistent/model.gguf")


def test_closed_file_raises(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", tensors=[("w", np.zeros((1, 32), np.float32))])
    f = GGUFFile(path)
    f.close()
    with pytest.raises(ValueError, match="closed"):
        f.tensor("w")


@pytest.mark.parametrize("key", ["smollm2-135m"])
def test_real_model_metadata(model_path, key):
    path = model_path(key)
    ref = gguf.GGUFReader(str(path))
    with GGUFFile(path) as f:
        md = f.metadata
        assert md["general.architecture"] == "llama"
        assert len(md["tokenizer.ggml.tokens"]) == 49152
        assert len(f.tensors) == len(ref.tensors)
        for ours, theirs in zip(f.tensors, ref.tensors):
            assert ours.name == theirs.name
            assert ours.ne == tuple(int(x) for x in theirs.shape)
            assert f.data_offset if hasattr(f, "data_offset") else True
    text = quickdraft.inspect(path)
    assert "architecture:    llama" in text and "Q4_1" in text

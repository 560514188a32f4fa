"""Hostile GGUF input: every corrupt file raises GGUFError naming the file, the fault and the
byte offset; valid raw files (v2 and v3) read the same as with the gguf package."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import textwrap

import gguf
import numpy as np
import pytest

import quickdraft
from quickdraft import GGUFError, GGUFFile, _core
from fixtures.hostile import CASES, GGML_TYPES, MAX_ARRAY_DEPTH, STR, U8, ARR, Tensor, build, seed_files, small_file, _nested

AT_BYTE = re.compile(r"\(at byte (\d+)\)")


def write(tmp_path, name, data):
    path = tmp_path / f"{name}.gguf"
    path.write_bytes(data)
    return path


def open_error(path) -> str:
    with pytest.raises(GGUFError) as e:
        GGUFFile(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: "), msg
    return msg


def test_gguf_error_is_value_error():
    assert issubclass(GGUFError, ValueError) and quickdraft.GGUFError is _core.GGUFError


def test_type_rows_match_gguf_package():
    for name, (type_id, block, size) in GGML_TYPES.items():
        t = gguf.GGMLQuantizationType[name]
        assert (int(t), *gguf.constants.GGML_QUANT_SIZES[t]) == (type_id, block, size), name


def flatten(v):
    """The gguf package's view of a nested array: flat, strings as their UTF-8 bytes."""
    if isinstance(v, str):
        return list(v.encode())
    return [x for item in v for x in flatten(item)] if isinstance(v, list) else [v]


def assert_same_as_gguf_reader(path):
    """Oracle: the gguf package reads the same metadata and tensors."""
    ref = gguf.GGUFReader(str(path))
    with GGUFFile(path) as f:
        md = f.metadata
        ref_keys = [k for k in ref.fields if not k.startswith("GGUF.")]
        assert list(md) == ref_keys
        for key in ref_keys:
            field = ref.fields[key]
            ours = md[key]
            if field.types[:2] == [gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.ARRAY]:
                ours = flatten(ours)  # the gguf package flattens nested arrays
            assert ours == pytest.approx(field.contents()), key
        assert len(f.tensors) == len(ref.tensors)
        for ours, theirs in zip(f.tensors, ref.tensors):
            assert (ours.name, ours.ne, ours.type) == (theirs.name, tuple(int(x) for x in theirs.shape), theirs.tensor_type.name)
            assert f._f.data_offset + ours.offset == theirs.data_offset
            assert ours.nbytes == theirs.n_bytes
            if _core.type_info(ours.type_id)[3]:
                expect = gguf.quants.dequantize(theirs.data, theirs.tensor_type).reshape(ours.shape)
                np.testing.assert_array_equal(f.tensor(ours.name), expect)


@pytest.mark.parametrize("index", range(len(seed_files())))
def test_raw_seed_files_read_like_gguf_package(tmp_path, index):
    b = seed_files()[index]
    path = write(tmp_path, "seed", b.bytes())
    assert_same_as_gguf_reader(path)
    with GGUFFile(path) as f:
        assert f.version == int.from_bytes(b.bytes()[4:8], "little")
        assert f._f.data_offset == b.at["data"]


def test_v2_file_from_gguf_writer_opens(tmp_path):
    """v2 has v3's 64-bit layout: a GGUFWriter file relabelled as v2 reads the same."""
    path = tmp_path / "v2.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("t.n", 5)
    w.add_array("t.words", ["a", "bb"])
    w.add_tensor("w", np.arange(64, dtype=np.float32).reshape(2, 32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    data = bytearray(path.read_bytes())
    assert data[4:8] == (3).to_bytes(4, "little")
    data[4:8] = (2).to_bytes(4, "little")
    path.write_bytes(data)
    with GGUFFile(path) as f:
        assert f.version == 2
    assert_same_as_gguf_reader(path)


def test_at_least_25_kinds_of_hostile_files():
    assert len(CASES) >= 25


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_file_raises_with_location(tmp_path, name):
    case = CASES[name]()
    path = write(tmp_path, name, case.data)
    msg = open_error(path)
    assert re.search(case.match, msg), msg
    assert f"(at byte {case.offset})" in msg, msg


@pytest.mark.parametrize("index", range(len(seed_files())))
def test_every_truncation_raises(tmp_path, index):
    """Every prefix of a valid file through the header and padding (and every 7th in the data
    section) raises, pointing inside the prefix."""
    seed = seed_files()[index]
    data = seed.bytes()
    path = tmp_path / "cut.gguf"
    for n in [*range(seed.at["data"] + 1), *range(seed.at["data"] + 1, len(data), 7), len(data) - 1]:
        path.write_bytes(data[:n])
        msg = open_error(path)
        m = AT_BYTE.search(msg)
        assert m and int(m.group(1)) <= n, (n, msg)


def test_nesting_at_the_depth_limit_opens(tmp_path):
    b = build([("deep", ARR, _nested(MAX_ARRAY_DEPTH))], [Tensor("w", (32,), "F32")])
    with GGUFFile(write(tmp_path, "deep", b.bytes())) as f:
        v = f.metadata["deep"]
        for _ in range(MAX_ARRAY_DEPTH - 1):
            (v,) = v
        assert v == [1]


def test_tensor_free_file_without_padding_opens(tmp_path):
    b = build([("general.architecture", STR, "llama")], [])
    with GGUFFile(write(tmp_path, "meta", b.bytes())) as f:
        assert f.tensors == [] and f.metadata == {"general.architecture": "llama"}


def test_directory_is_rejected(tmp_path):
    msg = open_error(tmp_path)
    assert "not a regular file" in msg


def run_child(code: str, *args, timeout=60, memory_limit=None):
    """Run code in a fresh interpreter (optionally under ulimit -v); returns its parsed JSON stdout."""
    def limit():
        if memory_limit:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    pkg_root = os.path.dirname(os.path.dirname(quickdraft.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pkg_root, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, preexec_fn=limit, env=env)
    assert p.returncode == 0, f"child exited with {p.returncode}: {p.stderr[-2000:]}"
    return json.loads(p.stdout)


def test_fifo_is_rejected_without_hanging(tmp_path):
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    out = run_child("""
        import json, sys
        from quickdraft import GGUFFile, GGUFError
        try:
            GGUFFile(sys.argv[1]); print(json.dumps("opened"))
        except GGUFError as e:
            print(json.dumps(str(e)))
        """, fifo, timeout=30)
    assert out.startswith(f"{fifo}: ") and "not a regular file" in out


def test_huge_counts_rejected_before_allocating(tmp_path):
    """Under a 2 GB address-space limit, absurd counts are refused without allocating, while a
    legitimately large string array (2^20 empty strings) still opens."""
    paths = [write(tmp_path, n, CASES[n]().data) for n in
             ("string_array_count_huge", "nested_array_count_huge", "n_kv_absurd", "n_tensors_absurd",
              "array_size_overflow", "tensor_dims_product_overflow", "tensor_size_overflow")]
    big = build([("many", ARR, (STR, [""] * 2**20)), ("deep", ARR, (ARR, [(U8, [])] * 2**16))], [Tensor("w", (32,), "F32")])
    paths.append(write(tmp_path, "big", big.bytes()))
    out = run_child("""
        import json, sys
        from quickdraft import GGUFFile, GGUFError
        result = {}
        for p in sys.argv[1:]:
            try:
                with GGUFFile(p) as f:
                    result[p] = ["opened", len(f.metadata["many"]), len(f.metadata["deep"])]
            except GGUFError as e:
                result[p] = ["GGUFError", str(e)]
            except MemoryError as e:
                result[p] = ["MemoryError", str(e)]
        print(json.dumps(result))
        """, *paths, memory_limit=2 << 30)
    for p in paths[:-1]:
        assert out[str(p)][0] == "GGUFError", (p, out[str(p)])
    assert out[str(paths[-1])] == ["opened", 2**20, 2**16]


SPARSE_SIZE = 768 << 20  # a large file that costs nothing on disk: all but the header is a hole


def test_counts_a_large_file_could_hold_are_not_reserved_up_front(tmp_path):
    """Counts in a big (sparse) file pass the fits-in-the-file check, but must not size an
    allocation before the elements are parsed: under a 2 GB limit each of these fails with
    GGUFError at its first bad element, not MemoryError from reserving ~2-10x the file size."""
    def head(n_tensors, n_kv):
        return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)

    def kv_array(elem_type, count):
        return struct.pack("<Q", 1) + b"a" + struct.pack("<IIQ", ARR, elem_type, count)

    heads = {
        "kv": head(0, (SPARSE_SIZE - 64) // 13),  # zero bytes parse as empty keys: the 2nd is a duplicate
        "tensors": head((SPARSE_SIZE - 64) // 32, 0),  # zero bytes: a tensor with 0 dimensions
        "strings": head(0, 1) + kv_array(STR, SPARSE_SIZE // 8 - 64) + struct.pack("<Q", 2**60),
        "nested": head(0, 1) + kv_array(ARR, SPARSE_SIZE // 12 - 64) + struct.pack("<I", 99),
    }
    paths = []
    for name, data in heads.items():
        path = write(tmp_path, name, data)
        os.truncate(path, SPARSE_SIZE)
        paths.append(path)
    out = run_child("""
        import json, sys
        from quickdraft import GGUFFile, GGUFError
        result = {}
        for p in sys.argv[1:]:
            try:
                GGUFFile(p).close()
                result[p] = "opened"
            except (GGUFError, MemoryError) as e:
                result[p] = type(e).__name__ + ": " + str(e)
        print(json.dumps(result))
        """, *paths, memory_limit=2 << 30)
    bad = {p: out[str(p)] for p in paths if not out[str(p)].startswith(f"GGUFError: {p}: ")}
    assert not bad

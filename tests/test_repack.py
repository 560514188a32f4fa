"""Weights repacked at load into 8 interleaved rows (cpu/repack.h) for the ISAs whose kernels read
them that way.

Oracles: the GGUF bytes themselves (repacking then copying a row back is the identity), the
same product computed from the GGUF layout, and bit-identity across batch sizes, thread counts
and the position of a row in its batch. Model-level checks run in a subprocess per ISA, so the
repacked path is tested whatever ISA this machine picks by default.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gguf
import numpy as np
import pytest

from quickdraft import _core
from test_kernels import cols_for, random_weight

T = gguf.GGMLQuantizationType
K = _core._testing.kernels
ROWS8_TYPES = [t for t in T if int(t) < 48 and K.rows8_supported(int(t))]
REPACKING_ISAS = [i for i in _core.isa_available() if any(K.repacks(int(t), i) for t in ROWS8_TYPES)]


def test_rows8_types():
    """The types of the real models (and their neighbours) have the layout."""
    assert {T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q6_K} <= set(ROWS8_TYPES)


@pytest.mark.parametrize("t", ROWS8_TYPES, ids=lambda t: t.name)
def test_repack_then_copy_row_is_the_identity(t):
    rng = np.random.default_rng(int(t))
    w = rng.integers(0, 256, random_weight(t, 24, cols_for(t), rng).shape, dtype=np.uint8)
    np.testing.assert_array_equal(K.rows8_roundtrip(w, int(t), 24, cols_for(t)), w)


@pytest.mark.parametrize("t", ROWS8_TYPES, ids=lambda t: t.name)
def test_rows8_stores_each_chunk_block_by_block(t):
    """The order of the groups' blocks (cpu/rows8_order.h): Q4_K, Q5_K and Q6_K in chunks of 8 row
    groups, each chunk block-major (block b of each of its groups, then block b + 1), the last
    chunk holding the groups left over; the other types group by group. The expected offsets are
    computed here from that rule; each group's blocks come from the group repacked alone (a chunk of
    one group: its blocks in order). 21 groups: two whole chunks and one of 5."""
    rng = np.random.default_rng(23 + int(t))
    groups, cols = 21, cols_for(t)
    rows = 8 * groups
    w = rng.integers(0, 256, random_weight(t, rows, cols, rng).shape, dtype=np.uint8)
    packed = K.rows8_roundtrip(w, int(t), rows, cols, packed=True)
    alone = [K.rows8_roundtrip(w[8 * g:8 * g + 8], int(t), 8, cols, packed=True) for g in range(groups)]
    nb = cols // gguf.GGML_QUANT_SIZES[t][0]
    gb = alone[0].size // nb
    assert packed.size == groups * nb * gb
    chunk = 8 if t in (T.Q4_K, T.Q5_K, T.Q6_K) else 1
    for g in range(groups):
        c0 = g // chunk * chunk
        ng = min(chunk, groups - c0)
        for b in range(nb):
            at = (c0 * nb + b * ng + g - c0) * gb
            np.testing.assert_array_equal(packed[at:at + gb], alone[g][b * gb:(b + 1) * gb], err_msg=f"group {g} block {b}")


def test_a_large_matrix_repacked_in_slices_is_the_same():
    """A matrix of tens of MB repacks in slices of row groups, one thread each (load time): the
    slices' seams lose nothing. 2053 groups of 8 rows (not a multiple of any slice count) of Q4_0,
    about 19 MB."""
    t, rows, cols = T.Q4_0, 8 * 2053, 2048
    w = np.random.default_rng(5).integers(0, 256, (rows, cols // 32 * 18), dtype=np.uint8)
    np.testing.assert_array_equal(K.rows8_roundtrip(w, int(t), rows, cols), w)


@pytest.mark.parametrize("layout,rows", [("rows8", 8 * 1000), ("gguf", 8 * 1000 + 5)])
@pytest.mark.parametrize("t", [T.Q8_0, T.Q5_0, T.Q6_K], ids=lambda t: t.name)
def test_requantized_at_load_is_each_row_requantized(t, layout, rows):
    """A draft model's wider matrices requantized at load (cpu::requantize_rows8 straight into the
    rows8 layout where the kernels read it repacked, cpu::requantize in the GGUF layout elsewhere),
    in slices on every core: each row copied back is the row dequantized and quantized to Q4_0 on
    its own (_core.dequantize, _core.quantize: the scalar references, the quantizer pinned to
    gguf-py by test_draft_levers), bit for bit. About 9 MB of Q8_0: several slices; the GGUF
    layout's row count is no multiple of 8."""
    rng = np.random.default_rng(17 + int(t))
    cols = 1024
    w = random_weight(t, rows, cols, rng)
    got = K.requantize_roundtrip(w, int(t), int(T.Q4_0), rows, cols, layout)
    want = _core.quantize(_core.dequantize(w, int(t), rows * cols), int(T.Q4_0)).reshape(rows, -1)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("isa", _core.isa_available())
@pytest.mark.parametrize("t", ROWS8_TYPES, ids=lambda t: t.name)
def test_rows8_product_matches_the_gguf_layout(t, isa):
    """Each ISA's product over repacked weights (its rows8 kernel, or row by row through its GGUF
    kernel) equals the product over the GGUF bytes up to float summation order."""
    rng = np.random.default_rng(7 + int(t))
    rows, cols = 296, cols_for(t)  # 296: see test_rows8_kernels_are_batch_and_thread_invariant
    w = random_weight(t, rows, cols, rng)
    x = rng.standard_normal((11, cols)).astype(np.float32)
    ref = K.matmul(w, int(t), rows, cols, x, isa=isa, layout="gguf")
    y = K.matmul(w, int(t), rows, cols, x, isa=isa, layout="rows8")
    scale = np.abs(ref).max()
    assert np.abs(y - ref).max() <= 1e-4 * scale, f"{t.name} {isa}: {np.abs(y - ref).max() / scale:.2e}"


# 296 rows: the AVX2 tall tiles (rows8_tall) take row groups in chunks of 32 (256 rows), so one
# whole chunk and a partial one (the layout needs rows in whole groups of 8).
@pytest.mark.parametrize("rows", (48, 296))
@pytest.mark.parametrize("isa", REPACKING_ISAS)
@pytest.mark.parametrize("t", ROWS8_TYPES, ids=lambda t: t.name)
def test_rows8_kernels_are_batch_and_thread_invariant(t, isa, rows):
    rng = np.random.default_rng(11 + int(t))
    cols = cols_for(t)
    w = random_weight(t, rows, cols, rng)
    x = rng.standard_normal((17, cols)).astype(np.float32)
    full = K.matmul(w, int(t), rows, cols, x, isa=isa, threads=1)
    for n in (1, 2, 3, 4, 5, 8, 9, 13):
        for threads in (1, 2):
            for i0 in (0, 17 - n):
                y = K.matmul(w, int(t), rows, cols, x[i0:i0 + n], isa=isa, threads=threads)
                np.testing.assert_array_equal(y, full[i0:i0 + n], err_msg=f"{t.name} {isa} n={n} threads={threads}")


@pytest.mark.parametrize("isa", REPACKING_ISAS)
@pytest.mark.parametrize("t", [T.Q4_0, T.Q4_K, T.Q6_K], ids=lambda t: t.name)
def test_small_batches_split_across_threads_keep_the_bits(t, isa):
    """Up to 4 rows, the weight rows are cut into 64 KB chunks that the threads take from their own
    stretches and then from each other's (cpu/matmul.cpp, matmul_stolen): with 2 to 4 threads over a
    matrix of many chunks, every output has the bits of one thread's product."""
    rng = np.random.default_rng(5 + int(t))
    cols, rows = 1024, 2040
    w = random_weight(t, rows, cols, rng)
    x = rng.standard_normal((4, cols)).astype(np.float32)
    for n in (1, 2, 3, 4):
        alone = K.matmul(w, int(t), rows, cols, x[:n], isa=isa, threads=1)
        for threads in (2, 3, 4):
            y = K.matmul(w, int(t), rows, cols, x[:n], isa=isa, threads=threads)
            np.testing.assert_array_equal(y, alone, err_msg=f"{t.name} {isa} n={n} threads={threads}")


@pytest.mark.parametrize("isa", REPACKING_ISAS)
def test_q6k_sums_at_the_int16_limits(isa):
    """The AVX2 tall tiles (5 to 8 activation rows) hold Q6_K's sum of (e - 32) x over 8 weights in
    an int16 half, the -32 taken in before the scale (x86/avx2/q6k_rows8.h). Its extremes: every
    e = 0 (weight -32) or 63 against activations of all +127 or all -127, where each half is
    exactly -32512, +32512, +31496 or -31496, with random signs and random activations beside them.
    Every batch height matches one row at a time bit for bit, and the GGUF layout's product up to
    float order."""
    rows, cols = 16, 512
    block = np.zeros((rows, cols // 256, 210), dtype=np.uint8)
    block[8:, :, :192] = 0xFF  # rows 8-15: ql and qh all ones, e = 63; rows 0-7: e = 0
    block[:, :, 192:208] = np.array([127, -128, 1, -1, 64, -64, 100, -100] * 2, dtype=np.int8).view(np.uint8)
    block[:, :, 208:210] = np.array([1 / 1024], dtype=np.float16).view(np.uint8)
    w = block.reshape(rows, -1)
    rng = np.random.default_rng(3)
    x = np.stack([np.ones(cols), -np.ones(cols), np.ones(cols), -np.ones(cols),
                  np.sign(rng.standard_normal(cols)), np.ones(cols), -np.ones(cols),
                  rng.standard_normal(cols)]).astype(np.float32)
    alone = np.concatenate([K.matmul(w, int(T.Q6_K), rows, cols, x[i:i + 1], isa=isa) for i in range(8)])
    ref = K.matmul(w, int(T.Q6_K), rows, cols, x, isa=isa, layout="gguf")
    np.testing.assert_allclose(alone, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    for n in range(2, 9):
        np.testing.assert_array_equal(K.matmul(w, int(T.Q6_K), rows, cols, x[:n], isa=isa), alone[:n],
                                      err_msg=f"{isa} n={n}")


MODEL_CHECK = r"""
import sys, numpy as np, quickdraft
path = sys.argv[1]
m = quickdraft.Model(path, n_ctx=256, threads=2)
ids = [int(i) for i in np.random.default_rng(0).integers(100, 20000, 24)]
whole = m.eval(ids)
m.reset(); m.eval(ids[:10]); part = m.eval(ids[10:13])
assert np.array_equal(part, whole[10:13]), "a row's logits depend on its batch"
plain = quickdraft.Engine(path, n_ctx=256, threads=2).generate("def fibonacci(n):", max_tokens=40, temperature=0)
for d in ("ngram", "self"):
    e = quickdraft.Engine(path, draft=d, n_ctx=256, threads=2, adaptive=False)
    out = e.generate("def fibonacci(n):", max_tokens=40, temperature=0)
    assert out.tokens == plain.tokens, d
    assert out.stats.drafted > 0, d
print(quickdraft.current_isa())
"""


@pytest.mark.real
@pytest.mark.parametrize("isa", REPACKING_ISAS)
def test_repacked_model_is_batch_invariant_and_speculation_exact(model_path, isa):
    """With the weights repacked: a row's logits are the same bits alone or inside a batch, and
    greedy speculative output equals greedy plain output, on a real model."""
    env = dict(os.environ, QD_FORCE_ISA=isa)
    r = subprocess.run([sys.executable, "-c", MODEL_CHECK, str(model_path("smollm2-135m"))], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == isa


ONE_BUFFER_CHECK = r"""
import json, sys
from quickdraft import _core
m = _core.LoadedModel(sys.argv[1])
spans = [(a, b) for a, b, layout in m.matrix_storage.values() if layout == "rows8"]
lo, hi = min(a for a, _ in spans), max(a + b for a, b in spans)
huge = 0  # kB of transparent huge pages in the mappings that hold the buffer
start = end = 0
for line in open("/proc/self/smaps"):
    if "-" in line.split()[0] and ":" not in line.split()[0]:
        start, end = (int(x, 16) for x in line.split()[0].split("-"))
    elif line.startswith("AnonHugePages:") and start < hi and end > lo:
        huge += int(line.split()[1])
print(json.dumps({"spans": spans, "n": len(m.matrix_storage), "huge_kb": huge, "isa": _core.current_isa()}))
"""


@pytest.mark.parametrize("isa", REPACKING_ISAS)
def test_a_models_repacked_weights_are_one_buffer_on_huge_pages(tmp_path, isa):
    """Every matrix repacked at load lies in one buffer that starts on a 2 MiB boundary, without gaps
    (cpu::rows8_alloc), so all of them stream from transparent huge pages, the small ones too (a
    buffer per matrix put only the 2 MiB pages inside each in huge pages: none of this model's, whose
    matrices are 0.1-1.1 MB). Where the kernel gives huge pages on request, most of the buffer is in
    them."""
    from fixtures.tiny_models import TinySpec, write_tiny_model

    path = write_tiny_model(tmp_path / "m.gguf", TinySpec(n_vocab=2048, n_embd=512, n_head=8, n_head_kv=2, n_ff=1024,
                                                          n_layer=4, wtype="Q8_0"))
    r = subprocess.run([sys.executable, "-c", ONE_BUFFER_CHECK, str(path)], env=dict(os.environ, QD_FORCE_ISA=isa),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    spans = sorted(got["spans"])
    assert got["isa"] == isa and len(spans) == got["n"]  # every matrix was repacked
    assert spans[0][0] % (2 << 20) == 0
    for (a, b), (next_a, _) in zip(spans, spans[1:]):
        assert a + b <= next_a <= a + b + 63  # consecutive, 64-byte aligned
    total = spans[-1][0] + spans[-1][1] - spans[0][0]
    assert total > 2 << 20 and max(b for _, b in spans) < 2 << 20  # no matrix holds a huge page of its own
    thp = open("/sys/kernel/mm/transparent_hugepage/enabled").read() if os.path.exists(
        "/sys/kernel/mm/transparent_hugepage/enabled") else ""
    if "[never]" not in thp and thp:
        assert got["huge_kb"] * 1024 >= total // 2, f"{got['huge_kb']} kB of {total} bytes in huge pages"

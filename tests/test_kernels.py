"""CPU matmul kernels: every ISA this machine runs, every weight type, batch sizes 1..17.

Oracles: gguf.quants.dequantize (the weights) and numpy (the product). The Q8 quantization of the
activations is bounded exactly: each activation moves by at most amax(row) / 254 plus the FP16
rounding of its block scale (amax * 2^-11), so |y - x @ W.T| <= (|W| @ 1) * amax * (1/254 + 2^-11)
(plus float rounding). SIMD kernels are compared with the
scalar reference kernels, and batch/thread invariance is checked bit for bit.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import gguf
import numpy as np
import pytest

from quickdraft import UnsupportedError, _core

T = gguf.GGMLQuantizationType
K = _core._testing.kernels
TABLES = _core.kernels  # public: describe(), table(), built_isas()

# Offsets of the fp16 scale/min fields inside one block: set to sane values so random bytes make a
# valid block (random bits there could be inf/nan).
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.IQ4_NL: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208], T.IQ4_XS: [0],
}
# Types with integer kernels (Q8 activations) vs types computed in f32.
QUANT_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_XS]
FALLBACK_TYPES = [T.BF16]
FLOAT_TYPES = [T.F32, T.F16]
ALL_TYPES = QUANT_TYPES + FALLBACK_TYPES + FLOAT_TYPES
# Every ISA built into this binary; the ones this CPU cannot run (avx2_vnni on a CPU without
# AVX-VNNI, say) skip with the reason.
BUILT_ISAS = TABLES.built_isas()
SIMD_ISAS = [i for i in _core.isa_available() if i != "scalar"]  # for loops: the ones that run here


def isa_params(isas):
    cannot = "this CPU cannot execute {} kernels (see _core.cpu_features())"
    return [pytest.param(i, marks=pytest.mark.skipif(i not in _core.isa_available(), reason=cannot.format(i)))
            for i in isas]


ISA_PARAMS = isa_params(BUILT_ISAS)
SIMD_ISA_PARAMS = isa_params([i for i in BUILT_ISAS if i != "scalar"])


def test_cpu_vendor_is_detected():
    """cpu_features()["amd"] (the rows8 kernels' prefetch distance follows it) matches the
    vendor the kernel reports in /proc/cpuinfo."""
    if platform.machine() not in ("x86_64", "AMD64"):
        # qemu-user (the aarch64 CI step) shows the x86 host's /proc/cpuinfo to the emulated process
        pytest.skip(f"an x86 vendor flag, and this process runs as {platform.machine()}")
    vendors = {line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("vendor_id")}
    if not vendors:
        pytest.skip("no x86 vendor_id in /proc/cpuinfo")
    assert _core.cpu_features()["amd"] == bool(vendors & {"AuthenticAMD", "HygonGenuine"}), vendors


def cols_for(t) -> int:
    block = gguf.GGML_QUANT_SIZES[t][0]
    # odd numbers of blocks / vector chunks exercise the kernels' tails; K-quants need 256s
    return {256: 768, 32: 800, 1: 811}[block]


def random_weight(t, rows: int, cols: int, rng) -> np.ndarray:
    """rows x row_bytes uint8: random blocks with finite scales."""
    if t == T.F32:
        return rng.standard_normal((rows, cols)).astype(np.float32).view(np.uint8)
    if t == T.F16:
        return rng.standard_normal((rows, cols)).astype(np.float16).view(np.uint8)
    if t == T.BF16:
        f = rng.standard_normal((rows, cols)).astype(np.float32)
        return (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(rows, -1)
    block, size = gguf.GGML_QUANT_SIZES[t]
    nb = rows * cols // block
    raw = rng.integers(0, 256, (nb, size), dtype=np.uint8)
    for off in HALF_FIELDS[t]:
        h = (rng.uniform(0.5, 1.5, nb) * rng.choice([-1, 1], nb) / 128).astype(np.float16)
        raw[:, off:off + 2] = h.view(np.uint8).reshape(nb, 2)
    return raw.reshape(rows, -1)


def dequant(t, w: np.ndarray, cols: int) -> np.ndarray:
    return gguf.quants.dequantize(w, t).reshape(w.shape[0], cols).astype(np.float64)


def run(t, w, cols, x, isa="scalar", threads=1):
    try:
        return K.matmul(w, int(t), w.shape[0], cols, x, isa=isa, threads=threads)
    except UnsupportedError as e:
        pytest.skip(f"{t.name}: no scalar dequantization yet ({e})")


@pytest.fixture(scope="module")
def cases():
    """type -> (weights, dequantized weights, activations[17, cols])."""
    rng = np.random.default_rng(7)
    out = {}
    for t in ALL_TYPES:
        cols = cols_for(t)
        w = random_weight(t, 37, cols, rng)
        x = rng.standard_normal((17, cols)).astype(np.float32)
        x[5] = 0.0  # an all-zero row: scale 0 must give exact zeros
        out[t] = (w, dequant(t, w, cols), x)
    return out


def act_rounding_bound(t, w, wf, x):
    """Largest |y - x @ W.T| the Q8 activation rounding can cause (see the module docstring)."""
    amax = np.abs(x).astype(np.float64).max(axis=1, keepdims=True)
    bound = amax * (1 / 254 + 2.0 ** -11) * np.abs(wf).sum(axis=1)[None, :] * 1.001
    return bound


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_scalar_matches_numpy(cases, t):
    w, wf, x = cases[t]
    cols = wf.shape[1]
    y = run(t, w, cols, x)
    ref = x.astype(np.float64) @ wf.T
    mag = np.abs(x).astype(np.float64) @ np.abs(wf).T
    tol = 1e-5 * mag + 1e-6
    if t in QUANT_TYPES:  # the exact bound of Q8 activation rounding
        tol += act_rounding_bound(t, w, wf, x)
    np.testing.assert_array_less(np.abs(y - ref), tol)
    assert np.all(y[5] == 0.0)


@pytest.mark.parametrize("isa", SIMD_ISA_PARAMS)
@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("n", range(1, 18))
def test_isa_matches_scalar(cases, isa, t, n):
    w, wf, x = cases[t]
    cols = wf.shape[1]
    ref = run(t, w, cols, x[:n], isa="scalar")
    y = run(t, w, cols, x[:n], isa=isa)
    mag = np.abs(x[:n]).astype(np.float64) @ np.abs(wf).T
    np.testing.assert_array_less(np.abs(y - ref), 1e-5 * mag + 1e-6)


@pytest.mark.parametrize("isa", ISA_PARAMS)
@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_batch_and_thread_invariance(cases, isa, t):
    """Row i of the output has the same bits whatever n is and however many threads run."""
    w, wf, x = cases[t]
    cols = wf.shape[1]
    full = run(t, w, cols, x, isa=isa)
    for n in range(1, 18):
        np.testing.assert_array_equal(run(t, w, cols, x[:n], isa=isa), full[:n])
    for i in (0, 7, 16):  # a row alone, at any batch position
        np.testing.assert_array_equal(run(t, w, cols, x[i:i + 1], isa=isa)[0], full[i])
    for threads in (2, 3):
        np.testing.assert_array_equal(run(t, w, cols, x, isa=isa, threads=threads), full)


REAL = {  # model key -> tensor names covering its weight types
    "smollm2-135m": ["blk.0.attn_q.weight", "blk.0.ffn_down.weight", "token_embd.weight"],
    "qwen2.5-coder-0.5b": ["blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.0.ffn_up.weight",
                           "blk.0.attn_v.weight", "token_embd.weight"],
}


@pytest.mark.parametrize("key", list(REAL))
def test_real_model_tensors(model_path, key):
    """Rows of real weight tensors, every ISA, against gguf dequantization + numpy."""
    reader = gguf.GGUFReader(model_path(key))
    tensors = {t.name: t for t in reader.tensors}
    rng = np.random.default_rng(3)
    for name in REAL[key]:
        t = tensors[name]
        cols = int(t.shape[0])
        w = np.ascontiguousarray(t.data[:64]).view(np.uint8).reshape(64, -1)
        wf = dequant(t.tensor_type, w, cols)
        x = rng.standard_normal((9, cols)).astype(np.float32)
        ref = x.astype(np.float64) @ wf.T
        bound = act_rounding_bound(t.tensor_type, w, wf, x)
        bound += 1e-5 * (np.abs(x).astype(np.float64) @ np.abs(wf).T) + 1e-6
        for isa in _core.isa_available():
            y = K.matmul(w, int(t.tensor_type), 64, cols, x, isa=isa, threads=2)
            np.testing.assert_array_less(np.abs(y - ref), bound, err_msg=f"{key} {name} {isa}")


def test_bad_arguments():
    w = np.zeros((4, 18), np.uint8)
    with pytest.raises(ValueError, match="multiple of 32"):
        K.matmul(w, int(T.Q4_0), 4, 31, np.zeros((1, 31), np.float32))
    with pytest.raises(ValueError, match="bytes"):
        K.matmul(w, int(T.Q4_0), 8, 32, np.zeros((1, 32), np.float32))
    with pytest.raises(ValueError, match="unknown ISA"):
        K.matmul(w, int(T.Q4_0), 4, 32, np.zeros((1, 32), np.float32), isa="sse9")


def _isa_in_subprocess(force: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, QD_FORCE_ISA=force)
    code = "from quickdraft import _core; print(_core.current_isa())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_force_isa():
    for isa in _core.isa_available():
        r = _isa_in_subprocess(isa)
        assert r.returncode == 0 and r.stdout.strip() == isa, r.stderr
    r = _isa_in_subprocess("sse9")
    assert r.returncode != 0 and "unknown ISA" in r.stderr
    missing = [i for i in ALL_ISA_NAMES if i not in _core.isa_available()]
    for isa in missing:
        r = _isa_in_subprocess(isa)
        assert r.returncode != 0 and "QD_FORCE_ISA" in r.stderr
        want = "cannot execute" if isa in BUILT_ISAS else "no " + isa + " kernels"
        assert want in r.stderr, r.stderr


ALL_ISA_NAMES = ("scalar", "avx2", "avx2_vnni", "avx512", "neon", "neon_dot")


def test_isa_names():
    """Every ISA level parses; the ones built here are the family's (x86-64 or aarch64)."""
    w = np.zeros((4, 18), np.uint8)
    for isa in ALL_ISA_NAMES:
        if isa in _core.isa_available():
            K.matmul(w, int(T.Q4_0), 4, 32, np.zeros((1, 32), np.float32), isa=isa)
        else:
            with pytest.raises(ValueError, match="not available"):
                K.matmul(w, int(T.Q4_0), 4, 32, np.zeros((1, 32), np.float32), isa=isa)
    assert BUILT_ISAS[0] == "scalar"
    assert set(BUILT_ISAS) in ({"scalar"}, {"scalar", "avx2", "avx2_vnni", "avx512"}, {"scalar", "neon", "neon_dot"})
    assert set(_core.isa_available()) <= set(BUILT_ISAS)


GGML_TYPES = [i for i in range(64) if _core.type_info(i) is not None]


@pytest.mark.parametrize("isa", BUILT_ISAS)
def test_table_covers_every_type(isa):
    """Every ISA built here has an explicit entry for every GGML type of the quant type table: a
    kernel for each type quickdraft can compute with, "unsupported" for the others, no hole."""
    table = TABLES.table()[isa]
    for i in GGML_TYPES:
        name, _, _, computable = _core.type_info(i)
        kind, act = table[name]
        if computable:
            assert kind in ("simd", "scalar", "dequant"), f"{isa} {name}: {kind}"
            assert act in ("f32", "q8_0", "q8_K"), f"{isa} {name}: {act}"
        else:
            assert kind == "unsupported", f"{isa} {name}: {kind}"
    repacked = [r for r in table if r.endswith(" rows8")]
    assert all(table[r][0] in ("simd", "-") for r in repacked), table
    routines = [r for r in table if r not in {_core.type_info(i)[0] for i in GGML_TYPES} and r not in repacked]
    assert all(table[r][0] in ("simd", "scalar") for r in routines), table
    assert {"quantize q8_0", "softmax", "rope", "silu_mul"} <= set(routines)
    if isa == "scalar":
        assert all(kind != "simd" for kind, _ in table.values())
    if isa in ("avx2", "avx2_vnni"):  # the laptop path reads the real models' types repacked
        assert all(table[f"{t} rows8"][0] == "simd" for t in ("Q4_0", "Q4_1", "Q5_0", "Q8_0", "Q4_K", "Q5_K",
                                                          "Q3_K", "Q2_K", "IQ4_XS")), table
    # The same activation format as the scalar table for every type: every ISA quantizes alike.
    ref = TABLES.table()["scalar"]
    for i in GGML_TYPES:
        name = _core.type_info(i)[0]
        assert table[name][1] == ref[name][1], f"{isa} {name}"


def test_describe():
    text = TABLES.describe()
    header, *rows = text.splitlines()
    assert header.split() == ["routine"] + BUILT_ISAS
    assert len(rows) == len(next(iter(TABLES.table().values())))
    assert "MISSING" not in text


def _round_half_even_f32(v: np.ndarray) -> np.ndarray:
    return np.rint(v).astype(np.int64)


@pytest.mark.parametrize("fmt,block", [("q8_0", 32), ("q8_K", 256)])
def test_activation_quantization(fmt, block):
    """Q8 activations: numpy float32 oracle, and the same bits from every ISA."""
    rng = np.random.default_rng(11)
    cols = 1024 + (64 if fmt == "q8_0" else 0)  # q8_0: a partial group stays in plain order
    x = (rng.standard_normal(cols) * rng.uniform(0.01, 100, cols)).astype(np.float32)
    x[:block] = 0.0  # a zero block
    blocks = x.reshape(-1, block)
    # llama.cpp's numerics: multiplier 127 / amax; Q8_0 keeps d = amax / 127 as FP16 (and
    # s = d * sum(q)), Q8_K keeps d = 1 / multiplier in float32.
    amax = np.abs(blocks).max(axis=1).astype(np.float32)
    inv = np.where(amax != 0, np.float32(127) / np.where(amax != 0, amax, 1), 0).astype(np.float32)
    q = np.clip(_round_half_even_f32(blocks * inv[:, None]), -127, 127)
    ref = K.quantize_row(x, fmt, isa="scalar")
    np.testing.assert_array_equal(ref["qs"], q.reshape(-1))
    if fmt == "q8_0":
        d_exact = (amax / np.float32(127)).astype(np.float32)
        d = d_exact.astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(ref["d"], d)
        np.testing.assert_array_equal(ref["s"], d * q.sum(axis=1).astype(np.float32))
        np.testing.assert_array_equal(ref["d8"], np.repeat(d, 8))
        np.testing.assert_array_equal(ref["d2"], np.repeat(d, 2))
        # block_q8_1's s (the min term of Q4_1 / Q5_1): the unrounded d times the sum, to FP16
        sm = (d_exact * q.sum(axis=1).astype(np.float32)).astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(ref["sm"], sm)
        np.testing.assert_array_equal(ref["a4"], q.reshape(-1, 4).sum(axis=1))
    else:
        d = np.where(inv != 0, np.float32(1) / np.where(inv != 0, inv, 1), 0).astype(np.float32)
        np.testing.assert_array_equal(ref["d"], d)
        sums = q.reshape(-1, 16).sum(axis=1)
        np.testing.assert_array_equal(ref["bsums"], sums)
        np.testing.assert_array_equal(ref["dsums"], np.repeat(d, 16) * sums.astype(np.float32))
        # group-of-16 order: vector v, lane p holds bytes 4v..4v+3 of group 4 (p % 4) + p // 4
        p = np.arange(16)
        g16 = q.reshape(-1, 16, 4, 4)[:, 4 * (p % 4) + p // 4]  # [group256, lane, v, t]
        np.testing.assert_array_equal(ref["qsg16"], g16.transpose(0, 2, 1, 3).reshape(-1))
        np.testing.assert_array_equal(ref["osg16"], -32 * sums.reshape(-1, 16)[:, 4 * (p % 4) + p // 4].reshape(-1))
    # group order: vector v holds bytes 8v..8v+7 of each 32-block of a whole 256-group
    flat = q.reshape(-1)
    whole = len(flat) // 256 * 256
    grouped = flat[:whole].reshape(-1, 8, 4, 8).transpose(0, 2, 1, 3).reshape(-1)
    np.testing.assert_array_equal(ref["qsg"], np.concatenate([grouped, flat[whole:]]))
    for isa in SIMD_ISAS:
        got = K.quantize_row(x, fmt, isa=isa)
        for name, arr in ref.items():
            np.testing.assert_array_equal(got[name], arr, err_msg=f"{isa} {name}")


@pytest.mark.parametrize("t", [T.Q4_0, T.Q4_1, T.Q5_0, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_XS],
                         ids=lambda t: t.name)
def test_long_rows(t):
    """Rows longer than the kernels' column blocks (2048) and chunks taller than their row blocks."""
    rng = np.random.default_rng(5)
    rows, cols = 100, 2816 if gguf.GGML_QUANT_SIZES[t][0] == 256 else 2848  # 11 super-blocks / 89 blocks
    w = random_weight(t, rows, cols, rng)
    wf = dequant(t, w, cols)
    x = rng.standard_normal((70, cols)).astype(np.float32)  # prompt-sized: several tiles and task blocks
    ref = run(t, w, cols, x, isa="scalar")
    mag = np.abs(x).astype(np.float64) @ np.abs(wf).T
    for isa in SIMD_ISAS:
        full = run(t, w, cols, x, isa=isa)
        np.testing.assert_array_less(np.abs(full - ref), 1e-5 * mag + 1e-6)
        for n in (1, 2, 5, 9):
            np.testing.assert_array_equal(run(t, w, cols, x[:n], isa=isa), full[:n])
        np.testing.assert_array_equal(run(t, w, cols, x[23:24], isa=isa)[0], full[23])
        np.testing.assert_array_equal(run(t, w, cols, x, isa=isa, threads=2), full)


@pytest.mark.parametrize("isa", ISA_PARAMS)
def test_half_conversions(isa):
    """Row conversions for the F16 KV cache: bit-exact with numpy's float16 (round to nearest even)."""
    rng = np.random.default_rng(13)
    x = (rng.standard_normal(1003) * np.exp(rng.uniform(-20, 12, 1003))).astype(np.float32)
    x[:6] = [0.0, -0.0, 65504.0, 70000.0, 6e-8, -3e-5]  # max, overflow to inf, subnormals
    ours = K.f32_to_f16(x, isa=isa)
    with np.errstate(over="ignore"):  # the overflow to inf is what is being checked
        expected = x.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(ours, expected)
    bits = rng.integers(0, 0x7C00, 1003, dtype=np.uint16) | (rng.integers(0, 2, 1003, dtype=np.uint16) << 15)
    np.testing.assert_array_equal(K.f16_to_f32(bits, isa=isa), bits.view(np.float16).astype(np.float32))


@pytest.mark.parametrize("isa", ISA_PARAMS)
def test_reduce_lanes(isa):
    """Attention's 16 partial sums per column, summed in one fixed tree on every ISA: bit for bit
    the tree written out in numpy float32 ((l + l+8), then + (l+4), then (0+2) + (1+3))."""
    rng = np.random.default_rng(17)
    p = (rng.standard_normal((16, 203)) * np.exp(rng.uniform(-8, 8, (16, 203)))).astype(np.float32)
    t = p[8:] + p[:8]
    u = t[4:] + t[:4]
    ref = (u[0] + u[2]) + (u[1] + u[3])
    assert np.array_equal(_core._testing.kernels.reduce_lanes(p, isa), ref)


@pytest.mark.parametrize("isa", ISA_PARAMS)
def test_silu_mul(isa):
    """SwiGLU's silu(gate) * up against float64, over the range where exp's fast and slow paths
    meet (|gate| past 88, where exp(-gate) overflows or flushes) and a tail shorter than a vector."""
    rng = np.random.default_rng(21)
    gate = (rng.standard_normal(1003) * np.exp(rng.uniform(-6, 5, 1003))).astype(np.float32)
    gate[:8] = [0.0, -0.0, 87.0, -87.0, 89.0, -89.0, 150.0, -150.0]
    gate[8:16] = [200.0, -200.0, 1e-30, -1e-30, 30.0, -30.0, 3.0, -3.0]
    up = rng.standard_normal(1003).astype(np.float32)
    got = _core._testing.kernels.silu_mul(gate, up, isa)
    g = gate.astype(np.float64)
    with np.errstate(over="ignore"):
        ref = g / (1.0 + np.exp(-g)) * up
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-30)


def halves(a):
    """a rounded to float16 and back: attention's weights and values are halves, so their products
    are exact in float and every ISA's weighted sums agree bit for bit."""
    return np.asarray(a, dtype=np.float16).astype(np.float32)


@pytest.mark.parametrize("isa", ISA_PARAMS)
@pytest.mark.parametrize("n", [128, 64, 256, 40, 13])
def test_scaled_dots_batch(isa, n):
    """Attention scores for a batch of queries (the G heads of every row of a verify batch share
    each key): against float64, and each query's dots bit for bit what it gets alone or in any
    other batch, over query counts that leave every tile tail (1, 2 of 3) and key counts that
    leave 1-3 keys past the 4-key tiles (whose dots must be the tiles' bits)."""
    rng = np.random.default_rng(n)
    scale = 1.0 / np.sqrt(n)
    for nq, rows in ((1, 64), (2, 5), (3, 66), (7, 67), (48, 64), (6, 3)):
        q = rng.standard_normal((nq, n)).astype(np.float32)
        k = rng.standard_normal((rows, n)).astype(np.float32)
        got = _core._testing.kernels.scaled_dots(q, k, scale, isa)
        ref = (q.astype(np.float64) @ k.astype(np.float64).T) * scale
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(n))
        alone = np.concatenate([_core._testing.kernels.scaled_dots(q[j:j + 1], k, scale, isa) for j in range(nq)])
        assert np.array_equal(got, alone), (nq, rows)
        if nq > 2:
            shifted = _core._testing.kernels.scaled_dots(q[1:], k, scale, isa)
            assert np.array_equal(shifted, got[1:]), (nq, rows)
        # keys one place on: a key the tiles took is now in the tail past them, and back
        later = _core._testing.kernels.scaled_dots(q, k[1:], scale, isa)
        assert np.array_equal(later, got[:, 1:]), (nq, rows)


@pytest.mark.parametrize("isa", ISA_PARAMS)
@pytest.mark.parametrize("n", [128, 64, 96, 72, 13])
def test_weighted_rows_add_batch(isa, n):
    """The weighted sums of values for a batch of queries, each with its own weights and partial
    sums: bit for bit each query alone, and (halves in, as attention feeds it) the scalar ISA's
    bits, over query counts that leave every tile tail."""
    rng = np.random.default_rng(n + 1)
    for nq, rows, lane0 in ((1, 64, 0), (2, 17, 3), (3, 64, 15), (7, 40, 9), (48, 64, 0)):
        w = halves(rng.random((nq, rows)))
        v = halves(rng.standard_normal((rows, n)))
        start = rng.standard_normal((nq, 16, n)).astype(np.float32)
        got = _core._testing.kernels.weighted_rows_add(w, v, lane0, start, isa)
        alone = np.stack([_core._testing.kernels.weighted_rows_add(w[j], v, lane0, start[j], isa) for j in range(nq)])
        assert np.array_equal(got, alone), (nq, rows)
        scalar = _core._testing.kernels.weighted_rows_add(w, v, lane0, start, "scalar")
        assert np.array_equal(got, scalar), (nq, rows)


@pytest.mark.parametrize("isa", ISA_PARAMS)
@pytest.mark.parametrize("n", [128, 64, 96, 40, 13])
def test_attention_kernels_read_f16_rows_as_their_floats(isa, n):
    """The F16 entries (a decode reads the cache's rows without a converted copy): bit for bit the
    float kernels on the same rows converted, over query counts that leave every tile tail, key
    counts past the 64-row conversion chunks and the 4-key tiles, and widths off the 8 and 32 lanes."""
    rng = np.random.default_rng(n + 7)
    for nq, rows, lane0 in ((1, 64, 0), (6, 3, 5), (7, 67, 9), (3, 130, 15), (12, 200, 1)):
        q = rng.standard_normal((nq, n)).astype(np.float32)
        bits = rng.standard_normal((rows, n)).astype(np.float16)
        floats = bits.astype(np.float32)
        got = K.scaled_dots_f16(q, bits.view(np.uint16), 0.125, isa)
        assert np.array_equal(got, K.scaled_dots(q, floats, 0.125, isa)), (nq, rows)
        w = halves(rng.random((nq, rows)))
        start = rng.standard_normal((nq, 16, n)).astype(np.float32)
        got = K.weighted_rows_add_f16(w, bits.view(np.uint16), lane0, start, isa)
        assert np.array_equal(got, K.weighted_rows_add(w, floats, lane0, start, isa)), (nq, rows)


@pytest.mark.parametrize("isa", ISA_PARAMS)
@pytest.mark.parametrize("n", [64, 128, 256, 72, 13])
def test_weighted_rows_add(isa, n):
    """Attention's weighted sum of values: each of the 16 lanes (key index mod 16) gets its rows'
    w * v in row order. Against a float64 reference, and bit for bit however the rows are split
    into calls (the key chunks of attention, lane0 moving on with them)."""
    rng = np.random.default_rng(n)
    rows, lane0 = 75, 5
    w = rng.random(rows).astype(np.float32)
    v = rng.standard_normal((rows, n)).astype(np.float32)
    start = rng.standard_normal((16, n)).astype(np.float32)
    got = _core._testing.kernels.weighted_rows_add(w, v, lane0, start, isa)
    ref = start.astype(np.float64)
    for r in range(rows):
        ref[(lane0 + r) % 16] += np.float64(w[r]) * v[r]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    split = start
    for a, b in ((0, 3), (3, 40), (40, 64), (64, rows)):
        split = _core._testing.kernels.weighted_rows_add(w[a:b], v[a:b], lane0 + a, split, isa)
    assert np.array_equal(split, got)


def test_bench_attention_times_each_pass_and_refuses_bad_shapes():
    # bench/attention.py's hook: iters timings of attention over a random cache, ValueError (never a
    # crash) for a shape the model could not have
    secs = K.bench_attention(100, 2, 4, 2, 64, 2, 1, 3)
    assert len(secs) == 3 and all(s > 0 for s in secs)
    for bad in ((100, 2, 3, 2, 64, 2), (0, 1, 4, 2, 64, 2), (100, 1, 4, 2, 64, 0), (100, 1, 4, 2, 64, 2, 0)):
        with pytest.raises(ValueError, match="bench_attention"):
            K.bench_attention(*bad)


@pytest.mark.parametrize("mib,threads", [(1, 1), (3.5, 2), (5, 3)])
def test_read_bandwidth_reads_every_word(mib, threads):
    """bench/compare.py's ceiling for a decode: the probe must read the whole buffer, every pass and
    on every thread's stretch, or its rate means nothing. Oracle: the closed form of the sum of word
    i = i * G (mod 2^64) over the whole pages of the buffer; a stretch skipped or read twice moves it."""
    r = _core.measure_read_bandwidth(mib, threads, 3)
    n_bytes = int(mib * (1 << 20)) // 4096 * 4096
    assert r["bytes"] == n_bytes and r["threads"] == threads
    words = n_bytes // 8
    G = 0x9E3779B97F4A7C15
    assert r["checksum"] == G * (words * (words - 1) // 2) % (1 << 64)
    assert r["best_GBps"] >= r["median_GBps"] > 0


def test_read_bandwidth_refuses_bad_arguments():
    for kwargs in ({"mib": 0}, {"mib": 0.5}, {"mib": -1}, {"mib": float("nan")}, {"mib": 1e9}, {"mib": 4, "passes": 0},
                   {"mib": 4, "passes": 10_000}, {"mib": 4, "threads": -1}, {"mib": 4, "threads": 100_000}):
        with pytest.raises(ValueError):
            _core.measure_read_bandwidth(**kwargs)
    # more than half the machine's memory would be overcommitted, then kill the process while filled
    half_mib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2 // (1 << 20)
    with pytest.raises(ValueError, match="half the machine's memory|mib must lie"):
        _core.measure_read_bandwidth(half_mib + 16, 1, 1)
    assert _core.measure_read_bandwidth(4, 0, 1)["threads"] >= 1  # 0: every CPU this process may use

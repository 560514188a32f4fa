"""aarch64 only (run under qemu-aarch64 by .ci/aarch64.sh): run-time feature detection and the
NEON kernels' promise of results bit-identical to the scalar reference.

Oracles: the kernel's auxiliary vector read through libc's getauxval via ctypes (independent of
quickdraft's C++), and the scalar kernels (themselves checked against gguf + numpy in
tests/test_kernels.py).
"""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys

import gguf
import numpy as np
import pytest

from quickdraft import _core

pytestmark = pytest.mark.skipif(platform.machine() not in ("aarch64", "arm64"), reason="aarch64 only")

T = gguf.GGMLQuantizationType
AT_HWCAP, AT_HWCAP2 = 16, 26
# Linux arch/arm64/include/uapi/asm/hwcap.h
HWCAP = {"asimd": 1 << 1, "fphp": 1 << 9, "asimdhp": 1 << 10, "asimddp": 1 << 20}
HWCAP2_I8MM = 1 << 13


def auxv(kind: int) -> int:
    libc = ctypes.CDLL(None)
    libc.getauxval.restype = ctypes.c_ulong
    libc.getauxval.argtypes = [ctypes.c_ulong]
    return int(libc.getauxval(kind))


def test_features_match_the_auxiliary_vector():
    hw, hw2 = auxv(AT_HWCAP), auxv(AT_HWCAP2)
    f = _core.cpu_features()
    assert f["asimd"] == bool(hw & HWCAP["asimd"])
    assert f["asimddp"] == bool(hw & HWCAP["asimddp"])
    assert f["fp16"] == bool(hw & HWCAP["fphp"] and hw & HWCAP["asimdhp"])
    assert f["i8mm"] == bool(hw2 & HWCAP2_I8MM)
    assert not any(f[k] for k in ("avx2", "avx512f", "avx_vnni"))


def test_neon_is_the_default_and_scalar_can_be_forced():
    assert _core.isa_available() == ["scalar", "neon"]
    code = "from quickdraft import _core; print(_core.current_isa())"
    for force, want in (("", "neon"), ("scalar", "scalar"), ("neon", "neon")):
        env = dict(os.environ, QD_FORCE_ISA=force)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.strip() == want, r.stderr
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, QD_FORCE_ISA="avx2"),
                       capture_output=True, text=True)
    assert r.returncode != 0 and "no avx2 kernels" in r.stderr


# Offsets of fp16 scale fields in one block (sane values keep random blocks finite).
HALF_FIELDS = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.IQ4_NL: [0],
               T.Q4_K: [0, 2], T.Q6_K: [208]}


@pytest.mark.parametrize("t", list(HALF_FIELDS), ids=lambda t: t.name)
def test_neon_bit_identical_to_scalar(t):
    """The NEON kernels do the scalar reference's float operations in its order (neon_kernels.h)."""
    rng = np.random.default_rng(11)
    block, size = gguf.GGML_QUANT_SIZES[t]
    rows, cols = 19, 3 * 256
    raw = rng.integers(0, 256, (rows * cols // block, size), dtype=np.uint8)
    for off in HALF_FIELDS[t]:
        h = rng.uniform(-1, 1, raw.shape[0]).astype(np.float16) / 64
        raw[:, off:off + 2] = h.view(np.uint8).reshape(-1, 2)
    w = raw.reshape(rows, -1)
    x = rng.standard_normal((9, cols)).astype(np.float32)
    ref = _core._testing.kernels.matmul(w, int(t), rows, cols, x, isa="scalar", threads=1)
    for threads in (1, 3):
        y = _core._testing.kernels.matmul(w, int(t), rows, cols, x, isa="neon", threads=threads)
        np.testing.assert_array_equal(y, ref)


# The entries make_neon_table() sets (cpu/neon_kernels.h): {type: activation format}
# (ActFormat: 1 = q8_0, 2 = q8_K). Every other entry must be null, so matmul takes the scalar
# table's kernel for it; .ci/aarch64.sh builds with -ftrivial-auto-var-init=pattern, which
# makes an entry left uninitialized read as non-null here.
NEON_GEMM = {T.Q4_0: 1, T.Q4_1: 1, T.Q5_0: 1, T.Q5_1: 1, T.Q8_0: 1, T.IQ4_NL: 1,
             T.Q4_K: 2, T.Q6_K: 2, T.Q2_K: 2, T.Q3_K: 2, T.Q5_K: 2, T.IQ4_XS: 2}


def test_neon_table_sets_only_its_own_entries():
    table = _core._testing.kernels.table("neon")
    assert table["gemm"] == {int(t): act for t, act in NEON_GEMM.items()}
    assert not table["half_to_float"] and not table["float_to_half"]
    assert table["quantize"] == [False, False, False]


ROWS8_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q6_K]


def test_only_the_sdot_table_repacks():
    """The rows8 kernels (cpu/arm/neon/) are SDOT kernels: weights are repacked at load on a CPU
    with asimddp and stay in the GGUF layout without it (Cortex-A72)."""
    dot = _core.cpu_features()["asimddp"]
    assert {t.name: _core._testing.kernels.repacks(int(t), "neon") for t in ROWS8_TYPES} == \
        {t.name: dot for t in ROWS8_TYPES}

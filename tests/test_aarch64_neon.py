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
    """neon_dot where the CPU has SDOT, else neon; plain neon and scalar can always be forced."""
    dot = _core.cpu_features()["asimddp"]
    assert _core.isa_available() == (["scalar", "neon", "neon_dot"] if dot else ["scalar", "neon"])
    assert _core.kernels.built_isas() == ["scalar", "neon", "neon_dot"]
    code = "from quickdraft import _core; print(_core.current_isa())"
    cases = [("", "neon_dot" if dot else "neon"), ("scalar", "scalar"), ("neon", "neon")]
    if dot:
        cases.append(("neon_dot", "neon_dot"))
    for force, want in cases:
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
    """The NEON kernels (neon and neon_dot) do the scalar reference's float operations in its order
    (cpu/arm/neon/common.h)."""
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
    for isa in [i for i in _core.isa_available() if i.startswith("neon")]:
        for threads in (1, 3):
            y = _core._testing.kernels.matmul(w, int(t), rows, cols, x, isa=isa, threads=threads, layout="gguf")
            np.testing.assert_array_equal(y, ref, err_msg=isa)


ROWS8_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q6_K]


def test_only_the_sdot_table_repacks():
    """The rows8 kernels (cpu/arm/neon/*_rows8.h) are SDOT kernels: neon_dot repacks these types
    at load, plain neon keeps the GGUF layout."""
    assert not any(_core._testing.kernels.repacks(int(t), "neon") for t in ROWS8_TYPES)
    if "neon_dot" in _core.isa_available():
        assert all(_core._testing.kernels.repacks(int(t), "neon_dot") for t in ROWS8_TYPES)

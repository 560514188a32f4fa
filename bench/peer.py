"""Find or build the llama.cpp peer (bundled in the llama-cpp-python 0.3.36 source package).

    python bench/peer.py            # prints the bin folder, building it first if needed (~5 min on 2 cores)
    python bench/peer.py avx2       # the AVX2-only build (no AVX-512, no AVX-VNNI), in build-avx2/
    python bench/peer.py avx2_vnni  # AVX2 + AVX-VNNI, no AVX-512, in build-avx2_vnni/

libllama() gives llama-cpp-python's low-level ctypes module (llama_cpp.llama_cpp, from the same
sdist) bound to this build's libllama.so, for benches that drive llama.cpp's C API directly.

The build is cached in $QUICKDRAFT_PEER (default ~/.cache/quickdraft/peer), outside the repo.
$QD_LLAMA_CPP_BIN points at an existing build's bin folder instead.
"""

from __future__ import annotations

import importlib
import os
import platform
import subprocess
import sys
import tarfile
import types
from pathlib import Path

VERSION = "0.3.36"
TARGETS = ["llama-bench", "llama-completion", "llama-speculative", "llama-speculative-simple", "llama-lookup",
           "llama-tokenize", "llama-quantize"]


def peer_dir() -> Path:
    return Path(os.environ.get("QUICKDRAFT_PEER") or Path.home() / ".cache" / "quickdraft" / "peer")


# Extra configure flags per ISA: "avx2" is an AVX2-only build (no AVX-512, no AVX-VNNI), the
# laptop path measured fairly on an AVX-512 machine; None is the native build.
# The native build leaves out AMX: its matmul (ggml_backend_amx_mul_mat) crashes with SIGSEGV on
# the Sapphire Rapids VMs here, and no laptop has AMX.
_NO_AMX = ["-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
           "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"] if platform.machine() in ("x86_64", "AMD64") else []
_AVX2 = ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_AVX512=OFF"]
ISA_FLAGS = {
    None: ["-DGGML_NATIVE=ON", *_NO_AMX],
    "avx2": [*_AVX2, "-DGGML_AVX_VNNI=OFF"],
    # AVX2 with the VEX-encoded AVX-VNNI (Intel 12th gen and later laptops), no AVX-512: the peer of
    # QD_FORCE_ISA=avx2_vnni on a CPU that has both (Sapphire Rapids, say).
    "avx2_vnni": [*_AVX2, "-DGGML_AVX_VNNI=ON"],
}


def build_dir(isa: str | None = None) -> Path:
    return peer_dir() / ("build" if isa is None else f"build-{isa}")


def find_bin(isa: str | None = None) -> Path | None:
    env = os.environ.get("QD_LLAMA_CPP_BIN") if isa is None else os.environ.get(f"QD_LLAMA_CPP_BIN_{isa.upper()}")
    for cand in (env, build_dir(isa) / "bin"):
        if cand and (Path(cand) / "llama-bench").exists():
            return Path(cand)
    return None


def sdist() -> Path:
    """The llama-cpp-python source package in the peer cache, downloaded once."""
    root = peer_dir()
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"llama_cpp_python-{VERSION}.tar.gz"
    if not path.exists():
        # --no-build-isolation: pip must not build the sdist's own build tools from source.
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "--no-build-isolation", "-d", str(root), f"llama-cpp-python=={VERSION}"], check=True)
    return path


def build(isa: str | None = None) -> Path:
    root = peer_dir()
    src = root / f"llama_cpp_python-{VERSION}"
    if not src.exists():
        with tarfile.open(sdist()) as t:
            t.extractall(root)
    out = build_dir(isa)
    subprocess.run(["cmake", "-S", str(src / "vendor" / "llama.cpp"), "-B", str(out), *ISA_FLAGS[isa],
                    "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                    "-DCMAKE_BUILD_TYPE=Release"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(out), "-j2", "--target", *TARGETS], check=True)
    return out / "bin"


def ensure(isa: str | None = None) -> Path:
    """The peer's bin folder for `isa` (None: native; "avx2": AVX2-only; "avx2_vnni"), built once."""
    return find_bin(isa) or build(isa)


def sdist_source(bin_dir: Path) -> Path:
    """The unpacked llama-cpp-python sdist: next to the build, or in the peer cache (fetched)."""
    for cand in (bin_dir.parent.parent / f"llama_cpp_python-{VERSION}", peer_dir() / f"llama_cpp_python-{VERSION}"):
        if (cand / "llama_cpp" / "llama_cpp.py").exists():
            return cand
    with tarfile.open(sdist()) as t:
        t.extractall(peer_dir(), members=[m for m in t.getmembers() if "/llama_cpp/" in m.name])
    return peer_dir() / f"llama_cpp_python-{VERSION}"


def libllama(isa: str | None = None) -> types.ModuleType:
    """llama_cpp.llama_cpp bound to the peer's libllama.so (of the `isa` build, as ensure()), without
    the package's __init__ (which pulls in the high-level API and its dependencies)."""
    bin_dir = ensure(isa)
    os.environ["LLAMA_CPP_LIB_PATH"] = str(bin_dir)
    if "llama_cpp" not in sys.modules:
        pkg = types.ModuleType("llama_cpp")
        pkg.__path__ = [str(sdist_source(bin_dir) / "llama_cpp")]
        sys.modules["llama_cpp"] = pkg
    return importlib.import_module("llama_cpp.llama_cpp")


if __name__ == "__main__":
    print(ensure(sys.argv[1] if len(sys.argv) > 1 else None))

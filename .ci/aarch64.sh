#!/usr/bin/env bash
# CI step: cross-compile quickdraft._core for aarch64 and run the test suite under qemu-aarch64.
#
# No arm64 machine and no binfmt_misc are needed: the arm64 Python from Debian bookworm is
# unpacked into a sysroot folder and started explicitly as `qemu-aarch64 -L SYSROOT python3.11`.
# Everything lands in $QD_AARCH64_DIR (default build/aarch64) and is reused when present, so a
# second run only rebuilds and retests.
#
#   bash .ci/aarch64.sh                 # the CI step: build + the emulated tests
#   bash .ci/aarch64.sh --build-only    # stop after the wheel: build/aarch64/dist/*.whl
# Afterwards, any test by hand under emulation:
#   PYTHONPATH=build/aarch64/site:build/aarch64/pydeps build/aarch64/python3 -m pytest tests/...
set -euo pipefail
MODE=${1:-}
cd "$(dirname "$0")/.."
ROOT=$PWD
DIR=${QD_AARCH64_DIR:-$ROOT/build/aarch64}
SYSROOT=$DIR/sysroot     # arm64 Debian packages unpacked with dpkg -x
PYDEPS=$DIR/pydeps       # the Python packages the tests import, aarch64 wheels
BUILD=$DIR/build         # scikit-build-core's build folder (incremental)
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
start=$(date +%s)
mkdir -p "$DIR"

# Host tools. CMake >= 4.1: its FindPython runs the arm64 interpreter through the emulator.
if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++-aarch64-linux-gnu qemu-user >/dev/null
fi
python -m pip install -q "cmake>=4.1" ninja "pybind11>=2.12" "scikit-build-core>=0.11"

# arm64 packages from Debian, fetched with a private apt state (the host's dpkg stays untouched).
# The shared libraries of the stdlib modules the tests import (not dbm/nis: they pull in Kerberos).
ARM64_DEBS="libc6 libgcc-s1 libstdc++6 zlib1g libexpat1 libffi8 libssl3 libbz2-1.0 liblzma5
  libsqlite3-0 libuuid1 libncursesw6 libtinfo6 libreadline8 libcrypt1 python3.11-minimal
  libpython3.11-minimal libpython3.11-stdlib libpython3.11-dev libpython3.11"
if [ ! -e "$SYSROOT/.complete" ]; then
  echo "== aarch64: unpacking arm64 Python into $SYSROOT"
  A=$DIR/apt
  rm -rf "$A" "$SYSROOT"
  mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/debs" "$SYSROOT"
  : >"$A/status"
  for suite in "debian bookworm" "debian bookworm-updates" "debian-security bookworm-security"; do
    echo "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
      "http://deb.debian.org/${suite% *} ${suite#* } main"
  done >"$A/sources.list"
  APT_OPTS=(-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Dir::State="$A"
    -o Dir::State::status="$A/status" -o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache"
    -o Dir::Etc::SourceList="$A/sources.list" -o Dir::Etc::SourceParts=/nonexistent
    -o Dir::Etc::Parts=/nonexistent -o APT::Sandbox::User=root)
  apt-get "${APT_OPTS[@]}" -qq update
  (cd "$A/debs" && apt-get "${APT_OPTS[@]}" -qq download $ARM64_DEBS)
  for deb in "$A"/debs/*.deb; do dpkg -x "$deb" "$SYSROOT"; done
  touch "$SYSROOT/.complete"
fi

# The interpreter under emulation, as a command others (and CMake) can run.
cat >"$DIR/python3" <<EOF
#!/bin/sh
# arm64 CPython 3.11 under qemu-aarch64; QD_QEMU_CPU picks the emulated CPU (default: max).
# -0 makes sys.executable this script, so tests that start "sys.executable -c ..." work too.
exec qemu-aarch64 -cpu "\${QD_QEMU_CPU:-max}" -0 "$DIR/python3" -L "$SYSROOT" "$SYSROOT/usr/bin/python3.11" "\$@"
EOF
chmod +x "$DIR/python3"

# The package's dependencies and its test extra, as aarch64 wheels (numpy and scipy bring their
# own OpenBLAS). Reinstalled when pyproject.toml's lists change.
REQS=$(python -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print(" ".join(p["dependencies"] + p["optional-dependencies"]["test"]))')
if [ "$(cat "$PYDEPS/.complete" 2>/dev/null)" != "$REQS" ]; then
  echo "== aarch64: installing $REQS into $PYDEPS"
  rm -rf "$PYDEPS"
  python -m pip install -q --target "$PYDEPS" --only-binary=:all: --platform manylinux2014_aarch64 \
    --python-version 3.11 --implementation cp --abi cp311 $REQS
  echo "$REQS" >"$PYDEPS/.complete"
fi
echo "== aarch64: setup took $(( $(date +%s) - start )) s"

# The cross-compiled wheel, built the way users build it (docs/aarch64.md). The extension
# suffix and platform tag are the target's: scikit-build-core would otherwise take the host's.
b0=$(date +%s)
rm -rf "$DIR/dist"
SETUPTOOLS_EXT_SUFFIX=.cpython-311-aarch64-linux-gnu.so _PYTHON_HOST_PLATFORM=linux-aarch64 \
  python -m pip wheel . -q --no-deps --no-build-isolation -w "$DIR/dist" -Cbuild-dir="$BUILD" \
  -Ccmake.version=">=4.1" -Ccmake.python-hints=false \
  -Ccmake.define.CMAKE_TOOLCHAIN_FILE="$ROOT/cpp/cmake/aarch64-linux-gnu.cmake" \
  -Ccmake.define.QD_AARCH64_SYSROOT="$SYSROOT" -Ccmake.define.CMAKE_POLICY_DEFAULT_CMP0190=NEW
WHEEL=$(ls "$DIR"/dist/quickdraft-*-cp311-cp311-linux_aarch64.whl)
echo "== aarch64: built $WHEEL in $(( $(date +%s) - b0 )) s"
[ "$MODE" = "--build-only" ] && exit 0

# Install the wheel for the emulated Python: a wheel is a zip laid out as site-packages.
rm -rf "$DIR/site" && mkdir -p "$DIR/site"
python -m zipfile -e "$WHEEL" "$DIR/site"

export PYTHONPATH=$DIR/site:$PYDEPS
"$DIR/python3" -c "import platform, quickdraft; print('emulated:', platform.machine(), quickdraft.__file__)"

# The tests under emulation (-cpu max: NEON with SDOT, i8mm, fp16). Real models: SmolLM2-135M
# only; emulation runs 10-30x slower than native and the larger models cover no other code.
REAL_FILTER="not 270m and not coder"
failed=""
emulated() {  # emulated LABEL PYTEST-ARGS...: one pytest run, timed; a failure fails the step at the end
  local label=$1 t0 rc=0
  shift
  t0=$(date +%s)
  echo "== aarch64: $label"
  "$DIR/python3" -m pytest -q -ra -p no:cacheprovider "$@" || rc=$?
  echo "== aarch64: $label took $(( $(date +%s) - t0 )) s (exit $rc)"
  [ "$rc" = 0 ] || failed="$failed; $label"
}
emulated "all kernels + forward + tokenizer, NEON (SDOT)" -k "$REAL_FILTER" \
  tests/test_gguf_reader.py tests/test_gguf_hostile.py tests/test_quant.py tests/test_kernels.py \
  tests/test_forward_tiny.py tests/test_forward_api.py tests/test_forward_invariance.py \
  tests/test_tokenizer_*.py tests/test_chat_template.py tests/test_aarch64_neon.py \
  tests/test_aarch64_teacher.py
QD_FORCE_ISA=scalar emulated "forward pass, QD_FORCE_ISA=scalar" \
  tests/test_forward_tiny.py tests/test_forward_invariance.py
QD_QEMU_CPU=cortex-a72 emulated "kernels on a CPU without SDOT (Cortex-A72: Raspberry Pi 4)" \
  -k "not real" tests/test_kernels.py tests/test_aarch64_neon.py
echo "aarch64 step wall time: $(( $(date +%s) - start )) s"
if [ -n "$failed" ]; then
  echo "aarch64 step FAILED in: ${failed#; }"
  exit 1
fi

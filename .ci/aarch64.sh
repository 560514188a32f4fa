#!/usr/bin/env bash
# CI step: cross-compile quickdraft._core for aarch64 and run the test suite under qemu-aarch64.
#
# No arm64 machine and no binfmt_misc are needed: the arm64 Python from Debian bookworm is
# unpacked into a sysroot folder and started explicitly as `qemu-aarch64 -L SYSROOT python3.11`.
# Everything lands in $QD_AARCH64_DIR (default build/aarch64) and is reused when present, so a
# second run only rebuilds and retests.
#
#   bash .ci/aarch64.sh                 # the CI step: build + the emulated tests
#   bash .ci/aarch64.sh --build-only    # stop after the cross build
#   build/aarch64/python3 -m pytest ... # afterwards: run any test by hand under emulation
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIR=${QD_AARCH64_DIR:-$ROOT/build/aarch64}
SYSROOT=$DIR/sysroot     # arm64 Debian packages unpacked with dpkg -x
PYDEPS=$DIR/pydeps       # the Python packages the tests import, aarch64 wheels
BUILD=$DIR/build
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
start=$(date +%s)
mkdir -p "$DIR"

# Host tools. CMake >= 4.1: its FindPython runs the arm64 interpreter through the emulator.
if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++-aarch64-linux-gnu qemu-user >/dev/null
fi
python -m pip install -q "cmake>=4.1" ninja "pybind11>=2.12"

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
    set -- $suite
    echo "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
      "http://deb.debian.org/$1 $2 main"
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
exec qemu-aarch64 -cpu "\${QD_QEMU_CPU:-max}" -L "$SYSROOT" "$SYSROOT/usr/bin/python3.11" "\$@"
EOF
chmod +x "$DIR/python3"

# The test dependencies as aarch64 wheels (numpy with its own OpenBLAS; the rest pure Python).
if [ ! -e "$PYDEPS/.complete" ]; then
  echo "== aarch64: installing test dependencies into $PYDEPS"
  rm -rf "$PYDEPS"
  python -m pip install -q --target "$PYDEPS" --only-binary=:all: --platform manylinux2014_aarch64 \
    --python-version 3.11 --implementation cp --abi cp311 numpy gguf jinja2 pytest
  touch "$PYDEPS/.complete"
fi
echo "== aarch64: setup took $(( $(date +%s) - start )) s"

# The cross build: _core.cpython-311-aarch64-linux-gnu.so lands in python/quickdraft/ next to
# the host's x86_64 module (different names, no clash).
b0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$ROOT/cpp/cmake/aarch64-linux-gnu.cmake" \
  -DQD_AARCH64_SYSROOT="$SYSROOT" -DCMAKE_POLICY_DEFAULT_CMP0190=NEW -DQD_DEV_INPLACE=ON -DCMAKE_BUILD_TYPE=Release \
  -Dpybind11_DIR="$(python -c 'import pybind11; print(pybind11.get_cmake_dir())')" >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
file python/quickdraft/_core.cpython-311-aarch64-linux-gnu.so
echo "== aarch64: cross build took $(( $(date +%s) - b0 )) s"
[ "${1:-}" = "--build-only" ] && exit 0

export PYTHONPATH=$ROOT/python:$PYDEPS
"$DIR/python3" -c "import platform, quickdraft; print('emulated:', platform.machine(), quickdraft.__file__)"
echo "aarch64 step wall time: $(( $(date +%s) - start )) s"

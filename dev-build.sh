#!/usr/bin/env bash
# Development build: compiles quickdraft._core into python/quickdraft/ so that
# `PYTHONPATH=python pytest` tests the working tree without reinstalling.
set -euo pipefail
cd "$(dirname "$0")"
BUILD=${QD_BUILD_DIR:-build/dev}
cmake -S . -B "$BUILD" -G Ninja -DQD_DEV_INPLACE=ON -DCMAKE_BUILD_TYPE=${QD_BUILD_TYPE:-Release} \
  -Dpybind11_DIR="$(python -c 'import pybind11; print(pybind11.get_cmake_dir())')" "$@" >/dev/null
cmake --build "$BUILD" -j2

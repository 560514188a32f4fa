#!/usr/bin/env bash
# CI step: build the GGUF reader with AddressSanitizer + UBSan (plain CMake + Ninja, no Python
# module) and replay the hostile-file corpus through it; any sanitizer report or unexpected
# exception fails the step. QD_FUZZ_ITERATIONS sets the number of mutated files (default 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build/sanitize
start=$(date +%s)

# -O0 -g1: the kernels compile ~7x faster than at -O2 -g, sanitizers see every access, and
# line tables are enough for readable reports.
cmake -S . -B "$BUILD" -G Ninja -DQD_SANITIZE=ON -DQD_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" >/dev/null
cmake --build "$BUILD" -j"${QD_JOBS:-2}" --target gguf_fuzz_replay

corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
python tests/fixtures/hostile.py "$corpus/a" "${QD_FUZZ_ITERATIONS:-2000}" 0
python tests/fixtures/hostile.py "$corpus/b" "${QD_FUZZ_ITERATIONS:-2000}" 1

# halt_on_error + a distinct exit code: the first report fails the step; leaks count too.
export ASAN_OPTIONS=halt_on_error=1:exitcode=86:detect_leaks=1:allocator_may_return_null=0:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=87
"$BUILD/tests/native/gguf_fuzz_replay" "$corpus/a" "$corpus/b"

echo "sanitize: passed in $(( $(date +%s) - start )) s"

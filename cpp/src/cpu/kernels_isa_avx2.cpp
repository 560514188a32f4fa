// AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; see CMakeLists.txt here).
#include <immintrin.h>

#include "cpu/x86_table.h"

namespace qd::cpu {

namespace {
struct Avx2Tag {
  static constexpr bool kVnni = false;
  static constexpr int kMaxRows = 4;  // 16 ymm registers: 2 accumulators per row + temporaries
};
}  // namespace

const KernelTable& kernels_avx2() {
  static const KernelTable t = make_x86_table<Avx2Tag>(Isa::avx2);
  return t;
}

}  // namespace qd::cpu

// AVX-512 (F/BW/VL/DQ + VNNI) kernels: the AVX2 kernels with VNNI dot products and the 32 vector
// registers used for taller tiles (compiled with -mavx512*; see CMakeLists.txt here).
#include <immintrin.h>

#include "cpu/x86_table.h"

namespace qd::cpu {

namespace {
struct Avx512Tag {
  static constexpr bool kVnni = true;
  static constexpr int kMaxRows = 8;  // 32 vector registers: 2 accumulators per row + temporaries
};
}  // namespace

const KernelTable& kernels_avx512() {
  static const KernelTable t = make_x86_table<Avx512Tag>(Isa::avx512);
  return t;
}

}  // namespace qd::cpu

// The avx2 kernel table (AVX2 + FMA + F16C; compiled with -mavx2 -mfma -mf16c, see
// cpp/src/cpu/CMakeLists.txt). The list: x86/avx2/table.h.
#include "cpu/x86/avx2/table.h"

namespace qd::cpu {

namespace {

struct Avx2Tag {
  static constexpr DotU8S8 kDot = DotU8S8::maddubs;
  static constexpr int kMaxRows = 4;  // 16 ymm registers: 2 accumulators per row + temporaries
};

constexpr KernelTable kTable = avx2_table<Avx2Tag>(Isa::avx2);

}  // namespace

const KernelTable& kernels_avx2() { return kTable; }

}  // namespace qd::cpu

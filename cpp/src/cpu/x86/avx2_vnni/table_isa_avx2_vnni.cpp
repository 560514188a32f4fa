// The avx2_vnni kernel table: the avx2 kernels (x86/avx2/table.h) with AVX-VNNI's VEX-encoded
// 256-bit dot products (compiled with -mavx2 -mfma -mf16c -mavxvnni, see cpp/src/cpu/CMakeLists.txt).
#include "cpu/x86/avx2/table.h"

namespace qd::cpu {

namespace {

struct Avx2VnniTag {
  static constexpr DotU8S8 kDot = DotU8S8::vnni_vex;
  static constexpr int kMaxRows = 4;  // 16 ymm registers, as avx2
};

constexpr KernelTable kTable = avx2_table<Avx2VnniTag>(Isa::avx2_vnni);

}  // namespace

const KernelTable& kernels_avx2_vnni() { return kTable; }

}  // namespace qd::cpu

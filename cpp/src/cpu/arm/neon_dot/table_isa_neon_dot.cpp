// The neon_dot kernel table: the neon kernels with SDOT dot products (compiled with
// -march=armv8.2-a+dotprod, see cpp/src/cpu/CMakeLists.txt; Cortex-A55/A76/A78, Jetson Orin,
// Pi 5). Bit-identical to neon's. The list: arm/neon/table.h.
#include "cpu/arm/neon/table.h"

namespace qd::cpu {

namespace {

struct NeonDotTag {
  static constexpr bool kDot = true;
};

constexpr KernelTable kTable = make_neon_table<NeonDotTag>(Isa::neon_dot);

}  // namespace

const KernelTable& kernels_neon_dot() { return kTable; }

}  // namespace qd::cpu

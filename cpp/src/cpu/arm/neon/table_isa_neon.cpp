// The neon kernel table: plain armv8-a, every aarch64 CPU (Cortex-A53/A57/A72: Raspberry Pi 3/4,
// Jetson Nano). The list: arm/neon/table.h.
#include "cpu/arm/neon/table.h"

namespace qd::cpu {

namespace {

struct NeonTag {
  static constexpr bool kDot = false;
};

constexpr KernelTable kTable = make_neon_table<NeonTag>(Isa::neon);

}  // namespace

const KernelTable& kernels_neon() { return kTable; }

}  // namespace qd::cpu

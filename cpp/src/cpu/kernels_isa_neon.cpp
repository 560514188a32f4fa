// NEON kernels for every aarch64 CPU (plain armv8-a: Cortex-A53/A57/A72, i.e. Raspberry Pi 3/4 and
// Jetson Nano), and the choice between them and the SDOT build (kernels_isa_neon_dot.cpp) for
// CPUs with asimddp. Both compute bit-identical results on weights in the GGUF layout (see
// neon_kernels.h); only the SDOT table has rows8 kernels, so only there are weights repacked.
#include "common/cpu_features.h"
#include "cpu/neon_kernels.h"

namespace qd::cpu {

const KernelTable& kernels_neon_dot();  // kernels_isa_neon_dot.cpp

namespace {
struct NeonTag {
  static constexpr bool kDot = false;
};
}  // namespace

const KernelTable& kernels_neon() {
  static const KernelTable base = make_neon_table<NeonTag>();
  return cpu_features().dotprod ? kernels_neon_dot() : base;
}

}  // namespace qd::cpu

// NEON kernels with SDOT (compiled with -march=armv8.2-a+dotprod; see CMakeLists.txt here).
// Chosen by kernels_neon() (kernels_isa_neon.cpp) only when the CPU reports asimddp.
#include "cpu/neon_kernels.h"

namespace qd::cpu {

namespace {
struct NeonDotTag {
  static constexpr bool kDot = true;
};
}  // namespace

const KernelTable& kernels_neon_dot() {
  static const KernelTable t = make_neon_table<NeonDotTag>();
  return t;
}

}  // namespace qd::cpu

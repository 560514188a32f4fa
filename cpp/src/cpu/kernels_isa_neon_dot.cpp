// NEON kernels with SDOT (compiled with -march=armv8.2-a+dotprod; see CMakeLists.txt here).
// Chosen by kernels_neon() (kernels_isa_neon.cpp) only when the CPU reports asimddp.
#include "cpu/neon_kernels.h"
#include "cpu/arm/neon/q32_rows8.h"
#include "cpu/arm/neon/q4k_rows8.h"
#include "cpu/arm/neon/q6k_rows8.h"

namespace qd::cpu {

namespace {
struct NeonDotTag {
  static constexpr bool kDot = true;
};

// Weights repacked at load into 8 interleaved rows (cpu/repack.h): the rows8 kernels.
void set_neon_dot_rows8(KernelTable& k) {
  using quant::Type;
  k.rows8[(uint32_t)Type::Q4_K] = {q4k_rows8_gemm<NeonDotTag, 4>, ActFormat::q8_K};
  k.rows8[(uint32_t)Type::Q6_K] = {q6k_rows8_gemm<NeonDotTag, 4>, ActFormat::q8_K};
  k.rows8[(uint32_t)Type::Q4_0] = {q32_rows8_gemm<N8Q4_0, NeonDotTag, 4>, ActFormat::q8_0};
  k.rows8[(uint32_t)Type::Q4_1] = {q32_rows8_gemm<N8Q4_1, NeonDotTag, 4>, ActFormat::q8_0};
  k.rows8[(uint32_t)Type::Q5_0] = {q32_rows8_gemm<N8Q5_0, NeonDotTag, 4>, ActFormat::q8_0};
  k.rows8[(uint32_t)Type::Q5_1] = {q32_rows8_gemm<N8Q5_1, NeonDotTag, 4>, ActFormat::q8_0};
  k.rows8[(uint32_t)Type::Q8_0] = {q32_rows8_gemm<N8Q8_0, NeonDotTag, 4>, ActFormat::q8_0};
}
}  // namespace

const KernelTable& kernels_neon_dot() {
  static const KernelTable t = [] {
    KernelTable k = make_neon_table<NeonDotTag>();
    set_neon_dot_rows8(k);
    return k;
  }();
  return t;
}

}  // namespace qd::cpu

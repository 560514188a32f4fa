// The neon_dot kernel table: the neon kernels with SDOT dot products (compiled with
// -march=armv8.2-a+dotprod, see cpp/src/cpu/CMakeLists.txt; Cortex-A55/A76/A78, Jetson Orin,
// Pi 5). For weights in the GGUF layout bit-identical to neon's; the list: arm/neon/table.h.
#include "cpu/arm/neon/q32_rows8.h"
#include "cpu/arm/neon/q4k_rows8.h"
#include "cpu/arm/neon/q6k_rows8.h"
#include "cpu/arm/neon/table.h"

namespace qd::cpu {

namespace {

struct NeonDotTag {
  static constexpr bool kDot = true;
};

// neon's list plus the SDOT kernels for weights repacked at load into 8 interleaved rows
// (cpu/repack.h): a CPU with SDOT reads these types repacked.
constexpr KernelTable make_table() {
  using quant::Type;
  KernelTable t = make_neon_table<NeonDotTag>(Isa::neon_dot);
  set_rows8(t, Type::Q4_K, q4k_rows8_gemm<NeonDotTag, 4>, ActFormat::q8_K);
  set_rows8(t, Type::Q6_K, q6k_rows8_gemm<NeonDotTag, 4>, ActFormat::q8_K);
  set_rows8(t, Type::Q4_0, q32_rows8_gemm<N8Q4_0, NeonDotTag, 4>, ActFormat::q8_0);
  set_rows8(t, Type::Q4_1, q32_rows8_gemm<N8Q4_1, NeonDotTag, 4>, ActFormat::q8_0);
  set_rows8(t, Type::Q5_0, q32_rows8_gemm<N8Q5_0, NeonDotTag, 4>, ActFormat::q8_0);
  set_rows8(t, Type::Q5_1, q32_rows8_gemm<N8Q5_1, NeonDotTag, 4>, ActFormat::q8_0);
  set_rows8(t, Type::Q8_0, q32_rows8_gemm<N8Q8_0, NeonDotTag, 4>, ActFormat::q8_0);
  return t;
}

constexpr KernelTable kTable = make_table();

}  // namespace

const KernelTable& kernels_neon_dot() { return kTable; }

}  // namespace qd::cpu

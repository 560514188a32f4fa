// AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; see CMakeLists.txt here).
#include <immintrin.h>

#include "cpu/x86_table.h"
#include "cpu/x86/avx2/q4k_rows8.h"
#include "cpu/x86/avx2/iq4xs_rows8.h"
#include "cpu/x86/avx2/q2k_q3k_rows8.h"
#include "cpu/x86/avx2/q32_rows8.h"
#include "cpu/x86/avx2/q6k_rows8.h"

namespace qd::cpu {

namespace {
struct Avx2Tag {
  static constexpr bool kVnni = false;
  static constexpr int kMaxRows = 4;  // 16 ymm registers: 2 accumulators per row + temporaries
};
}  // namespace

const KernelTable& kernels_avx2() {
  static const KernelTable t = [] {
    KernelTable k = make_x86_table<Avx2Tag>(Isa::avx2);
    k.rows8[(uint32_t)quant::Type::Q4_K] = {q4k_rows8_gemm<false, 4>, ActFormat::q8_K};
    k.rows8[(uint32_t)quant::Type::Q5_K] = {q4k_rows8_gemm<true, 4>, ActFormat::q8_K};
    k.rows8[(uint32_t)quant::Type::Q3_K] = {k23_rows8_gemm<true, 4>, ActFormat::q8_K};
    k.rows8[(uint32_t)quant::Type::Q2_K] = {k23_rows8_gemm<false, 4>, ActFormat::q8_K};
    k.rows8[(uint32_t)quant::Type::IQ4_XS] = {iq4xs_rows8_gemm<4>, ActFormat::q8_K};
    k.rows8[(uint32_t)quant::Type::Q6_K] = {q6k_rows8_gemm<false, 4>, ActFormat::q8_K};
    k.rows8[(uint32_t)quant::Type::Q4_0] = {q32_rows8_gemm<R8Q4_0, 4>, ActFormat::q8_0};
    k.rows8[(uint32_t)quant::Type::Q4_1] = {q32_rows8_gemm<R8Q4_1, 4>, ActFormat::q8_0};
    k.rows8[(uint32_t)quant::Type::Q5_0] = {q32_rows8_gemm<R8Q5_0, 4>, ActFormat::q8_0};
    k.rows8[(uint32_t)quant::Type::Q5_1] = {q32_rows8_gemm<R8Q5_1, 4>, ActFormat::q8_0};
    k.rows8[(uint32_t)quant::Type::Q8_0] = {q32_rows8_gemm<R8Q8_0, 4>, ActFormat::q8_0};
    k.rows8[(uint32_t)quant::Type::IQ4_NL] = {q32_rows8_gemm<R8IQ4_NL, 4>, ActFormat::q8_0};
    return k;
  }();
  return t;
}

}  // namespace qd::cpu

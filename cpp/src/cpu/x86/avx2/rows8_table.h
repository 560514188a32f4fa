// The rows8 entries of a kernel table (weights repacked at load, cpu/repack.h): one list for every
// x86 table that serves the layout (avx2 and avx2_vnni through x86/avx2/table.h, avx512), each
// compiling the kernels with its own flags. Include only from those tables' translation units.
#pragma once
#include "cpu/table_builder.h"
#include "cpu/x86/avx2/iq4xs_rows8.h"
#include "cpu/x86/avx2/q2k_q3k_rows8.h"
#include "cpu/x86/avx2/q32_rows8.h"
#include "cpu/x86/avx2/q4k_rows8.h"
#include "cpu/x86/avx2/q6k_rows8.h"

namespace qd::cpu {
namespace {

// kMaxK: the tallest tile of the K-quant kernels; kMaxQ4K / kMaxQ6K override it for Q4_K and Q5_K /
// Q6_K. The AVX-512 table (32 registers) takes 8 for all: Q4_K / Q6_K n = 8, 1 thread, Zen 4:
// 10-12 % faster than 4, while the 32-weight types lose at 8 (Q4_0 n = 8: 7 %) and stay at 4. The
// AVX2 table takes 4, and 8 for Q4_K, Q5_K and Q6_K, whose taller tiles are tall tiles
// (rows8_tall: weights row by row against broadcast activations; 2048 x 1536, n = 8, 1 thread,
// Zen 4, forced AVX2: Q4_K 0.207 ms, Q6_K 0.263 ms, against 0.219 and 0.294 in the row-by-row
// tiles before them, which were themselves 3 % and 17 % faster than two tiles of 4).
template <class Tag, int kMaxK, int kMaxQ6K = kMaxK, int kMaxQ4K = kMaxK>
constexpr void set_rows8_kernels(KernelTable& t) {
  using quant::Type;
  set_rows8(t, Type::Q4_0, q32_rows8_gemm<R8Q4_0, 4>, ActFormat::q8_0);
  set_rows8(t, Type::Q4_1, q32_rows8_gemm<R8Q4_1, 4>, ActFormat::q8_0);
  set_rows8(t, Type::Q5_0, q32_rows8_gemm<R8Q5_0, 4>, ActFormat::q8_0);
  set_rows8(t, Type::Q5_1, q32_rows8_gemm<R8Q5_1, 4>, ActFormat::q8_0);
  set_rows8(t, Type::Q8_0, q32_rows8_gemm<R8Q8_0, 4>, ActFormat::q8_0);
  set_rows8(t, Type::IQ4_NL, q32_rows8_gemm<R8IQ4_NL, 4>, ActFormat::q8_0);
  set_rows8(t, Type::Q2_K, k23_rows8_gemm<false, kMaxK>, ActFormat::q8_K);
  set_rows8(t, Type::Q3_K, k23_rows8_gemm<true, kMaxK>, ActFormat::q8_K);
  set_rows8(t, Type::Q4_K, q4k_rows8_gemm<Tag::kDot, false, kMaxQ4K>, ActFormat::q8_K);
  set_rows8(t, Type::Q5_K, q4k_rows8_gemm<Tag::kDot, true, kMaxQ4K>, ActFormat::q8_K);
  set_rows8(t, Type::Q6_K, q6k_rows8_gemm<Tag::kDot, kMaxQ6K>, ActFormat::q8_K);
  set_rows8(t, Type::IQ4_XS, iq4xs_rows8_gemm<kMaxK>, ActFormat::q8_K);
}

}  // namespace
}  // namespace qd::cpu

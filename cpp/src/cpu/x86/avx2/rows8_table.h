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

// kMaxK: the tallest tile of the K-quant kernels, kMaxQ32 that of the 32-weight types. The AVX-512
// table (32 registers) takes 8 for the K-quants: Q4_K / Q6_K n = 8, 1 thread, Zen 4: 10-12 %
// faster than 4, while the 32-weight types' walk tiles lose at 8 (Q4_0 n = 8: 7 %) and stay at 4.
// The AVX2 table takes 8 for all: their tiles of 6-8 rows are tall tiles (rows8_tall: weights row
// by row against broadcast activations; 5 rows walk, rows8_is_tall), against the walk tiles of up
// to 4 before them (the measurements below date from tall tiles of 5-8 rows):
// - 2048 x 1536, n = 8, 1 thread, Zen 4, forced AVX2: Q4_K 0.207 ms, Q6_K 0.263 ms, against 0.219
//   and 0.294 in the row-by-row tiles before them, which were themselves 3 % and 17 % faster than
//   two tiles of 4;
// - the 32-weight types against two walk tiles of 4 (or 3 + 2 at n = 5), the models' forward of
//   n tokens (bench/ab_builds.py, forced AVX2, Zen 4, 16-24 pairs): Qwen-0.5B (Q5_0, Q8_0 output)
//   n = 5 / 8 / 16 0.836 / 0.848 / 0.948 of the time, 64 / 256 0.92 / 0.86; Gemma-3-270M n = 8
//   0.926, 64 0.966; SmolLM2-135M (Q4_1) n = 8 / 16 0.87 / 0.86, 256 0.957;
// - IQ4_XS (the 1.5B requantized, 12 pairs): n = 5 / 8 / 64 0.902 / 0.853 / 0.973.
template <class Tag, int kMaxK, int kMaxQ32 = 4>
constexpr void set_rows8_kernels(KernelTable& t) {
  using quant::Type;
  set_rows8(t, Type::Q4_0, q32_rows8_gemm<R8Q4_0, kMaxQ32>, ActFormat::q8_0);
  set_rows8(t, Type::Q4_1, q32_rows8_gemm<R8Q4_1, kMaxQ32>, ActFormat::q8_0);
  set_rows8(t, Type::Q5_0, q32_rows8_gemm<R8Q5_0, kMaxQ32>, ActFormat::q8_0);
  set_rows8(t, Type::Q5_1, q32_rows8_gemm<R8Q5_1, kMaxQ32>, ActFormat::q8_0);
  set_rows8(t, Type::Q8_0, q32_rows8_gemm<R8Q8_0, kMaxQ32>, ActFormat::q8_0);
  set_rows8(t, Type::IQ4_NL, q32_rows8_gemm<R8IQ4_NL, kMaxQ32>, ActFormat::q8_0);
  set_rows8(t, Type::Q2_K, k23_rows8_gemm<false, kMaxK>, ActFormat::q8_K);
  set_rows8(t, Type::Q3_K, k23_rows8_gemm<true, kMaxK>, ActFormat::q8_K);
  set_rows8(t, Type::Q4_K, q4k_rows8_gemm<Tag::kDot, false, kMaxK>, ActFormat::q8_K);
  set_rows8(t, Type::Q5_K, q4k_rows8_gemm<Tag::kDot, true, kMaxK>, ActFormat::q8_K);
  set_rows8(t, Type::Q6_K, q6k_rows8_gemm<Tag::kDot, kMaxK>, ActFormat::q8_K);
  set_rows8(t, Type::IQ4_XS, iq4xs_rows8_gemm<kMaxK>, ActFormat::q8_K);
}

}  // namespace
}  // namespace qd::cpu

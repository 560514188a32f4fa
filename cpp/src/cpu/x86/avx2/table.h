// The kernel table of the avx2 and avx2_vnni ISAs: one list, instantiated with each one's Tag
// (x86/common.h; avx2_vnni's differs only in its 256-bit dot products). Include only from
// table_isa_avx2.cpp and table_isa_avx2_vnni.cpp.
#pragma once
#include "cpu/table_builder.h"
#include "cpu/x86/act_quant.h"
#include "cpu/x86/avx2/attention.h"
#include "cpu/x86/avx2/block32_quants.h"
#include "cpu/x86/avx2/rows8_table.h"
#include "cpu/x86/avx2/silu.h"
#include "cpu/x86/avx2/k_quants.h"
#include "cpu/x86/float_weights.h"
#include "cpu/x86/rope.h"

namespace qd::cpu {
namespace {

template <class Tag>
constexpr KernelTable avx2_table(Isa isa) {
  using quant::Type;
  KernelTable t{};
  t.isa = isa;
  set_gemm(t, Type::F32, float_gemm<Tag, false>, ActFormat::f32);
  set_gemm(t, Type::F16, float_gemm<Tag, true>, ActFormat::f32);
  set_gemm(t, Type::BF16, scalar::gemm_dequant, ActFormat::f32);
  set_gemm(t, Type::Q4_0, q32_gemm<Tag, WQ4_0>, ActFormat::q8_0);
  set_gemm(t, Type::Q4_1, q32_gemm<Tag, WQ4_1>, ActFormat::q8_0);
  set_gemm(t, Type::Q5_0, q32_gemm<Tag, WQ5_0>, ActFormat::q8_0);
  set_gemm(t, Type::Q5_1, q32_gemm<Tag, WQ5_1>, ActFormat::q8_0);
  set_gemm(t, Type::Q8_0, q32_gemm<Tag, WQ8_0>, ActFormat::q8_0);
  set_gemm(t, Type::IQ4_NL, q32_gemm<Tag, WIQ4_NL>, ActFormat::q8_0);
  set_gemm(t, Type::Q2_K, ksuper_gemm<Tag, KQ2>, ActFormat::q8_K);
  set_gemm(t, Type::Q3_K, ksuper_gemm<Tag, KQ3>, ActFormat::q8_K);
  set_gemm(t, Type::Q4_K, ksuper_gemm<Tag, KQ4>, ActFormat::q8_K);
  set_gemm(t, Type::Q5_K, ksuper_gemm<Tag, KQ5>, ActFormat::q8_K);
  set_gemm(t, Type::Q6_K, ksuper_gemm<Tag, KQ6>, ActFormat::q8_K);
  set_gemm(t, Type::Q8_K, scalar::gemm_dequant, ActFormat::f32);
  set_gemm(t, Type::IQ4_XS, ksuper_gemm<Tag, KIQ4XS>, ActFormat::q8_K);
  set_not_computable(t);
  // Weights repacked at load into 8 interleaved rows (cpu/repack.h); the list above serves the
  // matrices that are not (rows not a multiple of 8, rows copied out of a repacked matrix).
  set_rows8_kernels<Tag, 8, 8>(t);
  set_quantize(t, ActFormat::q8_0, x86_quantize_q8_0);
  set_quantize(t, ActFormat::q8_K, x86_quantize_q8_K);
  t.half_to_float = x86_half_to_float;
  t.float_to_half = x86_float_to_half;
  t.half_to_float_rows = avx2::half_to_float_rows;
  t.scaled_dots = avx2::scaled_dots<float>;
  t.scaled_dots_f16 = avx2::scaled_dots<uint16_t>;
  t.softmax = avx2::softmax;
  t.weighted_rows_add = avx2::weighted_rows_add<float>;
  t.weighted_rows_add_f16 = avx2::weighted_rows_add<uint16_t>;
  t.reduce_lanes = avx2::reduce_lanes;
  t.silu_mul = avx2::silu_mul;
  t.rope = x86_rope;
  return t;
}

}  // namespace
}  // namespace qd::cpu

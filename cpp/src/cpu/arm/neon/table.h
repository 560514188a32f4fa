// The kernel table of the neon and neon_dot ISAs: one list, instantiated with each one's Tag
// (arm/neon/common.h; neon_dot's uses SDOT). Include only from table_isa_neon.cpp and
// table_isa_neon_dot.cpp.
#pragma once
#include "cpu/arm/neon/attention.h"
#include "cpu/arm/neon/block32_quants.h"
#include "cpu/arm/neon/k_quants.h"
#include "cpu/table_builder.h"

namespace qd::cpu {
namespace {

template <class Tag>
constexpr KernelTable make_neon_table(Isa isa) {
  using quant::Type;
  KernelTable t{};
  t.isa = isa;
  set_gemm(t, Type::F32, scalar::gemm_f32, ActFormat::f32);
  set_gemm(t, Type::F16, scalar::gemm_f16, ActFormat::f32);
  set_gemm(t, Type::BF16, scalar::gemm_dequant, ActFormat::f32);
  set_gemm(t, Type::Q4_0, q32_gemm<Tag, NQ4_0>, ActFormat::q8_0);
  set_gemm(t, Type::Q4_1, q32_gemm<Tag, NQ4_1>, ActFormat::q8_0);
  set_gemm(t, Type::Q5_0, q32_gemm<Tag, NQ5_0>, ActFormat::q8_0);
  set_gemm(t, Type::Q5_1, q32_gemm<Tag, NQ5_1>, ActFormat::q8_0);
  set_gemm(t, Type::Q8_0, q32_gemm<Tag, NQ8_0>, ActFormat::q8_0);
  set_gemm(t, Type::IQ4_NL, q32_gemm<Tag, NIQ4_NL>, ActFormat::q8_0);
  set_gemm(t, Type::Q2_K, kq16_gemm<Tag, NKQ2>, ActFormat::q8_K);
  set_gemm(t, Type::Q3_K, kq16_gemm<Tag, NKQ3>, ActFormat::q8_K);
  set_gemm(t, Type::Q4_K, q4k_gemm<Tag>, ActFormat::q8_K);
  set_gemm(t, Type::Q5_K, kq16_gemm<Tag, NKQ5>, ActFormat::q8_K);
  set_gemm(t, Type::Q6_K, q6k_gemm<Tag>, ActFormat::q8_K);
  set_gemm(t, Type::Q8_K, scalar::gemm_dequant, ActFormat::f32);
  set_gemm(t, Type::IQ4_XS, kq16_gemm<Tag, NKIQ4XS>, ActFormat::q8_K);
  set_not_computable(t);
  set_quantize(t, ActFormat::q8_0, scalar::quantize_q8_0);
  set_quantize(t, ActFormat::q8_K, scalar::quantize_q8_K);
  t.half_to_float = scalar::half_to_float;
  t.float_to_half = scalar::float_to_half;
  t.half_to_float_rows = scalar::half_to_float_rows;
  t.scaled_dots = scalar::scaled_dots;
  t.softmax = scalar::softmax;
  t.weighted_rows_add = neon::weighted_rows_add;
  t.scaled_dots_f16 = scaled_dots_converting<scalar::half_to_float_rows, scalar::scaled_dots>;
  t.weighted_rows_add_f16 = weighted_rows_add_converting<scalar::half_to_float_rows, neon::weighted_rows_add>;
  t.reduce_lanes = scalar::reduce_lanes;
  t.silu_mul = scalar::silu_mul;
  t.rope = scalar::rope;
  return t;
}

}  // namespace
}  // namespace qd::cpu

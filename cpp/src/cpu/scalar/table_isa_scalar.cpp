// The scalar kernel table: the reference kernels (cpu/scalar/kernels.h) for every routine.
#include "cpu/scalar/attention.h"
#include "cpu/scalar/kernels.h"
#include "cpu/table_builder.h"

namespace qd::cpu {

namespace {

constexpr KernelTable make_table() {
  using quant::Type;
  KernelTable t{};
  t.isa = Isa::scalar;
  set_gemm(t, Type::F32, scalar::gemm_f32, ActFormat::f32);
  set_gemm(t, Type::F16, scalar::gemm_f16, ActFormat::f32);
  set_gemm(t, Type::BF16, scalar::gemm_dequant, ActFormat::f32);
  set_gemm(t, Type::Q4_0, scalar::gemm_q4_0, ActFormat::q8_0);
  set_gemm(t, Type::Q4_1, scalar::gemm_q4_1, ActFormat::q8_0);
  set_gemm(t, Type::Q5_0, scalar::gemm_q5_0, ActFormat::q8_0);
  set_gemm(t, Type::Q5_1, scalar::gemm_q5_1, ActFormat::q8_0);
  set_gemm(t, Type::Q8_0, scalar::gemm_q8_0, ActFormat::q8_0);
  set_gemm(t, Type::IQ4_NL, scalar::gemm_iq4_nl, ActFormat::q8_0);
  set_gemm(t, Type::Q2_K, scalar::gemm_q2_K, ActFormat::q8_K);
  set_gemm(t, Type::Q3_K, scalar::gemm_q3_K, ActFormat::q8_K);
  set_gemm(t, Type::Q4_K, scalar::gemm_q4_K, ActFormat::q8_K);
  set_gemm(t, Type::Q5_K, scalar::gemm_q5_K, ActFormat::q8_K);
  set_gemm(t, Type::Q6_K, scalar::gemm_q6_K, ActFormat::q8_K);
  set_gemm(t, Type::Q8_K, scalar::gemm_dequant, ActFormat::f32);
  set_gemm(t, Type::IQ4_XS, scalar::gemm_iq4_xs, ActFormat::q8_K);
  set_not_computable(t);
  set_quantize(t, ActFormat::q8_0, scalar::quantize_q8_0);
  set_quantize(t, ActFormat::q8_K, scalar::quantize_q8_K);
  t.half_to_float = scalar::half_to_float;
  t.float_to_half = scalar::float_to_half;
  t.half_to_float_rows = scalar::half_to_float_rows;
  t.scaled_dots = scalar::scaled_dots;
  t.softmax = scalar::softmax;
  t.weighted_rows_add = scalar::weighted_rows_add;
  t.scaled_dots_f16 = scaled_dots_converting<scalar::half_to_float_rows, scalar::scaled_dots>;
  t.weighted_rows_add_f16 = weighted_rows_add_converting<scalar::half_to_float_rows, scalar::weighted_rows_add>;
  t.reduce_lanes = scalar::reduce_lanes;
  t.silu_mul = scalar::silu_mul;
  t.rope = scalar::rope;
  return t;
}

constexpr KernelTable kTable = make_table();

}  // namespace

const KernelTable& kernels_scalar() { return kTable; }

}  // namespace qd::cpu

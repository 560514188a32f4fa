// The kernel table of one x86 ISA file. Include rules: see x86_common.h.
#pragma once
#include "cpu/kernels.h"
#include "cpu/x86_float.h"
#include "cpu/x86_kquants.h"
#include "cpu/x86_q32.h"
#include "cpu/x86_quantize.h"
#include "quant/quant_types.h"

namespace qd::cpu {
namespace {

template <class Tag>
KernelTable make_x86_table(Isa isa) {
  using quant::Type;
  KernelTable t{};
  t.isa = isa;
  auto set = [&](Type type, GemmRowsFn fn, ActFormat act) { t.gemm[(uint32_t)type] = {fn, act}; };
  set(Type::F32, float_gemm<Tag, false>, ActFormat::f32);
  set(Type::F16, float_gemm<Tag, true>, ActFormat::f32);
  set(Type::Q4_0, q32_gemm<Tag, WQ4_0>, ActFormat::q8_0);
  set(Type::Q4_1, q32_gemm<Tag, WQ4_1>, ActFormat::q8_0);
  set(Type::Q5_0, q32_gemm<Tag, WQ5_0>, ActFormat::q8_0);
  set(Type::Q5_1, q32_gemm<Tag, WQ5_1>, ActFormat::q8_0);
  set(Type::Q8_0, q32_gemm<Tag, WQ8_0>, ActFormat::q8_0);
  set(Type::IQ4_NL, q32_gemm<Tag, WIQ4_NL>, ActFormat::q8_0);
  set(Type::Q2_K, ksuper_gemm<Tag, KQ2>, ActFormat::q8_K);
  set(Type::Q3_K, ksuper_gemm<Tag, KQ3>, ActFormat::q8_K);
  set(Type::Q4_K, ksuper_gemm<Tag, KQ4>, ActFormat::q8_K);
  set(Type::Q5_K, ksuper_gemm<Tag, KQ5>, ActFormat::q8_K);
  set(Type::Q6_K, ksuper_gemm<Tag, KQ6>, ActFormat::q8_K);
  set(Type::IQ4_XS, ksuper_gemm<Tag, KIQ4XS>, ActFormat::q8_K);
  t.half_to_float = x86_half_to_float;
  t.float_to_half = x86_float_to_half;
  t.quantize[(int)ActFormat::q8_0] = x86_quantize_q8_0;
  t.quantize[(int)ActFormat::q8_K] = x86_quantize_q8_K;
  return t;
}

}  // namespace
}  // namespace qd::cpu

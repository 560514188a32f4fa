// Helpers for writing a kernel table as a list, evaluated at compile time (each table file
// declares `constexpr KernelTable kTable = make_table();`). Listing a type twice does not compile.
// Include only from a table file (anonymous namespace: each ISA file keeps its own copy).
#pragma once
#include "cpu/kernels.h"
#include "cpu/scalar/kernels.h"
#include "quant/quant_types.h"

namespace qd::cpu {
namespace {

constexpr void set_gemm(KernelTable& t, quant::Type type, GemmRowsFn fn, ActFormat act) {
  GemmKernel& k = t.gemm[(uint32_t)type];
  if (k.fn != nullptr) throw "this type is already in the table";  // not a constant expression
  k = {fn, act};
}

// The kernel for weights of `type` in the rows8 layout (cpu/repack.h): loading repacks them.
constexpr void set_rows8(KernelTable& t, quant::Type type, GemmRowsFn fn, ActFormat act) {
  GemmKernel& k = t.rows8[(uint32_t)type];
  if (k.fn != nullptr) throw "this type is already in the rows8 list";  // not a constant expression
  if (t.gemm[(uint32_t)type].act != act) throw "rows8 and GGUF kernels of a type take the same activations";
  k = {fn, act};
}

// The types of quant_types.cpp that quickdraft cannot compute with (no to_float): every table
// lists them through set_not_computable.
constexpr quant::Type kNotComputable[] = {
    quant::Type::Q8_1,  quant::Type::IQ2_XXS, quant::Type::IQ2_XS, quant::Type::IQ3_XXS, quant::Type::IQ1_S,
    quant::Type::IQ3_S, quant::Type::IQ2_S,   quant::Type::I8,     quant::Type::I16,     quant::Type::I32,
    quant::Type::I64,   quant::Type::F64,     quant::Type::IQ1_M,  quant::Type::TQ1_0,   quant::Type::TQ2_0,
    quant::Type::MXFP4, quant::Type::NVFP4,   quant::Type::Q1_0,
};

constexpr void set_not_computable(KernelTable& t) {
  for (quant::Type type : kNotComputable) set_gemm(t, type, scalar::gemm_unsupported, ActFormat::f32);
}

constexpr void set_quantize(KernelTable& t, ActFormat f, QuantizeRowFn fn) { t.quantize[(int)f] = fn; }

}  // namespace
}  // namespace qd::cpu

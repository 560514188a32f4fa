#include "quant/quant_types.h"

#include <cctype>

#include "quant/dequant_ref.h"
#include "quant/quantize_ref.h"

namespace qd::quant {

namespace {

// name, elements per block, bytes per block, scalar dequantization (nullptr = unsupported), scalar
// quantization (omitted: quickdraft does not write the type).
const TypeTraits kTable[] = {
    {Type::F32, "F32", 1, 4, to_float_f32},
    {Type::F16, "F16", 1, 2, to_float_f16},
    {Type::Q4_0, "Q4_0", 32, 18, to_float_q4_0, from_float_q4_0},
    {Type::Q4_1, "Q4_1", 32, 20, to_float_q4_1},
    {Type::Q5_0, "Q5_0", 32, 22, to_float_q5_0},
    {Type::Q5_1, "Q5_1", 32, 24, to_float_q5_1},
    {Type::Q8_0, "Q8_0", 32, 34, to_float_q8_0},
    {Type::Q8_1, "Q8_1", 32, 36, nullptr},
    {Type::Q2_K, "Q2_K", 256, 84, to_float_q2_K},
    {Type::Q3_K, "Q3_K", 256, 110, to_float_q3_K},
    {Type::Q4_K, "Q4_K", 256, 144, to_float_q4_K},
    {Type::Q5_K, "Q5_K", 256, 176, to_float_q5_K},
    {Type::Q6_K, "Q6_K", 256, 210, to_float_q6_K},
    {Type::Q8_K, "Q8_K", 256, 292, to_float_q8_K},
    {Type::IQ2_XXS, "IQ2_XXS", 256, 66, nullptr},
    {Type::IQ2_XS, "IQ2_XS", 256, 74, nullptr},
    {Type::IQ3_XXS, "IQ3_XXS", 256, 98, nullptr},
    {Type::IQ1_S, "IQ1_S", 256, 50, nullptr},
    {Type::IQ4_NL, "IQ4_NL", 32, 18, to_float_iq4_nl},
    {Type::IQ3_S, "IQ3_S", 256, 110, nullptr},
    {Type::IQ2_S, "IQ2_S", 256, 82, nullptr},
    {Type::IQ4_XS, "IQ4_XS", 256, 136, to_float_iq4_xs},
    {Type::I8, "I8", 1, 1, nullptr},
    {Type::I16, "I16", 1, 2, nullptr},
    {Type::I32, "I32", 1, 4, nullptr},
    {Type::I64, "I64", 1, 8, nullptr},
    {Type::F64, "F64", 1, 8, nullptr},
    {Type::IQ1_M, "IQ1_M", 256, 56, nullptr},
    {Type::BF16, "BF16", 1, 2, to_float_bf16},
    {Type::TQ1_0, "TQ1_0", 256, 54, nullptr},
    {Type::TQ2_0, "TQ2_0", 256, 66, nullptr},
    {Type::MXFP4, "MXFP4", 32, 17, nullptr},
    {Type::NVFP4, "NVFP4", 64, 36, nullptr},
    {Type::Q1_0, "Q1_0", 128, 18, nullptr},
};

}  // namespace

const TypeTraits* type_traits(uint32_t id) {
  for (const TypeTraits& t : kTable) {
    if (static_cast<uint32_t>(t.type) == id) return &t;
  }
  return nullptr;
}

const TypeTraits* type_by_name(const std::string& name) {
  for (const TypeTraits& t : kTable) {
    const std::string n = t.name;
    if (n.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < n.size() && same; i++) same = std::toupper((unsigned char)name[i]) == (unsigned char)n[i];
    if (same) return &t;
  }
  return nullptr;
}

}  // namespace qd::quant

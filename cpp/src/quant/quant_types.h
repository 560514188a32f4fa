// The ONE table of GGUF tensor types. Adding a type means adding a row in quant_types.cpp.
#pragma once
#include <cstdint>
#include <string>

namespace qd::quant {

// Values are the GGML type ids stored in GGUF tensor infos.
enum class Type : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41,
};

// Dequantize n elements (n a multiple of block_size) from src into dst.
using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
// Quantize n elements (n a multiple of block_size) from src into dst.
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);

struct TypeTraits {
  Type type;
  const char* name;
  int64_t block_size;  // elements per block
  int64_t type_size;   // bytes per block
  ToFloatFn to_float;  // nullptr: the type is known to GGUF but quickdraft cannot compute with it
  FromFloatFn from_float = nullptr;  // nullptr: quickdraft cannot write the type
};

// nullptr when `id` is not a GGML type at all.
const TypeTraits* type_traits(uint32_t id);

// The type named `name` (case-insensitive, "q4_0" or "Q4_0"); nullptr when no type has that name.
const TypeTraits* type_by_name(const std::string& name);

inline bool is_supported(uint32_t id) {
  const TypeTraits* t = type_traits(id);
  return t != nullptr && t->to_float != nullptr;
}

}  // namespace qd::quant

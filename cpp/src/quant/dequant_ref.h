// Scalar reference dequantization, one function per type: bit-exact with gguf.quants.dequantize.
#pragma once
#include <cstdint>

namespace qd::quant {

void to_float_f32(const void* src, float* dst, int64_t n);
void to_float_f16(const void* src, float* dst, int64_t n);
void to_float_bf16(const void* src, float* dst, int64_t n);

}  // namespace qd::quant

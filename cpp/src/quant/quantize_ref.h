// Scalar reference quantization, one function per type that quickdraft can write: bit-exact with
// ggml's quantize_row_*_ref and gguf.quants.quantize (same float32 operations in the same order).
// n is a multiple of the type's block size.
#pragma once
#include <cstdint>

namespace qd::quant {

// quantize_legacy.cpp
void from_float_q4_0(const float* src, void* dst, int64_t n);

}  // namespace qd::quant

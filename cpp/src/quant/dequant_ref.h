// Scalar reference dequantization, one function per type: bit-exact with gguf.quants.dequantize
// (same float32 operations in the same order). n is a multiple of the type's block size.
//
// Why FMA contraction cannot break bit-exactness here: every product is exact in float32
// (an 11-bit fp16 significand times integer factors of magnitude at most 2^12 in all, e.g.
// Q6_K's 128 * 32, fits in 24 bits, far from overflow or underflow), so `d * sc * q - m`
// rounds only once, in the subtraction, fused or not. Q8_K's float32 scale is only multiplied.
#pragma once
#include <cstdint>

namespace qd::quant {

// dequant_float.cpp
void to_float_f32(const void* src, float* dst, int64_t n);
void to_float_f16(const void* src, float* dst, int64_t n);
void to_float_bf16(const void* src, float* dst, int64_t n);

// dequant_legacy.cpp: 32-element blocks with one fp16 scale (and min).
void to_float_q4_0(const void* src, float* dst, int64_t n);
void to_float_q4_1(const void* src, float* dst, int64_t n);
void to_float_q5_0(const void* src, float* dst, int64_t n);
void to_float_q5_1(const void* src, float* dst, int64_t n);
void to_float_q8_0(const void* src, float* dst, int64_t n);

// dequant_k.cpp: 256-element super-blocks with packed sub-block scales.
void to_float_q2_K(const void* src, float* dst, int64_t n);
void to_float_q3_K(const void* src, float* dst, int64_t n);
void to_float_q4_K(const void* src, float* dst, int64_t n);
void to_float_q5_K(const void* src, float* dst, int64_t n);
void to_float_q6_K(const void* src, float* dst, int64_t n);
void to_float_q8_K(const void* src, float* dst, int64_t n);

// dequant_iq4.cpp: the non-linear 4-bit codebook.
void to_float_iq4_nl(const void* src, float* dst, int64_t n);
void to_float_iq4_xs(const void* src, float* dst, int64_t n);

}  // namespace qd::quant

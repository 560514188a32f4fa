// The scalar kernels: the reference every SIMD kernel is tested against (tests/test_kernels.py),
// written to be checked by reading, and the entries of every table whose ISA has no SIMD version
// of a routine. Compiled once, portably (cpu/scalar/*.cpp); the other tables point at these.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu/kernels.h"

namespace qd::cpu::scalar {

// matmul kernels (signature: GemmRowsFn). Integer dot of one weight block with one Q8 activation
// block, the float scale applied per block, blocks summed left to right.
GemmRows gemm_f32;     // float_weights.cpp: f32 activations, 8 partial sums
GemmRows gemm_f16;
GemmRows gemm_q4_0;    // block32_quants.cpp: Q8_0 activations
GemmRows gemm_q4_1;
GemmRows gemm_q5_0;
GemmRows gemm_q5_1;
GemmRows gemm_q8_0;
GemmRows gemm_iq4_nl;
GemmRows gemm_q2_K;    // k_quants.cpp: Q8_K activations
GemmRows gemm_q3_K;
GemmRows gemm_q4_K;
GemmRows gemm_q5_K;
GemmRows gemm_q6_K;
GemmRows gemm_iq4_xs;
// Types with a to_float (quant_types.cpp) but no integer kernel: each weight row dequantized once,
// then dotted with every f32 activation row in gemm_f32's order.
GemmRows gemm_dequant;
// Types quickdraft cannot compute with: never called (matmul() throws UnsupportedError first).
GemmRows gemm_unsupported;

// Activation quantization (act_quant.cpp), llama.cpp's quantize_row_q8_0 / q8_K values.
void quantize_q8_0(const float* x, int64_t cols, uint8_t* dst);
void quantize_q8_K(const float* x, int64_t cols, uint8_t* dst);

// F16 <-> F32 rows (float_weights.cpp).
void half_to_float(const uint16_t* src, float* dst, int64_t n);
void float_to_half(const float* src, uint16_t* dst, int64_t n);

// Attention (attention.cpp): 8 partial sums per dot, the exp of attention.h, 16 lanes of weighted values.
void half_to_float_rows(const uint16_t* src, size_t src_stride, float* dst, int rows, int n);
void scaled_dots_one(const float* q, const float* k, int rows, int n, float scale, float* out);
void scaled_dots(const float* const* q, float* const* out, int nq, const float* k, int rows, int n, float scale);
void softmax(float* x, int n, int phase);
void weighted_rows_add_one(const float* w, const float* v, int rows, int n, int lane0, float* partial);
void weighted_rows_add(const float* const* w, float* const* partial, int nq, const float* v, int rows, int n,
                       int lane0);
void reduce_lanes(const float* partial, int n, float* out);

// Row-wise ops (rows.cpp): silu by std::exp; rope with std::fma (rope.h).
void silu_mul(float* gate, const float* up, int64_t n);
void rope(float* x, int n_rows, int n_heads, int head_dim, int n_rot, bool neox, const float* cos, const float* sin);

}  // namespace qd::cpu::scalar

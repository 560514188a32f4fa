// Scalar kernels for float weights (F32, F16) against f32 activations, the dequantize fallback for
// types without an integer kernel, and F16 <-> F32 rows.
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "cpu/scalar/gemm_rows.h"
#include "cpu/scalar/kernels.h"
#include "quant/fp16.h"
#include "quant/quant_types.h"

namespace qd::cpu::scalar {

namespace {

// Eight partial sums in a fixed order, then a fixed pairwise reduction.
float dot_f32_acts(const float* w, const float* x, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < n; i++) acc[i & 7] += w[i] * x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

float dot_f32(const uint8_t* w, const uint8_t* a, int64_t cols) {
  return dot_f32_acts((const float*)w, (const float*)a, cols);
}

float dot_f16(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const float* x = (const float*)a;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < cols; i++) {
    uint16_t h;
    std::memcpy(&h, w + 2 * i, 2);
    acc[i & 7] += fp16_to_f32(h) * x[i];
  }
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

void gemm_f32(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_f32>(w, r0, r1, a, s, n, y, ldy);
}

void gemm_f16(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_f16>(w, r0, r1, a, s, n, y, ldy);
}

void gemm_dequant(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t act_stride, int64_t n,
                  float* y, int64_t ldy) {
  const quant::TypeTraits* t = quant::type_traits(w.type);
  if (!t || !t->to_float) throw UnsupportedError("matmul: no dequantization for GGML type " + std::to_string(w.type));
  thread_local std::vector<float> row;
  row.resize((size_t)w.cols);
  for (int64_t r = r0; r < r1; r++) {
    t->to_float(w.data + (size_t)r * w.row_bytes, row.data(), w.cols);
    for (int64_t i = 0; i < n; i++) {
      y[i * ldy + r] = dot_f32_acts(row.data(), (const float*)(act + (size_t)i * act_stride), w.cols);
    }
  }
}

void gemm_unsupported(const Matrix& w, int64_t, int64_t, const uint8_t*, size_t, int64_t, float*, int64_t) {
  throw UnsupportedError("matmul: weight type " + std::to_string(w.type) + " is not supported");
}

void half_to_float(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_f32(src[i]);
}

void float_to_half(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = f32_to_fp16(src[i]);
}

}  // namespace qd::cpu::scalar

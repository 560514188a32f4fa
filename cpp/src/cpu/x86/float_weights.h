// x86 kernels for float weights (F32, F16) against f32 activations, 8 lanes per vector.
// Order per (row, column), identical for every tile height R: columns 16 at a time into two
// 8-lane accumulators (even / odd 8-column chunks), a lone last chunk of 8 into the first, then
// a fixed horizontal sum of their sum, then the last cols % 8 columns left to right.
// Include rules: see x86/common.h.
#pragma once
#include "cpu/x86/common.h"
#include "quant/blocks.h"

namespace qd::cpu {
namespace {

template <bool F16>
inline __m256 load8_weights(const uint8_t* row, int64_t c) {
  if constexpr (F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(row + 2 * c)));
  } else {
    return _mm256_loadu_ps((const float*)row + c);
  }
}

template <bool F16>
inline float weight_at(const uint8_t* row, int64_t c) {
  if constexpr (F16) {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    return h2f(h);
  } else {
    float f;
    std::memcpy(&f, row + 4 * c, 4);
    return f;
  }
}

template <bool F16, int R>
void float_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t cols = w.cols, c16 = cols / 16 * 16, c8 = cols / 8 * 8;
  const float* x[R];
  for (int j = 0; j < R; j++) x[j] = (const float*)(act + (size_t)j * stride);
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t* wr = w.data + (size_t)r * w.row_bytes;
    __m256 acc0[R], acc1[R];
    for (int j = 0; j < R; j++) acc0[j] = acc1[j] = _mm256_setzero_ps();
    for (int64_t c = 0; c < c16; c += 16) {
      const __m256 w0 = load8_weights<F16>(wr, c), w1 = load8_weights<F16>(wr, c + 8);
      for (int j = 0; j < R; j++) {
        acc0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[j] + c), acc0[j]);
        acc1[j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[j] + c + 8), acc1[j]);
      }
    }
    if (c8 > c16) {
      const __m256 w0 = load8_weights<F16>(wr, c16);
      for (int j = 0; j < R; j++) acc0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[j] + c16), acc0[j]);
    }
    for (int j = 0; j < R; j++) {
      float sum = hsum(_mm256_add_ps(acc0[j], acc1[j]));
      for (int64_t c = c8; c < cols; c++) sum += weight_at<F16>(wr, c) * x[j][c];
      y[j * ldy + r] = sum;
    }
  }
}

void x86_half_to_float(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(src + i))));
  for (; i < n; i++) dst[i] = h2f(src[i]);
}

void x86_float_to_half(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128((__m128i*)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; i++) dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

template <class Tag, bool F16>
void float_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    float_tile<F16, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

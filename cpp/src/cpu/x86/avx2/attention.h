// AVX2 + FMA + F16C attention over the F16 KV cache: 8 lanes, fused multiply-adds. Each result's
// order depends only on its inputs' lengths. Include rules: see x86/common.h.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cpu/scalar/attention.h"

namespace qd::cpu::avx2 {
namespace {

// Rows this far ahead are prefetched: a long context's cache streams from memory, row after row.
constexpr int kPrefetchRows = 16;

inline void half_to_float_rows(const uint16_t* src, size_t stride, float* dst, int rows, int n) {
  for (int r = 0; r < rows; r++) {
    const uint16_t* s = src + (size_t)r * stride;
    const char* ahead = reinterpret_cast<const char*>(s + kPrefetchRows * stride);  // never faults
    for (int b = 0; b < 2 * n; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
    float* d = dst + (size_t)r * n;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
    }
    for (; i < n; i++) d[i] = half_bits_to_float(s[i]);
  }
}

// Four rows at a time: four independent FMA chains keep the unit busy (one chain waits on each
// FMA's latency); each row's lanes are summed in the same order as one row alone.
inline void scaled_dots(const float* q, const float* k, int rows, int n, float scale, float* out) {
  const int n8 = n / 8 * 8;
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float* k0 = k + (size_t)r * n;
    __m256 v[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < n8; i += 8) {
      const __m256 qi = _mm256_loadu_ps(q + i);
      for (int t = 0; t < 4; t++) v[t] = _mm256_fmadd_ps(qi, _mm256_loadu_ps(k0 + (size_t)t * n + i), v[t]);
    }
    for (int t = 0; t < 4; t++) {
      alignas(32) float acc[8];
      _mm256_store_ps(acc, v[t]);
      for (int i = n8; i < n; i++) acc[i & 7] += q[i] * k0[(size_t)t * n + i];
      out[r + t] = scale * reduce8(acc);
    }
  }
  for (; r < rows; r++) {
    const float* kr = k + (size_t)r * n;
    __m256 v = _mm256_setzero_ps();
    for (int i = 0; i < n8; i += 8) v = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kr + i), v);
    alignas(32) float acc[8];
    _mm256_store_ps(acc, v);
    for (int i = n8; i < n; i++) acc[i & 7] += q[i] * kr[i];
    out[r] = scale * reduce8(acc);
  }
}

inline float exp_shift_sum(float* x, int n, float shift) {
  const __m256 vshift = _mm256_set1_ps(shift), lo = _mm256_set1_ps(-87.0f), round = _mm256_set1_ps(kRound);
  __m256 sum = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 t = _mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vshift), lo);
    const __m256 nf = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(t, _mm256_set1_ps(kLog2e)), round), round);
    __m256 r = _mm256_sub_ps(t, _mm256_mul_ps(nf, _mm256_set1_ps(kLn2Hi)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(nf, _mm256_set1_ps(kLn2Lo)));
    __m256 p = _mm256_set1_ps(kP0);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP1));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP2));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP3));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP4));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP5));
    p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r), _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nf), _mm256_set1_epi32(127)), 23);
    const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    _mm256_storeu_ps(x + i, y);
    sum = _mm256_add_ps(sum, y);
  }
  alignas(32) float acc[8];
  _mm256_store_ps(acc, sum);
  for (; i < n; i++) {
    x[i] = exp_nonpositive(x[i] - shift);
    acc[i & 7] += x[i];
  }
  return reduce8(acc);
}

inline void softmax(float* x, int n, int phase) {
  (void)phase;
  float mx = x[0];
  for (int j = 1; j < n; j++) mx = std::max(mx, x[j]);
  const float inv_sum = 1.0f / exp_shift_sum(x, n, mx);
  for (int j = 0; j < n; j++) x[j] *= inv_sum;
}

// Lane by lane (the rows r0, r0 + 16, ... of one lane), C x 8 columns in registers per pass: each
// row's weight is broadcast once for 8C columns, and the lane's partial sums are loaded and stored
// once per pass, not once per row. Every lane still adds its rows in row order: the same bits as
// one row at a time.
template <int C>
inline void lane_columns(const float* w, const float* v, int r0, int rows, int n, float* o) {
  __m256 acc[C];
  for (int t = 0; t < C; t++) acc[t] = _mm256_loadu_ps(o + 8 * t);
  for (int r = r0; r < rows; r += kAttentionLanes) {
    const __m256 wr = _mm256_set1_ps(w[r]);
    const float* vr = v + (size_t)r * n;
    for (int t = 0; t < C; t++) acc[t] = _mm256_fmadd_ps(wr, _mm256_loadu_ps(vr + 8 * t), acc[t]);
  }
  for (int t = 0; t < C; t++) _mm256_storeu_ps(o + 8 * t, acc[t]);
}

inline void weighted_rows_add(const float* w, const float* v, int rows, int n, int lane0, float* partial) {
  for (int r0 = 0; r0 < rows && r0 < kAttentionLanes; r0++) {
    float* o = partial + (size_t)((lane0 + r0) % kAttentionLanes) * n;
    int d = 0;
    for (; d + 64 <= n; d += 64) lane_columns<8>(w, v + d, r0, rows, n, o + d);
    for (; d + 8 <= n; d += 8) lane_columns<1>(w, v + d, r0, rows, n, o + d);
    for (; d < n; d++) {
      for (int r = r0; r < rows; r += kAttentionLanes) o[d] += w[r] * v[(size_t)r * n + d];
    }
  }
}

// reduce_lanes with 8 columns per step: the same tree, lane by lane.
inline void reduce_lanes(const float* partial, int n, float* out) {
  int d = 0;
  for (; d + 8 <= n; d += 8) {
    __m256 t[8];
    for (int i = 0; i < 8; i++) {
      t[i] = _mm256_add_ps(_mm256_loadu_ps(partial + (size_t)(i + 8) * n + d), _mm256_loadu_ps(partial + (size_t)i * n + d));
    }
    for (int i = 0; i < 4; i++) t[i] = _mm256_add_ps(t[i + 4], t[i]);
    _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(t[0], t[2]), _mm256_add_ps(t[1], t[3])));
  }
  if (d < n) reduce_lanes_strided(partial + d, n - d, n, out + d);
}

}  // namespace
}  // namespace qd::cpu::avx2

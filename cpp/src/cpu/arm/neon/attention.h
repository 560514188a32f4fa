// Attention's weighted sum of values on NEON (the AVX2 structure, x86/avx2/attention.h). Include
// only from the NEON table's translation units.
#pragma once
#include <arm_neon.h>

#include <cmath>
#include <cstddef>

#include "cpu/kernels.h"
#include "cpu/scalar/attention.h"

namespace qd::cpu::neon {
namespace {

// Lane by lane (the rows r0, r0 + 16, ... of one lane), C x 4 columns in registers per pass: each
// row's weight is broadcast once for 4C columns, and the lane's partial sums are loaded and stored
// once per pass, not once per row. Every lane still adds its rows in row order, one fused
// multiply-add per value: the same bits however the rows are split into calls.
template <int C>
inline void lane_columns(const float* w, const float* v, int r0, int rows, int n, float* o) {
  float32x4_t acc[C];
  for (int t = 0; t < C; t++) acc[t] = vld1q_f32(o + 4 * t);
  for (int r = r0; r < rows; r += kAttentionLanes) {
    const float32x4_t wr = vdupq_n_f32(w[r]);
    const float* vr = v + (size_t)r * n;
    for (int t = 0; t < C; t++) acc[t] = vfmaq_f32(acc[t], wr, vld1q_f32(vr + 4 * t));
  }
  for (int t = 0; t < C; t++) vst1q_f32(o + 4 * t, acc[t]);
}

inline void weighted_rows_add_one(const float* w, const float* v, int rows, int n, int lane0, float* partial) {
  for (int r0 = 0; r0 < rows && r0 < kAttentionLanes; r0++) {
    float* o = partial + (size_t)((lane0 + r0) % kAttentionLanes) * n;
    int d = 0;
    for (; d + 64 <= n; d += 64) lane_columns<16>(w, v + d, r0, rows, n, o + d);
    for (; d + 4 <= n; d += 4) lane_columns<1>(w, v + d, r0, rows, n, o + d);
    for (; d < n; d++) {
      for (int r = r0; r < rows; r += kAttentionLanes) o[d] = std::fma(w[r], v[(size_t)r * n + d], o[d]);
    }
  }
}

inline void weighted_rows_add(const float* const* w, float* const* partial, int nq, const float* v, int rows, int n,
                              int lane0) {
  each_query_weighted_add<weighted_rows_add_one>(w, partial, nq, v, rows, n, lane0);
}

}  // namespace
}  // namespace qd::cpu::neon

// Scalar attention over the F16 KV cache: 8 partial sums per dot, the polynomial exp of
// attention.h, each key's weighted value into the partial sums of its lane (key index mod 16).
#include "cpu/scalar/attention.h"

#include <algorithm>

#include "cpu/scalar/kernels.h"

namespace qd::cpu::scalar {

namespace {

float exp_shift_sum(float* x, int n, float shift) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < n; i++) {
    x[i] = exp_nonpositive(x[i] - shift);
    acc[i & 7] += x[i];
  }
  return reduce8(acc);
}

}  // namespace

void half_to_float_rows(const uint16_t* src, size_t stride, float* dst, int rows, int n) {
  for (int r = 0; r < rows; r++) {
    const uint16_t* s = src + (size_t)r * stride;
    float* d = dst + (size_t)r * n;
    for (int i = 0; i < n; i++) d[i] = half_bits_to_float(s[i]);
  }
}

void scaled_dots_one(const float* q, const float* k, int rows, int n, float scale, float* out) {
  for (int r = 0; r < rows; r++) {
    const float* kr = k + (size_t)r * n;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int l = 0; l < 8; l++) acc[l] += q[i + l] * kr[i + l];
    }
    for (; i < n; i++) acc[i & 7] += q[i] * kr[i];
    out[r] = scale * reduce8(acc);
  }
}

void softmax(float* x, int n, int phase) {
  (void)phase;
  float mx = x[0];
  for (int j = 1; j < n; j++) mx = std::max(mx, x[j]);
  const float inv_sum = 1.0f / exp_shift_sum(x, n, mx);
  for (int j = 0; j < n; j++) x[j] *= inv_sum;
}

void weighted_rows_add_one(const float* w, const float* v, int rows, int n, int lane0, float* partial) {
  for (int r = 0; r < rows; r++) {
    const float* vr = v + (size_t)r * n;
    float* o = partial + (size_t)((lane0 + r) % kAttentionLanes) * n;
    for (int d = 0; d < n; d++) o[d] += w[r] * vr[d];
  }
}

void scaled_dots(const float* const* q, float* const* out, int nq, const float* k, int rows, int n, float scale) {
  each_query_dots<scaled_dots_one>(q, out, nq, k, rows, n, scale);
}

void weighted_rows_add(const float* const* w, float* const* partial, int nq, const float* v, int rows, int n,
                       int lane0) {
  each_query_weighted_add<weighted_rows_add_one>(w, partial, nq, v, rows, n, lane0);
}

void reduce_lanes(const float* partial, int n, float* out) { reduce_lanes_strided(partial, n, n, out); }

}  // namespace qd::cpu::scalar

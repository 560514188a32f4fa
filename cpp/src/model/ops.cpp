#include "model/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/convert.h"
#include "cpu/kernels.h"
#include "quant/fp16.h"

namespace qd::model {

namespace {

// GELU(tanh) of every half value, rounded to half: ggml's table, indexed by the input's bits.
struct GeluTable {
  std::vector<uint16_t> y;
  GeluTable() : y(65536) {
    constexpr float kSqrt2OverPi = 0.79788456080286535588f;
    constexpr float kCoef = 0.044715f;
    for (uint32_t i = 0; i < 65536; i++) {
      const float h = fp16_to_f32((uint16_t)i);
      y[i] = f32_to_fp16(0.5f * h * (1.0f + std::tanh(kSqrt2OverPi * h * (1.0f + kCoef * h * h))));
    }
  }
};

const uint16_t* gelu_table() {
  static const GeluTable t;  // 128 KB, built on first use
  return t.y.data();
}

}  // namespace

void round_to_half(float* x, int64_t n) {
  uint16_t h[256];
  for (int64_t i = 0; i < n; i += 256) {
    const int64_t m = std::min<int64_t>(256, n - i);
    cpu::fp32_to_fp16_row(x + i, h, m);
    cpu::fp16_to_fp32_row(h, x + i, m);
  }
}

void rmsnorm(const float* x, const float* w, int n_rows, int dim, float eps, float* y) {
  for (int r = 0; r < n_rows; r++) {
    const float* xr = x + (int64_t)r * dim;
    float* yr = y + (int64_t)r * dim;
    // Sum of squares in double, in index order (as ggml does): cheap and order-fixed.
    double sum = 0.0;
    for (int i = 0; i < dim; i++) sum += (double)(xr[i] * xr[i]);
    const float mean = (float)(sum / dim);
    const float inv = 1.0f / std::sqrt(mean + eps);
    for (int i = 0; i < dim; i++) yr[i] = xr[i] * inv * w[i];
  }
}

void add_rows(float* x, const float* b, int n_rows, int dim) {
  for (int r = 0; r < n_rows; r++) {
    float* xr = x + (int64_t)r * dim;
    for (int i = 0; i < dim; i++) xr[i] += b[i];
  }
}

void add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

void scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] *= s;
}

void softcap(float* x, float cap, int64_t n) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; i++) x[i] = cap * std::tanh(x[i] * inv);
}

void gelu_tanh_mul(float* gate, const float* up, int64_t n) {
  const uint16_t* table = gelu_table();
  uint16_t h[256];
  float t[256];
  for (int64_t i0 = 0; i0 < n; i0 += 256) {
    const int64_t m = std::min<int64_t>(256, n - i0);
    float* g = gate + i0;
    cpu::fp32_to_fp16_row(g, h, m);
    for (int64_t i = 0; i < m; i++) h[i] = table[h[i]];
    cpu::fp16_to_fp32_row(h, t, m);
    for (int64_t i = 0; i < m; i++) {
      const float v = g[i];
      g[i] = (v <= -10.0f ? 0.0f : v >= 10.0f ? v : t[i]) * up[i0 + i];
    }
  }
}

void silu_mul(float* gate, const float* up, int64_t n) { cpu::active_kernels().silu_mul(gate, up, n); }

void rope(float* x, int n_rows, int n_heads, int head_dim, int n_rot, bool neox, const float* cos,
          const float* sin) {
  cpu::active_kernels().rope(x, n_rows, n_heads, head_dim, n_rot, neox, cos, sin);
}

}  // namespace qd::model

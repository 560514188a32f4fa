// Rotary embedding as ggml computes it, with the fused multiply-add given by the ISA file: the
// scalar table's std::fma and the x86 tables' FMA instruction give the same bits. Include only
// from a kernel file (anonymous namespace).
#pragma once
#include <cstdint>

namespace qd::cpu {
namespace {

template <class Fma>
inline __attribute__((always_inline)) void rope_rows(float* x, int n_rows, int n_heads, int head_dim, int n_rot,
                                                      bool neox, const float* cos, const float* sin, Fma fma) {
  const int half = n_rot / 2;
  // NEOX pairs element i with i + n_rot/2; normal mode pairs neighbours 2i and 2i+1.
  const int stride = neox ? half : 1;
  const int step = neox ? 1 : 2;
  for (int r = 0; r < n_rows; r++) {
    const float* c = cos + (int64_t)r * half;
    const float* s = sin + (int64_t)r * half;
    for (int h = 0; h < n_heads; h++) {
      float* xh = x + ((int64_t)r * n_heads + h) * head_dim;
      for (int i = 0; i < half; i++) {
        float* a = xh + i * step;
        float* b = a + stride;
        const float x0 = *a, x1 = *b;
        // ggml's rotate_pairs as GCC contracts it (-march=native): one product rounded, the
        // other fused.
        *a = fma(x0, c[i], -(x1 * s[i]));
        *b = fma(x0, s[i], x1 * c[i]);
      }
    }
  }
}

}  // namespace
}  // namespace qd::cpu

// Scalar row-wise ops of the forward pass: SwiGLU's silu(gate) * up, rotary embedding.
#include <cmath>

#include "cpu/scalar/kernels.h"
#include "cpu/scalar/rope.h"

namespace qd::cpu::scalar {

void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void rope(float* x, int n_rows, int n_heads, int head_dim, int n_rot, bool neox, const float* cos, const float* sin) {
  rope_rows(x, n_rows, n_heads, head_dim, n_rot, neox, cos, sin,
            [](float a, float b, float c) { return std::fma(a, b, c); });
}

}  // namespace qd::cpu::scalar

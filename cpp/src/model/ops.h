// Row-wise kernels of the forward pass besides matmul. Each output row depends only on its own
// input row and is reduced in one fixed order, so results do not depend on the batch or threads.
// silu_mul and rope run the active ISA's kernels (cpu/kernels.h); the others are written plainly
// (the matmuls dominate the time).
#pragma once
#include <cstdint>

namespace qd::model {

// x[i] = x[i] rounded to the nearest half (ties to even). llama.cpp rounds the queries and the
// softmax probabilities so when its attention matmuls run against the F16 KV cache.
void round_to_half(float* x, int64_t n);

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for n_rows rows of `dim`; y may alias x.
void rmsnorm(const float* x, const float* w, int n_rows, int dim, float eps, float* y);

// x[r] += b for each of n_rows rows of `dim`.
void add_rows(float* x, const float* b, int n_rows, int dim);

// x[i] += y[i].
void add(float* x, const float* y, int64_t n);

// x[i] *= s.
void scale(float* x, float s, int64_t n);

// x[i] = cap * tanh(x[i] / cap).
void softcap(float* x, float cap, int64_t n);

// gate[i] = act(gate[i]) * up[i]. GELU as ggml computes it: through its F16 table (the input
// rounded to half, tanh-GELU of that, the result rounded to half) for |x| < 10.
void silu_mul(float* gate, const float* up, int64_t n);
void gelu_tanh_mul(float* gate, const float* up, int64_t n);

// Rotary embedding of n_rows rows of n_heads heads of head_dim, the first n_rot dims of each
// head. Pairs are (2i, 2i+1) in normal mode, (i, i + n_rot/2) in NEOX mode. cos/sin: [row][n_rot/2].
void rope(float* x, int n_rows, int n_heads, int head_dim, int n_rot, bool neox, const float* cos,
          const float* sin);

}  // namespace qd::model

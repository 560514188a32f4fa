// Row-wise kernels of the forward pass besides matmul. Each output row depends only on its own
// input row and is reduced in one fixed order, so results do not depend on the batch or threads.
// Written plainly so the compiler can vectorise them; the matmuls dominate the time anyway.
#pragma once
#include <cstdint>
#include <cstring>

namespace qd::model {

// Exact IEEE half -> float without branches (vectorisable); agrees with qd::fp16_to_f32 on
// every one of the 65,536 inputs (after Maratos' FP16 library).
inline float half_to_float(uint16_t h) {
  const uint32_t w = (uint32_t)h << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  uint32_t nbits = (two_w >> 4) + (0xE0u << 23);
  float normalized;
  std::memcpy(&normalized, &nbits, 4);
  normalized *= 0x1.0p-112f;
  uint32_t dbits = (two_w >> 17) | (126u << 23);
  float denormalized;
  std::memcpy(&denormalized, &dbits, 4);
  denormalized -= 0.5f;
  uint32_t nb, db;
  std::memcpy(&nb, &normalized, 4);
  std::memcpy(&db, &denormalized, 4);
  const uint32_t bits = sign | (two_w < (1u << 27) ? db : nb);
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

void half_to_float_row(const uint16_t* src, float* dst, int n);
void float_to_half_row(const float* src, uint16_t* dst, int n);

// Dot product with eight partial sums in a fixed order, then a fixed pairwise reduction.
float dot(const float* a, const float* b, int n);

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

// gate[i] = act(gate[i]) * up[i].
void silu_mul(float* gate, const float* up, int64_t n);
void gelu_tanh_mul(float* gate, const float* up, int64_t n);

// Rotary embedding of n_rows rows of n_heads heads of head_dim, the first n_rot dims of each
// head. Pairs are (2i, 2i+1) in normal mode, (i, i + n_rot/2) in NEOX mode. cos/sin: [row][n_rot/2].
void rope(float* x, int n_rows, int n_heads, int head_dim, int n_rot, bool neox, const float* cos,
          const float* sin);

}  // namespace qd::model

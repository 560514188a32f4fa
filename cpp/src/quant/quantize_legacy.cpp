// Q4_0 from float32: ggml's quantize_row_q4_0_ref. Per block of 32, the element of largest
// magnitude (the first one on ties) keeps its sign in the scale d = max / -8, so it maps to
// q = 0 exactly; every element is q = trunc(x / d + 8.5) clamped to 15, stored as d * (q - 8).
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quantize_ref.h"

namespace qd::quant {

namespace {

// trunc(x + 8.5) clamped to [0, 15]; clamping before the conversion keeps a NaN or infinite weight
// (a damaged file) defined, and changes nothing for finite ones.
// (Comparisons rather than std::fmin / fmax, which compile to library calls: the same result for
// every input, NaN included, at a fraction of the load time.)
int nibble(float x) {
  float v = x + 8.5f;
  v = v < 15.0f ? v : 15.0f;  // NaN -> 15, as fmin(15, NaN)
  v = v > 0.0f ? v : 0.0f;
  return (int)v;
}

}  // namespace

void from_float_q4_0(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK4_0; i++, src += QK4_0) {
    // max: the first value of the largest magnitude (two passes, so that the first vectorizes)
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK4_0; j++) amax = std::fabs(src[j]) > amax ? std::fabs(src[j]) : amax;
    for (int j = 0; amax > 0.0f && j < QK4_0; j++) {  // an all-zero block keeps max = +0
      if (std::fabs(src[j]) == amax) {
        max = src[j];
        break;
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    block_q4_0 b;
    b.d = f32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; j++) {
      const float x0 = src[j] * id, x1 = src[j + QK4_0 / 2] * id;
      b.qs[j] = (uint8_t)(nibble(x0) | nibble(x1) << 4);
    }
    std::memcpy(static_cast<uint8_t*>(dst) + i * (int64_t)sizeof(block_q4_0), &b, sizeof b);
  }
}

}  // namespace qd::quant

#include <cstring>

#include "quant/dequant_ref.h"
#include "quant/fp16.h"

namespace qd::quant {

void to_float_f32(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, (size_t)n * 4); }

void to_float_f16(const void* src, float* dst, int64_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = fp16_to_f32(h);
  }
}

void to_float_bf16(const void* src, float* dst, int64_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = bf16_to_f32(h);
  }
}

}  // namespace qd::quant

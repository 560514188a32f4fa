// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: gguf-py's Q*_*.dequantize_blocks, one block at a time.
// Element j < 16 comes from the low nibble of qs[j], element j + 16 from its high nibble.
#include "quant/blocks.h"
#include "quant/dequant_ref.h"
#include "quant/fp16.h"

namespace qd::quant {

namespace {

// The 32 high bits of a Q5 block; bit j belongs to element j.
uint32_t load_qh(const uint8_t qh[4]) {
  return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

}  // namespace

void to_float_q4_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK4_0; i++, dst += QK4_0) {
    const auto b = load_block<block_q4_0>(src, i);
    const float d = fp16_to_f32(b.d);
    for (int j = 0; j < QK4_0 / 2; j++) {
      dst[j] = d * (float)((b.qs[j] & 0x0F) - 8);
      dst[j + QK4_0 / 2] = d * (float)((b.qs[j] >> 4) - 8);
    }
  }
}

void to_float_q4_1(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK4_1; i++, dst += QK4_1) {
    const auto b = load_block<block_q4_1>(src, i);
    const float d = fp16_to_f32(b.d), m = fp16_to_f32(b.m);
    for (int j = 0; j < QK4_1 / 2; j++) {
      dst[j] = d * (float)(b.qs[j] & 0x0F) + m;
      dst[j + QK4_1 / 2] = d * (float)(b.qs[j] >> 4) + m;
    }
  }
}

void to_float_q5_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK5_0; i++, dst += QK5_0) {
    const auto b = load_block<block_q5_0>(src, i);
    const float d = fp16_to_f32(b.d);
    const uint32_t qh = load_qh(b.qh);
    for (int j = 0; j < QK5_0 / 2; j++) {
      const int lo = (b.qs[j] & 0x0F) | ((qh >> j) & 1) << 4;
      const int hi = (b.qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
      dst[j] = d * (float)(lo - 16);
      dst[j + QK5_0 / 2] = d * (float)(hi - 16);
    }
  }
}

void to_float_q5_1(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK5_1; i++, dst += QK5_1) {
    const auto b = load_block<block_q5_1>(src, i);
    const float d = fp16_to_f32(b.d), m = fp16_to_f32(b.m);
    const uint32_t qh = load_qh(b.qh);
    for (int j = 0; j < QK5_1 / 2; j++) {
      const int lo = (b.qs[j] & 0x0F) | ((qh >> j) & 1) << 4;
      const int hi = (b.qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
      dst[j] = d * (float)lo + m;
      dst[j + QK5_1 / 2] = d * (float)hi + m;
    }
  }
}

void to_float_q8_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK8_0; i++, dst += QK8_0) {
    const auto b = load_block<block_q8_0>(src, i);
    const float d = fp16_to_f32(b.d);
    for (int j = 0; j < QK8_0; j++) dst[j] = (float)b.qs[j] * d;
  }
}

}  // namespace qd::quant

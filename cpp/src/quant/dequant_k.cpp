// K-quants (256-element super-blocks): gguf-py's Q*_K.dequantize_blocks, one block at a time.
// Each sub-block scale is formed first (d * sc, dmin * m) and then applied, as gguf-py does.
#include "quant/blocks.h"
#include "quant/dequant_ref.h"
#include "quant/fp16.h"

namespace qd::quant {

namespace {

// Scale and min of sub-block j (0..7) from the 12 packed bytes of Q4_K/Q5_K (6 bits each):
// j < 4 sit in the low 6 bits of bytes j and j+4; j >= 4 are split between a nibble of
// byte j+4 and the top 2 bits of bytes j-4 (scale) and j (min). ggml's get_scale_min_k4.
void get_scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

}  // namespace

// Element h*128 + s*32 + l is 2-bit field s of qs[h*32 + l]; scale byte e/16 holds the
// 4-bit scale (low) and 4-bit min (high).
void to_float_q2_K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
    const auto b = load_block<block_q2_K>(src, i);
    const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
    for (int g = 0; g < QK_K / 16; g++) {  // 16 elements per scale byte
      const float dl = d * (float)(b.scales[g] & 0x0F), ml = dmin * (float)(b.scales[g] >> 4);
      const int h = g / 8, s = (g / 2) % 4;
      const uint8_t* q = b.qs + h * 32 + (g % 2) * 16;
      for (int k = 0; k < 16; k++) dst[g * 16 + k] = dl * (float)((q[k] >> (2 * s)) & 3) - ml;
    }
  }
}

// As Q2_K for the low 2 bits; the third bit of element b*32 + l is bit b of hmask[l], and a
// CLEAR bit subtracts 4 (q = low - 4 * !high).
void to_float_q3_K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
    const auto b = load_block<block_q3_K>(src, i);
    const float d = fp16_to_f32(b.d);
    for (int g = 0; g < QK_K / 16; g++) {
      const float dl = d * (float)q3_K_scale(b.scales, g);
      const int h = g / 8, s = (g / 2) % 4, l0 = (g % 2) * 16;
      for (int k = 0; k < 16; k++) {
        const int low = (b.qs[h * 32 + l0 + k] >> (2 * s)) & 3;
        const int high = (b.hmask[l0 + k] >> (g / 2)) & 1;
        dst[g * 16 + k] = dl * (float)(low - ((high ^ 1) << 2));
      }
    }
  }
}

// Sub-block j = 2c + s (32 elements) is nibble s of qs[c*32 + l].
void to_float_q4_K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
    const auto b = load_block<block_q4_K>(src, i);
    const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
    for (int j = 0; j < QK_K / 32; j++) {
      int sc, m;
      get_scale_min_k4(j, b.scales, &sc, &m);
      const float dl = d * (float)sc, ml = dmin * (float)m;
      const uint8_t* q = b.qs + (j / 2) * 32;
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; l++) dst[j * 32 + l] = dl * (float)((q[l] >> shift) & 0x0F) - ml;
    }
  }
}

// As Q4_K, plus a fifth bit: bit j of qh[l] for element j*32 + l.
void to_float_q5_K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
    const auto b = load_block<block_q5_K>(src, i);
    const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
    for (int j = 0; j < QK_K / 32; j++) {
      int sc, m;
      get_scale_min_k4(j, b.scales, &sc, &m);
      const float dl = d * (float)sc, ml = dmin * (float)m;
      const uint8_t* q = b.qs + (j / 2) * 32;
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; l++) {
        const int v = ((q[l] >> shift) & 0x0F) | ((b.qh[l] >> j) & 1) << 4;
        dst[j * 32 + l] = dl * (float)v - ml;
      }
    }
  }
}

// Element h*128 + s*64 + k: low 4 bits are nibble s of ql[h*64 + k]; element h*128 + t*32 + l:
// high 2 bits are field t of qh[h*32 + l]. Signed 8-bit scale per 16 elements.
void to_float_q6_K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
    const auto b = load_block<block_q6_K>(src, i);
    const float d = fp16_to_f32(b.d);
    for (int g = 0; g < QK_K / 16; g++) {
      const float dl = d * (float)b.scales[g];
      const int h = g / 8, r0 = (g % 8) * 16;  // r: index within the 128-element half
      for (int k = 0; k < 16; k++) {
        const int r = r0 + k;
        const int low = (b.ql[h * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
        const int high = (b.qh[h * 32 + r % 32] >> (2 * (r / 32))) & 3;
        dst[g * 16 + k] = dl * (float)((low | high << 4) - 32);
      }
    }
  }
}

// Q8_K is the activation type of the K-quant dot products: a float32 scale, no offset.
void to_float_q8_K(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
    const auto b = load_block<block_q8_K>(src, i);
    for (int j = 0; j < QK_K; j++) dst[j] = b.d * (float)b.qs[j];
  }
}

}  // namespace qd::quant

// IQ4_NL and IQ4_XS: 4-bit indices into the non-linear codebook kvalues_iq4nl.
// gguf-py's IQ4_NL/IQ4_XS.dequantize_blocks, one block at a time.
#include "quant/blocks.h"
#include "quant/dequant_ref.h"
#include "quant/fp16.h"

namespace qd::quant {

// 32 elements: j < 16 from the low nibble of qs[j], j + 16 from its high nibble.
void to_float_iq4_nl(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK4_NL; i++, dst += QK4_NL) {
    const auto b = load_block<block_iq4_nl>(src, i);
    const float d = fp16_to_f32(b.d);
    for (int j = 0; j < QK4_NL / 2; j++) {
      dst[j] = d * (float)kvalues_iq4nl[b.qs[j] & 0x0F];
      dst[j + QK4_NL / 2] = d * (float)kvalues_iq4nl[b.qs[j] >> 4];
    }
  }
}

// 8 sub-blocks of 32, each laid out like an IQ4_NL block, with a signed 6-bit scale:
// low 4 bits are nibble ib%2 of scales_l[ib/2], high 2 bits are bits 2*ib of scales_h.
void to_float_iq4_xs(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
    const auto b = load_block<block_iq4_xs>(src, i);
    const float d = fp16_to_f32(b.d);
    for (int ib = 0; ib < QK_K / 32; ib++) {
      const int lo = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F;
      const int hi = (b.scales_h >> (2 * ib)) & 3;
      const float dl = d * (float)((lo | hi << 4) - 32);
      const uint8_t* q = b.qs + ib * 16;
      float* y = dst + ib * 32;
      for (int j = 0; j < 16; j++) {
        y[j] = dl * (float)kvalues_iq4nl[q[j] & 0x0F];
        y[j + 16] = dl * (float)kvalues_iq4nl[q[j] >> 4];
      }
    }
  }
}

}  // namespace qd::quant

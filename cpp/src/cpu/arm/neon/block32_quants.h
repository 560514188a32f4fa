// NEON kernels for the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) against Q8_0
// activations. Include rules: see arm/neon/common.h.
#pragma once
#include "cpu/arm/neon/common.h"

namespace qd::cpu {
namespace {

// A weight format: its block, the 32 weights as int8 (before d), and the "min" term if any.
struct NQ4_0 {
  using block = quant::block_q4_0;
  static void unpack(const block& b, int8x16_t q[2]) {
    uint8x16_t lo, hi;
    unpack_nibbles(b.qs, &lo, &hi);
    q[0] = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(8));
    q[1] = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(8));
  }
  static constexpr bool kMin = false;
  static float m(const block&) { return 0.f; }
};

struct NQ4_1 {
  using block = quant::block_q4_1;
  static void unpack(const block& b, int8x16_t q[2]) {
    uint8x16_t lo, hi;
    unpack_nibbles(b.qs, &lo, &hi);
    q[0] = vreinterpretq_s8_u8(lo);
    q[1] = vreinterpretq_s8_u8(hi);
  }
  static constexpr bool kMin = true;
  static float m(const block& b) { return h2f(b.m); }
};

struct NQ5_0 {
  using block = quant::block_q5_0;
  // (q | h << 4) - 16 == q | (h ? 0 : 0xF0) as int8
  static void unpack(const block& b, int8x16_t q[2]) {
    uint8x16_t lo, hi, blo, bhi;
    unpack_nibbles(b.qs, &lo, &hi);
    bits_to_bytes(b.qh, &blo, &bhi);
    const uint8x16_t f0 = vdupq_n_u8(0xF0);
    q[0] = vreinterpretq_s8_u8(vorrq_u8(lo, vbicq_u8(f0, blo)));
    q[1] = vreinterpretq_s8_u8(vorrq_u8(hi, vbicq_u8(f0, bhi)));
  }
  static constexpr bool kMin = false;
  static float m(const block&) { return 0.f; }
};

struct NQ5_1 {
  using block = quant::block_q5_1;
  static void unpack(const block& b, int8x16_t q[2]) {
    uint8x16_t lo, hi, blo, bhi;
    unpack_nibbles(b.qs, &lo, &hi);
    bits_to_bytes(b.qh, &blo, &bhi);
    const uint8x16_t h = vdupq_n_u8(0x10);
    q[0] = vreinterpretq_s8_u8(vorrq_u8(lo, vandq_u8(blo, h)));
    q[1] = vreinterpretq_s8_u8(vorrq_u8(hi, vandq_u8(bhi, h)));
  }
  static constexpr bool kMin = true;
  static float m(const block& b) { return h2f(b.m); }
};

struct NQ8_0 {
  using block = quant::block_q8_0;
  static void unpack(const block& b, int8x16_t q[2]) {
    q[0] = vld1q_s8(b.qs);
    q[1] = vld1q_s8(b.qs + 16);
  }
  static constexpr bool kMin = false;
  static float m(const block&) { return 0.f; }
};

struct NIQ4_NL {
  using block = quant::block_iq4_nl;
  static void unpack(const block& b, int8x16_t q[2]) {
    const int8x16_t lut = vld1q_s8(quant::kvalues_iq4nl);
    uint8x16_t lo, hi;
    unpack_nibbles(b.qs, &lo, &hi);
    q[0] = vqtbl1q_s8(lut, lo);
    q[1] = vqtbl1q_s8(lut, hi);
  }
  static constexpr bool kMin = false;
  static float m(const block&) { return 0.f; }
};

template <class Tag, class W, int R>
void q32_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 32;
  ActQ8_0 x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_0(act + (size_t)j * stride, w.cols);
  for (int64_t r = r0; r < r1; r++) {
    const typename W::block* wb = (const typename W::block*)(w.data + (size_t)r * w.row_bytes);
    float sum[R];
    for (int j = 0; j < R; j++) sum[j] = 0.f;
    for (int64_t b = 0; b < nb; b++) {
      int8x16_t q[2];
      W::unpack(wb[b], q);
      const float dw = h2f(wb[b].d);
      const float mw = W::m(wb[b]);
      for (int j = 0; j < R; j++) {
        const int8_t* xq = x[j].qs + 32 * b;
        const int32x4_t p = dot16<Tag>(dot16<Tag>(vdupq_n_s32(0), q[0], vld1q_s8(xq)), q[1], vld1q_s8(xq + 16));
        const int isum = vaddvq_s32(p);
        // the scalar reference's expression (cpu/scalar/block32_quants.cpp), term for term
        if constexpr (W::kMin) {
          sum[j] += dw * x[j].d[b] * (float)isum + mw * x[j].sm[b];
        } else {
          sum[j] += dw * x[j].d[b] * (float)isum;
        }
      }
    }
    for (int j = 0; j < R; j++) y[j * ldy + r] = sum[j];
  }
}

template <class Tag, class W>
void q32_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
              int64_t ldy) {
  neon_for_each_tile(n, [&](auto rc, int64_t i0) {
    q32_tile<Tag, W, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

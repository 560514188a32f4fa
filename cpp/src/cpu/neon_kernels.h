// aarch64 NEON kernels, included by the two NEON kernel files:
//   kernels_isa_neon_dot.cpp   -march=armv8.2-a+dotprod  (SDOT: Cortex-A55/A76/A78, Jetson Orin, Pi 5)
//   kernels_isa_neon.cpp       plain armv8-a             (Cortex-A53/A57/A72: Pi 3/4, Jetson Nano)
// The ISA "tag" says which: struct Tag { static constexpr bool kDot; }.
//
// Each weight block is unpacked ONCE into int8 vectors and applied to every activation row of the
// tile (the skinny GEMM of speculative verification). Integer sums are exact, so lanes may group
// products any way; the float work per (row, column) is the scalar reference's expression, block
// by block left to right. So results are bit-identical to kernels_isa_scalar.cpp for every tile
// height, thread count and dotprod/no-dotprod choice. (Weights repacked into the rows8 layout are
// served by the kernels in cpu/arm/neon/, batch-invariant but in their own order.)
//
// Include only from an *_isa_neon*.cpp file: everything is in an anonymous namespace so each file
// keeps its own copy compiled with its own flags.
#pragma once
#include <arm_neon.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/act_layout.h"
#include "quant/blocks.h"
#include "quant/quant_types.h"

namespace qd::cpu {
namespace {

constexpr int kNeonMaxRows = 4;  // activation rows per tile (32 vector registers)

inline float h2f(uint16_t h) {
  __fp16 f;
  std::memcpy(&f, &h, 2);
  return (float)f;  // exact
}

// acc + the sums of a[k] * b[k] over groups of products (exact while pairs fit int16: they do,
// |a|, |b| <= 128 and never both -128).
template <class Tag>
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
  if constexpr (Tag::kDot) {
    return vdotq_s32(acc, a, b);
  } else {
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    p = vmlal_high_s8(p, a, b);
    return vpadalq_s16(acc, p);
  }
}

// ---- 32-element blocks against Q8_0 activations ---------------------------------------------

// 16 bytes of packed nibbles -> elements 0..15 (low nibbles) and 16..31 (high nibbles).
inline void unpack_nibbles(const uint8_t* qs, uint8x16_t* lo, uint8x16_t* hi) {
  const uint8x16_t t = vld1q_u8(qs);
  *lo = vandq_u8(t, vdupq_n_u8(15));
  *hi = vshrq_n_u8(t, 4);
}

// Bit j of the 32-bit little-endian qh -> byte j = 0xFF if set, else 0; elements 0..15 and 16..31.
inline void bits_to_bytes(const uint8_t* qh, uint8x16_t* lo, uint8x16_t* hi) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  const uint8x16_t bytes = vreinterpretq_u8_u32(vdupq_n_u32(v));
  static const uint8_t kIdxLo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  static const uint8_t kIdxHi[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bit = vld1q_u8(kBit);
  *lo = vtstq_u8(vqtbl1q_u8(bytes, vld1q_u8(kIdxLo)), bit);
  *hi = vtstq_u8(vqtbl1q_u8(bytes, vld1q_u8(kIdxHi)), bit);
}

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
        // the scalar reference's expression (kernels_isa_scalar.cpp), term for term
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

// ---- K-quants against Q8_K activations ------------------------------------------------------

// Q4_K's 12 scale bytes -> 6-bit scales (out[0..7]) and mins (out[8..15]) (ggml get_scale_min_k4).
inline void q4k_scales_mins(const uint8_t* q, uint8_t out[16]) {
  for (int j = 0; j < 8; j++) {
    if (j < 4) {
      out[j] = q[j] & 63;
      out[8 + j] = q[j + 4] & 63;
    } else {
      out[j] = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
      out[8 + j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
  }
}

// Q4_K: w = d * sc_s * q - dmin * m_s over 8 sub-blocks of 32 (q in 0..15).
template <class Tag, int R>
void q4k_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  for (int64_t r = r0; r < r1; r++) {
    const quant::block_q4_K* wb = (const quant::block_q4_K*)(w.data + (size_t)r * w.row_bytes);
    float sum[R];
    for (int j = 0; j < R; j++) sum[j] = 0.f;
    for (int64_t b = 0; b < nb; b++) {
      const quant::block_q4_K& blk = wb[b];
      int8x16_t q[16];  // sub-block s: q[2s], q[2s + 1]
      for (int k = 0; k < 4; k++) {  // 64 elements: low nibbles = sub-block 2k, high = 2k + 1
        const uint8x16_t b0 = vld1q_u8(blk.qs + 32 * k), b1 = vld1q_u8(blk.qs + 32 * k + 16);
        q[4 * k + 0] = vreinterpretq_s8_u8(vandq_u8(b0, vdupq_n_u8(15)));
        q[4 * k + 1] = vreinterpretq_s8_u8(vandq_u8(b1, vdupq_n_u8(15)));
        q[4 * k + 2] = vreinterpretq_s8_u8(vshrq_n_u8(b0, 4));
        q[4 * k + 3] = vreinterpretq_s8_u8(vshrq_n_u8(b1, 4));
      }
      uint8_t sm[16];
      q4k_scales_mins(blk.scales, sm);
      const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(sm + 8)));
      const float dw = h2f(blk.d), dmw = h2f(blk.dmin);
      for (int j = 0; j < R; j++) {
        const int8_t* xq = x[j].qs + 256 * b;
        int32x4_t acc = vdupq_n_s32(0);
        for (int s = 0; s < 8; s++) {
          int32x4_t p = dot16<Tag>(vdupq_n_s32(0), q[2 * s], vld1q_s8(xq + 32 * s));
          p = dot16<Tag>(p, q[2 * s + 1], vld1q_s8(xq + 32 * s + 16));
          acc = vmlaq_n_s32(acc, p, sm[s]);
        }
        const int isum = vaddvq_s32(acc);
        // sum over sub-blocks of m_s * (sum of x in the sub-block); bsums hold sums of 16
        const int16_t* bs = x[j].bsums + 16 * b;
        const int16x8_t s8 = vpaddq_s16(vld1q_s16(bs), vld1q_s16(bs + 8));
        const int msum = vaddvq_s32(vmull_s16(vget_low_s16(mins), vget_low_s16(s8))) +
                         vaddvq_s32(vmull_high_s16(mins, s8));
        sum[j] += x[j].d[b] * (dw * (float)isum - dmw * (float)msum);
      }
    }
    for (int j = 0; j < R; j++) y[j * ldy + r] = sum[j];
  }
}

// Q6_K: w = d * sc_g * (q - 32) over 16 groups of 16 (q in 0..63, int8 sc).
template <class Tag, int R>
void q6k_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  const uint8x16_t m4 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);
  for (int64_t r = r0; r < r1; r++) {
    const quant::block_q6_K* wb = (const quant::block_q6_K*)(w.data + (size_t)r * w.row_bytes);
    float sum[R];
    for (int j = 0; j < R; j++) sum[j] = 0.f;
    for (int64_t b = 0; b < nb; b++) {
      const quant::block_q6_K& blk = wb[b];
      int8x16_t q[16];  // q[g]: the 16 elements of group g = 8h + 2c + k
      for (int h = 0; h < 2; h++) {
        for (int k = 0; k < 2; k++) {
          const uint8x16_t l0 = vld1q_u8(blk.ql + 64 * h + 16 * k);
          const uint8x16_t l1 = vld1q_u8(blk.ql + 64 * h + 32 + 16 * k);
          const uint8x16_t hb = vld1q_u8(blk.qh + 32 * h + 16 * k);
          const uint8x16_t c[4] = {
              vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)),
              vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)),
              vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)),
              vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
          };
          for (int cc = 0; cc < 4; cc++) q[8 * h + 2 * cc + k] = vreinterpretq_s8_u8(c[cc]);
        }
      }
      const int8x16_t sc8 = vld1q_s8(blk.scales);
      const int16x8_t sc_lo = vmovl_s8(vget_low_s8(sc8)), sc_hi = vmovl_high_s8(sc8);
      const float dw = h2f(blk.d);
      for (int j = 0; j < R; j++) {
        const int8_t* xq = x[j].qs + 256 * b;
        int32x4_t acc = vdupq_n_s32(0);
        for (int g = 0; g < 16; g++) {
          acc = vmlaq_n_s32(acc, dot16<Tag>(vdupq_n_s32(0), q[g], vld1q_s8(xq + 16 * g)), blk.scales[g]);
        }
        // the -32 offset: 32 * sum_g sc_g * (sum of x in group g)
        const int16_t* bs = x[j].bsums + 16 * b;
        const int off = vaddvq_s32(vmull_s16(vget_low_s16(sc_lo), vld1_s16(bs))) +
                        vaddvq_s32(vmull_high_s16(sc_lo, vld1q_s16(bs))) +
                        vaddvq_s32(vmull_s16(vget_low_s16(sc_hi), vld1_s16(bs + 8))) +
                        vaddvq_s32(vmull_high_s16(sc_hi, vld1q_s16(bs + 8)));
        const int isum = vaddvq_s32(acc) - 32 * off;
        sum[j] += dw * x[j].d[b] * (float)isum;
      }
    }
    for (int j = 0; j < R; j++) y[j * ldy + r] = sum[j];
  }
}

// The other K-quants (Q2_K, Q3_K, Q5_K, IQ4_XS) as 16 groups of 16 int8 weights with integer
// scales, and mins where the type has them (kMins): the scalar reference's
// x.d * (d * isum - dmin * msum), else d * x.d * isum.
struct NKUnpacked {
  int8x16_t q[16];  // group g: elements 16g .. 16g + 15
  int sc[16], m[16];
  float d, dmin;
};

// The low 2 bits of Q2_K/Q3_K, group g = 8h + 2s + k: field s of qs[32h + 16k .. + 15].
inline void low2_groups(const uint8_t* qs, uint8x16_t low[16]) {
  const uint8x16_t m3 = vdupq_n_u8(3);
  for (int h = 0; h < 2; h++) {
    for (int k = 0; k < 2; k++) {
      const uint8x16_t b = vld1q_u8(qs + 32 * h + 16 * k);
      low[8 * h + 0 + k] = vandq_u8(b, m3);
      low[8 * h + 2 + k] = vandq_u8(vshrq_n_u8(b, 2), m3);
      low[8 * h + 4 + k] = vandq_u8(vshrq_n_u8(b, 4), m3);
      low[8 * h + 6 + k] = vshrq_n_u8(b, 6);
    }
  }
}

struct NKQ2 {  // w = d * sc_g * q - dmin * m_g, 4-bit sc (low) and m (high) per group
  using Block = quant::block_q2_K;
  static constexpr bool kMins = true;
  static void unpack(const Block& blk, NKUnpacked& u) {
    uint8x16_t low[16];
    low2_groups(blk.qs, low);
    for (int g = 0; g < 16; g++) {
      u.q[g] = vreinterpretq_s8_u8(low[g]);
      u.sc[g] = blk.scales[g] & 15;
      u.m[g] = blk.scales[g] >> 4;
    }
    u.d = h2f(blk.d);
    u.dmin = h2f(blk.dmin);
  }
};

struct NKQ3 {  // w = d * sc_g * (low - 4 * !high), high = bit c of hmask[l] in chunk c = g / 2
  using Block = quant::block_q3_K;
  static constexpr bool kMins = false;
  static void unpack(const Block& blk, NKUnpacked& u) {
    uint8x16_t low[16];
    low2_groups(blk.qs, low);
    const uint8x16_t hm[2] = {vld1q_u8(blk.hmask), vld1q_u8(blk.hmask + 16)};
    const uint8x16_t four = vdupq_n_u8(4);
    for (int g = 0; g < 16; g++) {
      const uint8x16_t high = vtstq_u8(hm[g % 2], vdupq_n_u8((uint8_t)(1 << (g / 2))));
      u.q[g] = vsubq_s8(vreinterpretq_s8_u8(low[g]), vreinterpretq_s8_u8(vbicq_u8(four, high)));
      u.sc[g] = quant::q3_K_scale(blk.scales, g);
    }
    u.d = h2f(blk.d);
  }
};

struct NKQ5 {  // w = d * sc_s * q - dmin * m_s, sub-block s = groups 2s, 2s + 1, fifth bit s of qh[l]
  using Block = quant::block_q5_K;
  static constexpr bool kMins = true;
  static void unpack(const Block& blk, NKUnpacked& u) {
    uint8_t sm[16];
    q4k_scales_mins(blk.scales, sm);
    const uint8x16_t qh[2] = {vld1q_u8(blk.qh), vld1q_u8(blk.qh + 16)};
    const uint8x16_t sixteen = vdupq_n_u8(16);
    for (int s = 0; s < 8; s++) {
      for (int k = 0; k < 2; k++) {
        const uint8x16_t b = vld1q_u8(blk.qs + 32 * (s / 2) + 16 * k);
        const uint8x16_t nib = (s & 1) ? vshrq_n_u8(b, 4) : vandq_u8(b, vdupq_n_u8(15));
        const uint8x16_t high = vandq_u8(vtstq_u8(qh[k], vdupq_n_u8((uint8_t)(1 << s))), sixteen);
        u.q[2 * s + k] = vreinterpretq_s8_u8(vorrq_u8(nib, high));
        u.sc[2 * s + k] = sm[s];
        u.m[2 * s + k] = sm[8 + s];
      }
    }
    u.d = h2f(blk.d);
    u.dmin = h2f(blk.dmin);
  }
};

struct NKIQ4XS {  // w = d * (ls_s - 32) * kvalues[nibble], sub-block s laid out as an IQ4_NL block
  using Block = quant::block_iq4_xs;
  static constexpr bool kMins = false;
  static void unpack(const Block& blk, NKUnpacked& u) {
    const int8x16_t lut = vld1q_s8(quant::kvalues_iq4nl);
    for (int s = 0; s < 8; s++) {
      uint8x16_t lo, hi;
      unpack_nibbles(blk.qs + 16 * s, &lo, &hi);
      u.q[2 * s] = vqtbl1q_s8(lut, lo);
      u.q[2 * s + 1] = vqtbl1q_s8(lut, hi);
      const int ls = ((blk.scales_l[s / 2] >> (4 * (s % 2))) & 15) | (((blk.scales_h >> (2 * s)) & 3) << 4);
      u.sc[2 * s] = u.sc[2 * s + 1] = ls - 32;
    }
    u.d = h2f(blk.d);
  }
};

template <class Tag, class W, int R>
void kq16_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  NKUnpacked u;
  for (int64_t r = r0; r < r1; r++) {
    const typename W::Block* wb = (const typename W::Block*)(w.data + (size_t)r * w.row_bytes);
    float sum[R];
    for (int j = 0; j < R; j++) sum[j] = 0.f;
    for (int64_t b = 0; b < nb; b++) {
      W::unpack(wb[b], u);
      for (int j = 0; j < R; j++) {
        const int8_t* xq = x[j].qs + 256 * b;
        int32x4_t acc = vdupq_n_s32(0);
        for (int g = 0; g < 16; g++) acc = vmlaq_n_s32(acc, dot16<Tag>(vdupq_n_s32(0), u.q[g], vld1q_s8(xq + 16 * g)), u.sc[g]);
        const int isum = vaddvq_s32(acc);
        if constexpr (W::kMins) {
          const int16_t* bs = x[j].bsums + 16 * b;
          int msum = 0;
          for (int g = 0; g < 16; g++) msum += u.m[g] * bs[g];
          sum[j] += x[j].d[b] * (u.d * (float)isum - u.dmin * (float)msum);
        } else {
          sum[j] += u.d * x[j].d[b] * (float)isum;
        }
      }
    }
    for (int j = 0; j < R; j++) y[j * ldy + r] = sum[j];
  }
}

// ---- tiles and the table -----------------------------------------------------------------

// Calls f(std::integral_constant<int, R>{}) for R == m: a run-time row count as a tile height.
template <int Lo, int Max, class F>
inline void neon_with_rows(int m, F&& f) {
  if constexpr (Lo <= Max) {
    if (m == Lo) {
      f(std::integral_constant<int, Lo>{});
      return;
    }
    neon_with_rows<Lo + 1, Max>(m, f);
  }
}

// Splits the n activation rows into tiles of at most kNeonMaxRows, each run as Tile<R>.
template <class TileFn>
inline void neon_for_each_tile(int64_t n, TileFn&& tile) {
  for (int64_t i0 = 0; i0 < n; i0 += kNeonMaxRows) {
    const int m = (int)(n - i0 < kNeonMaxRows ? n - i0 : kNeonMaxRows);
    neon_with_rows<1, kNeonMaxRows>(m, [&](auto rc) { tile(rc, i0); });
  }
}

template <class Tag, class W>
void q32_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
              int64_t ldy) {
  neon_for_each_tile(n, [&](auto rc, int64_t i0) {
    q32_tile<Tag, W, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

template <class Tag>
void q4k_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
              int64_t ldy) {
  neon_for_each_tile(n, [&](auto rc, int64_t i0) {
    q4k_tile<Tag, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

template <class Tag>
void q6k_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
              int64_t ldy) {
  neon_for_each_tile(n, [&](auto rc, int64_t i0) {
    q6k_tile<Tag, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

template <class Tag, class W>
void kq16_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
               int64_t ldy) {
  neon_for_each_tile(n, [&](auto rc, int64_t i0) {
    kq16_tile<Tag, W, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

// Types without an entry here (F32, F16, BF16) fall back to the scalar table.
template <class Tag>
KernelTable make_neon_table() {
  using quant::Type;
  KernelTable t{};
  t.isa = Isa::neon;
  auto set = [&](Type type, GemmRowsFn fn, ActFormat act) { t.gemm[(uint32_t)type] = {fn, act}; };
  set(Type::Q4_0, q32_gemm<Tag, NQ4_0>, ActFormat::q8_0);
  set(Type::Q4_1, q32_gemm<Tag, NQ4_1>, ActFormat::q8_0);
  set(Type::Q5_0, q32_gemm<Tag, NQ5_0>, ActFormat::q8_0);
  set(Type::Q5_1, q32_gemm<Tag, NQ5_1>, ActFormat::q8_0);
  set(Type::Q8_0, q32_gemm<Tag, NQ8_0>, ActFormat::q8_0);
  set(Type::IQ4_NL, q32_gemm<Tag, NIQ4_NL>, ActFormat::q8_0);
  set(Type::Q4_K, q4k_gemm<Tag>, ActFormat::q8_K);
  set(Type::Q6_K, q6k_gemm<Tag>, ActFormat::q8_K);
  set(Type::Q2_K, kq16_gemm<Tag, NKQ2>, ActFormat::q8_K);
  set(Type::Q3_K, kq16_gemm<Tag, NKQ3>, ActFormat::q8_K);
  set(Type::Q5_K, kq16_gemm<Tag, NKQ5>, ActFormat::q8_K);
  set(Type::IQ4_XS, kq16_gemm<Tag, NKIQ4XS>, ActFormat::q8_K);
  return t;
}

}  // namespace
}  // namespace qd::cpu

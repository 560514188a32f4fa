// NEON kernels for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and IQ4_XS against Q8_K
// activations. Include rules: see arm/neon/common.h.
#pragma once
#include "cpu/arm/neon/common.h"

namespace qd::cpu {
namespace {

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

}  // namespace
}  // namespace qd::cpu

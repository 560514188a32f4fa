// Q6_K weights in the rows8 layout (cpu/repack.cpp) against Q8_K activations, NEON with SDOT.
//
// Per block (256 weights) and activation row: each group G of 16 weights is 4 k-groups by SDOT of
// the unsigned 6-bit values e, started at -32 * bsum_G (the activations' osg16), so the int32 sum
// is sum (e - 32) x exactly; times the group's int8 scale (vmlaq_s32) into the block's sum.
// acc += d * xd * S, one FMA per block.
#pragma once
#include "cpu/arm/neon/rows8_common.h"

namespace qd::cpu {
namespace {

constexpr size_t kQ6KRows8Block = 1680;

// The 6-bit values of vector (t, g), rows 0-3 (Half 0) or 4-7 (Half 1), low (High = false:
// elements 64t + 4g + i) or high part (elements 64t + 32 + 4g + i): the nibble from the lo
// plane, two bits from field 2 (t & 1) + High of the hi plane, moved to bits 4..5.
template <int T, bool High, int Half>
inline int8x16_t q6k_rows8_values(const uint8_t* blk, int g) {
  const uint8x16_t lo = vld1q_u8(blk + 144 + 32 * (8 * T + g) + 16 * Half);
  const uint8x16_t hi = vld1q_u8(blk + 1168 + 32 * (8 * (T / 2) + g) + 16 * Half);
  const uint8x16_t nib = High ? vshrq_n_u8(lo, 4) : vandq_u8(lo, vdupq_n_u8(15));
  constexpr int field = 2 * (T & 1) + (High ? 1 : 0);
  uint8x16_t h2;
  if constexpr (field == 0) {
    h2 = vshlq_n_u8(hi, 4);
  } else if constexpr (field == 1) {
    h2 = vshlq_n_u8(hi, 2);
  } else if constexpr (field == 2) {
    h2 = hi;
  } else {
    h2 = vshrq_n_u8(hi, 2);
  }
  return vreinterpretq_s8_u8(vorrq_u8(nib, vandq_u8(h2, vdupq_n_u8(0x30))));
}

// Group G = 4T + 2 High + Q of block b (k-groups 4Q .. 4Q + 3 of part High of chunk T) into isum.
template <class Tag, int R, int T, bool High, int Q>
inline void q6k_rows8_group(const uint8_t* blk, const ActQ8_K* x, int64_t b, int32x4_t* isum_lo,
                            int32x4_t* isum_hi) {
  constexpr int G = 4 * T + 2 * (High ? 1 : 0) + Q;
  // scales pair u = G / 2: byte 2r + (G & 1) of the 16 at 16 + 16u is row r's scale
  const int8x16_t pair = vld1q_s8((const int8_t*)blk + 16 + 16 * (G / 2));
  const int16x8_t sc16 = vmovl_s8(vget_low_s8((G & 1) ? vuzp2q_s8(pair, pair) : vuzp1q_s8(pair, pair)));
  const int32x4_t sc_lo = vmovl_s16(vget_low_s16(sc16)), sc_hi = vmovl_high_s16(sc16);
  int32x4_t s_lo[R], s_hi[R];
  int8x16_t xv[R];
  for (int j = 0; j < R; j++) {
    // osg16 is in group-of-16 lane order: p = 4 (G % 4) + G / 4 holds group G
    s_lo[j] = s_hi[j] = vld1q_dup_s32(x[j].osg16 + 16 * b + 4 * (G % 4) + G / 4);
    xv[j] = vld1q_s8(x[j].qs + 256 * b + 16 * G);
  }
  rows8_unroll<4>([&](auto l) {
    const int g = 4 * Q + decltype(l)::value;
    const int8x16_t v0 = q6k_rows8_values<T, High, 0>(blk, g), v1 = q6k_rows8_values<T, High, 1>(blk, g);
    for (int j = 0; j < R; j++) {
      s_lo[j] = rows8_dot<Tag, decltype(l)::value>(s_lo[j], v0, xv[j]);
      s_hi[j] = rows8_dot<Tag, decltype(l)::value>(s_hi[j], v1, xv[j]);
    }
  });
  for (int j = 0; j < R; j++) {
    isum_lo[j] = vmlaq_s32(isum_lo[j], s_lo[j], sc_lo);
    isum_hi[j] = vmlaq_s32(isum_hi[j], s_hi[j], sc_hi);
  }
}

template <class Tag, int R>
void q6k_rows8_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y,
                    int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  for (int64_t r = r0; r < r1; r += 8) {
    const uint8_t* group = w.data + (size_t)(r / 8) * (size_t)nb * kQ6KRows8Block;
    float32x4_t acc_lo[R], acc_hi[R];
    for (int j = 0; j < R; j++) acc_lo[j] = acc_hi[j] = vdupq_n_f32(0.f);
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* blk = group + (size_t)b * kQ6KRows8Block;
      int32x4_t isum_lo[R], isum_hi[R];
      for (int j = 0; j < R; j++) isum_lo[j] = isum_hi[j] = vdupq_n_s32(0);
      rows8_unroll<4>([&](auto t) {  // chunk t: elements 64t .. 64t + 63, groups 4t .. 4t + 3
        constexpr int T = decltype(t)::value;
        q6k_rows8_group<Tag, R, T, false, 0>(blk, x, b, isum_lo, isum_hi);
        q6k_rows8_group<Tag, R, T, false, 1>(blk, x, b, isum_lo, isum_hi);
        q6k_rows8_group<Tag, R, T, true, 0>(blk, x, b, isum_lo, isum_hi);
        q6k_rows8_group<Tag, R, T, true, 1>(blk, x, b, isum_lo, isum_hi);
      });
      const float32x4_t d_lo = rows8_f16x4(blk), d_hi = rows8_f16x4(blk + 8);
      for (int j = 0; j < R; j++) {
        const float xd = x[j].d[b];
        acc_lo[j] = vfmaq_f32(acc_lo[j], vmulq_n_f32(d_lo, xd), vcvtq_f32_s32(isum_lo[j]));
        acc_hi[j] = vfmaq_f32(acc_hi[j], vmulq_n_f32(d_hi, xd), vcvtq_f32_s32(isum_hi[j]));
      }
    }
    for (int j = 0; j < R; j++) rows8_store(y + j * ldy, r, r1, acc_lo[j], acc_hi[j]);
  }
}

template <class Tag, int kMax>
void q6k_rows8_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                    int64_t ldy) {
  rows8_tiles<kMax>(n, [&](auto rc, int64_t i0) {
    q6k_rows8_tile<Tag, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

// Q6_K weights in the rows8 layout (cpu/repack.cpp) against Q8_K activations, NEON with SDOT.
//
// Per block (256 weights) and activation row: each group G of 16 weights is 4 k-groups by SDOT of
// the unsigned 6-bit values e, started at -32 * bsum_G (the activations' osg16), so the int32 sum
// is sum (e - 32) x exactly; times the group's int8 scale (vmlaq_s32) into the block's sum.
// acc += d * xd * S, one FMA per block.
#pragma once
#include "cpu/arm/neon/rows8_common.h"
#include "cpu/repack.h"

namespace qd::cpu {
namespace {

// Group G of block b (16 weights: elements 16G .. 16G + 15, k-group L at 16G + 4L) into isum. Its
// values are the low 6 bits of the layout's X, Y, Z (k-groups 0-2) and, for k-group 3, their top
// 2 bits gathered by shift-left-and-insert (X's are bits 4..5, Y's 2..3, Z's 0..1).
template <class Tag, int R>
QD_ROWS8_INLINE inline void q6k_rows8_group(const uint8_t* blk, int G, const ActQ8_K* x, int64_t b,
                                            int32x4_t* isum_lo, int32x4_t* isum_hi) {
  const uint8x16_t m63 = vdupq_n_u8(63);
  // scales pair G / 2 holds byte 2r + (G & 1) = row r's scale of group G: the even bytes from (G & 1)
  const int8x16_t pair = vld1q_s8((const int8_t*)blk + 16 + 16 * (G / 2) + (G & 1));
  const int16x8_t sc16 = vmovl_s8(vget_low_s8(vuzp1q_s8(pair, pair)));
  const int32x4_t sc_lo = vmovl_s16(vget_low_s16(sc16)), sc_hi = vmovl_high_s16(sc16);
  int32x4_t s_lo[R], s_hi[R];
  int8x16_t xv[R];
  for (int j = 0; j < R; j++) {
    // the -32 as the start of the sum; osg16's lane p = 4 (G % 4) + G / 4 holds group G
    s_lo[j] = s_hi[j] = vld1q_dup_s32(x[j].osg16 + 16 * b + 4 * (G % 4) + G / 4);
    xv[j] = vld1q_s8(x[j].qs + 256 * b + 16 * G);
  }
  const uint8_t* xyz = blk + kQ6KRows8Values + 96 * G;
  rows8_unroll<4>([&](auto l) QD_ROWS8_INLINE {  // k-group L
    constexpr int L = decltype(l)::value;
    int8x16_t v[2];
    for (int half = 0; half < 2; half++) {  // rows 0-3, rows 4-7
      uint8x16_t e;
      if constexpr (L < 3) {
        e = vandq_u8(vld1q_u8(xyz + 32 * L + 16 * half), m63);
      } else {
        const uint8x16_t X = vld1q_u8(xyz + 16 * half), Y = vld1q_u8(xyz + 32 + 16 * half),
                         Z = vld1q_u8(xyz + 64 + 16 * half);
        e = vsliq_n_u8(vsliq_n_u8(vshrq_n_u8(Z, 6), vshrq_n_u8(Y, 6), 2), vshrq_n_u8(X, 6), 4);
      }
      v[half] = vreinterpretq_s8_u8(e);
    }
    for (int j = 0; j < R; j++) {
      s_lo[j] = rows8_dot<Tag, L>(s_lo[j], v[0], xv[j]);
      s_hi[j] = rows8_dot<Tag, L>(s_hi[j], v[1], xv[j]);
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
  rows8_walk<R>(w, nb, kQ6KRows8Block, r0, r1, y, ldy, [&](const uint8_t* blk, int64_t b, float32x4_t* acc_lo, float32x4_t* acc_hi) QD_ROWS8_INLINE {
    int32x4_t isum_lo[R], isum_hi[R];
    for (int j = 0; j < R; j++) isum_lo[j] = isum_hi[j] = vdupq_n_s32(0);
    for (int G = 0; G < 16; G++) q6k_rows8_group<Tag, R>(blk, G, x, b, isum_lo, isum_hi);
    const float32x4_t d_lo = rows8_f16x4(blk), d_hi = rows8_f16x4(blk + 8);
    for (int j = 0; j < R; j++) {
      const float xd = x[j].d[b];
      acc_lo[j] = vfmaq_f32(acc_lo[j], vmulq_n_f32(d_lo, xd), vcvtq_f32_s32(isum_lo[j]));
      acc_hi[j] = vfmaq_f32(acc_hi[j], vmulq_n_f32(d_hi, xd), vcvtq_f32_s32(isum_hi[j]));
    }
  });
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

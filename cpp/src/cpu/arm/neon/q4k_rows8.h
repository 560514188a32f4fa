// Q4_K weights in the rows8 layout (cpu/repack.cpp) against Q8_K activations, NEON with SDOT.
//
// Per block (256 weights) and activation row: for each sub-block s of 32, 8 k-groups by SDOT (one
// instruction per 4 rows x 4 weights) into int32, times the sub-block's scale (vmlaq_s32); the
// mins against the activations' sub-block sums (pairs of bsums) by vmlal_laneq_s16. Then
// acc += d * xd * S, acc -= dmin * xd * M (two FMAs per block).
#pragma once
#include "cpu/arm/neon/rows8_common.h"

namespace qd::cpu {
namespace {

constexpr size_t kQ4KRows8Block = 1184;

// Sub-block s of block blk (the low nibbles of chunk s / 2 for even s, the high nibbles for odd
// s: 8 k-group vectors) against R activation rows (32 values at xq[j]), times the sub-block's
// scales, into isum. The nibble shift is a run-time vector shift, so that the caller's loop over
// s stays a loop: one sub-block's registers live at a time.
template <class Tag, int R>
QD_ROWS8_INLINE inline void q4k_rows8_sub(const uint8_t* blk, int s, const int8_t* const* xq,
                                          int32x4_t* isum_lo, int32x4_t* isum_hi) {
  const uint8_t* qv = blk + 160 + 256 * (s / 2);
  const uint8x16_t m4 = vdupq_n_u8(15);
  const int8x16_t shift = vdupq_n_s8((int8_t)(-4 * (s & 1)));  // negative: shift right
  int32x4_t s_lo[R], s_hi[R];
  for (int j = 0; j < R; j++) s_lo[j] = s_hi[j] = vdupq_n_s32(0);
  rows8_unroll<2>([&](auto h) QD_ROWS8_INLINE {  // activation register h: k-groups 4h .. 4h + 3
    int8x16_t xv[R];
    for (int j = 0; j < R; j++) xv[j] = vld1q_s8(xq[j] + 16 * h);
    rows8_unroll<4>([&](auto l) QD_ROWS8_INLINE {
      constexpr int g = 4 * decltype(h)::value + decltype(l)::value;
      const int8x16_t v0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vld1q_u8(qv + 32 * g), shift), m4));
      const int8x16_t v1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vld1q_u8(qv + 32 * g + 16), shift), m4));
      for (int j = 0; j < R; j++) {
        s_lo[j] = rows8_dot<Tag, decltype(l)::value>(s_lo[j], v0, xv[j]);
        s_hi[j] = rows8_dot<Tag, decltype(l)::value>(s_hi[j], v1, xv[j]);
      }
    });
  });
  int32x4_t sc_lo, sc_hi;
  rows8_u8_to_s32(vld1_u8(blk + 32 + 8 * s), &sc_lo, &sc_hi);
  for (int j = 0; j < R; j++) {
    isum_lo[j] = vmlaq_s32(isum_lo[j], s_lo[j], sc_lo);
    isum_hi[j] = vmlaq_s32(isum_hi[j], s_hi[j], sc_hi);
  }
}

template <class Tag, int R>
void q4k_rows8_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y,
                    int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  rows8_walk<R>(w, nb, kQ4KRows8Block, r0, r1, y, ldy, [&](const uint8_t* blk, int64_t b, float32x4_t* acc_lo, float32x4_t* acc_hi) QD_ROWS8_INLINE {
    int32x4_t isum_lo[R], isum_hi[R];
    const int8_t* xq[R];
    for (int j = 0; j < R; j++) isum_lo[j] = isum_hi[j] = vdupq_n_s32(0);
    for (int s = 0; s < 8; s++) {  // sub-block s: elements 32s .. 32s + 31
      for (int j = 0; j < R; j++) xq[j] = x[j].qs + 256 * b + 32 * s;
      q4k_rows8_sub<Tag, R>(blk, s, xq, isum_lo, isum_hi);
    }
    const float32x4_t d_lo = rows8_f16x4(blk), d_hi = rows8_f16x4(blk + 8);
    const float32x4_t dm_lo = rows8_f16x4(blk + 16), dm_hi = rows8_f16x4(blk + 24);
    for (int j = 0; j < R; j++) {
      // M = sum over sub-blocks s of m_s * (the sum of the activations of s: two bsums)
      const int16_t* bs = x[j].bsums + 16 * b;
      const int16x8_t ssum = vpaddq_s16(vld1q_s16(bs), vld1q_s16(bs + 8));
      int32x4_t ms_lo = vdupq_n_s32(0), ms_hi = vdupq_n_s32(0);
      rows8_unroll<8>([&](auto s) QD_ROWS8_INLINE {
        const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(blk + 96 + 8 * decltype(s)::value)));
        ms_lo = vmlal_laneq_s16(ms_lo, vget_low_s16(m), ssum, decltype(s)::value);
        ms_hi = vmlal_high_laneq_s16(ms_hi, m, ssum, decltype(s)::value);
      });
      const float xd = x[j].d[b];
      acc_lo[j] = vfmaq_f32(acc_lo[j], vmulq_n_f32(d_lo, xd), vcvtq_f32_s32(isum_lo[j]));
      acc_hi[j] = vfmaq_f32(acc_hi[j], vmulq_n_f32(d_hi, xd), vcvtq_f32_s32(isum_hi[j]));
      acc_lo[j] = vfmsq_f32(acc_lo[j], vmulq_n_f32(dm_lo, xd), vcvtq_f32_s32(ms_lo));
      acc_hi[j] = vfmsq_f32(acc_hi[j], vmulq_n_f32(dm_hi, xd), vcvtq_f32_s32(ms_hi));
    }
  });
}

template <class Tag, int kMax>
void q4k_rows8_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                    int64_t ldy) {
  rows8_tiles<kMax>(n, [&](auto rc, int64_t i0) {
    q4k_rows8_tile<Tag, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

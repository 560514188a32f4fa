// The 32-weight block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) in the rows8 layout (cpu/repack.cpp)
// against Q8_0 activations, NEON with SDOT.
//
// Per block and activation row: the 8 k-groups of the unsigned 4/5-bit values (Q8_0's signed
// values as they are) by SDOT into int32; then acc += d * xd * S, plus the offset times an
// activation block sum: Q4_0's -8 d and Q5_0's -16 d times d * sum (s), Q4_1/Q5_1's m times
// llama.cpp's FP16-rounded block_q8_1 sum (sm, as the GGUF-layout kernels): two FMAs per block.
#pragma once
#include "cpu/arm/neon/rows8_common.h"

namespace qd::cpu {
namespace {

struct N8Q4_0 { static constexpr int kHalves = 1, kValueBytes = 16; static constexpr bool kFifth = false; static constexpr float kOffset = -8.f; };
struct N8Q4_1 { static constexpr int kHalves = 2, kValueBytes = 16; static constexpr bool kFifth = false; static constexpr float kOffset = 0.f; };
struct N8Q5_0 { static constexpr int kHalves = 1, kValueBytes = 16; static constexpr bool kFifth = true; static constexpr float kOffset = -16.f; };
struct N8Q5_1 { static constexpr int kHalves = 2, kValueBytes = 16; static constexpr bool kFifth = true; static constexpr float kOffset = 0.f; };
struct N8Q8_0 { static constexpr int kHalves = 1, kValueBytes = 32; static constexpr bool kFifth = false; static constexpr float kOffset = 0.f; };

template <class F>
constexpr size_t q32_rows8_block() {
  return 8 * (2 * F::kHalves + F::kValueBytes + (F::kFifth ? 4 : 0));
}

// k-group C of rows 0-3 (Half 0) or 4-7 (Half 1) of the 5-bit types' planes (cpu/repack.cpp):
// k-groups 0-4 the low 5 bits of plane C; 5 and 6 the top 3 bits of P0 / P2 and bits 5..6 of P1 /
// P3 above them; 7 the top 3 bits of P4, then bit 7 of P1 and of P3.
template <int C, int Half>
inline uint8x16_t p5_rows8_values(const uint8_t* plane) {
  const auto at = [&](int p) { return vld1q_u8(plane + 32 * p + 16 * Half); };
  if constexpr (C < 5) {
    return vandq_u8(at(C), vdupq_n_u8(31));
  } else if constexpr (C < 7) {
    constexpr int p = 2 * (C - 5);
    return vorrq_u8(vshrq_n_u8(at(p), 5), vandq_u8(vshrq_n_u8(at(p + 1), 2), vdupq_n_u8(0x18)));
  } else {
    return vorrq_u8(vshrq_n_u8(at(4), 5), vorrq_u8(vandq_u8(vshrq_n_u8(at(1), 4), vdupq_n_u8(0x08)),
                                                   vandq_u8(vshrq_n_u8(at(3), 3), vdupq_n_u8(0x10))));
  }
}

// k-group C (elements 4C .. 4C + 3) of rows 0-3 (Half 0) or 4-7 (Half 1): unsigned values (signed
// for Q8_0). Nibble types: the low nibbles of word C % 4 for C < 4, the high nibbles for C >= 4.
template <class F, int C, int Half>
inline int8x16_t q32_rows8_values(const uint8_t* blk) {
  const uint8_t* plane = blk + 16 * F::kHalves;
  if constexpr (F::kValueBytes == 32) {
    return vld1q_s8((const int8_t*)plane + 32 * C + 16 * Half);
  } else if constexpr (F::kFifth) {
    return vreinterpretq_s8_u8(p5_rows8_values<C, Half>(plane));
  } else {
    const uint8x16_t wv = vld1q_u8(plane + 32 * (C % 4) + 16 * Half);
    return vreinterpretq_s8_u8(C < 4 ? vandq_u8(wv, vdupq_n_u8(15)) : vshrq_n_u8(wv, 4));
  }
}

template <class F, class Tag, int R>
void q32_rows8_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y,
                    int64_t ldy) {
  constexpr size_t kBlock = q32_rows8_block<F>();
  const int64_t nb = w.cols / 32;
  ActQ8_0 x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_0(act + (size_t)j * stride, w.cols);
  for (int64_t r = r0; r < r1; r += 8) {
    const uint8_t* group = w.data + (size_t)(r / 8) * (size_t)nb * kBlock;
    float32x4_t acc_lo[R], acc_hi[R];
    for (int j = 0; j < R; j++) acc_lo[j] = acc_hi[j] = vdupq_n_f32(0.f);
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* blk = group + (size_t)b * kBlock;
      int32x4_t isum_lo[R], isum_hi[R];
      for (int j = 0; j < R; j++) isum_lo[j] = isum_hi[j] = vdupq_n_s32(0);
      rows8_unroll<2>([&](auto h) QD_ROWS8_INLINE {  // activation register h: k-groups 4h .. 4h + 3
        int8x16_t xv[R];
        for (int j = 0; j < R; j++) xv[j] = vld1q_s8(x[j].qs + 32 * b + 16 * h);
        rows8_unroll<4>([&](auto l) QD_ROWS8_INLINE {
          constexpr int C = 4 * decltype(h)::value + decltype(l)::value;
          const int8x16_t v0 = q32_rows8_values<F, C, 0>(blk), v1 = q32_rows8_values<F, C, 1>(blk);
          for (int j = 0; j < R; j++) {
            isum_lo[j] = rows8_dot<Tag, decltype(l)::value>(isum_lo[j], v0, xv[j]);
            isum_hi[j] = rows8_dot<Tag, decltype(l)::value>(isum_hi[j], v1, xv[j]);
          }
        });
      });
      const float32x4_t d_lo = rows8_f16x4(blk), d_hi = rows8_f16x4(blk + 8);
      float32x4_t off_lo = vdupq_n_f32(0.f), off_hi = vdupq_n_f32(0.f);
      if constexpr (F::kHalves == 2) {
        off_lo = rows8_f16x4(blk + 16);
        off_hi = rows8_f16x4(blk + 24);
      } else if constexpr (F::kOffset != 0.f) {
        off_lo = vmulq_n_f32(d_lo, F::kOffset);
        off_hi = vmulq_n_f32(d_hi, F::kOffset);
      }
      for (int j = 0; j < R; j++) {
        const float xd = x[j].d[b];
        acc_lo[j] = vfmaq_f32(acc_lo[j], vmulq_n_f32(d_lo, xd), vcvtq_f32_s32(isum_lo[j]));
        acc_hi[j] = vfmaq_f32(acc_hi[j], vmulq_n_f32(d_hi, xd), vcvtq_f32_s32(isum_hi[j]));
        if constexpr (F::kHalves == 2 || F::kOffset != 0.f) {
          const float xs = F::kHalves == 2 ? x[j].sm[b] : x[j].s[b];
          acc_lo[j] = vfmaq_n_f32(acc_lo[j], off_lo, xs);
          acc_hi[j] = vfmaq_n_f32(acc_hi[j], off_hi, xs);
        }
      }
    }
    for (int j = 0; j < R; j++) rows8_store(y + j * ldy, r, r1, acc_lo[j], acc_hi[j]);
  }
}

template <class F, class Tag, int kMax>
void q32_rows8_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                    int64_t ldy) {
  rows8_tiles<kMax>(n, [&](auto rc, int64_t i0) {
    q32_rows8_tile<F, Tag, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

// Helpers shared by the aarch64 NEON kernel files (cpu/arm/*/table_isa_neon*.cpp): the ISA "tag"
// says which dot product a file may use: struct Tag { static constexpr bool kDot; } (SDOT, or
// widening multiplies and pairwise adds). Each weight block is unpacked ONCE into int8 vectors
// and applied to every activation row of the tile (the skinny GEMM of speculative verification).
// Integer sums are exact, so lanes may group products any way; the float work per (row, column)
// is the scalar reference's expression, block by block left to right: results are bit-identical
// to cpu/scalar/ for every tile height, thread count and dotprod/no-dotprod choice.
//
// Include only from a NEON table file or the headers it includes: everything is in an anonymous
// namespace so each file keeps its own copy compiled with its own flags.
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

}  // namespace
}  // namespace qd::cpu

// Shared by the NEON kernels for weights in the rows8 layout (cpu/repack.h). One 32-byte k-group
// vector of the layout is two 128-bit registers here, rows 0-3 and rows 4-7, each 32-bit lane
// holding 4 consecutive weights of one row. SDOT by lane (vdotq_laneq_s32) multiplies them by one
// 4-value group (a lane) of a 16-value activation register, so an 8-row group is two int32x4
// accumulators per activation row and each output is stored without a horizontal reduction.
//
// The order per (weight row, activation row) is fixed by the block order and the same for every
// tile height R: the integer sums of a block are exact, then one or two FMAs per block into one
// float accumulator per activation row.
//
// Include only from an *_isa_neon*.cpp file: everything is in an anonymous namespace, so each file
// keeps its own copy compiled with its own flags.
#pragma once
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cpu/act_layout.h"
#include "cpu/rows8_order.h"

namespace qd::cpu {
namespace {

// On the lambdas of rows8_unroll: GCC's inliner otherwise gives up on some of them inside the
// large tile functions, and their register arrays then go through memory.
#define QD_ROWS8_INLINE __attribute__((always_inline))

// Calls f(std::integral_constant<int, i>{}) for i = 0 .. N-1: lane numbers must be compile-time
// constants.
template <class F, int... I>
QD_ROWS8_INLINE inline void rows8_unroll_impl(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
QD_ROWS8_INLINE inline void rows8_unroll(F&& f) {
  rows8_unroll_impl(f, std::make_integer_sequence<int, N>{});
}

// Four f16 values (rows 0-3 or 4-7 of the group) as floats.
inline float32x4_t rows8_f16x4(const uint8_t* p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }

// acc[r] += the dot product of lane r of w (4 weights of row r) with lane L of x (4 activations).
template <class Tag, int L>
inline int32x4_t rows8_dot(int32x4_t acc, int8x16_t w, int8x16_t x) {
  static_assert(Tag::kDot, "the rows8 NEON kernels need SDOT");
  return vdotq_laneq_s32(acc, w, x, L);
}

// Widens 8 unsigned bytes (one per row) to int32: rows 0-3 into *lo, rows 4-7 into *hi.
inline void rows8_u8_to_s32(uint8x8_t v, int32x4_t* lo, int32x4_t* hi) {
  const uint16x8_t w = vmovl_u8(v);
  *lo = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w)));
  *hi = vreinterpretq_s32_u32(vmovl_high_u16(w));
}

// Outputs of rows [r, r + 8) that lie below r1.
inline void rows8_store(float* y, int64_t r, int64_t r1, float32x4_t lo, float32x4_t hi) {
  if (r + 8 <= r1) {
    vst1q_f32(y + r, lo);
    vst1q_f32(y + r + 4, hi);
    return;
  }
  float t[8];
  vst1q_f32(t, lo);
  vst1q_f32(t + 4, hi);
  for (int64_t i = 0; i < r1 - r; i++) y[r + i] = t[i];
}

// Block b of a span's ng row groups (the first at row, block_bytes apart) into their accumulators:
// one step of rows8_walk, a function of its own as on x86 (x86/avx2/rows8_common.h).
template <int R, class BlockFn>
[[gnu::noinline]] void rows8_walk_step(const uint8_t* row, size_t block_bytes, int ng, int64_t b,
                                       float32x4_t (*acc_lo)[R], float32x4_t (*acc_hi)[R], const BlockFn& block) {
  for (int g = 0; g < ng; g++) block(row + (size_t)g * block_bytes, b, acc_lo[g], acc_hi[g]);
}

// Runs block(blk, b, acc_lo, acc_hi) for every row group of rows [r0, r1) and block b of it, in the
// layout's order (rows8_order.h): a chunk's groups block after block, the weights one sequential
// stream. acc_lo / acc_hi are the group's R float accumulators of rows 0-3 and 4-7, which stay in
// memory between its blocks; block adds block b into them. Then the outputs are stored.
template <int R, class BlockFn>
inline void rows8_walk(const Matrix& w, int64_t nb, size_t block_bytes, int64_t r0, int64_t r1, float* y, int64_t ldy,
                       const BlockFn& block) {
  float32x4_t acc_lo[kRows8MaxChunkGroups][R], acc_hi[kRows8MaxChunkGroups][R];
  rows8_spans(w, nb, block_bytes, r0, r1, [&](const Rows8Span& s) {
    for (int g = 0; g < s.ng; g++) {
      for (int j = 0; j < R; j++) acc_lo[g][j] = acc_hi[g][j] = vdupq_n_f32(0.f);
    }
    for (int64_t b = 0; b < nb; b++) {
      rows8_walk_step<R>(s.first + (size_t)b * s.stride, block_bytes, s.ng, b, acc_lo, acc_hi, block);
    }
    for (int g = 0; g < s.ng; g++) {
      for (int j = 0; j < R; j++) rows8_store(y + j * ldy, s.r0 + 8 * g, s.r1, acc_lo[g][j], acc_hi[g][j]);
    }
  });
}

// Calls f(std::integral_constant<int, R>{}) for R == m: a run-time row count as a tile height.
template <int Lo, int Max, class F>
inline void rows8_with_rows(int m, F&& f) {
  if constexpr (Lo <= Max) {
    if (m == Lo) {
      f(std::integral_constant<int, Lo>{});
      return;
    }
    rows8_with_rows<Lo + 1, Max>(m, f);
  }
}

// Splits n activation rows into the fewest tiles of at most kMax rows, of equal heights, and
// runs tile(R, i0) on each (R a compile-time constant).
template <int kMax, class TileFn>
inline void rows8_tiles(int64_t n, TileFn&& tile) {
  const int64_t n_tiles = (n + kMax - 1) / kMax;
  for (int64_t t = 0, i0 = 0; t < n_tiles; t++) {
    const int m = (int)(n / n_tiles + (t < n % n_tiles ? 1 : 0));
    rows8_with_rows<1, kMax>(m, [&](auto rc) { tile(rc, i0); });
    i0 += m;
  }
}

}  // namespace
}  // namespace qd::cpu

// Shared by the AVX2 kernels for weights in the rows8 layout (cpu/repack.h): a 256-bit register
// holds 4 consecutive weights of each of 8 rows, so integer dot products leave one 32-bit lane
// per weight row and each output is written without a horizontal reduction.
//
// The order per (weight row, activation row) is fixed by the block order and the same for every
// tile height R: the integer sums of a block are exact, then one or two FMAs per block into one
// float accumulator per activation row. Include rules: see cpu/x86/common.h.
#pragma once
#include <cstring>

#include "common/cpu_features.h"
#include "cpu/act_layout.h"
#include "cpu/x86/common.h"

namespace qd::cpu {
namespace {

// 8 f16 values (one per row of the group) as floats.
inline __m256 rows8_f16(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }

// Keeps v in a register at this point. Without it GCC turns a fully unrolled chain of integer adds
// into a reassociated tree and spills it (measured on the Q4_K tile: 5-10 % slower than a loop
// unrolled twice); with it the unrolled chain stays sequential in one register. The integer sums
// are exact in any order, so this changes speed only, never results.
inline void rows8_pin(__m256i& v) { __asm__("" : "+v"(v)); }  // "v": any of the 32 registers under AVX-512

// Vector registers a tile may keep live: 16 under AVX2, 32 where the translation unit is built for
// AVX-512 (x86/avx512/table_isa_avx512.cpp). The tallest tiles order their loops by it.
#ifdef __AVX512F__
constexpr int kRows8Registers = 32;
#else
constexpr int kRows8Registers = 16;
#endif

// Whether a tile of R activation rows takes each group of weight vectors row by row (folding each
// row's int16 sums at once) instead of vector by vector (every row's int16 sums live across the
// group): the taller tiles under AVX2, whose 16 registers cannot hold those sums for R rows.
constexpr bool rows8_row_by_row(int R) { return R > 4 && kRows8Registers < 32; }

// 4 activation bytes broadcast to every 32-bit lane.
inline __m256i rows8_bcast(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// 8 bytes (one per row) as int16 pairs (v, v) in each 32-bit lane: the multiplier of a
// pairwise-summed int16 vector in vpmaddwd.
inline __m256i rows8_u8_pairs(const uint8_t* p) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p));
  return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

// 8 unsigned scale bytes (one per row) as the multiplier rows8_scaled takes.
template <DotU8S8 D>
inline __m256i rows8_u8_scales(const uint8_t* p) {
  if constexpr (D == DotU8S8::maddubs) {
    return rows8_u8_pairs(p);
  } else {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p));
  }
}

// One k-group's products with one activation row added to the sums s (started by the first
// group). With maddubs: int16 pair sums, so the caller bounds how many groups fit an int16; with
// VNNI: vpdpbusd's int32 sums, with room for any number of groups.
template <DotU8S8 D>
inline __m256i rows8_dot(__m256i s, bool first, __m256i w, __m256i x) {
  if constexpr (D == DotU8S8::maddubs) {
    const __m256i p = _mm256_maddubs_epi16(w, x);
    return first ? p : _mm256_add_epi16(s, p);
  } else {
    return dot_u8s8_acc<D>(first ? _mm256_setzero_si256() : s, w, x);
  }
}

// Sums from rows8_dot times each row's scale, as int32: vpmaddwd by (sc, sc) int16 pairs, or
// vpmulld by sc in int32 lanes. The same integers either way.
template <DotU8S8 D>
inline __m256i rows8_scaled(__m256i s, __m256i sc) {
  if constexpr (D == DotU8S8::maddubs) {
    return _mm256_madd_epi16(s, sc);
  } else {
    return _mm256_mullo_epi32(s, sc);
  }
}


// Outputs of rows [r, r + 8) that lie below r1.
inline void rows8_store(float* y, int64_t r, int64_t r1, __m256 v) {
  if (r + 8 <= r1) {
    _mm256_storeu_ps(y + r, v);
    return;
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  for (int64_t i = 0; i < r1 - r; i++) y[r + i] = t[i];
}

// How far ahead a tile of R activation rows prefetches its weights. Taller tiles compute longer
// per byte and gain from 4 KiB. With one or two rows the best distance depends on the core:
// - Zen 4 (AVX2 path, one thread, weights 4x the L3, before Q6_K's planes were 32-byte aligned):
//   the stream outruns a far prefetch, which then competes with the lines in use: 256 bytes ahead
//   reads Q6_K at 25 GB/s, 2 KiB ahead at 11, none at 6.5 (the hardware prefetcher does not follow
//   its two planes); Q4_K / Q8_0 / Q5_0 are as fast or faster at 256.
// - Sapphire Rapids (AVX2 path, 2 threads, bench/kernels.py --rows 286720, n = 1): 1 KiB ahead
//   reads Q4_K at 29.5-30.1 GB/s against 27.2-27.5 at 256, Q5_0 29.3-29.6 against 25.6-25.9,
//   Q8_0 30.1 against 28.5-29.1, Q6_K 28.7-29.2 against 28.3; the 1.5B decodes in 41.6-42.1 ms
//   against 44.1-44.7 (2 KiB: 41.8-42.2, none: 44.2-44.6).
// - Zen 3 (AVX2 native, 2 threads, same bench): 2 KiB ahead reads Q6_K at 26-29 GB/s against 23
//   at 256, Q5_0 31-35 against 27-28, Q4_K 29-32 against 27-29, Q8_0 32-33 against 30-31; the 1.5B
//   decodes at 27.8-28.4 tok/s against 26.6-27.2 and the 0.5B at 75-77 against 69 (1 and 4 KiB
//   within noise of 2). Zen 4, the AMD core with AVX-512, keeps the 256 measured there.
template <int R>
inline size_t rows8_prefetch_ahead() {
  if constexpr (R > 2) {
    return 4096;
  } else {
    static const size_t near = [] {
      const CpuFeatures& f = cpu_features();
      return f.amd ? (f.avx512f ? 256 : 2048) : 1024;
    }();
    return near;
  }
}

// Prefetch of the weights `ahead` bytes past p (the stream is sequential in the rows8 layout).
inline void rows8_prefetch(const uint8_t* p, size_t bytes, size_t ahead) {
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char*)(p + ahead + o), _MM_HINT_T0);
}

// Splits n activation rows into the fewest tiles of at most kMax rows, of equal heights, and
// runs tile(R, i0) on each (R a compile-time constant).
template <int kMax, class TileFn>
inline void rows8_tiles(int64_t n, TileFn&& tile) {
  const int64_t n_tiles = (n + kMax - 1) / kMax;
  for (int64_t t = 0, i0 = 0; t < n_tiles; t++) {
    const int m = (int)(n / n_tiles + (t < n % n_tiles ? 1 : 0));
    with_rows<1, kMax>(m, [&](auto rc) { tile(rc, i0); });
    i0 += m;
  }
}

// Runs tile(R, r, r_end, x, i0) over every group of 8 weight rows in [r0, r1) and, inside each
// group, every tile of activation rows: a group's weights (a few KB) stay in L1 for all tiles.
// x points at the tile's activation row views (view(row, cols) of each quantized row).
template <int kMax, class Act, class View, class TileFn>
inline void rows8_run(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n,
                      View&& view, TileFn&& tile) {
  constexpr int64_t kChunk = 64;
  Act xs[kChunk];
  for (int64_t a0 = 0; a0 < n; a0 += kChunk) {
    const int64_t m = n - a0 < kChunk ? n - a0 : kChunk;
    for (int64_t i = 0; i < m; i++) xs[i] = view(act + (size_t)(a0 + i) * stride, w.cols);
    for (int64_t r = r0; r < r1; r += 8) {
      const int64_t r_end = r + 8 < r1 ? r + 8 : r1;
      rows8_tiles<kMax>(m, [&](auto rc, int64_t i0) { tile(rc, r, r_end, xs + i0, a0 + i0); });
    }
  }
}

}  // namespace
}  // namespace qd::cpu

// Shared by the AVX2 kernels for weights in the rows8 layout (cpu/repack.h): a 256-bit register
// holds 4 consecutive weights of each of 8 rows, so integer dot products leave one 32-bit lane
// per weight row and each output is written without a horizontal reduction.
//
// The order per (weight row, activation row) is fixed by the block order and the same for every
// tile height R: the integer sums of a block are exact, then one or two FMAs per block into one
// float accumulator per activation row. Include rules: see cpu/x86/common.h.
#pragma once
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/cpu_features.h"
#include "cpu/act_layout.h"
#include "cpu/rows8_order.h"
#include "cpu/x86/common.h"

namespace qd::cpu {
namespace {

// 8 f16 values (one per row of the group) as floats.
inline __m256 rows8_f16(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }

// On the block lambdas that rows8_walk_step calls, so that each block stays inside its loop.
#define QD_ROWS8_INLINE __attribute__((always_inline))

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

// Whether a tile of R activation rows is a tall tile (rows8_tall), where the kernel has one: the
// tiles of 6 rows or more under AVX2, whose 16 registers cannot hold every row's int16 sums across
// a group of weight vectors, so that the tall tiles take the vectors row by row from broadcast
// activations. 5 rows still fit, one row group at a time (rows8_walk_groups): Zen 4, forced AVX2,
// the forward of 5 tokens (bench/ab_builds.py, 20-24 pairs, against the tall tile) 0.946 of the
// time on the 1.5B (Q4_K, Q6_K), 0.942 on the 0.5B (Q5_0, Q8_0), the same logits; in cache (1536 x
// 1536, one thread) Q4_K 0.95, Q6_K and Q8_0 level. A forward of 9 tokens (5 + 4) reads 1.03.
constexpr bool rows8_is_tall(int R) { return R > 5 && kRows8Registers < 32; }

// 4 activation bytes broadcast to every 32-bit lane.
inline __m256i rows8_bcast(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// f(std::integral_constant<int, I>{}) for I = Lo .. Hi - 1 in turn: a loop whose index the body
// needs as a compile-time constant (which field of a layout a k-group takes).
template <int Lo, int Hi, class F>
[[gnu::always_inline]] inline void rows8_unroll(F&& f) {
  if constexpr (Lo < Hi) {
    f(std::integral_constant<int, Lo>{});
    rows8_unroll<Lo + 1, Hi>(f);
  }
}

// 8 bytes (one per row) as int16 pairs (v, v) in each 32-bit lane: the multiplier of a
// pairwise-summed int16 vector in vpmaddwd.
inline __m256i rows8_u8_pairs(const uint8_t* p) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p));
  return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

// Of 16 int16 lanes holding a pair of scales per row (a, b in each 32-bit lane), the first (hi
// false) or the second of each duplicated into (a, a) or (b, b): the multiplier of an int16 sum in
// vpmaddwd, for the types whose scales come in pairs of groups (Q2_K, Q3_K, Q6_K).
inline __m256i rows8_pair_half(__m256i pair, bool hi) {
  const __m256i dup_lo = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,  //
                                          0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  const __m256i dup_hi = _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15,  //
                                          2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15);
  return _mm256_shuffle_epi8(pair, hi ? dup_hi : dup_lo);
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

// Two partial sums of rows8_dot joined: int16 or int32 lanes added.
template <DotU8S8 D>
inline __m256i rows8_join(__m256i a, __m256i b) {
  return D == DotU8S8::maddubs ? _mm256_add_epi16(a, b) : _mm256_add_epi32(a, b);
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


// Bits [lo, lo + n) of each byte of the plane at p, moved to bit `to` (a 16-bit shift, then the
// mask: bits shifted in from the neighbouring byte fall outside it).
template <int kLo, int kN, int kTo>
inline __m256i rows8_byte_field(const uint8_t* p) {
  const __m256i x = _mm256_loadu_si256((const __m256i*)p);
  const __m256i s = kLo >= kTo ? _mm256_srli_epi16(x, kLo - kTo) : _mm256_slli_epi16(x, kTo - kLo);
  return _mm256_and_si256(s, _mm256_set1_epi8((char)(((1 << kN) - 1) << kTo)));
}

// k-group C of the 5-bit values' planes (cpu/repack.cpp: Q5_0, Q5_1, and each sub-block of Q5_K): k-groups 0-4 one AND each, 5 and 6 two
// fields, 7 three: 23 vector operations for the 8 (the former nibble and fifth-bit planes took 35).
template <int C>
inline __m256i p5_rows8_values(const uint8_t* plane) {
  if constexpr (C < 5) {
    return rows8_byte_field<0, 5, 0>(plane + 32 * C);
  } else if constexpr (C < 7) {
    const uint8_t* p = plane + 64 * (C - 5);  // P0 and P1, or P2 and P3
    return _mm256_or_si256(rows8_byte_field<5, 3, 0>(p), rows8_byte_field<5, 2, 3>(p + 32));
  } else {
    return _mm256_or_si256(rows8_byte_field<5, 3, 0>(plane + 128),
                           _mm256_or_si256(rows8_byte_field<7, 1, 3>(plane + 32), rows8_byte_field<7, 1, 4>(plane + 96)));
  }
}

// All 8 k-groups of the planes at `plane`.
[[gnu::always_inline]] inline void p5_rows8_all(const uint8_t* plane, __m256i v[8]) {
  rows8_unroll<0, 8>([&](auto c) { v[c] = p5_rows8_values<decltype(c)::value>(plane); });
}

// k-group g of the planes, g known where the caller's loop is unrolled.
[[gnu::always_inline]] inline __m256i p5_rows8_value(const uint8_t* plane, int g) {
  switch (g) {
    case 0: return p5_rows8_values<0>(plane);
    case 1: return p5_rows8_values<1>(plane);
    case 2: return p5_rows8_values<2>(plane);
    case 3: return p5_rows8_values<3>(plane);
    case 4: return p5_rows8_values<4>(plane);
    case 5: return p5_rows8_values<5>(plane);
    case 6: return p5_rows8_values<6>(plane);
    default: return p5_rows8_values<7>(plane);
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
// per byte and gain from 4 KiB, except on Zen 4 up to 4 rows. With one or two rows the best
// distance depends on the core:
// - Zen 4 (AVX2 path, one thread, weights 4x the L3, before Q6_K's planes were 32-byte aligned):
//   the stream outruns a far prefetch, which then competes with the lines in use: 256 bytes ahead
//   reads Q6_K at 25 GB/s, 2 KiB ahead at 11, none at 6.5 (the hardware prefetcher did not follow
//   the two planes of Q6_K's former layout); Q4_K / Q8_0 / Q5_0 are as fast or faster at 256.
// - Zen 4 at 3 and 4 rows (bench/kernels.py --rows 65536 --cols 1536, 2 threads, medians of 4-6
//   interleaved runs, 256 against 4096 bytes ahead): forced AVX2 n = 3 Q4_K 36.2 against 31.5 GB/s,
//   Q6_K 38.9 against 34.3, n = 4 within 2 %; AVX-512 n = 3 Q4_K 39.0 against 36.7, n = 4 Q6_K 32.8
//   against 28.2, while n = 8 reads 14.4 against 18.4 (Q4_K) and keeps 4096. The 1.5B's forward
//   of 3 tokens (forced AVX2, 4 alternated rounds, medians of 15) then takes 37.6-44.9 ms
//   against 44.0-46.0, and of 4 tokens 44.7-52.9 against 48.3-54.0.
// - Sapphire Rapids (AVX2 path, 2 threads, bench/kernels.py --rows 286720, n = 1): 1 KiB ahead
//   reads Q4_K at 29.5-30.1 GB/s against 27.2-27.5 at 256, Q5_0 29.3-29.6 against 25.6-25.9,
//   Q8_0 30.1 against 28.5-29.1, Q6_K 28.7-29.2 against 28.3; the 1.5B decodes in 41.6-42.1 ms
//   against 44.1-44.7 (2 KiB: 41.8-42.2, none: 44.2-44.6).
// - Zen 3 (AVX2 native, 2 threads, same bench): 2 KiB ahead reads Q6_K at 26-29 GB/s against 23
//   at 256, Q5_0 31-35 against 27-28, Q4_K 29-32 against 27-29, Q8_0 32-33 against 30-31; the 1.5B
//   decodes at 27.8-28.4 tok/s against 26.6-27.2 and the 0.5B at 75-77 against 69 (1 and 4 KiB
//   within noise of 2). Zen 4, the AMD core with AVX-512, keeps the 256 measured there.
// Zen 3 and Intel keep 4 KiB from 3 rows on (not measured there).
template <int R>
inline size_t rows8_prefetch_ahead() {
  if constexpr (R > 4) {
    return 4096;
  } else {
    static const size_t ahead = [] {
      const CpuFeatures& f = cpu_features();
      if (f.amd && f.avx512f) return (size_t)256;  // Zen 4
      if (R > 2) return (size_t)4096;
      return (size_t)(f.amd ? 2048 : 1024);
    }();
    return ahead;
  }
}

// How far ahead a walk tile of R activation rows prefetches when it takes row groups in pairs
// (rows8_walk_groups): the pair's 2 x 1184 bytes of Q4_K from the same distance past its start.
// Zen 4, forced AVX2, the 1.5B's forward of n = 2 / 3 / 4 tokens (bench/ab_builds.py, one build,
// 16-20 pairs, against 2048): 256 bytes 1.065 / 1.166 / 1.183 of the time, 1024 0.987 / 0.993 /
// 1.017, 4096 1.019 / 1.043 / 1.034. Elsewhere rows8_prefetch_ahead's distance (not measured
// with pairs).
template <int R>
inline size_t rows8_pair_prefetch_ahead() {
  static const size_t ahead = [] {
    const CpuFeatures& f = cpu_features();
    return f.amd && f.avx512f ? (size_t)2048 : rows8_prefetch_ahead<R>();
  }();
  return ahead;
}

// Prefetch of the weights `ahead` bytes past p (the stream is sequential in the rows8 layout).
inline void rows8_prefetch(const uint8_t* p, size_t bytes, size_t ahead) {
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char*)(p + ahead + o), _MM_HINT_T0);
}

// Part `part` of kParts of rows8_prefetch: the block's lines spread over its sub-blocks, so that
// the prefetches do not queue up in front of the loads in use. The Q4_K tiles of up to 4 rows
// (AVX-512: 8), Zen 4, the 1.5B's forward of n tokens, two builds in two processes driven in
// turns (20-30 pairs, median of the paired ratios): forced AVX2 in fast memory n = 1 / 2 / 4
// 0.915 / 0.952 / 0.953 of the time with the whole block prefetched at its start, together with
// q4k_rows8_part's two chains; AVX-512 n = 8 0.923. The whole block's prefetch unrolled (no loop
// between the prefetches) measured 4-9 % slower than either. Q6_K's tile of up to 4 rows, spread
// over its 8 pairs, measured 1.00-1.04 (slow memory) and keeps rows8_prefetch. The tall tiles use
// it with kHint T1 for a block some groups on (rows8_tall).
template <size_t kBytes, int kParts, int kHint = _MM_HINT_T0>
[[gnu::always_inline]] inline void rows8_prefetch_part(const uint8_t* p, size_t ahead, int part) {
  constexpr size_t kLines = (kBytes + 63) / 64, kPer = (kLines + kParts - 1) / kParts;
  p += ahead;
  for (size_t l = kPer * part; l < kPer * (part + 1) && l < kLines; l++) _mm_prefetch((const char*)(p + 64 * l), (_mm_hint)kHint);
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

// Activation rows in chunks of up to kRows8ActChunk (each row's view made once: view(row, cols)).
// In each chunk, cut into tiles (rows8_tiles), the tall tiles (rows8_is_tall) go to tall(R, r0,
// r1, x, i0), each over the whole row range (rows8_tall), and walk(m, xs, a0) takes the chunk's
// other tiles, where there are any. x and xs point at the tile's or chunk's activation row views.
constexpr int kRows8ActChunk = 64;

template <int kMax, class Act, class View, class TallFn, class WalkFn>
inline void rows8_chunks(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n,
                         View&& view, TallFn&& tall, WalkFn&& walk) {
  Act xs[kRows8ActChunk];
  for (int64_t a0 = 0; a0 < n; a0 += kRows8ActChunk) {
    const int64_t m = n - a0 < kRows8ActChunk ? n - a0 : kRows8ActChunk;
    for (int64_t i = 0; i < m; i++) xs[i] = view(act + (size_t)(a0 + i) * stride, w.cols);
    bool any = false;
    rows8_tiles<kMax>(m, [&](auto rc, int64_t i0) {
      if constexpr (rows8_is_tall(decltype(rc)::value)) {
        tall(rc, r0, r1, xs + i0, a0 + i0);
      } else {
        any = true;
      }
    });
    if (any) walk(m, (const Act*)xs, a0);
  }
}

// The matmul of the types stored group by group (rows8_order.h; rows8_run_chunked for the others):
// the tall tiles as rows8_chunks sends them, the others to tile(R, r, r_end, x, i0) for every
// group of 8 weight rows [r, r_end) in [r0, r1) and inside each group every tile: a group's
// weights (a few KB) stay in L1 for all.
template <int kMax, class Act, class View, class TileFn, class TallFn>
inline void rows8_run(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n,
                      View&& view, TileFn&& tile, TallFn&& tall) {
  rows8_chunks<kMax, Act>(w, r0, r1, act, stride, n, view, tall, [&](int64_t m, const Act* xs, int64_t a0) {
    for (int64_t r = r0; r < r1; r += 8) {
      const int64_t r_end = r + 8 < r1 ? r + 8 : r1;
      rows8_tiles<kMax>(m, [&](auto rc, int64_t i0) {
        if constexpr (!rows8_is_tall(decltype(rc)::value)) tile(rc, r, r_end, xs + i0, a0 + i0);
      });
    }
  });
}

// Row groups a walk tile of R activation rows takes at once (rows8_walk_step): two from 2 rows up,
// so that each activation broadcast serves 16 weight rows (the Q4_K tiles; Q6_K's take the pair
// group by group). Zen 4, the 1.5B's forward of n = 2 / 3 / 4 tokens in fast memory
// (bench/ab_builds.py, 24 pairs, against one group at a time): forced AVX2 0.962 / 0.947 / 0.927
// of the time; AVX-512 (its walk tiles go up to 8 rows) 1.01 / 0.925 / 0.903, level at 6 and 8. In
// cache (1536 x 1536, one thread, forced AVX2) n = 2 / 3 / 4 7 / 10 / 7 % faster. At one row the
// pair is 6 % faster in cache but 2-4 % slower from slow memory (the decode), and Q6_K's pair
// (every k-group's 4 value vectors of both groups live at once) 6-8 % slower in cache. AVX2's
// tiles of 5 rows take one group at a time: two groups' sums would not fit in its 16 registers.
constexpr int rows8_walk_groups(int R) { return R >= 2 && (R <= 4 || kRows8Registers == 32) ? 2 : 1; }

// Block b of a span's ng row groups (the first at row, block_bytes apart) against one tile of
// activation rows: block(G, blk, b, acc, acc_stride) adds block b of G consecutive groups, the
// first at blk (rows8_walk_groups at a time, one at a time for those left), into the groups'
// accumulators, acc_stride apart from one group to the next. A function of its own: inlined into
// the loops of rows8_run_chunked, GCC kept the block's int16 sums in memory instead of registers
// (Q4_K, 4 rows, in cache: 15 % slower).
template <int R, class BlockFn>
[[gnu::noinline]] void rows8_walk_step(const uint8_t* row, size_t block_bytes, int ng, int64_t b, __m256* acc,
                                       int acc_stride, const BlockFn& block) {
  constexpr int kG = rows8_walk_groups(R);
  int g = 0;
  for (; g + kG <= ng; g += kG) {
    block(std::integral_constant<int, kG>{}, row + (size_t)g * block_bytes, b, acc + (size_t)g * acc_stride, acc_stride);
  }
  for (; g < ng; g++) {
    block(std::integral_constant<int, 1>{}, row + (size_t)g * block_bytes, b, acc + (size_t)g * acc_stride, acc_stride);
  }
}

// The matmul of the types stored in chunks of row groups (rows8_order.h), nb blocks of block_bytes
// per group: the tall tiles as rows8_chunks sends them; the others walk the layout's order, a
// chunk's groups block after block: block(R, G, blk, b, x, acc, acc_stride) adds block b of the G
// groups from blk on into the tile's R accumulators of each (rows8_walk_step), which stay in
// memory between the groups' blocks (up to 64 rows of a chunk's 8 groups: 16 KiB). Every tile
// takes block b of the span's groups before block b + 1, so each block stays in L1 for all.
template <int kMax, class Act, class View, class BlockFn, class TallFn>
inline void rows8_run_chunked(const Matrix& w, int64_t nb, size_t block_bytes, int64_t r0, int64_t r1,
                              const uint8_t* act, size_t stride, int64_t n, float* y, int64_t ldy, View&& view,
                              BlockFn&& block, TallFn&& tall) {
  alignas(32) __m256 acc[kRows8MaxChunkGroups][kRows8ActChunk];
  rows8_chunks<kMax, Act>(w, r0, r1, act, stride, n, view, tall, [&](int64_t m, const Act* xs, int64_t a0) {
    rows8_spans(w, nb, block_bytes, r0, r1, [&](const Rows8Span& s) {
      for (int g = 0; g < s.ng; g++) {
        for (int64_t i = 0; i < m; i++) acc[g][i] = _mm256_setzero_ps();
      }
      for (int64_t b = 0; b < nb; b++) {
        const uint8_t* row = s.first + (size_t)b * s.stride;
        rows8_tiles<kMax>(m, [&](auto rc, int64_t i0) {
          if constexpr (!rows8_is_tall(decltype(rc)::value)) {
            const Act* x = xs + i0;
            rows8_walk_step<decltype(rc)::value>(row, block_bytes, s.ng, b, &acc[0][i0], kRows8ActChunk,
                                                 [&](auto gc, const uint8_t* blk, int64_t bb, __m256* a, int as) QD_ROWS8_INLINE {
                                                   block(rc, gc, blk, bb, x, a, as);
                                                 });
          }
        });
      }
      rows8_tiles<kMax>(m, [&](auto rc, int64_t i0) {
        if constexpr (!rows8_is_tall(decltype(rc)::value)) {
          for (int g = 0; g < s.ng; g++) {
            for (int j = 0; j < decltype(rc)::value; j++) rows8_store(y + (a0 + i0 + j) * ldy, s.r0 + 8 * g, s.r1, acc[g][i0 + j]);
          }
        }
      });
    });
  });
}

// Block b (256 weights) of R Q8_K activation rows with each k-group's 4 bytes broadcast to all 8
// lanes: at(s, j)[g] is k-group g (weights 32 s + 4 g .. + 3) of row j. Filled once per block for
// all the row groups of a rows8_tall chunk, whose products then read it as the memory operand of
// vpmaddubsw (or vpdpbusd): no broadcast per product. 2 KiB per row.
template <int R>
struct Rows8Bcast {
  static constexpr int kWeights = 256;          // weights of a block
  static constexpr size_t kRowBytes = 8 * 8 * 32;  // bytes per row and block (the run length's unit)
  alignas(32) int8_t v[8][R][8][32];

  void fill(const ActQ8_K* x, int64_t b) {
    for (int s = 0; s < 8; s++) {
      for (int j = 0; j < R; j++) {
        const int8_t* q = x[j].qs + 256 * b + 32 * s;
        for (int g = 0; g < 8; g++) _mm256_store_si256((__m256i*)v[s][j][g], rows8_bcast(q + 4 * g));
      }
    }
  }
  const __m256i* at(int s, int j) const { return (const __m256i*)v[s][j]; }
};

// Bytes of broadcast activations (Rows8Bcast) a rows8_tall pass keeps: as many consecutive blocks
// as fit, so that each row group's weights are read in runs of that many blocks. Broadcasts
// beyond L1 cost more than they save. Zen 4, forced AVX2, the 1.5B's forward of n tokens from
// memory, in the former group-by-group layout (medians of 4-5 alternated rounds, three runs):
// n = 5 (two blocks) 54.4-60.7 ms against 60.6-65.5 with one; n = 8 with two blocks (32 KiB) 92.8
// against 76.5; n = 6 with two (24 KiB) 76.2 against 73.8.
// In cache (1536 x 1536, one thread) two blocks at n = 8 are 13 % slower.
constexpr size_t kRows8TallBcastBytes = 20 * 1024;

// Row groups per rows8_tall pass: their float accumulators (1 KiB each at R = 8) and the broadcast
// blocks stay in L1 together.
constexpr int kRows8TallGroups = 32;

// How far ahead of its block a rows8_tall pass prefetches, in blocks of its walk: the block this
// many groups on (at least two), at the same place in the run. Zen 4, forced AVX2, the 1.5B's
// forward of n tokens (bench/ab_builds.py, 16 pairs per n, Q4_K and Q6_K, one block a run), 8
// groups on against 2: n = 6 / 7 / 8 / 12 / 16 0.911-0.925 / 0.955 / 0.961-0.992 / 0.962 / 0.989
// of the time; 4 groups n = 6 / 8 0.923 / 0.961, 8 against 4 0.991 / 0.982, 16 against 8 1.051 /
// 1.019. The 32-weight types, whose runs hold 10-13 blocks at 6-8 rows, keep 2 groups (20-26
// blocks): on the 0.5B (Q5_0, Q8_0) 8 groups read 1.09-1.11, 4 groups 1.03, 1 group level.
constexpr int kRows8TallAheadBlocks = 8;

// The tall tiles' loop order: the R activation rows against the row groups of [r0, r1) a run of
// blocks at a time instead of group by group, so that each run's broadcasts (Rows8Bcast) serve
// kRows8TallGroups groups: four chunks of the layout (rows8_order.h), each read as a sequential
// stream. block(blk, b, xb, acc, next) adds block b of the group at blk into its R accumulators, and
// must do so with the FMAs, in the order, of the group-by-group tile: each output still takes its
// blocks in order, so it gets the same floats in the same order and the results do not depend on
// the loop order. next is the block kAhead groups on in the walk (from the last run on, the next
// pass's first blocks: with 8 groups on, 0.970-0.977 of the time at 8 tokens against nothing
// there, level at 6 and 12), which block prefetches into L2
// (T1), a few lines per sub-block (rows8_prefetch_part): without any prefetch the 1.5B's forward of
// 8 / 5 tokens takes 1.39x / 1.71x the time, in chunks of 8 groups too (the hardware prefetcher
// does not take up the 4 streams); the whole block's 19-27 lines prefetched in one loop before the
// block, against spread over its sub-blocks: 1.023x at 8 tokens (0.977 the other way, 30 pairs,
// forced AVX2, Zen 4), level at 6; one thread in L3 Q6_K 71.0 against 68.0 cycles a sub-block.
// Bcast is Rows8Bcast<R>, a type derived from it that fills more per block (Q6_K's offsets) or the
// 32-weight blocks' Rows8Bcast32<R> (x86/avx2/q32_rows8.h); its kWeights are a block's weights and
// R x its kRowBytes the run length's unit (extra fills such as Q6_K's offsets not counted), and
// Act the activation rows it fills from.
template <int R, class Bcast = Rows8Bcast<R>, class Act, class BlockFn>
inline void rows8_tall(const Matrix& w, size_t block_bytes, int64_t r0, int64_t r1, const Act* x, float* y,
                       int64_t ldy, BlockFn&& block) {
  constexpr int kRun = std::max(1, (int)(kRows8TallBcastBytes / (R * Bcast::kRowBytes)));  // blocks per run
  constexpr int kAhead = std::max(2, kRows8TallAheadBlocks / kRun);  // groups
  const int64_t nb = w.cols / Bcast::kWeights;
  Bcast xb[kRun];
  __m256 acc[kRows8TallGroups][R];
  // Group i's block b at base[i] + b * stride[i]; the same for the next pass (nbase, nstride), whose
  // first blocks the last run prefetches.
  const uint8_t *base[kRows8TallGroups], *nbase[kRows8TallGroups];
  size_t stride[kRows8TallGroups], nstride[kRows8TallGroups];
  auto groups = [&](int64_t c0, const uint8_t** bs, size_t* st) {
    int ng = 0;
    rows8_spans(w, nb, block_bytes, c0, std::min(c0 + 8 * kRows8TallGroups, r1), [&](const Rows8Span& s) {
      for (int g = 0; g < s.ng; g++, ng++) {
        bs[ng] = s.first + (size_t)g * block_bytes;
        st[ng] = s.stride;
      }
    });
    return ng;
  };
  int ng = groups(r0, base, stride);
  for (int64_t c0 = r0; c0 < r1; c0 += 8 * kRows8TallGroups) {
    const int64_t c1 = std::min(c0 + 8 * kRows8TallGroups, r1);
    const int nng = c1 < r1 ? groups(c1, nbase, nstride) : 0;
    for (int g = 0; g < ng; g++) {
      for (int j = 0; j < R; j++) acc[g][j] = _mm256_setzero_ps();
    }
    for (int64_t b0 = 0; b0 < nb; b0 += kRun) {
      const int run = nb - b0 < kRun ? (int)(nb - b0) : kRun;
      const bool last = b0 + run >= nb;
      for (int i = 0; i < run; i++) xb[i].fill(x, b0 + i);
      for (int g = 0; g < ng; g++) {
        const uint8_t* blk = base[g] + (size_t)b0 * stride[g];
        // kAhead groups on: in this run, the next, or (from the last) the next pass's first
        const int on = g + kAhead;
        const uint8_t* next;
        size_t next_stride;
        if (on < ng || !last) {
          const int h = on % ng;
          next = base[h] + (size_t)(b0 + (on >= ng ? run : 0)) * stride[h];
          next_stride = stride[h];
        } else if (on - ng < nng) {
          next = nbase[on - ng];
          next_stride = nstride[on - ng];
        } else {
          next = blk;  // nothing left to fetch
          next_stride = stride[g];
        }
        for (int i = 0; i < run; i++) block(blk + i * stride[g], b0 + i, xb[i], acc[g], next + i * next_stride);
      }
    }
    for (int g = 0; g < ng; g++) {
      for (int j = 0; j < R; j++) rows8_store(y + j * ldy, c0 + 8 * g, c1, acc[g][j]);
    }
    ng = nng;
    std::copy(nbase, nbase + nng, base);
    std::copy(nstride, nstride + nng, stride);
  }
}

}  // namespace
}  // namespace qd::cpu

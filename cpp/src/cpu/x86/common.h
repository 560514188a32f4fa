// Helpers shared by the x86 kernel files (cpu/x86/*/*_isa_*.cpp).
//
// Include only from an x86 *_isa_*.cpp file or the headers they include. Everything is in an
// anonymous namespace on purpose: each ISA file gets its own copy compiled with its own flags, and
// the linker can never hand the AVX-512 copy of a helper to the AVX2 kernels (or to a CPU without
// it). The ISA "tag" passed to the templates says what the file may use:
//   struct Tag { static constexpr DotU8S8 kDot; static constexpr int kMaxRows; };
// kDot: how 256-bit u8 x s8 dot products are computed; kMaxRows: activation rows per tile.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/matmul.h"

namespace qd::cpu {
namespace {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }  // exact

inline float load_h2f(const uint16_t& h) { return _cvtsh_ss(h); }

// Fixed-order horizontal sum (the same on every call, so results are reproducible).
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The largest of 8 lanes (exact in any order).
inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline float hsum128(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Software prefetch of the weights a few KB ahead (whole rows ahead, same units): the hardware
// prefetcher alone lets the weight stream stall the kernels at each block's first load. Tiles of
// many activation rows spend longer per byte, and take a longer distance. Kernels that walk NW
// weight rows at once consume NW rows per step: the distance scales with it (one row ahead of a
// pair is the pair's own second row, already too late).
template <int R, int NW = 1>
inline const uint8_t* prefetch_row(const Matrix& w, int64_t r) {
  constexpr int64_t kBytes = R <= 2 ? 2048 : 8192;
  const int64_t ahead = NW * (1 + kBytes / (int64_t)w.row_bytes);
  return r + ahead < w.rows ? w.data + (size_t)(r + ahead) * w.row_bytes : nullptr;
}

// Every cache line of [p, p + n).
inline void prefetch_range(const uint8_t* p, size_t n) {
  const uintptr_t end = (uintptr_t)p + n;
  for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < end; a += 64) _mm_prefetch((const char*)a, _MM_HINT_T0);
}

// How a 256-bit u8 x s8 dot product is computed: AVX2's maddubs + madd, AVX-VNNI's VEX-encoded
// vpdpbusd (-mavxvnni), or AVX512-VL VNNI's EVEX-encoded one.
enum class DotU8S8 { maddubs, vnni_vex, vnni_evex };

// acc + the sums of a[k] * b[k] over each group of 4 bytes, on the VNNI paths (vpdpbusd, no
// int16 intermediate and no saturation: exact while the int32 sums fit).
template <DotU8S8 D>
inline __m256i dot_u8s8_acc(__m256i acc, __m256i a, __m256i b) {
  static_assert(D != DotU8S8::maddubs, "dot_u8s8_acc: VNNI only");
  if constexpr (D == DotU8S8::vnni_vex) {
    return _mm256_dpbusd_avx_epi32(acc, a, b);
  } else {
    return _mm256_dpbusd_epi32(acc, a, b);
  }
}

// Sum of a[k] * b[k] over each group of 4 bytes: u8 x s8 -> 8 x int32. The same integers on every
// path as long as a pair of products fits int16 (|a| <= 128, |b| <= 127 here).
template <class Tag>
inline __m256i dot_u8s8(__m256i a, __m256i b) {
  if constexpr (Tag::kDot == DotU8S8::maddubs) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1));
  } else {
    return dot_u8s8_acc<Tag::kDot>(_mm256_setzero_si256(), a, b);
  }
}

// Calls f(std::integral_constant<int, R>) for the R == m, R in [Lo, Max]: turns a run-time row
// count into a compile-time tile height.
template <int Lo, int Max, class F>
inline void with_rows(int m, F&& f) {
  if constexpr (Lo <= Max) {
    if (m == Lo) {
      f(std::integral_constant<int, Lo>{});
      return;
    }
    with_rows<Lo + 1, Max>(m, f);
  }
}

// Attention scores for nq queries in tiles of up to Q queries x 4 keys: tile(qc, j, r) for
// queries [j, j + qc) and keys [r, r + 4), then one(j, r0) for query j's last rows % 4 keys.
template <int Q, class Tile, class One>
inline void query_key_tiles(int nq, int rows, Tile&& tile, One&& one) {
  const int rows4 = rows / 4 * 4;
  for (int j = 0; j < nq; j += Q) {
    const int m = std::min(Q, nq - j);
    with_rows<1, Q>(m, [&](auto qc) {
      for (int r = 0; r < rows4; r += 4) tile(qc, j, r);
    });
    for (int jj = j; rows4 < rows && jj < j + m; jj++) one(jj, rows4);
  }
}

// Splits the n activation rows into the fewest tiles of at most Tag::kMaxRows, of equal heights
// (64 rows: 8 tiles of 8, not 7 of 9 and one of 1), and runs Tile<R> on each. A tile computes
// every (row, column) pair in the same order whatever its height R.
template <class Tag, class TileFn>
inline void for_each_tile(int64_t n, TileFn&& tile) {
  const int64_t n_tiles = (n + Tag::kMaxRows - 1) / Tag::kMaxRows;
  for (int64_t t = 0, i0 = 0; t < n_tiles; t++) {
    const int m = (int)(n / n_tiles + (t < n % n_tiles ? 1 : 0));
    with_rows<1, Tag::kMaxRows>(m, [&](auto rc) { tile(rc, i0); });
    i0 += m;
  }
}

}  // namespace
}  // namespace qd::cpu

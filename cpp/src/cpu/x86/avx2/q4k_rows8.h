// Q4_K and Q5_K weights in the rows8 layout (cpu/repack.cpp) against Q8_K activations, AVX2.
// Q5_K's values are each sub-block's five 5-bit planes (p5_rows8_values, as Q5_0's), the rest
// Q4_K's.
//
// Per block (256 weights) and activation row: for each sub-block s of 32, the 8 k-groups'
// vpmaddubsw products summed in int16 (at most 16 products of 15 * 127 per lane: no overflow),
// then one vpmaddwd by the sub-block's scale (with VNNI: vpdpbusd's int32 sums, then one vpmulld:
// the same integers); the mins against the activations' 32-sums (bsums32) by vpmaddwd, two
// sub-blocks a time. Then acc += d * xd * S, acc -= dmin * xd * M (two FMAs per block). The walk
// tiles of 2 rows or more take two row groups at once, each activation broadcast feeding both
// (rows8_walk_groups).
#pragma once
#include "cpu/x86/avx2/rows8_common.h"

namespace qd::cpu {
namespace {

// Q5 = false: Q4_K (1184-byte blocks); true: Q5_K (1440-byte blocks).
template <bool Q5>
constexpr size_t k4k_rows8_block() {
  return Q5 ? 1440 : 1184;
}

// Where sub-block s's values start: Q4_K's nibble vectors (low nibbles the even sub-block, high
// the odd), Q5_K's five planes of the sub-block alone (p5_rows8_values).
template <bool Q5>
inline const uint8_t* q4k_rows8_values_at(const uint8_t* blk, int s) {
  return Q5 ? blk + 160 + 160 * s : blk + 160 + 256 * (s / 2);
}

// Vector g of a sub-block (its values at qv) unpacked: the low or high nibbles, or Q5_K's 5-bit
// values from their planes (High unused).
template <bool High, bool Q5>
[[gnu::always_inline]] inline __m256i q4k_rows8_value(const uint8_t* qv, int g) {
  if constexpr (Q5) {
    return p5_rows8_value(qv, g);
  } else {
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m256i wv = _mm256_loadu_si256((const __m256i*)(qv + 32 * g));
    return High ? _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4) : _mm256_and_si256(wv, m4);
  }
}

// k-groups [g0, g0 + n) of a sub-block of G row groups (group i's values at qv + i * gb) against
// R activation rows (at xq[j]): their sums (rows8_dot) into
// s16[j][i] (set by the first group, added by the others). Each activation row's broadcast serves
// the G groups.
template <DotU8S8 D, int R, int G, bool High, bool Q5>
inline void q4k_rows8_part(const uint8_t* qv, size_t gb, int g0, int n, const int8_t* const* xq,
                           __m256i (*s16)[G]) {
  if constexpr (R * G < 4) {
    // Two chains per row and row group, even and odd k-groups, joined at the end, where there would
    // be fewer than 4 (one row; two rows of one group): one chain of dependent int16 adds bounds a
    // tile this short (in cache, one thread, n = 1: 14.5 -> 13.4 cycles a sub-block
    // forced AVX2, 14.3 -> 12.2 AVX-512; the 1.5B's forward, paired: n = 1 0.972, n = 2 0.984).
    // The sums are exact in any order: the same results.
    __m256i t16[R][G];
#pragma GCC unroll 8
    for (int g = g0; g < g0 + n; g += 2) {
      __m256i v[G], u[G];
      for (int i = 0; i < G; i++) {
        v[i] = q4k_rows8_value<High, Q5>(qv + i * gb, g);
        u[i] = q4k_rows8_value<High, Q5>(qv + i * gb, g + 1);
      }
      for (int j = 0; j < R; j++) {
        const __m256i xa = rows8_bcast(xq[j] + 4 * g), xb = rows8_bcast(xq[j] + 4 * (g + 1));
        for (int i = 0; i < G; i++) {
          s16[j][i] = rows8_dot<D>(s16[j][i], g == g0, v[i], xa);
          t16[j][i] = rows8_dot<D>(t16[j][i], g == g0, u[i], xb);
          rows8_pin(s16[j][i]);
          rows8_pin(t16[j][i]);
        }
      }
    }
    for (int j = 0; j < R; j++) {
      for (int i = 0; i < G; i++) s16[j][i] = rows8_join<D>(s16[j][i], t16[j][i]);
    }
    return;
  }
#pragma GCC unroll 8
  for (int g = g0; g < g0 + n; g++) {
    __m256i v[G];
    for (int i = 0; i < G; i++) v[i] = q4k_rows8_value<High, Q5>(qv + i * gb, g);
    for (int j = 0; j < R; j++) {
      const __m256i xa = rows8_bcast(xq[j] + 4 * g);
      for (int i = 0; i < G; i++) {
        s16[j][i] = rows8_dot<D>(s16[j][i], g == g0, v[i], xa);
        rows8_pin(s16[j][i]);
      }
    }
  }
}

// Sub-block s of G row groups (the i-th at blk + i * gb) times its scale into isum[j][i]: each
// vector unpacked once, the rows' int16 sums over all 8 k-groups kept in registers, one vpmaddwd
// per row and group. For up to 5 rows under AVX2 (5 one group at a time) and 8 under AVX-512; AVX2's
// 16 registers cannot hold those sums for more, and its taller tiles take q4k_rows8_tall_block instead.
template <DotU8S8 D, int R, int G, bool High, bool Q5>
inline void q4k_rows8_sub(const uint8_t* blk, size_t gb, int s, const int8_t* const* xq, __m256i (*isum)[G]) {
  const uint8_t* qv = q4k_rows8_values_at<Q5>(blk, s);
  // Q5_K's int16 sums hold 4 groups (16 products of 31 * 127), VNNI's int32 sums all 8
  constexpr int kParts = Q5 && D == DotU8S8::maddubs ? 2 : 1;
  __m256i s16[R][G];
  for (int part = 0; part < kParts; part++) {
    q4k_rows8_part<D, R, G, High, Q5>(qv, gb, 8 / kParts * part, 8 / kParts, xq, s16);
    for (int i = 0; i < G; i++) {
      const __m256i sc = rows8_u8_scales<D>(blk + i * gb + 32 + 8 * s);
      for (int j = 0; j < R; j++) isum[j][i] = _mm256_add_epi32(isum[j][i], rows8_scaled<D>(s16[j][i], sc));
    }
  }
}

// Block b's end, the same in every tile: the mins against the activations' 32-sums, then the two
// FMAs per row, acc += d * xd * isum, acc -= dmin * xd * msum.
template <int R>
[[gnu::always_inline]] inline void q4k_rows8_finish(const uint8_t* blk, int64_t b, const ActQ8_K* x,
                                                    const __m256i* isum, __m256* acc) {
  const __m256 d = rows8_f16(blk), dmin = rows8_f16(blk + 16);
  // (m_2u, m_2u+1) of each row as an int16 pair per lane, against (bsum32_2u, bsum32_2u+1)
  const __m128i pair_bytes = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  __m256i mins[4];
  for (int u = 0; u < 4; u++) {
    mins[u] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i*)(blk + 96 + 16 * u)), pair_bytes));
  }
  for (int j = 0; j < R; j++) {
    const int8_t* bs = (const int8_t*)(x[j].bsums32 + 8 * b);
    __m256i msum = _mm256_madd_epi16(mins[0], rows8_bcast(bs));
    for (int u = 1; u < 4; u++) msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mins[u], rows8_bcast(bs + 4 * u)));
    const __m256 xd = _mm256_set1_ps(x[j].d[b]);
    acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(isum[j]), acc[j]);
    acc[j] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, xd), _mm256_cvtepi32_ps(msum), acc[j]);
  }
}

// Block b of G row groups (the i-th at blk + i * kBlock, its accumulators at acc + i * acc_stride)
// against R activation rows, into acc[R] (the tiles of up to 5 rows under AVX2, 8 under AVX-512,
// walked by rows8_run_chunked).
template <DotU8S8 D, bool Q5, int R, int G>
[[gnu::always_inline]] inline void q4k_rows8_block(const uint8_t* blk, int64_t b, const ActQ8_K* x, __m256* acc,
                                                   int acc_stride) {
  constexpr size_t kBlock = k4k_rows8_block<Q5>();
  const size_t ahead = G == 1 ? rows8_prefetch_ahead<R>() : rows8_pair_prefetch_ahead<R>();
  __m256i isum[R][G];
  const int8_t* xq[R];
  for (int j = 0; j < R; j++) {
    for (int i = 0; i < G; i++) isum[j][i] = _mm256_setzero_si256();
  }
  for (int t = 0; t < 4; t++) {  // chunk t: low nibbles are sub-block 2t, high nibbles 2t + 1
    rows8_prefetch_part<G * kBlock, 4>(blk, ahead, t);
    for (int j = 0; j < R; j++) xq[j] = x[j].qs + 256 * b + 64 * t;
    q4k_rows8_sub<D, R, G, false, Q5>(blk, kBlock, 2 * t, xq, isum);
    for (int j = 0; j < R; j++) xq[j] += 32;
    q4k_rows8_sub<D, R, G, true, Q5>(blk, kBlock, 2 * t + 1, xq, isum);
  }
  for (int i = 0; i < G; i++) {
    __m256i is[R];
    for (int j = 0; j < R; j++) is[j] = isum[j][i];
    q4k_rows8_finish<R>(blk + i * kBlock, b, x, is, acc + i * acc_stride);
  }
}

// Block b of one row group against R rows broadcast in xb, into acc[R] (the tall tiles: rows8_tall).
// Each sub-block's 8 vectors unpacked once and kept in registers while row by row their products
// with the broadcast activations (memory operands) run in one int16 sum, folded by one vpmaddwd
// (Q5_K: two sums of 4, whose int16 lanes hold 16 products of 31 * 127); the row sums isum[R] go
// through memory, which the registers cannot spare. Then q4k_rows8_finish.
template <DotU8S8 D, bool Q5, int R>
[[gnu::always_inline]] inline void q4k_rows8_tall_block(const uint8_t* blk, int64_t b, const ActQ8_K* x,
                                                        const Rows8Bcast<R>& xb, __m256* acc, const uint8_t* next) {
  constexpr int kParts = Q5 && D == DotU8S8::maddubs ? 2 : 1;
  alignas(32) __m256i isum[R];
  for (int j = 0; j < R; j++) isum[j] = _mm256_setzero_si256();
  for (int s = 0; s < 8; s++) {
    rows8_prefetch_part<k4k_rows8_block<Q5>(), 8, _MM_HINT_T1>(next, 0, s);
    const uint8_t* qv = q4k_rows8_values_at<Q5>(blk, s);
    const __m256i sc = rows8_u8_scales<D>(blk + 32 + 8 * s);
    __m256i v[8];
    if constexpr (Q5) {
      p5_rows8_all(qv, v);
    } else {
      for (int g = 0; g < 8; g++) v[g] = s & 1 ? q4k_rows8_value<true, Q5>(qv, g) : q4k_rows8_value<false, Q5>(qv, g);
    }
    for (int j = 0; j < R; j++) {
      const __m256i* xv = xb.at(s, j);
      for (int part = 0; part < kParts; part++) {
        constexpr int kGroups = 8 / kParts;
        // pairwise: two chains of kGroups / 2 products, joined at the end
        const int g0 = kGroups * part, h0 = g0 + kGroups / 2;
        __m256i s16 = rows8_dot<D>(_mm256_setzero_si256(), true, v[g0], _mm256_load_si256(xv + g0));
        __m256i t16 = rows8_dot<D>(_mm256_setzero_si256(), true, v[h0], _mm256_load_si256(xv + h0));
        for (int i = 1; i < kGroups / 2; i++) {
          s16 = rows8_dot<D>(s16, false, v[g0 + i], _mm256_load_si256(xv + g0 + i));
          t16 = rows8_dot<D>(t16, false, v[h0 + i], _mm256_load_si256(xv + h0 + i));
          rows8_pin(s16);
          rows8_pin(t16);
        }
        s16 = rows8_join<D>(s16, t16);
        isum[j] = _mm256_add_epi32(isum[j], rows8_scaled<D>(s16, sc));
      }
      __asm__("" : : "m"(isum[j]));  // isum[j] lives in memory between rows, v[] in registers
    }
  }
  q4k_rows8_finish<R>(blk, b, x, isum, acc);
}

template <DotU8S8 D, bool Q5, int R>
[[gnu::noinline]] void q4k_rows8_tall(const Matrix& w, int64_t r0, int64_t r1, const ActQ8_K* x, float* y,
                                      int64_t ldy) {
  rows8_tall<R>(w, k4k_rows8_block<Q5>(), r0, r1, x, y, ldy,
                [&](const uint8_t* blk, int64_t b, const Rows8Bcast<R>& xb, __m256* acc, const uint8_t* next) {
                  q4k_rows8_tall_block<D, Q5, R>(blk, b, x, xb, acc, next);
                });
}

template <DotU8S8 D, bool Q5, int kMax>
void q4k_rows8_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                    int64_t ldy) {
  rows8_run_chunked<kMax, ActQ8_K>(
      w, w.cols / 256, k4k_rows8_block<Q5>(), r0, r1, act, stride, n, y, ldy, act_q8_K,
      [&](auto rc, auto gc, const uint8_t* blk, int64_t b, const ActQ8_K* x, __m256* acc, int acc_stride)
          QD_ROWS8_INLINE { q4k_rows8_block<D, Q5, decltype(rc)::value, decltype(gc)::value>(blk, b, x, acc, acc_stride); },
      [&](auto rc, int64_t r, int64_t r_end, const ActQ8_K* x, int64_t i0) {
        q4k_rows8_tall<D, Q5, decltype(rc)::value>(w, r, r_end, x, y + i0 * ldy, ldy);
      });
}

}  // namespace
}  // namespace qd::cpu

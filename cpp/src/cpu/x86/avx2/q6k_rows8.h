// Q6_K weights in the rows8 layout (cpu/repack.cpp) against Q8_K activations, AVX2.
//
// Per block (256 weights) and activation row: the unsigned 6-bit values e against the
// activations, two k-groups' vpmaddubsw products summed in int16 (at most 8 products of 63 * 127
// per lane: no overflow; the tall tiles sum four with the -32 taken in, q6k_rows8_tall_sub),
// then one vpmaddwd by the group's scale (with VNNI: a 16-weight group's
// vpdpbusd int32 sums, then one vpmulld: the same integers); the -32 as
// -32 * sum_g sc_g * bsum_g by vpmaddwd. acc += d * xd * (S - 32 O), one FMA per block.
//
// The layout stores a group's values as three vectors X, Y, Z whose low 6 bits are k-groups 0-2
// and whose top 2 bits together hold k-group 3: 11 vector operations unpack the group's 4
// vectors (the former nibble and 2-bit planes took 17). bench/kernels.py, 1024 x 1536, 1 thread,
// Zen 4: forced AVX2 n = 1 27.9 -> 43.9 GB/s, n = 4 -23 % time; AVX-512 n = 1 -18 % time; the
// same outputs bit for bit (docs/benchmarks.md).
#pragma once
#include <type_traits>

#include "cpu/repack.h"
#include "cpu/x86/avx2/rows8_common.h"

namespace qd::cpu {
namespace {

// Group G's 4 value vectors (k-group j: elements 16G + 4j + i of each row): X, Y, Z's low 6 bits,
// and k-group 3 gathered from their top 2 bits (X's are its bits 4..5, Y's 2..3, Z's 0..1) as
// ((X & C0) | (Y & C0) >> 2 | (Z & C0) >> 4) >> 2; the 16-bit shifts move only zero bits across
// bytes.
[[gnu::always_inline]] inline void q6k_rows8_values(const uint8_t* blk, int G, __m256i v[4]) {
  const __m256i m63 = _mm256_set1_epi8(63), top = _mm256_set1_epi8((char)0xC0);
  const uint8_t* p = blk + kQ6KRows8Values + 96 * G;
  const __m256i X = _mm256_loadu_si256((const __m256i*)p), Y = _mm256_loadu_si256((const __m256i*)(p + 32)),
                Z = _mm256_loadu_si256((const __m256i*)(p + 64));
  v[0] = _mm256_and_si256(X, m63);
  v[1] = _mm256_and_si256(Y, m63);
  v[2] = _mm256_and_si256(Z, m63);
  const __m256i xy = _mm256_or_si256(_mm256_and_si256(X, top), _mm256_srli_epi16(_mm256_and_si256(Y, top), 2));
  v[3] = _mm256_srli_epi16(_mm256_or_si256(xy, _mm256_srli_epi16(_mm256_and_si256(Z, top), 4)), 2);
}

// Group p's scale of a pair (sc[2u], sc[2u + 1]) widened to int16 lanes, as rows8_scaled's
// multiplier: sc duplicated into (sc, sc) int16 pairs, or sign-extended to int32 (VNNI).
template <DotU8S8 D>
inline __m256i q6k_rows8_scale(__m256i pair, int p) {
  if constexpr (D == DotU8S8::maddubs) {
    return rows8_pair_half(pair, p);
  } else {
    return p ? _mm256_srai_epi32(pair, 16) : _mm256_srai_epi32(_mm256_slli_epi32(pair, 16), 16);
  }
}

// Block b's end, the same in every tile: the -32 as isum[j] -= sum_s (32 sc_s) * bsum_s (each
// scale pair widened once for all R rows; not where the sums already hold it, kOffset false:
// the AVX2 tall tiles), then acc += d * xd * isum.
template <int R, bool kOffset = true>
[[gnu::always_inline]] inline void q6k_rows8_finish(const uint8_t* blk, int64_t b, const ActQ8_K* x, __m256i* isum,
                                                    __m256* acc) {
  for (int u = 0; u < 8 && kOffset; u++) {
    const __m256i pair32 = _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + 16 + 16 * u))), 5);
    for (int j = 0; j < R; j++) {
      const int8_t* bs = (const int8_t*)(x[j].bsums + 16 * b + 2 * u);
      isum[j] = _mm256_sub_epi32(isum[j], _mm256_madd_epi16(pair32, rows8_bcast(bs)));
    }
  }
  const __m256 d = rows8_f16(blk);
  for (int j = 0; j < R; j++) {
    acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x[j].d[b])), _mm256_cvtepi32_ps(isum[j]), acc[j]);
  }
}

// Group G (16 weights, 4 k-groups) of R activation rows (xq[j] at the group's first weight) times
// the group's scale sc into isum[j]: with maddubs, two int16 sums of 2 k-groups (an int16 holds 4
// products of 63 * 127); with VNNI, one int32 sum of all 4 and one vpmulld.
template <DotU8S8 D, int R>
[[gnu::always_inline]] inline void q6k_rows8_group(const uint8_t* blk, int G, const int8_t* const* xq, __m256i sc,
                                                   __m256i* isum) {
  constexpr int kRun = D == DotU8S8::maddubs ? 2 : 4;  // k-groups per folded sum
  __m256i v[4];
  q6k_rows8_values(blk, G, v);
  for (int g0 = 0; g0 < 4; g0 += kRun) {
    for (int j = 0; j < R; j++) {
      __m256i s = rows8_dot<D>(_mm256_setzero_si256(), true, v[g0], rows8_bcast(xq[j] + 4 * g0));
      for (int i = 1; i < kRun; i++) s = rows8_dot<D>(s, false, v[g0 + i], rows8_bcast(xq[j] + 4 * (g0 + i)));
      isum[j] = _mm256_add_epi32(isum[j], rows8_scaled<D>(s, sc));
      rows8_pin(isum[j]);
    }
  }
}

// Groups 2u and 2u + 1 of block b (scales pair u) into isum[j].
template <DotU8S8 D, int R>
[[gnu::always_inline]] inline void q6k_rows8_pair(const uint8_t* blk, const ActQ8_K* x, int64_t b, int u,
                                                  __m256i* isum) {
  const __m256i pair = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + 16 + 16 * u)));
  for (int p = 0; p < 2; p++) {
    const int8_t* xq[R];
    for (int j = 0; j < R; j++) xq[j] = x[j].qs + 256 * b + 16 * (2 * u + p);
    q6k_rows8_group<D, R>(blk, 2 * u + p, xq, q6k_rows8_scale<D>(pair, p), isum);
  }
}

// Block b of one row group against R activation rows, into acc[R] (the tiles of up to 5 rows
// under AVX2, 8 under AVX-512, walked by rows8_run_chunked).
template <DotU8S8 D, int R>
[[gnu::always_inline]] inline void q6k_rows8_block(const uint8_t* blk, int64_t b, const ActQ8_K* x, __m256* acc) {
  rows8_prefetch(blk, kQ6KRows8Block, rows8_prefetch_ahead<R>());
  __m256i isum[R];
  for (int j = 0; j < R; j++) isum[j] = _mm256_setzero_si256();
  for (int u = 0; u < 8; u++) q6k_rows8_pair<D, R>(blk, x, b, u, isum);
  q6k_rows8_finish<R>(blk, b, x, isum, acc);
}

// Block b of R activation rows broadcast as Rows8Bcast holds them, plus for each row and group of
// 16 Q6_K's -32 as an int16 pair: off[j][G] is (-32 * (x_16G+4i + x_16G+4i+1 summed over i < 4),
// -32 * (x_16G+4i+2 + x_16G+4i+3 summed)), the two int16 halves' shares of vpmaddubsw's pair
// sums over the group's 4 k-groups. 64 bytes more per row.
template <int R>
struct Rows8BcastQ6 : Rows8Bcast<R> {
  alignas(32) int32_t off[R][16];

  void fill(const ActQ8_K* x, int64_t b) {
    Rows8Bcast<R>::fill(x, b);
    const __m256i ones = _mm256_set1_epi8(1), m32 = _mm256_set1_epi16(-32);
    for (int j = 0; j < R; j++) {
      for (int s = 0; s < 8; s++) {  // groups 2s (low 128 bits) and 2s + 1 (high)
        __m256i t = _mm256_maddubs_epi16(ones, _mm256_loadu_si256((const __m256i*)(x[j].qs + 256 * b + 32 * s)));
        t = _mm256_add_epi16(t, _mm256_shuffle_epi32(t, 0x4E));
        t = _mm256_mullo_epi16(_mm256_add_epi16(t, _mm256_shuffle_epi32(t, 0xB1)), m32);  // |.| <= 32 * 1016
        off[j][2 * s] = _mm256_cvtsi256_si32(t);
        off[j][2 * s + 1] = _mm_cvtsi128_si32(_mm256_extracti128_si256(t, 1));
      }
    }
  }
  __m256i offset(int j, int G) const { return _mm256_set1_epi32(off[j][G]); }
};

// Sub-block S (32 weights: groups 2S and 2S + 1) of one row group against R rows broadcast in xb,
// into isum[R] (the tall tiles: rows8_tall). Its 8 vectors unpacked once and kept in registers;
// row by row the products with the broadcast activations (memory operands) run in sums of a
// group's 4 k-groups, each folded by its group's scale, and the row's total added to isum[j]:
// - maddubs: int16 sums that take in the group's -32 share (xb.offset): each half ends at
//   sum (e - 32) x over 8 weights, |.| <= 8 * 32 * 127 = 32512, an int16. Summed as
//   (products of k-groups 0, 1 + share) + products of 2, 3, no partial sum leaves the int16
//   range either: the first is sum over k-groups 0, 1 of (e - 32) x plus -32 x over 2, 3, each
//   <= 16256; vpmaddubsw's pair sums (<= 2 * 63 * 127) never saturate. The same integers as the
//   -32 applied at the block's end (q6k_rows8_finish), with one vpmaddwd per group instead of
//   two and no offset pass per block. Zen 4, forced AVX2, n = 8, 8960 x 1536 (in L3), one thread:
//   75.7 -> 68.7 cycles a sub-block; the 1.5B's forward of 8 tokens (bench/ab_builds.py, 40
//   pairs) 0.985 of the time, of 5 tokens 0.998.
// - VNNI: vpdpbusd's int32 sums, then the block end's offset.
template <DotU8S8 D, int R, int S, class Bcast>
[[gnu::always_inline]] inline void q6k_rows8_tall_sub(const uint8_t* blk, const Bcast& xb, __m256i* isum) {
  const __m256i pair = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + 16 + 16 * S)));
  const __m256i sc[2] = {q6k_rows8_scale<D>(pair, 0), q6k_rows8_scale<D>(pair, 1)};
  __m256i v[8];
  q6k_rows8_values(blk, 2 * S, v);
  q6k_rows8_values(blk, 2 * S + 1, v + 4);
  for (int j = 0; j < R; j++) {
    const __m256i* xv = xb.at(S, j);
    for (int G = 0; G < 2; G++) {
      const __m256i* xg = xv + 4 * G;
      const __m256i* vg = v + 4 * G;
      __m256i s;
      if constexpr (D == DotU8S8::maddubs) {  // two chains, joined with the offset
        __m256i a = _mm256_maddubs_epi16(vg[0], _mm256_load_si256(xg));
        __m256i c = _mm256_maddubs_epi16(vg[2], _mm256_load_si256(xg + 2));
        a = _mm256_add_epi16(a, _mm256_maddubs_epi16(vg[1], _mm256_load_si256(xg + 1)));
        c = _mm256_add_epi16(c, _mm256_maddubs_epi16(vg[3], _mm256_load_si256(xg + 3)));
        s = _mm256_add_epi16(_mm256_add_epi16(a, xb.offset(j, 2 * S + G)), c);
      } else {
        s = rows8_dot<D>(_mm256_setzero_si256(), true, vg[0], _mm256_load_si256(xg));
        for (int i = 1; i < 4; i++) s = rows8_dot<D>(s, false, vg[i], _mm256_load_si256(xg + i));
      }
      isum[j] = _mm256_add_epi32(isum[j], rows8_scaled<D>(s, sc[G]));
      rows8_pin(isum[j]);
    }
  }
}

// The tall tiles' broadcasts: with the offsets where the int16 sums take them in (maddubs).
template <DotU8S8 D, int R>
using Q6KRows8Bcast = std::conditional_t<D == DotU8S8::maddubs, Rows8BcastQ6<R>, Rows8Bcast<R>>;

// Block b of one row group against R rows broadcast in xb, into acc[R] (rows8_tall): the 8
// sub-blocks, then q6k_rows8_finish.
template <DotU8S8 D, int R>
[[gnu::always_inline]] inline void q6k_rows8_tall_block(const uint8_t* blk, int64_t b, const ActQ8_K* x,
                                                        const Q6KRows8Bcast<D, R>& xb, __m256* acc,
                                                        const uint8_t* next) {
  __m256i isum[R];
  for (int j = 0; j < R; j++) isum[j] = _mm256_setzero_si256();
  rows8_prefetch_part<kQ6KRows8Block, 8, _MM_HINT_T1>(next, 0, 0);
  q6k_rows8_tall_sub<D, R, 0>(blk, xb, isum);
  rows8_prefetch_part<kQ6KRows8Block, 8, _MM_HINT_T1>(next, 0, 1);
  q6k_rows8_tall_sub<D, R, 1>(blk, xb, isum);
  rows8_prefetch_part<kQ6KRows8Block, 8, _MM_HINT_T1>(next, 0, 2);
  q6k_rows8_tall_sub<D, R, 2>(blk, xb, isum);
  rows8_prefetch_part<kQ6KRows8Block, 8, _MM_HINT_T1>(next, 0, 3);
  q6k_rows8_tall_sub<D, R, 3>(blk, xb, isum);
  rows8_prefetch_part<kQ6KRows8Block, 8, _MM_HINT_T1>(next, 0, 4);
  q6k_rows8_tall_sub<D, R, 4>(blk, xb, isum);
  rows8_prefetch_part<kQ6KRows8Block, 8, _MM_HINT_T1>(next, 0, 5);
  q6k_rows8_tall_sub<D, R, 5>(blk, xb, isum);
  rows8_prefetch_part<kQ6KRows8Block, 8, _MM_HINT_T1>(next, 0, 6);
  q6k_rows8_tall_sub<D, R, 6>(blk, xb, isum);
  rows8_prefetch_part<kQ6KRows8Block, 8, _MM_HINT_T1>(next, 0, 7);
  q6k_rows8_tall_sub<D, R, 7>(blk, xb, isum);
  q6k_rows8_finish<R, D != DotU8S8::maddubs>(blk, b, x, isum, acc);
}

template <DotU8S8 D, int R>
[[gnu::noinline]] void q6k_rows8_tall(const Matrix& w, int64_t r0, int64_t r1, const ActQ8_K* x, float* y, int64_t ldy) {
  rows8_tall<R, Q6KRows8Bcast<D, R>>(w, kQ6KRows8Block, r0, r1, x, y, ldy,
                                      [&](const uint8_t* blk, int64_t b, const Q6KRows8Bcast<D, R>& xb, __m256* acc,
                                          const uint8_t* next) {
    q6k_rows8_tall_block<D, R>(blk, b, x, xb, acc, next);
  });
}

template <DotU8S8 D, int kMax>
void q6k_rows8_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                    int64_t ldy) {
  rows8_run_chunked<kMax, ActQ8_K>(
      w, w.cols / 256, kQ6KRows8Block, r0, r1, act, stride, n, y, ldy, act_q8_K,
      [&](auto rc, auto gc, const uint8_t* blk, int64_t b, const ActQ8_K* x, __m256* acc, int acc_stride)
          QD_ROWS8_INLINE {
        // group by group: a pair's 8 value vectors do not fit beside the sums (rows8_walk_groups)
        for (int i = 0; i < decltype(gc)::value; i++) {
          q6k_rows8_block<D, decltype(rc)::value>(blk + i * kQ6KRows8Block, b, x, acc + i * acc_stride);
        }
      },
      [&](auto rc, int64_t r, int64_t r_end, const ActQ8_K* x, int64_t i0) {
        q6k_rows8_tall<D, decltype(rc)::value>(w, r, r_end, x, y + i0 * ldy, ldy);
      });
}

}  // namespace
}  // namespace qd::cpu

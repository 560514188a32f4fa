// Q6_K weights in the rows8 layout (cpu/repack.cpp) against Q8_K activations, AVX2.
//
// Per block (256 weights) and activation row: the unsigned 6-bit values e against the
// activations, two k-groups' vpmaddubsw products summed in int16 (at most 8 products of 63 * 127
// per lane: no overflow), then one vpmaddwd by the group's scale (with VNNI: a 16-weight group's
// vpdpbusd int32 sums, then one vpmulld: the same integers); the -32 as
// -32 * sum_g sc_g * bsum_g by vpmaddwd. acc += d * xd * (S - 32 O), one FMA per block.
#pragma once
#include "cpu/repack.h"
#include "cpu/x86/avx2/rows8_common.h"

namespace qd::cpu {
namespace {

// The 6-bit values of vector (t, g), low (High = false: elements 64t + 4g + i) or high part
// (elements 64t + 32 + 4g + i): nibble from the lo plane, two bits from field 2 (t & 1) + High of
// the hi plane, moved to bits 4..5.
template <int T, bool High>
inline __m256i q6k_rows8_values(const uint8_t* blk, int g) {
  constexpr int t = T;
  const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
  const __m256i lo = _mm256_loadu_si256((const __m256i*)(blk + kQ6KRows8Lo + 32 * (8 * t + g)));
  const __m256i hi = _mm256_loadu_si256((const __m256i*)(blk + kQ6KRows8Hi + 32 * (8 * (t / 2) + g)));
  const __m256i nib = High ? _mm256_and_si256(_mm256_srli_epi16(lo, 4), m4) : _mm256_and_si256(lo, m4);
  __m256i h2;
  constexpr int field = 2 * (t & 1) + (High ? 1 : 0);
  if constexpr (field == 0) {
    h2 = _mm256_slli_epi16(hi, 4);
  } else if constexpr (field == 1) {
    h2 = _mm256_slli_epi16(hi, 2);
  } else if constexpr (field == 2) {
    h2 = hi;
  } else {
    h2 = _mm256_srli_epi16(hi, 2);
  }
  return _mm256_or_si256(nib, _mm256_and_si256(h2, m30));
}

// Group p's scale of a pair (sc[2u], sc[2u + 1]) widened to int16 lanes, as rows8_scaled's
// multiplier: sc duplicated into (sc, sc) int16 pairs, or sign-extended to int32 (VNNI).
template <DotU8S8 D>
inline __m256i q6k_rows8_scale(__m256i pair, int p) {
  if constexpr (D == DotU8S8::maddubs) {
    const __m256i dup_lo = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,  //
                                            0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i dup_hi = _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15,  //
                                            2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15);
    return _mm256_shuffle_epi8(pair, p ? dup_hi : dup_lo);
  } else {
    return p ? _mm256_srai_epi32(pair, 16) : _mm256_srai_epi32(_mm256_slli_epi32(pair, 16), 16);
  }
}

// Block b's end, the same in every tile: the -32 as isum[j] -= sum_s (32 sc_s) * bsum_s (each
// scale pair widened once for all R rows), then acc += d * xd * isum.
template <int R>
[[gnu::always_inline]] inline void q6k_rows8_finish(const uint8_t* blk, int64_t b, const ActQ8_K* x, __m256i* isum,
                                                    __m256* acc) {
  for (int u = 0; u < 8; u++) {
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

// Group 4t + 2 High + p (16 weights: k-groups 4p .. 4p + 3 of the part) into isum[j]. With
// maddubs, two halves of 2 k-groups (an int16 holds 4 products of 63 * 127); with VNNI, all 4 in
// vpdpbusd's int32 sums and one vpmulld.
template <DotU8S8 D, int R, int T, bool High>
inline void q6k_rows8_group(const uint8_t* blk, int p, const int8_t* const* xq, __m256i sc, __m256i* isum) {
  constexpr int kHalves = D == DotU8S8::maddubs ? 2 : 1;
  for (int half = 0; half < kHalves; half++) {
    __m256i s16[R];
    for (int gg = 0; gg < 4 / kHalves; gg++) {
      const int g = 4 * p + 4 / kHalves * half + gg;
      const __m256i v = q6k_rows8_values<T, High>(blk, g);
      for (int j = 0; j < R; j++) {
        s16[j] = rows8_dot<D>(s16[j], gg == 0, v, rows8_bcast(xq[j] + 4 * g));
        rows8_pin(s16[j]);
      }
    }
    for (int j = 0; j < R; j++) isum[j] = _mm256_add_epi32(isum[j], rows8_scaled<D>(s16[j], sc));
  }
}

// Chunk T (elements 64T .. 64T + 63: groups 4T .. 4T + 3) of block b into isum[j].
template <DotU8S8 D, int R, int T>
inline void q6k_rows8_chunk(const uint8_t* blk, const ActQ8_K* x, int64_t b, __m256i* isum) {
  const int8_t* xq[R];
  for (int part = 0; part < 2; part++) {  // scales pair u = 2T + part: groups 4T + 2 part + p
    const __m256i pair = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + 16 + 16 * (2 * T + part))));
    for (int j = 0; j < R; j++) xq[j] = x[j].qs + 256 * b + 64 * T + 32 * part;
    for (int p = 0; p < 2; p++) {
      const __m256i sc = q6k_rows8_scale<D>(pair, p);
      part ? q6k_rows8_group<D, R, T, true>(blk, p, xq, sc, isum) : q6k_rows8_group<D, R, T, false>(blk, p, xq, sc, isum);
    }
  }
}

template <DotU8S8 D, int R>
[[gnu::noinline]] void q6k_rows8_tile(const Matrix& w, int64_t r0, int64_t r1, const ActQ8_K* x, float* y,
                    int64_t ldy) {
  const int64_t nb = w.cols / 256;
  const size_t ahead = rows8_prefetch_ahead<R>();
  for (int64_t r = r0; r < r1; r += 8) {
    const uint8_t* group = w.data + (size_t)(r / 8) * (size_t)nb * kQ6KRows8Block;
    __m256 acc[R];
    for (int j = 0; j < R; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* blk = group + (size_t)b * kQ6KRows8Block;
      rows8_prefetch(blk, kQ6KRows8Block, ahead);
      __m256i isum[R];
      for (int j = 0; j < R; j++) isum[j] = _mm256_setzero_si256();
      q6k_rows8_chunk<D, R, 0>(blk, x, b, isum);
      q6k_rows8_chunk<D, R, 1>(blk, x, b, isum);
      q6k_rows8_chunk<D, R, 2>(blk, x, b, isum);
      q6k_rows8_chunk<D, R, 3>(blk, x, b, isum);
      q6k_rows8_finish<R>(blk, b, x, isum, acc);
    }
    for (int j = 0; j < R; j++) rows8_store(y + j * ldy, r, r1, acc[j]);
  }
}

// Sub-block S (32 weights: chunk S / 2, low or high part) of one row group against R rows
// broadcast in xb, into isum[R] (the tall tiles: rows8_tall). Its 8 vectors unpacked once and kept
// in registers; row by row the products with the broadcast activations (memory operands) run in
// int16 sums of two k-groups (maddubs; VNNI: int32 sums of a group of four), each folded by its
// group's scale, and the row's total added to isum[j] in memory.
template <DotU8S8 D, int R, int S>
[[gnu::always_inline]] inline void q6k_rows8_tall_sub(const uint8_t* blk, const Rows8Bcast<R>& xb, __m256i* isum) {
  constexpr int T = S / 2;
  constexpr bool kHigh = S & 1;
  const __m256i pair = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + 16 + 16 * S)));
  const __m256i sc[2] = {q6k_rows8_scale<D>(pair, 0), q6k_rows8_scale<D>(pair, 1)};
  constexpr int kRun = D == DotU8S8::maddubs ? 2 : 4;  // k-groups per folded sum
  for (int g0 = 0; g0 < 8; g0 += kRun) {
    __m256i v[kRun];
    for (int i = 0; i < kRun; i++) v[i] = q6k_rows8_values<T, kHigh>(blk, g0 + i);
    for (int j = 0; j < R; j++) {
      const __m256i* xv = xb.at(S, j) + g0;
      __m256i s16 = rows8_dot<D>(_mm256_setzero_si256(), true, v[0], _mm256_load_si256(xv));
      for (int i = 1; i < kRun; i++) s16 = rows8_dot<D>(s16, false, v[i], _mm256_load_si256(xv + i));
      isum[j] = _mm256_add_epi32(isum[j], rows8_scaled<D>(s16, sc[g0 / 4]));
      rows8_pin(isum[j]);
    }
  }
}

// Block b of one row group against R rows broadcast in xb, into acc[R] (rows8_tall): the 8
// sub-blocks, then q6k_rows8_finish.
template <DotU8S8 D, int R>
[[gnu::always_inline]] inline void q6k_rows8_tall_block(const uint8_t* blk, int64_t b, const ActQ8_K* x,
                                                        const Rows8Bcast<R>& xb, __m256* acc) {
  __m256i isum[R];
  for (int j = 0; j < R; j++) isum[j] = _mm256_setzero_si256();
  q6k_rows8_tall_sub<D, R, 0>(blk, xb, isum);
  q6k_rows8_tall_sub<D, R, 1>(blk, xb, isum);
  q6k_rows8_tall_sub<D, R, 2>(blk, xb, isum);
  q6k_rows8_tall_sub<D, R, 3>(blk, xb, isum);
  q6k_rows8_tall_sub<D, R, 4>(blk, xb, isum);
  q6k_rows8_tall_sub<D, R, 5>(blk, xb, isum);
  q6k_rows8_tall_sub<D, R, 6>(blk, xb, isum);
  q6k_rows8_tall_sub<D, R, 7>(blk, xb, isum);
  q6k_rows8_finish<R>(blk, b, x, isum, acc);
}

template <DotU8S8 D, int R>
[[gnu::noinline]] void q6k_rows8_tall(const Matrix& w, int64_t r0, int64_t r1, const ActQ8_K* x, float* y, int64_t ldy) {
  rows8_tall<R>(w, kQ6KRows8Block, r0, r1, x, y, ldy, [&](const uint8_t* blk, int64_t b, const Rows8Bcast<R>& xb, __m256* acc) {
    q6k_rows8_tall_block<D, R>(blk, b, x, xb, acc);
  });
}

template <DotU8S8 D, int kMax>
void q6k_rows8_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                    int64_t ldy) {
  rows8_run<kMax, ActQ8_K>(w, r0, r1, act, stride, n, act_q8_K, [&](auto rc, int64_t r, int64_t r_end, const ActQ8_K* x, int64_t i0) {
    q6k_rows8_tile<D, decltype(rc)::value>(w, r, r_end, x, y + i0 * ldy, ldy);
  }, [&](auto rc, int64_t r, int64_t r_end, const ActQ8_K* x, int64_t i0) {
    q6k_rows8_tall<D, decltype(rc)::value>(w, r, r_end, x, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

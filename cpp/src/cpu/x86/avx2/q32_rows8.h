// The 32-weight block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) in the rows8 layout (cpu/repack.cpp)
// against Q8_0 activations, AVX2.
//
// Per block and activation row: the unsigned 4/5-bit values' vpmaddubsw products summed in int16
// (per lane at most 16 products of 15 * 127 for the whole block, or 8 of 31 * 127 per half), or
// the signed values of Q8_0 and IQ4_NL (its codebook) through the sign trick one k-group at a
// time; then acc += d * xd * S,
// plus the offset times an activation block sum: Q4_0's -8 d and Q5_0's -16 d times d * sum (s),
// Q4_1/Q5_1's m times llama.cpp's FP16-rounded block_q8_1 sum (sm, as the GGUF-layout kernels):
// two FMAs per block. Tiles of up to 5 rows walk the row groups one at a time
// (q32_rows8_tile); taller ones under AVX2 are tall tiles (q32_rows8_tall_block) with the same
// integers and block ends.
#pragma once
#include <utility>

#include "cpu/x86/avx2/rows8_common.h"
#include "quant/blocks.h"

namespace qd::cpu {
namespace {

struct R8Q4_0 { static constexpr bool kLut = false; static constexpr int kHalves = 1, kValueBytes = 16; static constexpr bool kFifth = false; static constexpr float kOffset = -8.f; };
struct R8Q4_1 { static constexpr bool kLut = false; static constexpr int kHalves = 2, kValueBytes = 16; static constexpr bool kFifth = false; static constexpr float kOffset = 0.f; };
struct R8Q5_0 { static constexpr bool kLut = false; static constexpr int kHalves = 1, kValueBytes = 16; static constexpr bool kFifth = true; static constexpr float kOffset = -16.f; };
struct R8Q5_1 { static constexpr bool kLut = false; static constexpr int kHalves = 2, kValueBytes = 16; static constexpr bool kFifth = true; static constexpr float kOffset = 0.f; };
struct R8IQ4_NL { static constexpr bool kLut = true; static constexpr int kHalves = 1, kValueBytes = 16; static constexpr bool kFifth = false; static constexpr float kOffset = 0.f; };
struct R8Q8_0 { static constexpr bool kLut = false; static constexpr int kHalves = 1, kValueBytes = 32; static constexpr bool kFifth = false; static constexpr float kOffset = 0.f; };

template <class F>
constexpr bool q32_rows8_signed() {
  return F::kValueBytes == 32 || F::kLut;
}

template <class F>
constexpr size_t q32_rows8_block() {
  return 8 * (2 * F::kHalves + F::kValueBytes + (F::kFifth ? 4 : 0));
}

// k-group c (elements 4c .. 4c + 3) of the 8 rows: unsigned values (signed for Q8_0).
template <class F, int C>
inline __m256i q32_rows8_values(const uint8_t* blk) {
  const uint8_t* plane = blk + 16 * F::kHalves;
  if constexpr (F::kValueBytes == 32) {
    return _mm256_loadu_si256((const __m256i*)(plane + 32 * C));
  } else if constexpr (F::kFifth) {
    return p5_rows8_values<C>(plane);
  } else {
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m256i wv = _mm256_loadu_si256((const __m256i*)(plane + 32 * (C % 4)));
    __m256i v = C < 4 ? _mm256_and_si256(wv, m4) : _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);
    if constexpr (F::kLut) {
      v = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)quant::kvalues_iq4nl)), v);
    }
    return v;
  }
}

// How many k-groups' vpmaddubsw products one int16 sum holds: 8 for the 4-bit types (16
// products of 15 * 127 per lane), 4 for the 5-bit ones (8 of 31 * 127).
template <class F>
constexpr int q32_rows8_span() {
  return F::kFifth ? 4 : 8;
}

template <class F, int R, int C>
inline void q32_rows8_group(const uint8_t* blk, const int8_t* const* xq, __m256i* s16, __m256i* isum) {
  const __m256i v = q32_rows8_values<F, C>(blk);
  if constexpr (q32_rows8_signed<F>()) {
    const __m256i av = _mm256_sign_epi8(v, v), ones = _mm256_set1_epi16(1);
    for (int j = 0; j < R; j++) {
      const __m256i p = _mm256_maddubs_epi16(av, _mm256_sign_epi8(rows8_bcast(xq[j] + 4 * C), v));
      isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p, ones));
    }
  } else {
    for (int j = 0; j < R; j++) {
      const __m256i p = _mm256_maddubs_epi16(v, rows8_bcast(xq[j] + 4 * C));
      s16[j] = C % q32_rows8_span<F>() == 0 ? p : _mm256_add_epi16(s16[j], p);
      rows8_pin(s16[j]);
    }
  }
}

// k-groups [C0, C0 + 4) into isum (through s16, folded in once per span).
template <class F, int R, int C0>
inline void q32_rows8_quarter(const uint8_t* blk, const int8_t* const* xq, __m256i* s16, __m256i* isum) {
  q32_rows8_group<F, R, C0>(blk, xq, s16, isum);
  q32_rows8_group<F, R, C0 + 1>(blk, xq, s16, isum);
  q32_rows8_group<F, R, C0 + 2>(blk, xq, s16, isum);
  q32_rows8_group<F, R, C0 + 3>(blk, xq, s16, isum);
  if constexpr (!q32_rows8_signed<F>() && (C0 + 4) % q32_rows8_span<F>() == 0) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int j = 0; j < R; j++) isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(s16[j], ones));
  }
}

// Block b's end, the same in every tile: acc += d * xd * S, plus the offset's FMA.
template <class F, int R>
[[gnu::always_inline]] inline void q32_rows8_finish(const uint8_t* blk, int64_t b, const ActQ8_0* x,
                                                    const __m256i* isum, __m256* acc) {
  const __m256 d = rows8_f16(blk);
  __m256 off = _mm256_setzero_ps();
  if constexpr (F::kHalves == 2) {
    off = rows8_f16(blk + 16);
  } else if constexpr (F::kOffset != 0.f) {
    off = _mm256_mul_ps(d, _mm256_set1_ps(F::kOffset));
  }
  for (int j = 0; j < R; j++) {
    acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x[j].d[b])), _mm256_cvtepi32_ps(isum[j]), acc[j]);
    if constexpr (F::kHalves == 2 || F::kOffset != 0.f) acc[j] = _mm256_fmadd_ps(off, _mm256_set1_ps(F::kHalves == 2 ? x[j].sm[b] : x[j].s[b]), acc[j]);
  }
}

// The tiles of up to 5 rows, walking the row groups of [r0, r1) one at a time, block after block.
template <class F, int R>
[[gnu::noinline]] void q32_rows8_tile(const Matrix& w, int64_t r0, int64_t r1, const ActQ8_0* x, float* y,
                    int64_t ldy) {
  constexpr size_t kBlock = q32_rows8_block<F>();
  const int64_t nb = w.cols / 32;
  const size_t ahead = rows8_prefetch_ahead<R>();
  for (int64_t r = r0; r < r1; r += 8) {
    const uint8_t* group = w.data + (size_t)(r / 8) * (size_t)nb * kBlock;
    __m256 acc[R];
    for (int j = 0; j < R; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* blk = group + (size_t)b * kBlock;
      rows8_prefetch(blk, kBlock, ahead);
      __m256i isum[R];
      const int8_t* xq[R];
      for (int j = 0; j < R; j++) {
        isum[j] = _mm256_setzero_si256();
        xq[j] = x[j].qs + 32 * b;
      }
      __m256i s16[R];
      q32_rows8_quarter<F, R, 0>(blk, xq, s16, isum);
      q32_rows8_quarter<F, R, 4>(blk, xq, s16, isum);
      q32_rows8_finish<F, R>(blk, b, x, isum, acc);
    }
    for (int j = 0; j < R; j++) rows8_store(y + j * ldy, r, r1, acc[j]);
  }
}

// Block b (32 weights) of R Q8_0 activation rows with each k-group's 4 bytes broadcast to all 8
// lanes: at(j)[c] is k-group c (weights 4c .. 4c + 3) of row j. Filled once per block for all the
// row groups of a rows8_tall pass, whose products read it as vpmaddubsw's memory operand. 256
// bytes per row.
template <int R>
struct Rows8Bcast32 {
  static constexpr int kWeights = 32;
  static constexpr size_t kRowBytes = 8 * 32;
  alignas(32) int8_t v[R][8][32];

  void fill(const ActQ8_0* x, int64_t b) {
    for (int j = 0; j < R; j++) {
      const int8_t* q = x[j].qs + 32 * b;
      for (int c = 0; c < 8; c++) _mm256_store_si256((__m256i*)v[j][c], rows8_bcast(q + 4 * c));
    }
  }
  const __m256i* at(int j) const { return (const __m256i*)v[j]; }
};

// k-groups [C0, C0 + sizeof...(C)) of the block unpacked into v.
template <class F, int C0, int... C>
[[gnu::always_inline]] inline void q32_rows8_unpack(const uint8_t* blk, __m256i* v, std::integer_sequence<int, C...>) {
  ((v[C] = q32_rows8_values<F, C0 + C>(blk)), ...);
}

// Half H (k-groups 4H .. 4H + 3) of a signed type's block (Q8_0, IQ4_NL) against R rows broadcast
// in xb, added to isum[R]: the 4 groups' values and their absolutes in registers (all 8 would
// take the 16 registers), each row's products through the sign trick and vpmaddwd by ones, as
// the walk tile's.
template <class F, int R, int H>
[[gnu::always_inline]] inline void q32_rows8_tall_half(const uint8_t* blk, const Rows8Bcast32<R>& xb, __m256i* isum) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i v[4], av[4];
  q32_rows8_unpack<F, 4 * H>(blk, v, std::make_integer_sequence<int, 4>{});
  for (int c = 0; c < 4; c++) av[c] = _mm256_sign_epi8(v[c], v[c]);
  for (int j = 0; j < R; j++) {
    const __m256i* xv = xb.at(j) + 4 * H;
    __m256i sum = isum[j];
    for (int c = 0; c < 4; c++) {
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(av[c], _mm256_sign_epi8(_mm256_load_si256(xv + c), v[c])), ones));
    }
    isum[j] = sum;
    __asm__("" : : "m"(isum[j]));  // isum[j] lives in memory between rows, v[] and av[] in registers
  }
}

// Block b of one row group against R rows broadcast in xb, into acc[R] (the tall tiles:
// rows8_tall, from 6 rows under AVX2). The block's 8 value vectors unpacked once for all rows
// (the walk tile unpacks them once per tile of up to 5) and kept in registers while row by row
// their products with the broadcast activations (memory operands) run in int16 sums of a span
// (two chains, joined), each folded by vpmaddwd; signed types half a block at a time
// (q32_rows8_tall_half). The same integers as the walk tile's, then its block end
// (q32_rows8_finish): the same floats. next is the block some groups on (rows8_tall), prefetched
// into L2.
template <class F, int R>
[[gnu::always_inline]] inline void q32_rows8_tall_block(const uint8_t* blk, int64_t b, const ActQ8_0* x,
                                                        const Rows8Bcast32<R>& xb, __m256* acc, const uint8_t* next) {
  rows8_prefetch_part<q32_rows8_block<F>(), 1, _MM_HINT_T1>(next, 0, 0);
  alignas(32) __m256i isum[R];
  if constexpr (q32_rows8_signed<F>()) {
    for (int j = 0; j < R; j++) isum[j] = _mm256_setzero_si256();
    q32_rows8_tall_half<F, R, 0>(blk, xb, isum);
    q32_rows8_tall_half<F, R, 1>(blk, xb, isum);
  } else {
    constexpr int kSpan = q32_rows8_span<F>();
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i v[8];
    q32_rows8_unpack<F, 0>(blk, v, std::make_integer_sequence<int, 8>{});
    for (int j = 0; j < R; j++) {
      const __m256i* xv = xb.at(j);
      __m256i sum = _mm256_setzero_si256();
      for (int g0 = 0; g0 < 8; g0 += kSpan) {
        const int h0 = g0 + kSpan / 2;
        __m256i s16 = _mm256_maddubs_epi16(v[g0], _mm256_load_si256(xv + g0));
        __m256i t16 = _mm256_maddubs_epi16(v[h0], _mm256_load_si256(xv + h0));
        for (int i = 1; i < kSpan / 2; i++) {
          s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[g0 + i], _mm256_load_si256(xv + g0 + i)));
          t16 = _mm256_add_epi16(t16, _mm256_maddubs_epi16(v[h0 + i], _mm256_load_si256(xv + h0 + i)));
          rows8_pin(s16);
          rows8_pin(t16);
        }
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_add_epi16(s16, t16), ones));
      }
      isum[j] = sum;
      __asm__("" : : "m"(isum[j]));  // isum[j] lives in memory between rows, v[] in registers
    }
  }
  q32_rows8_finish<F, R>(blk, b, x, isum, acc);
}

template <class F, int R>
[[gnu::noinline]] void q32_rows8_tall(const Matrix& w, int64_t r0, int64_t r1, const ActQ8_0* x, float* y,
                                      int64_t ldy) {
  rows8_tall<R, Rows8Bcast32<R>>(w, q32_rows8_block<F>(), r0, r1, x, y, ldy,
                                 [&](const uint8_t* blk, int64_t b, const Rows8Bcast32<R>& xb, __m256* acc,
                                     const uint8_t* next) { q32_rows8_tall_block<F, R>(blk, b, x, xb, acc, next); });
}

template <class F, int kMax>
void q32_rows8_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                    int64_t ldy) {
  rows8_run<kMax, ActQ8_0>(
      w, r0, r1, act, stride, n, act_q8_0,
      [&](auto rc, int64_t r, int64_t r_end, const ActQ8_0* x, int64_t i0) {
        q32_rows8_tile<F, decltype(rc)::value>(w, r, r_end, x, y + i0 * ldy, ldy);
      },
      [&](auto rc, int64_t r, int64_t r_end, const ActQ8_0* x, int64_t i0) {
        q32_rows8_tall<F, decltype(rc)::value>(w, r, r_end, x, y + i0 * ldy, ldy);
      });
}

}  // namespace
}  // namespace qd::cpu

// IQ4_XS weights in the rows8 layout (cpu/repack.cpp) against Q8_K activations, AVX2.
//
// Per block (256 weights, 8 sub-blocks of 32) and activation row: the codebook values (signed)
// through the sign trick, each k-group's vpmaddubsw products (at most 2 * 127 * 127 per lane)
// multiplied by the sub-block's scale ls - 32 in vpmaddwd; acc += d * xd * S, one FMA per block.
// Tiles of up to 5 rows walk the row groups (iq4xs_rows8_tile); taller ones under AVX2 are tall
// tiles (iq4xs_rows8_tall_block) with the same integers and block ends.
#pragma once
#include "cpu/x86/avx2/rows8_common.h"
#include "quant/blocks.h"

namespace qd::cpu {
namespace {

constexpr size_t kIQ4XSRows8Block = 1104;

// Sub-block s's scale ls - 32 of each row (signed bytes at blk + 16) as (sc, sc) int16 pairs.
inline __m256i iq4xs_rows8_scale(const uint8_t* blk, int s) {
  const __m256i sv = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(blk + 16 + 8 * s)));
  return _mm256_or_si256(_mm256_and_si256(sv, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sv, 16));
}

// k-group g (elements 32s + 4g .. + 3) of sub-block s of the 8 rows: the codebook values of the
// low nibbles of word 4s + g (g < 4), else of the high nibbles of word 4s + g - 4.
[[gnu::always_inline]] inline __m256i iq4xs_rows8_values(const uint8_t* blk, int s, int g) {
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)quant::kvalues_iq4nl));
  const __m256i m4 = _mm256_set1_epi8(15);
  const __m256i wv = _mm256_loadu_si256((const __m256i*)(blk + 80 + 32 * (4 * s + g % 4)));
  return _mm256_shuffle_epi8(lut, g < 4 ? _mm256_and_si256(wv, m4) : _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4));
}

// Block b's end, the same in every tile: acc += d * xd * S.
template <int R>
[[gnu::always_inline]] inline void iq4xs_rows8_finish(const uint8_t* blk, int64_t b, const ActQ8_K* x,
                                                      const __m256i* isum, __m256* acc) {
  const __m256 d = rows8_f16(blk);
  for (int j = 0; j < R; j++) {
    acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x[j].d[b])), _mm256_cvtepi32_ps(isum[j]), acc[j]);
  }
}

// The tiles of up to 5 rows (8 under AVX-512), walking the row groups one at a time.
template <int R>
[[gnu::noinline]] void iq4xs_rows8_tile(const Matrix& w, int64_t r0, int64_t r1, const ActQ8_K* x, float* y,
                      int64_t ldy) {
  const int64_t nb = w.cols / 256;
  const size_t ahead = rows8_prefetch_ahead<R>();
  for (int64_t r = r0; r < r1; r += 8) {
    const uint8_t* group = w.data + (size_t)(r / 8) * (size_t)nb * kIQ4XSRows8Block;
    __m256 acc[R];
    for (int j = 0; j < R; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* blk = group + (size_t)b * kIQ4XSRows8Block;
      rows8_prefetch(blk, kIQ4XSRows8Block, ahead);
      __m256i isum[R];
      for (int j = 0; j < R; j++) isum[j] = _mm256_setzero_si256();
      for (int s = 0; s < 8; s++) {
        const __m256i sc = iq4xs_rows8_scale(blk, s);
        for (int g = 0; g < 8; g++) {
          const __m256i v = iq4xs_rows8_values(blk, s, g), av = _mm256_sign_epi8(v, v);
          for (int j = 0; j < R; j++) {
            const __m256i xv = _mm256_sign_epi8(rows8_bcast(x[j].qs + 256 * b + 32 * s + 4 * g), v);
            isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(_mm256_maddubs_epi16(av, xv), sc));
          }
        }
      }
      iq4xs_rows8_finish<R>(blk, b, x, isum, acc);
    }
    for (int j = 0; j < R; j++) rows8_store(y + j * ldy, r, r1, acc[j]);
  }
}

// Half H (k-groups 4H .. 4H + 3) of sub-block S of one row group against R rows broadcast in xb,
// added to isum[R]: the 4 groups' codebook values and their absolutes in registers, each row's
// products through the sign trick and vpmaddwd by the sub-block's scale, as the walk tile's.
template <int R>
[[gnu::always_inline]] inline void iq4xs_rows8_tall_half(const uint8_t* blk, int S, int H, __m256i sc,
                                                         const Rows8Bcast<R>& xb, __m256i* isum) {
  __m256i v[4], av[4];
  for (int c = 0; c < 4; c++) {
    v[c] = iq4xs_rows8_values(blk, S, 4 * H + c);
    av[c] = _mm256_sign_epi8(v[c], v[c]);
  }
  for (int j = 0; j < R; j++) {
    const __m256i* xv = xb.at(S, j) + 4 * H;
    __m256i sum = isum[j];
    for (int c = 0; c < 4; c++) {
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(av[c], _mm256_sign_epi8(_mm256_load_si256(xv + c), v[c])), sc));
    }
    isum[j] = sum;
    __asm__("" : : "m"(isum[j]));  // isum[j] lives in memory between rows, v[] and av[] in registers
  }
}

// Block b of one row group against R rows broadcast in xb, into acc[R] (the tall tiles:
// rows8_tall, from 6 rows under AVX2): each sub-block's vectors unpacked once for all rows, half
// a sub-block at a time (iq4xs_rows8_tall_half), with the walk tile's integers and block end.
// next is the block rows8_tall prefetches (some groups on), into L2 a part per sub-block.
template <int R>
[[gnu::always_inline]] inline void iq4xs_rows8_tall_block(const uint8_t* blk, int64_t b, const ActQ8_K* x,
                                                          const Rows8Bcast<R>& xb, __m256* acc, const uint8_t* next) {
  alignas(32) __m256i isum[R];
  for (int j = 0; j < R; j++) isum[j] = _mm256_setzero_si256();
  for (int s = 0; s < 8; s++) {
    rows8_prefetch_part<kIQ4XSRows8Block, 8, _MM_HINT_T1>(next, 0, s);
    const __m256i sc = iq4xs_rows8_scale(blk, s);
    iq4xs_rows8_tall_half<R>(blk, s, 0, sc, xb, isum);
    iq4xs_rows8_tall_half<R>(blk, s, 1, sc, xb, isum);
  }
  iq4xs_rows8_finish<R>(blk, b, x, isum, acc);
}

template <int R>
[[gnu::noinline]] void iq4xs_rows8_tall(const Matrix& w, int64_t r0, int64_t r1, const ActQ8_K* x, float* y,
                                        int64_t ldy) {
  rows8_tall<R>(w, kIQ4XSRows8Block, r0, r1, x, y, ldy,
                [&](const uint8_t* blk, int64_t b, const Rows8Bcast<R>& xb, __m256* acc, const uint8_t* next) {
                  iq4xs_rows8_tall_block<R>(blk, b, x, xb, acc, next);
                });
}

template <int kMax>
void iq4xs_rows8_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                      int64_t ldy) {
  rows8_run<kMax, ActQ8_K>(
      w, r0, r1, act, stride, n, act_q8_K,
      [&](auto rc, int64_t r, int64_t r_end, const ActQ8_K* x, int64_t i0) {
        iq4xs_rows8_tile<decltype(rc)::value>(w, r, r_end, x, y + i0 * ldy, ldy);
      },
      [&](auto rc, int64_t r, int64_t r_end, const ActQ8_K* x, int64_t i0) {
        iq4xs_rows8_tall<decltype(rc)::value>(w, r, r_end, x, y + i0 * ldy, ldy);
      });
}

}  // namespace
}  // namespace qd::cpu

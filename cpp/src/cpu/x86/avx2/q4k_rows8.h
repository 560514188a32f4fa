// Q4_K weights in the rows8 layout (cpu/repack.cpp) against Q8_K activations, AVX2.
//
// Per block (256 weights) and activation row: for each sub-block s of 32, the 8 k-groups'
// vpmaddubsw products summed in int16 (at most 16 products of 15 * 127 per lane: no overflow),
// then one vpmaddwd by the sub-block's scale; the mins against the activations' 16-sums by
// vpmaddwd. Then acc += d * xd * S, acc -= dmin * xd * M (two FMAs per block).
#pragma once
#include "cpu/x86/avx2/rows8_common.h"

namespace qd::cpu {
namespace {

constexpr size_t kQ4KRows8Block = 1184;

// One sub-block (32 weights of 8 rows: the low or high nibbles of 8 vectors at qv) against R
// activation rows (32 bytes at xq[j]), into the int16 sums s16[j].
template <int R, bool High>
inline void q4k_rows8_sub(const uint8_t* qv, const int8_t* const* xq, __m256i* s16) {
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int j = 0; j < R; j++) s16[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int g = 0; g < 8; g++) {
    const __m256i wv = _mm256_loadu_si256((const __m256i*)(qv + 32 * g));
    const __m256i v = High ? _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4) : _mm256_and_si256(wv, m4);
    for (int j = 0; j < R; j++) s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(v, rows8_bcast(xq[j] + 4 * g)));
  }
}

template <bool Vnni, int R>
void q4k_rows8_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y,
                    int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  const size_t ahead = R <= 2 ? 2048 : 4096;
  for (int64_t r = r0; r < r1; r += 8) {
    const uint8_t* group = w.data + (size_t)(r / 8) * (size_t)nb * kQ4KRows8Block;
    __m256 acc[R];
    for (int j = 0; j < R; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* blk = group + (size_t)b * kQ4KRows8Block;
      rows8_prefetch(blk, kQ4KRows8Block, ahead);
      __m256i isum[R], s16[R];
      const int8_t* xq[R];
      for (int j = 0; j < R; j++) isum[j] = _mm256_setzero_si256();
      for (int t = 0; t < 4; t++) {  // chunk t: low nibbles are sub-block 2t, high nibbles 2t + 1
        const uint8_t* qv = blk + 160 + 256 * t;
        for (int j = 0; j < R; j++) xq[j] = x[j].qs + 256 * b + 64 * t;
        q4k_rows8_sub<R, false>(qv, xq, s16);
        const __m256i sc0 = rows8_u8_pairs(blk + 32 + 16 * t);
        for (int j = 0; j < R; j++) isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(s16[j], sc0));
        for (int j = 0; j < R; j++) xq[j] += 32;
        q4k_rows8_sub<R, true>(qv, xq, s16);
        const __m256i sc1 = rows8_u8_pairs(blk + 32 + 16 * t + 8);
        for (int j = 0; j < R; j++) isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(s16[j], sc1));
      }
      const __m256 d = rows8_f16(blk), dmin = rows8_f16(blk + 16);
      for (int j = 0; j < R; j++) {
        __m256i msum = _mm256_setzero_si256();
        const int16_t* bs = x[j].bsums + 16 * b;
        for (int s = 0; s < 8; s++) {
          msum = _mm256_add_epi32(msum, _mm256_madd_epi16(rows8_u8_pairs(blk + 96 + 8 * s), rows8_bcast((const int8_t*)(bs + 2 * s))));
        }
        const __m256 xd = _mm256_set1_ps(x[j].d[b]);
        acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(isum[j]), acc[j]);
        acc[j] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, xd), _mm256_cvtepi32_ps(msum), acc[j]);
      }
    }
    for (int j = 0; j < R; j++) rows8_store(y + j * ldy, r, r1, acc[j]);
  }
}

template <bool Vnni, int kMax>
void q4k_rows8_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                    int64_t ldy) {
  rows8_tiles<kMax>(n, [&](auto rc, int64_t i0) {
    q4k_rows8_tile<Vnni, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

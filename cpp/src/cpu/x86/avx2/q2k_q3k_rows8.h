// Q2_K and Q3_K weights in the rows8 layout (cpu/repack.cpp) against Q8_K activations, AVX2.
//
// Per block (256 weights, 16 groups of 16) and activation row: the unsigned 2-bit (Q2_K) or
// 3-bit (Q3_K: low 2 bits | hmask bit << 2, stored whole in the X, Y, Z vectors of
// cpu/repack.cpp) values' vpmaddubsw products over a group summed in
// int16, then one vpmaddwd by the group's scale. Q2_K's mins and Q3_K's -4 against the
// activations' 16-sums by vpmaddwd: acc += d * xd * S - dmin * xd * M (Q2_K), or
// acc += d * xd * (S - 4 O) (Q3_K). Tiles of up to 5 rows walk the row groups (k23_rows8_tile);
// taller ones under AVX2 are tall tiles (k23_rows8_tall_block) with the same integers and block
// ends.
#pragma once
#include "cpu/x86/avx2/rows8_common.h"

namespace qd::cpu {
namespace {

template <bool Q3>
constexpr size_t k23_rows8_block() {
  return Q3 ? 912 : 672;
}

// Scales of groups 2u, 2u + 1 as int16 pairs per row lane (Q3_K's signed scales; Q2_K's low
// nibbles), and Q2_K's mins (high nibbles).
template <bool Q3>
inline __m256i k23_rows8_scales(const uint8_t* blk, int u) {
  if constexpr (Q3) return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + 16 + 16 * u)));
  return _mm256_and_si256(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(blk + 32 + 16 * u))), _mm256_set1_epi16(15));
}

inline __m256i q2k_rows8_mins(const uint8_t* blk, int u) {
  return _mm256_srli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(blk + 32 + 16 * u))), 4);
}

// Where chunk u's values sit (elements 32u .. 32u + 31): Q2_K's (p = u / 4, f = u % 4) in the
// vectors from `at` on, at bit lo_shift = 2f of each byte; Q3_K's in its X, Y, Z vectors from `at`
// on. Worked out once per chunk, out of the per-k-group unpacking (k23_rows8_value).
template <bool Q3>
struct K23Chunk {
  const uint8_t* at;
  __m128i lo_shift;  // Q2_K

  K23Chunk(const uint8_t* blk, int u)
      : at(Q3 ? blk + 144 + 96 * u : blk + 160 + 256 * (u / 4)), lo_shift(_mm_cvtsi32_si128(Q3 ? 0 : 2 * (u % 4))) {}
};

// k-group G (elements 4G .. 4G + 3) of a chunk of the 8 rows: Q2_K's 2-bit values; Q3_K's 3-bit
// ones, k-groups 0-5 one field of X, Y or Z (rows8_byte_field), 6 and 7 two: 19 vector operations
// for the 8 (the former 2-bit and hmask planes took 7 a k-group).
template <bool Q3, int G>
[[gnu::always_inline]] inline __m256i k23_rows8_value(const K23Chunk<Q3>& c) {
  if constexpr (Q3) {
    const uint8_t* X = c.at;
    if constexpr (G < 6) {
      return rows8_byte_field<3 * (G % 2), 3, 0>(X + 32 * (G / 2));
    } else if constexpr (G == 6) {
      return _mm256_or_si256(rows8_byte_field<6, 2, 0>(X), rows8_byte_field<6, 1, 2>(X + 32));
    } else {
      return _mm256_or_si256(rows8_byte_field<7, 1, 0>(X + 32), rows8_byte_field<6, 2, 1>(X + 64));
    }
  } else {
    const __m256i lv = _mm256_loadu_si256((const __m256i*)(c.at + 32 * G));
    return _mm256_and_si256(_mm256_srl_epi16(lv, c.lo_shift), _mm256_set1_epi8(3));
  }
}

template <bool Q3, int R>
[[gnu::always_inline]] inline void k23_rows8_finish(const uint8_t* blk, int64_t b, const ActQ8_K* x,
                                                    const __m256i* isum, __m256* acc) {
  const __m256 d = rows8_f16(blk);
  __m256i offs[8];  // per pair of groups: Q3_K's scales (against its -4), Q2_K's mins
  for (int u = 0; u < 8; u++) offs[u] = Q3 ? k23_rows8_scales<Q3>(blk, u) : q2k_rows8_mins(blk, u);
  for (int j = 0; j < R; j++) {
    const int16_t* bs = x[j].bsums + 16 * b;
    __m256i o = _mm256_setzero_si256();
    for (int u = 0; u < 8; u++) o = _mm256_add_epi32(o, _mm256_madd_epi16(offs[u], rows8_bcast((const int8_t*)(bs + 2 * u))));
    const __m256 xd = _mm256_set1_ps(x[j].d[b]);
    if constexpr (Q3) {
      const __m256i total = _mm256_sub_epi32(isum[j], _mm256_slli_epi32(o, 2));
      acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(total), acc[j]);
    } else {
      acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(isum[j]), acc[j]);
      acc[j] = _mm256_fnmadd_ps(_mm256_mul_ps(rows8_f16(blk + 16), xd), _mm256_cvtepi32_ps(o), acc[j]);
    }
  }
}

// The tiles of up to 5 rows (8 under AVX-512), walking the row groups one at a time.
template <bool Q3, int R>
[[gnu::noinline]] void k23_rows8_tile(const Matrix& w, int64_t r0, int64_t r1, const ActQ8_K* x, float* y,
                    int64_t ldy) {
  constexpr size_t kBlock = k23_rows8_block<Q3>();
  const int64_t nb = w.cols / 256;
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
      for (int j = 0; j < R; j++) isum[j] = _mm256_setzero_si256();
      for (int u = 0; u < 8; u++) {  // chunk u: groups 2u, 2u + 1
        const __m256i pair = k23_rows8_scales<Q3>(blk, u);
        const K23Chunk<Q3> chunk(blk, u);
        for (int j = 0; j < R; j++) xq[j] = x[j].qs + 256 * b + 32 * u;
        rows8_unroll<0, 2>([&](auto half) {
          const __m256i sc = rows8_pair_half(pair, half);
          __m256i s16[R];
          for (int j = 0; j < R; j++) s16[j] = _mm256_setzero_si256();
          rows8_unroll<4 * decltype(half)::value, 4 * decltype(half)::value + 4>([&](auto g) {
            const __m256i v = k23_rows8_value<Q3, decltype(g)::value>(chunk);
            for (int j = 0; j < R; j++) s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(v, rows8_bcast(xq[j] + 4 * g)));
          });
          for (int j = 0; j < R; j++) isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(s16[j], sc));
        });
      }
      k23_rows8_finish<Q3, R>(blk, b, x, isum, acc);
    }
    for (int j = 0; j < R; j++) rows8_store(y + j * ldy, r, r1, acc[j]);
  }
}

// Groups 2u, 2u + 1 of one row group (the 8 k-groups of chunk u: 4 a group) against R rows
// broadcast in xb, added to isum[R] (the tall tiles): the 8 value vectors unpacked once and kept
// in registers, each row's products with the broadcast activations (memory operands) summed in
// int16 per group and folded by the group's scale, as the walk tile's.
template <bool Q3, int R>
[[gnu::always_inline]] inline void k23_rows8_tall_pair(const uint8_t* blk, int u, const Rows8Bcast<R>& xb,
                                                       __m256i* isum) {
  const __m256i pair = k23_rows8_scales<Q3>(blk, u);
  const __m256i sc[2] = {rows8_pair_half(pair, false), rows8_pair_half(pair, true)};
  __m256i v[8];
  const K23Chunk<Q3> chunk(blk, u);
  rows8_unroll<0, 8>([&](auto g) { v[g] = k23_rows8_value<Q3, decltype(g)::value>(chunk); });
  // chunk u's 32 weights of row j broadcast: xb's sub-block u, k-groups 0-7
  for (int j = 0; j < R; j++) {
    const __m256i* xv = xb.at(u, j);
    __m256i sum = isum[j];
    for (int half = 0; half < 2; half++) {
      const __m256i* xg = xv + 4 * half;
      const __m256i* vg = v + 4 * half;
      const __m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(vg[0], _mm256_load_si256(xg)),
                                         _mm256_maddubs_epi16(vg[1], _mm256_load_si256(xg + 1)));
      const __m256i c = _mm256_add_epi16(_mm256_maddubs_epi16(vg[2], _mm256_load_si256(xg + 2)),
                                         _mm256_maddubs_epi16(vg[3], _mm256_load_si256(xg + 3)));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_add_epi16(a, c), sc[half]));
    }
    isum[j] = sum;
    __asm__("" : : "m"(isum[j]));  // isum[j] lives in memory between rows, v[] in registers
  }
}

// Block b of one row group against R rows broadcast in xb, into acc[R] (the tall tiles:
// rows8_tall, from 6 rows under AVX2): chunk by chunk (k23_rows8_tall_pair), then the walk
// tile's block end. next is the block rows8_tall prefetches (some groups on), into L2 a part per chunk.
template <bool Q3, int R>
[[gnu::always_inline]] inline void k23_rows8_tall_block(const uint8_t* blk, int64_t b, const ActQ8_K* x,
                                                        const Rows8Bcast<R>& xb, __m256* acc, const uint8_t* next) {
  alignas(32) __m256i isum[R];
  for (int j = 0; j < R; j++) isum[j] = _mm256_setzero_si256();
  for (int u = 0; u < 8; u++) {
    rows8_prefetch_part<k23_rows8_block<Q3>(), 8, _MM_HINT_T1>(next, 0, u);
    k23_rows8_tall_pair<Q3, R>(blk, u, xb, isum);
  }
  k23_rows8_finish<Q3, R>(blk, b, x, isum, acc);
}

template <bool Q3, int R>
[[gnu::noinline]] void k23_rows8_tall(const Matrix& w, int64_t r0, int64_t r1, const ActQ8_K* x, float* y,
                                      int64_t ldy) {
  rows8_tall<R>(w, k23_rows8_block<Q3>(), r0, r1, x, y, ldy,
                [&](const uint8_t* blk, int64_t b, const Rows8Bcast<R>& xb, __m256* acc, const uint8_t* next) {
                  k23_rows8_tall_block<Q3, R>(blk, b, x, xb, acc, next);
                });
}

template <bool Q3, int kMax>
void k23_rows8_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                    int64_t ldy) {
  rows8_run<kMax, ActQ8_K>(
      w, r0, r1, act, stride, n, act_q8_K,
      [&](auto rc, int64_t r, int64_t r_end, const ActQ8_K* x, int64_t i0) {
        k23_rows8_tile<Q3, decltype(rc)::value>(w, r, r_end, x, y + i0 * ldy, ldy);
      },
      [&](auto rc, int64_t r, int64_t r_end, const ActQ8_K* x, int64_t i0) {
        k23_rows8_tall<Q3, decltype(rc)::value>(w, r, r_end, x, y + i0 * ldy, ldy);
      });
}

}  // namespace
}  // namespace qd::cpu

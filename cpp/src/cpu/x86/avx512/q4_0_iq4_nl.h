// AVX-512 VNNI kernels for Q4_0 and IQ4_NL against Q8_0 activations, in group order
// (group_order.h): groups of 8 blocks, each weight written w = d * u + c with u unsigned (u8
// operand of dpbusd) and c a per-block offset; then
//   sum w x = sum_lanes (d dx)_lane * dot_lane  +  sum_blocks c * s   (s = dx * sum xq)
// one FMA into a 16-lane accumulator and one into an 8-lane one per group. Blocks after the last
// whole group: pairs of blocks (b, b+1) in one vector, per pair one FMA into the 16-lane
// accumulator, an odd last block alone (upper half zero).
//
// Order per (row, column), identical for every tile height R (batch invariance): exact integer
// dot per group, the FMAs above group by group, then a fixed horizontal sum of each accumulator.
// Include rules: see x86/common.h.
#pragma once
#include <cstddef>

#include "cpu/act_layout.h"
#include "cpu/x86/avx512/group_order.h"
#include "cpu/x86/block32_weights.h"

namespace qd::cpu {
namespace {

// Weights that are qs's 4-bit nibbles alone (W::kNibbles: Q4_0), 8 blocks straight into group
// order: the qs of four blocks in one vector (low nibbles: elements 0..15 of each, high: 16..31),
// then one 2-source qword permute per group-order vector. Same values as W::unpack_u +
// to_group_order in about half the instructions.
template <class W>
inline void nibble_group(const typename W::block* blk, __m512i q[4]) {
  static_assert(W::kNibbles, "4-bit nibble blocks only");
  const __m512i m4 = _mm512_set1_epi8(15);
  __m512i lo[2], hi[2];
  for (int h = 0; h < 2; h++) {
    const typename W::block* b4 = blk + 4 * h;
    __m512i t = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)b4[0].qs));
    t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i*)b4[1].qs), 1);
    t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i*)b4[2].qs), 2);
    t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i*)b4[3].qs), 3);
    lo[h] = _mm512_and_si512(t, m4);
    hi[h] = _mm512_and_si512(_mm512_srli_epi16(t, 4), m4);
  }
  // group-order vector v: qword v of each block; block b's qwords 0, 1 are its low nibbles'
  // (qwords 2b, 2b + 1 of lo), 2, 3 its high nibbles'
  const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
  q[0] = _mm512_permutex2var_epi64(lo[0], even, lo[1]);
  q[1] = _mm512_permutex2var_epi64(lo[0], odd, lo[1]);
  q[2] = _mm512_permutex2var_epi64(hi[0], even, hi[1]);
  q[3] = _mm512_permutex2var_epi64(hi[0], odd, hi[1]);
}

// Blocks after the last whole group: block b and (when `pair`) b + 1 into acc, plus the 2-lane
// "min" accumulator for the unsigned types.
template <class W, int R>
inline void q32x2_step(const typename W::block* blk, int64_t b, bool pair, const ActQ8_0* x, __m512* acc,
                       __m128* accm) {
  const __m256i q0 = W::unpack(blk[0]);
  const __m512i q = join256(q0, pair ? W::unpack(blk[1]) : _mm256_setzero_si256());
  // lanes 0..7 scale block b, lanes 8..15 block b + 1 (zero for a lone last block)
  const __m512 dwv = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(h2f(blk[0].d))),
                                        _mm256_set1_ps(pair ? h2f(blk[1].d) : 0.f), 1);
  auto load_x = [&](const int8_t* qs) {
    return pair ? _mm512_loadu_si512((const void*)(qs + 32 * b))
                : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i*)(qs + 32 * b)));
  };
  auto load_d8 = [&](const float* d8) {
    return pair ? _mm512_loadu_ps(d8 + 8 * b) : _mm512_zextps256_ps512(_mm256_loadu_ps(d8 + 8 * b));
  };
  if constexpr (W::kSigned) {
    // u8 x s8 dot products need an unsigned operand: |q| against x with q's sign.
    const __m512i aq = _mm512_abs_epi8(q);
    const __mmask64 neg = _mm512_movepi8_mask(q);
    for (int j = 0; j < R; j++) {
      const __m512i xv = load_x(x[j].qs);
      const __m512i sx = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
      const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aq, sx);
      acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(dwv, load_d8(x[j].d8)), _mm512_cvtepi32_ps(p), acc[j]);
    }
  } else {
    const __m128 mw = _mm_setr_ps(W::m(blk[0]), pair ? W::m(blk[1]) : 0.f, 0.f, 0.f);
    for (int j = 0; j < R; j++) {
      const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, load_x(x[j].qs));
      acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(dwv, load_d8(x[j].d8)), _mm512_cvtepi32_ps(p), acc[j]);
      const __m128 s2 = pair ? _mm_castpd_ps(_mm_load_sd((const double*)(x[j].sm + b))) : _mm_load_ss(x[j].sm + b);
      accm[j] = _mm_fmadd_ps(mw, s2, accm[j]);
    }
  }
}

template <class W, int R>
void q32g_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 32, ng = w.cols / 256;
  ActQ8_0 x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_0(act + (size_t)j * stride, w.cols);
  static_assert(offsetof(typename W::block, d) == 0, "the gather reads d (and m) at the block start");
  const int bs = (int)sizeof(typename W::block);
  const __m256i block_offsets = _mm256_setr_epi32(0, bs, 2 * bs, 3 * bs, 4 * bs, 5 * bs, 6 * bs, 7 * bs);
  auto body = [&](auto, int64_t r, int64_t g0, int64_t g1, bool first, bool last, __m512 (*sts)[3][R]) {
    __m512(*st)[R] = sts[0];
    const typename W::block* wb = (const typename W::block*)(w.data + (size_t)r * w.row_bytes);
    const uint8_t* ahead = prefetch_row<R>(w, r);
    __m512 acc[R];
    __m256 acco[R];
    __m128 accm[R];
    for (int j = 0; j < R; j++) {
      acc[j] = first ? _mm512_setzero_ps() : st[0][j];
      acco[j] = first ? _mm256_setzero_ps() : _mm512_castps512_ps256(st[1][j]);
      accm[j] = first ? _mm_setzero_ps() : _mm512_castps512_ps128(st[2][j]);
    }
    for (int64_t g = g0; g < g1; g++) {
      const typename W::block* blk = wb + 8 * g;
      if (ahead) prefetch_range(ahead + 8 * g * sizeof(*blk), 8 * sizeof(*blk));
      __m512i q[1][4];
      if constexpr (W::kNibbles) {
        nibble_group<W>(blk, q[0]);
      } else {
        __m256i u[8];
        for (int b = 0; b < 8; b++) u[b] = W::unpack_u(blk[b]);
        to_group_order(u, q[0]);
      }
      // d (and m, stored right after it) of the 8 blocks in one gather: no scalar stores that a
      // vector load would have to wait for
      const __m256i dm = _mm256_i32gather_epi32((const int*)blk, block_offsets, 1);
      const __m256 dw = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm));
      const __m512 wd = per_block_lanes(dw);
      const __m256 wc = W::kHasM ? _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16)))
                                 : _mm256_mul_ps(dw, _mm256_set1_ps(W::kOffset));
      for (int j = 0; j < R; j++) {
        __m512i sumi;
        group_dots<1>(q, x[j].qsg + 256 * g, _mm512_setzero_si512(), &sumi);
        const __m512 scale = _mm512_mul_ps(wd, _mm512_loadu_ps(x[j].d2 + 16 * g));
        acc[j] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(sumi), acc[j]);
        acco[j] = _mm256_fmadd_ps(wc, _mm256_loadu_ps((W::kHasM ? x[j].sm : x[j].s) + 8 * g), acco[j]);
      }
    }
    if (last) {  // blocks after the last whole group, then the row's outputs
      int64_t b = 8 * ng;
      for (; b + 2 <= nb; b += 2) q32x2_step<W, R>(wb + b, b, true, x, acc, accm);
      if (b < nb) q32x2_step<W, R>(wb + b, b, false, x, acc, accm);
      for (int j = 0; j < R; j++) {  // one horizontal sum: short rows (896 wide) pay it often
        const __m256 o = _mm256_add_ps(acco[j], _mm256_zextps128_ps256(accm[j]));
        y[j * ldy + r] = hsum512(_mm512_add_ps(acc[j], _mm512_zextps256_ps512(o)));
      }
      return;
    }
    for (int j = 0; j < R; j++) {
      st[0][j] = acc[j];
      st[1][j] = _mm512_castps256_ps512(acco[j]);
      st[2][j] = _mm512_castps128_ps512(accm[j]);
    }
  };
  column_blocked<3, R, 1>(r0, r1, ng, body);
}

template <class Tag, class W>
void q32g_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
               int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    q32g_tile<W, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

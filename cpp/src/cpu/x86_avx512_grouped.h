// AVX-512 VNNI kernels over groups of 256 weights in "group order" (see act_layout.h): every
// 32-bit lane of a dot product stays within one 32-weight block, so a group costs 4 VNNI dot
// products and one scale multiply per activation row, whatever the block type.
//
//   32-blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL), groups of 8 blocks: each weight is written
//     w = d * u + c with u unsigned (u8 operand of dpbusd) and c a per-block offset; then
//       sum w x = sum_lanes (d dx)_lane * dot_lane  +  sum_blocks c * s   (s = dx * sum xq)
//     one FMA into a 16-lane accumulator and one into an 8-lane one per group. Blocks after the
//     last whole group go through q32x2_step (x86_avx512.h).
//   Q4_K: a super-block is one group (its 8 sub-blocks); scales per lane, mins through dsums.
//   Q6_K: a super-block is one group of 16 x 16 weights ("group-of-16 order"); the -32 offset
//     through dsums.
//
// Order per (row, column), identical for every tile height R (batch invariance): exact integer
// dot per group, the FMAs above group by group, then a fixed horizontal sum of each accumulator.
// Include only from kernels_isa_avx512.cpp (rules in x86_common.h).
#pragma once
#include <cstddef>

#include "cpu/x86_avx512.h"
#include "cpu/x86_kquants.h"

namespace qd::cpu {
namespace {

// 8 blocks of 32 bytes in plain order -> 4 vectors in group order: out[v] holds qword v of
// block 0, qword v of block 1, ..., qword v of block 7.
inline void to_group_order(const __m256i y[8], __m512i out[4]) {
  const __m512i za = join256(y[0], y[1]), zb = join256(y[2], y[3]);
  const __m512i zc = join256(y[4], y[5]), zd = join256(y[6], y[7]);
  for (int v0 = 0; v0 < 4; v0 += 2) {
    const __m512i idx = _mm512_setr_epi64(v0, 4 + v0, 8 + v0, 12 + v0, v0 + 1, 5 + v0, 9 + v0, 13 + v0);
    const __m512i lo = _mm512_permutex2var_epi64(za, idx, zb);  // blocks 0..3: qword v0, then v0 + 1
    const __m512i hi = _mm512_permutex2var_epi64(zc, idx, zd);  // blocks 4..7
    out[v0] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
    out[v0 + 1] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2));
  }
}

// Lane 2b and 2b + 1 of the result = v[b]: the per-block value for every lane of block b.
inline __m512 per_block_lanes(__m256 v) {
  const __m512i idx = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(v));
}

// sum over the group of u * x -> 16 int32 lanes, lane 2b + h within block b (exact).
inline __m512i group_dot(const __m512i q[4], const int8_t* xg) {
  __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[0], _mm512_loadu_si512((const void*)xg));
  s = _mm512_dpbusd_epi32(s, q[1], _mm512_loadu_si512((const void*)(xg + 64)));
  s = _mm512_dpbusd_epi32(s, q[2], _mm512_loadu_si512((const void*)(xg + 128)));
  return _mm512_dpbusd_epi32(s, q[3], _mm512_loadu_si512((const void*)(xg + 192)));
}

// Walks weight rows [r0, r1) in blocks of kRowBlock and their units (groups / super-blocks) in
// blocks of kColBlock, so that the activation rows' slice for one column block stays in L1 while
// kRowBlock weight rows use it (long rows, e.g. ffn_down's 8960 columns, would otherwise stream
// all R activation rows from L2 for every weight row). Each (weight row, activation row) keeps
// its accumulators across column blocks, so the FMA sequence into every accumulator is exactly
// that of an unblocked loop: blocking never changes a result bit.
constexpr int64_t kRowBlock = 16, kColBlock = 8;

// body(r, u0, u1, first, last, st): units [u0, u1) of weight row r; starts from zero when
// `first` (else from st), writes the row's outputs when `last` (else saves to st). One column
// block (short rows) never touches st.
template <int NAcc, int R, class Body>
inline void column_blocked(int64_t r0, int64_t r1, int64_t n_units, Body&& body) {
  alignas(64) __m512 st[kRowBlock][NAcc][R];
  // Activation rows that fit L1 whole (about 256 bytes of them per unit and row): keep the
  // weight rows streaming in order.
  const int64_t col_block = R * n_units * 256 <= (24 << 10) ? n_units : kColBlock;
  for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
    const int64_t re = rb + kRowBlock < r1 ? rb + kRowBlock : r1;
    int64_t u0 = 0;
    do {  // at least once: a row with no whole unit still has its tail
      const int64_t u1 = u0 + col_block < n_units ? u0 + col_block : n_units;
      for (int64_t r = rb; r < re; r++) body(r, u0, u1, u0 == 0, u1 == n_units, st[r - rb]);
      u0 = u1;
    } while (u0 < n_units);
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
  auto body = [&](int64_t r, int64_t g0, int64_t g1, bool first, bool last, __m512 (*st)[R]) {
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
      __m256i u[8];
      for (int b = 0; b < 8; b++) u[b] = W::unpack_u(blk[b]);
      __m512i q[4];
      to_group_order(u, q);
      // d (and m, stored right after it) of the 8 blocks in one gather: no scalar stores that a
      // vector load would have to wait for
      const __m256i dm = _mm256_i32gather_epi32((const int*)blk, block_offsets, 1);
      const __m256 dw = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm));
      const __m512 wd = per_block_lanes(dw);
      const __m256 wc = W::kHasM ? _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16)))
                                 : _mm256_mul_ps(dw, _mm256_set1_ps(W::kOffset));
      for (int j = 0; j < R; j++) {
        const __m512i sumi = group_dot(q, x[j].qsg + 256 * g);
        const __m512 scale = _mm512_mul_ps(wd, _mm512_loadu_ps(x[j].d2 + 16 * g));
        acc[j] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(sumi), acc[j]);
        acco[j] = _mm256_fmadd_ps(wc, _mm256_loadu_ps(x[j].s + 8 * g), acco[j]);
      }
    }
    if (last) {  // blocks after the last whole group, then the row's outputs
      int64_t b = 8 * ng;
      for (; b + 2 <= nb; b += 2) q32x2_step<W, R>(wb + b, b, true, x, acc, accm);
      if (b < nb) q32x2_step<W, R>(wb + b, b, false, x, acc, accm);
      for (int j = 0; j < R; j++) y[j * ldy + r] = hsum512(acc[j]) + hsum(acco[j]) + hsum128(accm[j]);
      return;
    }
    for (int j = 0; j < R; j++) {
      st[0][j] = acc[j];
      st[1][j] = _mm512_castps256_ps512(acco[j]);
      st[2][j] = _mm512_castps128_ps512(accm[j]);
    }
  };
  column_blocked<3, R>(r0, r1, ng, body);
}

template <class Tag, class W>
void q32g_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
               int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    q32g_tile<W, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

template <int R>
void q4kg_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  const __m256i m4 = _mm256_set1_epi8(15);
  const __m128i pairs_lo = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m128i pairs_hi = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  auto body = [&](int64_t r, int64_t b0, int64_t b1, bool first, bool last, __m512 (*st)[R]) {
    const quant::block_q4_K* wb = (const quant::block_q4_K*)(w.data + (size_t)r * w.row_bytes);
    const uint8_t* ahead = prefetch_row<R>(w, r);
    __m512 acc[R], accm[R];
    for (int j = 0; j < R; j++) {
      acc[j] = first ? _mm512_setzero_ps() : st[0][j];
      accm[j] = first ? _mm512_setzero_ps() : st[1][j];
    }
    for (int64_t b = b0; b < b1; b++) {
      const quant::block_q4_K& blk = wb[b];
      if (ahead) prefetch_range(ahead + b * sizeof(blk), sizeof(blk));
      const __m128i sm128 = q4k_scales_mins_v(blk.scales);
      __m256i u[8];  // sub-block s: low nibbles of qs[32 (s/2) ..] for even s, high for odd s
      for (int m = 0; m < 4; m++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i*)(blk.qs + 32 * m));
        u[2 * m] = _mm256_and_si256(bits, m4);
        u[2 * m + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
      }
      __m512i q[4];
      to_group_order(u, q);
      // lanes 2s, 2s + 1: d * sc_s; dsums groups 2s, 2s + 1: dmin * m_s
      const __m512 wsc = _mm512_mul_ps(_mm512_set1_ps(h2f(blk.d)),
                                       _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_shuffle_epi8(sm128, pairs_lo))));
      const __m512 wmin = _mm512_mul_ps(_mm512_set1_ps(h2f(blk.dmin)),
                                        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_shuffle_epi8(sm128, pairs_hi))));
      for (int j = 0; j < R; j++) {
        const __m512i sumi = group_dot(q, x[j].qsg + 256 * b);
        acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(wsc, _mm512_set1_ps(x[j].d[b])), _mm512_cvtepi32_ps(sumi), acc[j]);
        accm[j] = _mm512_fmadd_ps(wmin, _mm512_loadu_ps(x[j].dsums + 16 * b), accm[j]);
      }
    }
    if (last) {
      for (int j = 0; j < R; j++) y[j * ldy + r] = hsum512(acc[j]) - hsum512(accm[j]);
      return;
    }
    for (int j = 0; j < R; j++) {
      st[0][j] = acc[j];
      st[1][j] = accm[j];
    }
  };
  column_blocked<2, R>(r0, r1, nb, body);
}

template <class Tag>
void q4kg_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
               int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    q4kg_tile<decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

// 4 vectors of 64 plain-order weights -> group-of-16 order (act_layout.h): a 4x4 transpose of
// 32-bit words inside each 128-bit lane.
inline void to_group16_order(const __m512i z[4], __m512i out[4]) {
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpacklo_epi32(z[2], z[3]);
  const __m512i t2 = _mm512_unpackhi_epi32(z[0], z[1]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t1);
  out[1] = _mm512_unpackhi_epi64(t0, t1);
  out[2] = _mm512_unpacklo_epi64(t2, t3);
  out[3] = _mm512_unpackhi_epi64(t2, t3);
}

template <int R>
void q6kg_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
  const __m128i sigma = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  auto body = [&](int64_t r, int64_t b0, int64_t b1, bool first, bool last, __m512 (*st)[R]) {
    const quant::block_q6_K* wb = (const quant::block_q6_K*)(w.data + (size_t)r * w.row_bytes);
    const uint8_t* ahead = prefetch_row<R>(w, r);
    __m512 acc[R], acco[R];
    for (int j = 0; j < R; j++) {
      acc[j] = first ? _mm512_setzero_ps() : st[0][j];
      acco[j] = first ? _mm512_setzero_ps() : st[1][j];
    }
    for (int64_t b = b0; b < b1; b++) {
      const quant::block_q6_K& blk = wb[b];
      if (ahead) prefetch_range(ahead + b * sizeof(blk), sizeof(blk));
      __m512i z[4];  // plain order, 64 weights each (see x86_kquants.h for the bit layout)
      for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i*)(blk.ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i*)(blk.ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i*)(blk.qh + 32 * h));
        const __m256i c0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
        const __m256i c1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
        const __m256i c2 =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
        const __m256i c3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
        z[2 * h] = join256(c0, c1);
        z[2 * h + 1] = join256(c2, c3);
      }
      __m512i q[4];
      to_group16_order(z, q);
      const __m128i sc8 = _mm_loadu_si128((const __m128i*)blk.scales);
      const float dw = h2f(blk.d);
      const __m512 wsc = _mm512_mul_ps(_mm512_set1_ps(dw),
                                       _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_shuffle_epi8(sc8, sigma))));
      // the -32 offset: -32 * d * sc_g per group g (plain order), against the activations' d * bsums
      const __m512 woff = _mm512_mul_ps(_mm512_set1_ps(-32.f * dw), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc8)));
      for (int j = 0; j < R; j++) {
        const __m512i sumi = group_dot(q, x[j].qsg16 + 256 * b);
        acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(wsc, _mm512_set1_ps(x[j].d[b])), _mm512_cvtepi32_ps(sumi), acc[j]);
        acco[j] = _mm512_fmadd_ps(woff, _mm512_loadu_ps(x[j].dsums + 16 * b), acco[j]);
      }
    }
    if (last) {
      for (int j = 0; j < R; j++) y[j * ldy + r] = hsum512(acc[j]) + hsum512(acco[j]);
      return;
    }
    for (int j = 0; j < R; j++) {
      st[0][j] = acc[j];
      st[1][j] = acco[j];
    }
  };
  column_blocked<2, R>(r0, r1, nb, body);
}

template <class Tag>
void q6kg_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
               int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    q6kg_tile<decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

template <class Tag>
void add_avx512_grouped_kernels(KernelTable& t) {
  using quant::Type;
  auto set = [&](Type type, GemmRowsFn fn, ActFormat act) { t.gemm[(uint32_t)type] = {fn, act}; };
  set(Type::Q4_0, q32g_gemm<Tag, WQ4_0>, ActFormat::q8_0);
  set(Type::Q4_1, q32g_gemm<Tag, WQ4_1>, ActFormat::q8_0);
  set(Type::Q5_0, q32g_gemm<Tag, WQ5_0>, ActFormat::q8_0);
  set(Type::Q5_1, q32g_gemm<Tag, WQ5_1>, ActFormat::q8_0);
  set(Type::Q8_0, q32g_gemm<Tag, WQ8_0>, ActFormat::q8_0);
  set(Type::IQ4_NL, q32g_gemm<Tag, WIQ4_NL>, ActFormat::q8_0);
  set(Type::Q4_K, q4kg_gemm<Tag>, ActFormat::q8_K);
  set(Type::Q6_K, q6kg_gemm<Tag>, ActFormat::q8_K);
}

}  // namespace
}  // namespace qd::cpu

// AVX-512 VNNI kernels over groups of 256 weights in "group order" (see act_layout.h): every
// 32-bit lane of a dot product stays within one 32-weight block, so a group costs 4 VNNI dot
// products and one scale multiply per activation row, whatever the block type.
//
// (Q4_1, Q5_1, Q5_0, Q8_0 and the K-quants but Q2_K take llama.cpp's own orders instead:
// x86_avx512_lane8.h, x86_avx512_krows.h, which use the unpacking helpers here.)
//
//   32-blocks (Q4_0, IQ4_NL), groups of 8 blocks: each weight is written
//     w = d * u + c with u unsigned (u8 operand of dpbusd) and c a per-block offset; then
//       sum w x = sum_lanes (d dx)_lane * dot_lane  +  sum_blocks c * s   (s = dx * sum xq)
//     one FMA into a 16-lane accumulator and one into an 8-lane one per group. Blocks after the
//     last whole group go through q32x2_step (x86_avx512.h).
//   Q2_K (k16g_tile): a super-block is one group of 16 x 16 weights ("group-of-16 order"); its
//     mins through dsums.
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

// The 4-bit nibble types (Q4_0, Q4_1), 8 blocks straight into group order: the qs of four
// blocks in one vector (low nibbles: elements 0..15 of each, high: 16..31), then one 2-source
// qword permute per group-order vector. Same values as W::unpack_u + to_group_order in about
// half the instructions. (Q5_0 / Q5_1 keep the per-block path: their 5th bits as masks for these
// vectors cost as much as the rest saves, whether the masks are built with vector, scalar or
// store-and-load steps; measured.)
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

// Lane 2b and 2b + 1 of the result = v[b]: the per-block value for every lane of block b.
inline __m512 per_block_lanes(__m256 v) {
  const __m512i idx = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(v));
}

// sum over the group of u * x -> 16 int32 lanes, lane 2b + h within block b (exact), for NW
// weight rows at once, each activation vector loaded once for all of them. `init` starts the
// sums (Q6_K's integer offset).
template <int NW>
__attribute__((always_inline)) inline void group_dots(const __m512i q[][4], const int8_t* xg, __m512i init,
                                                      __m512i out[NW]) {
  #pragma GCC unroll 2
  for (int i = 0; i < NW; i++) out[i] = init;
  for (int v = 0; v < 4; v++) {
    const __m512i xv = _mm512_loadu_si512((const void*)(xg + 64 * v));
    #pragma GCC unroll 2
    for (int i = 0; i < NW; i++) out[i] = _mm512_dpbusd_epi32(out[i], q[i][v], xv);
  }
}

// Walks weight rows [r0, r1) in blocks of kRowBlock and their units (groups / super-blocks) in
// blocks of kColBlock, so that the activation rows' slice for one column block stays in L1 while
// kRowBlock weight rows use it (long rows, e.g. ffn_down's 8960 columns, would otherwise stream
// all R activation rows from L2 for every weight row). Each (weight row, activation row) keeps
// its accumulators across column blocks, so the FMA sequence into every accumulator is exactly
// that of an unblocked loop: blocking never changes a result bit.
constexpr int64_t kRowBlock = 16, kColBlock = 8;

// body(nw, r, u0, u1, first, last, st): units [u0, u1) of the nw weight rows r, r + 1, ...
// (nw an integral_constant, NW at a time and 1 for a last odd row); starts from zero when
// `first` (else from st[i] for row r + i), writes the rows' outputs when `last` (else saves to
// st). One column block (short rows) never touches st. Several weight rows at a time share each
// activation load: with 8 activation rows the kernels are bound by those loads as much as by
// the dot products. Every (row, column) sees the same operations whatever nw is.
template <int NAcc, int R, int NW, class Body>
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
      int64_t r = rb;
      for (; r + NW <= re; r += NW)
        body(std::integral_constant<int, NW>{}, r, u0, u1, u0 == 0, u1 == n_units, &st[r - rb]);
      for (; r < re; r++) body(std::integral_constant<int, 1>{}, r, u0, u1, u0 == 0, u1 == n_units, &st[r - rb]);
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

// Q4_K: the 128 bytes of nibbles as two 512-bit vectors; low nibbles of bytes 0..63 hold
// sub-blocks 0 and 2, high nibbles 1 and 3 (4..7 likewise from bytes 64..127).
inline void q4k_group_order(const uint8_t* qs, __m512i q[4]) {
  const __m512i m4 = _mm512_set1_epi8(15);
  const __m512i z0 = _mm512_loadu_si512((const void*)qs), z1 = _mm512_loadu_si512((const void*)(qs + 64));
  const __m512i s[4] = {_mm512_and_si512(z0, m4), _mm512_and_si512(_mm512_srli_epi16(z0, 4), m4),
                        _mm512_and_si512(z1, m4), _mm512_and_si512(_mm512_srli_epi16(z1, 4), m4)};
  // qword v of sub-block 0, 1, 2, 3 in (s[0], s[1]) sits at v, 8 + v, 4 + v, 12 + v
  for (int v0 = 0; v0 < 4; v0 += 2) {
    const __m512i idx = _mm512_setr_epi64(v0, 8 + v0, 4 + v0, 12 + v0, v0 + 1, 9 + v0, 5 + v0, 13 + v0);
    const __m512i lo = _mm512_permutex2var_epi64(s[0], idx, s[1]);  // sub-blocks 0..3
    const __m512i hi = _mm512_permutex2var_epi64(s[2], idx, s[3]);  // sub-blocks 4..7
    q[v0] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
    q[v0 + 1] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2));
  }
}

// The start and end of a K-quant body over NW weight rows from r: their blocks and prefetch
// pointers, accumulators from zero (first column block) or from the saved state; at the end the
// outputs (last column block) or the state.
template <class Block, int NW, int R>
inline void k_rows_start(const Matrix& w, int64_t r, bool first, __m512 (*st)[1][R], const Block* wb[NW],
                         const uint8_t* ahead[NW], __m512 acc[NW][R]) {
  #pragma GCC unroll 2
  for (int i = 0; i < NW; i++) {
    wb[i] = (const Block*)(w.data + (size_t)(r + i) * w.row_bytes);
    ahead[i] = prefetch_row<R, NW>(w, r + i);
    for (int j = 0; j < R; j++) acc[i][j] = first ? _mm512_setzero_ps() : st[i][0][j];
  }
}

template <int NW, int R>
inline void k_rows_finish(bool last, __m512 acc[NW][R], __m512 (*st)[1][R], float* y, int64_t ldy, int64_t r) {
  #pragma GCC unroll 2
  for (int i = 0; i < NW; i++) {
    for (int j = 0; j < R; j++) {
      if (last) {
        y[j * ldy + r + i] = hsum512(acc[i][j]);
      } else {
        st[i][0][j] = acc[i][j];
      }
    }
  }
}

// Bit s of the 8 bytes qh[8v .. 8v + 7] (s = the qword lane) as a byte mask over a group-order
// vector v: the fifth bits of Q5_K.
inline __mmask64 q5k_high_bits(const uint8_t* qh, int v) {
  const __m512i lane_bit = _mm512_setr_epi64(0x0101010101010101LL, 0x0202020202020202LL, 0x0404040404040404LL,
                                             0x0808080808080808LL, 0x1010101010101010LL, 0x2020202020202020LL,
                                             0x4040404040404040LL, (long long)0x8080808080808080ULL);
  uint64_t bytes;
  std::memcpy(&bytes, qh + 8 * v, 8);
  return _mm512_test_epi8_mask(_mm512_set1_epi64((long long)bytes), lane_bit);
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

// Q6_K's 6-bit weights of one super-block in plain order, 64 per vector (x86_kquants.h has the
// bit layout): half h = bytes 64h.. of ql (low nibbles: weights 128h + 0..63, high: + 64..127)
// and the 2-bit fields of qh[32h..], shifted by 4 and 2 (then 0 and -2) for the two 32-byte halves.
inline void q6k_plain(const quant::block_q6_K& blk, __m512i z[4]) {
  const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
  const __m512i shl = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
  const __m512i shr = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
  for (int h = 0; h < 2; h++) {
    const __m512i l = _mm512_loadu_si512((const void*)(blk.ql + 64 * h));
    const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)(blk.qh + 32 * h)));
    z[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_sllv_epi64(hb, shl), m30));
    z[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                   _mm512_and_si512(_mm512_srlv_epi64(hb, shr), m30));
  }
}

// The K-quants with 16 groups of 16, one super-block = one group in group-of-16 order (Q2_K here;
// Q6_K and Q3_K in x86_avx512_krows.h): unpack() gives the unsigned weights u and wsc (lane p: the
// float scale of group sigma(p)); a shift that made them unsigned would enter exactly, as the
// integer start of each group's dot product (offset(): a multiple of the activations' -32 * bsums,
// osg16); mins as wmin (lane g: dmin m_g, plain order) against dsums, subtracted from the same
// accumulator.
inline __m512 sigma_scales(__m128i sc8, float d) {
  const __m128i sigma = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_shuffle_epi8(sc8, sigma))));
}

// The low 2 bits of Q2_K/Q3_K in plain order, 64 per vector: z[2h] = fields 0, 1 of qs[32h..],
// z[2h + 1] = fields 2, 3 (the 32-byte halves of each vector).
inline void low2_plain(const uint8_t* qs, __m512i z[4]) {
  const __m512i m3 = _mm512_set1_epi8(3);
  const __m512i sh01 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2), sh23 = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
  for (int h = 0; h < 2; h++) {
    const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)(qs + 32 * h)));
    z[2 * h] = _mm512_and_si512(_mm512_srlv_epi64(bits, sh01), m3);
    z[2 * h + 1] = _mm512_and_si512(_mm512_srlv_epi64(bits, sh23), m3);
  }
}

struct G16Q2K {  // w = d sc_g u - dmin m_g
  using Block = quant::block_q2_K;
  static constexpr bool kMins = true;
  template <int R>
  static constexpr int kWeightRows = 1;
  static void unpack(const Block& blk, __m512i q[4], __m512& wsc, __m512& wmin) {
    __m512i z[4];
    low2_plain(blk.qs, z);
    to_group16_order(z, q);
    const __m128i m4 = _mm_set1_epi8(15), bytes = _mm_loadu_si128((const __m128i*)blk.scales);
    wsc = sigma_scales(_mm_and_si128(bytes, m4), h2f(blk.d));
    wmin = _mm512_mul_ps(_mm512_set1_ps(h2f(blk.dmin)),
                         _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(bytes, 4), m4))));
  }
  static __m512i offset(const int32_t*) { return _mm512_setzero_si512(); }
};

template <class W, int R>
void k16g_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  using Block = typename W::Block;
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  auto body = [&](auto nw, int64_t r, int64_t b0, int64_t b1, bool first, bool last, __m512 (*st)[1][R]) {
    constexpr int NW = decltype(nw)::value;
    const Block* wb[NW];
    const uint8_t* ahead[NW];
    __m512 acc[NW][R];
    k_rows_start<Block, NW, R>(w, r, first, st, wb, ahead, acc);
    for (int64_t b = b0; b < b1; b++) {
      __m512i q[NW][4];
      __m512 wsc[NW], wmin[NW];
      #pragma GCC unroll 2
      for (int i = 0; i < NW; i++) {
        const Block& blk = wb[i][b];
        if (ahead[i]) prefetch_range(ahead[i] + b * sizeof(blk), sizeof(blk));
        W::unpack(blk, q[i], wsc[i], wmin[i]);
      }
      for (int j = 0; j < R; j++) {
        __m512i sumi[NW];
        group_dots<NW>(q, x[j].qsg16 + 256 * b, W::offset(x[j].osg16 + 16 * b), sumi);
        const __m512 dx = _mm512_set1_ps(x[j].d[b]);
        #pragma GCC unroll 2
        for (int i = 0; i < NW; i++) {
          acc[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(wsc[i], dx), _mm512_cvtepi32_ps(sumi[i]), acc[i][j]);
          if constexpr (W::kMins) acc[i][j] = _mm512_fnmadd_ps(wmin[i], _mm512_loadu_ps(x[j].dsums + 16 * b), acc[i][j]);
        }
      }
    }
    k_rows_finish<NW, R>(last, acc, st, y, ldy, r);
  };
  column_blocked<1, R, W::template kWeightRows<R>>(r0, r1, nb, body);
}

template <class Tag, class W>
void k16g_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
               int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    k16g_tile<W, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

template <class Tag>
void add_avx512_grouped_kernels(KernelTable& t) {
  using quant::Type;
  auto set = [&](Type type, GemmRowsFn fn, ActFormat act) { t.gemm[(uint32_t)type] = {fn, act}; };
  set(Type::Q4_0, q32g_gemm<Tag, WQ4_0>, ActFormat::q8_0);
  set(Type::IQ4_NL, q32g_gemm<Tag, WIQ4_NL>, ActFormat::q8_0);
  set(Type::Q2_K, k16g_gemm<Tag, G16Q2K>, ActFormat::q8_K);
}

}  // namespace
}  // namespace qd::cpu

// AVX-512 VNNI building blocks over groups of 256 weights in "group order" (see act_layout.h):
// every 32-bit lane of a dot product stays within one 32-weight block, so a group costs 4 VNNI dot
// products and one scale multiply per activation row, whatever the block type; and the
// "group-of-16 order" of the K-quants with 16 scales per super-block. Used by q4_0_iq4_nl.h,
// q2_k.h and k_quants.h. Include rules: see x86/common.h.
#pragma once
#include <cstddef>

#include "cpu/x86/avx512/common.h"
#include "cpu/x86/block32_weights.h"
#include "cpu/x86/k_quant_weights.h"

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

// Q6_K's 6-bit weights of one super-block in plain order, 64 per vector (x86/k_quant_weights.h has the
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
// Q6_K and Q3_K in k_quants.h): unpack() gives the unsigned weights u and wsc (lane p: the
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

}  // namespace
}  // namespace qd::cpu

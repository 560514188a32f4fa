// AVX-512 VNNI kernels for Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS against Q8_K activations. Q4_K, Q5_K
// and Q6_K take the order llama.cpp's prompt path computes them in on x86, so that models made of
// these types match it bit for bit; Q3_K and IQ4_XS take the tiled order:
//
//   Q4_K (ggml_gemm_q4_K_8x8_q8_K, the repacked GEMM): per super-block and pair of sub-blocks
//        sb = (2k, 2k + 1), the exact integers I = sc_2k dot_2k + sc_2k+1 dot_2k+1 and
//        M = m_2k bsum_2k + m_2k+1 bsum_2k+1, then
//          acc  = fma(float(I), d_w * d_x, acc),   accm = fma(float(M), dmin_w * d_x, accm)
//        and the output acc - accm.
//   Q6_K, Q5_K (the tiled K-quant matmul, taken from 8 rows up): per super-block the exact
//        integers s1 = sum_g sc_g dot_g (Q6_K: groups of 16, weights minus 32; Q5_K: sub-blocks of
//        32) and, with mins, s2 = sum_s m_s bsum_s, then
//          acc = fma(fnmadd(dmin_w, float(s2), float(s1) * d_w), d_x, acc).
//
// Vector lanes are weight rows (16 per block), as in llama.cpp's kernels: each row's weights are
// dotted with the activations in 32-bit lanes (group order, group_order.h), and
// the lanes of four rows at a time are summed by a transposing reduction that leaves one row per
// lane. Every (row, column) sees the same operations whatever the tile height R and whichever
// rows share its block (batch invariance). Include rules: see x86/common.h.
#pragma once
#include "cpu/act_layout.h"
#include "cpu/x86/avx512/group_order.h"

namespace qd::cpu {
namespace {

constexpr int kRowLanes = 16;

// Four rows' 16-lane vectors -> one vector whose 128-bit chunk k holds, for rows 0..3 of the
// four, the sum of their lanes 4k..4k+3.
inline __m512i quad_sums(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
  const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
  const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

// The 4x4 transpose of 128-bit chunks: out[k] chunk q = w[q] chunk k (lane 4q + i: row 4q + i).
inline void chunk_transpose(const __m512i w[4], __m512i out[4]) {
  const __m512i a = _mm512_shuffle_i32x4(w[0], w[1], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i b = _mm512_shuffle_i32x4(w[2], w[3], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i c = _mm512_shuffle_i32x4(w[0], w[1], _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i d = _mm512_shuffle_i32x4(w[2], w[3], _MM_SHUFFLE(3, 2, 3, 2));
  out[0] = _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  out[1] = _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  out[2] = _mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(2, 0, 2, 0));
  out[3] = _mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(3, 1, 3, 1));
}

// One super-block of four weight rows, unpacked into registers for every activation row.
struct KQuad {
  __m512i q[4][4];  // weights, group order (Q4_K) or group-of-16 order (Q6_K)
  __m512i sc[4];    // per lane: the integer scale of the lane's sub-block / group
  __m512i mn;       // Q4_K: 128-bit chunk t holds row t's 8 mins as int16
};

// Q4_K's 12 packed bytes of 6-bit scales and mins -> bytes sc0..7, m0..7, for the four rows whose
// scale fields are the 128-bit chunks of v (each chunk's last 4 bytes ignored): ggml's
// get_scale_min_k4 unpacking, on 32-bit words w0, w1, w2 of each chunk.
inline __m512i q4k_scales_mins_x4(__m512i v) {
  const __m512i k3 = _mm512_set1_epi32(0x03030303);
  const __m512i p = _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)_MM_SHUFFLE(2, 1, 2, 0));  // w0, w2, w1, w2
  const __m512i q = _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)_MM_SHUFFLE(1, 1, 0, 0));  // w0, w0, w1, w1
  // out0 = w0 & k1, out2 = w1 & k1, out1 = (w2 & k2) | ((w0 >> 6) & k3) << 4,
  // out3 = ((w2 >> 4) & k2) | ((w1 >> 6) & k3) << 4
  const __m512i lo_mask = _mm512_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f,
                                            0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f,
                                            0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
  const __m512i shift = _mm512_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4);
  const __m512i lo = _mm512_and_si512(_mm512_srlv_epi32(p, shift), lo_mask);
  const __m512i hi = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(q, 6), k3), 4);
  return _mm512_mask_or_epi32(lo, 0xAAAA, lo, hi);
}

// Row t's scales as int32 lanes in group order (lanes 2s, 2s + 1: scale s), from the bytes of
// q4k_scales_mins_x4: row t's chunk in all four chunks, then in chunk c byte 2c + i / 2 to lane i.
template <int T>
inline __m512i q4k_lane_scales(__m512i sm) {
  const char z = (char)0x80;  // pshufb: a zero byte
  const __m512i idx = _mm512_set_epi8(z, z, z, 7, z, z, z, 7, z, z, z, 6, z, z, z, 6, z, z, z, 5, z, z, z, 5,
                                      z, z, z, 4, z, z, z, 4, z, z, z, 3, z, z, z, 3, z, z, z, 2, z, z, z, 2,
                                      z, z, z, 1, z, z, z, 1, z, z, z, 0, z, z, z, 0);
  return _mm512_shuffle_epi8(_mm512_shuffle_i32x4(sm, sm, T * 0x55), idx);
}

// Q4_K and Q5_K: scales and mins from the 12 packed bytes, weights in group order (Q5_K: plus 16
// where its fifth bit is set).
template <class Block>
inline void q4k_like_unpack4(const Block* const* blk, KQuad& u) {
  __m512i raw = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)blk[0]->scales));
  raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i*)blk[1]->scales), 1);
  raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i*)blk[2]->scales), 2);
  raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i*)blk[3]->scales), 3);
  const __m512i sm = q4k_scales_mins_x4(raw);
  for (int t = 0; t < 4; t++) q4k_group_order(blk[t]->qs, u.q[t]);
  u.sc[0] = q4k_lane_scales<0>(sm);
  u.sc[1] = q4k_lane_scales<1>(sm);
  u.sc[2] = q4k_lane_scales<2>(sm);
  u.sc[3] = q4k_lane_scales<3>(sm);
  // mins (bytes 8..15 of each chunk) as int16, in place
  const char z = (char)0x80;
  u.mn = _mm512_shuffle_epi8(sm, _mm512_broadcast_i32x4(_mm_setr_epi8(8, z, 9, z, 10, z, 11, z, 12, z, 13, z, 14, z, 15, z)));
}

// Each format: kMins (a mins term M next to the dot I), kTiled (the tiled order rather than the
// repacked GEMM's), kGroup16 (weights in group-of-16 order against qsg16, else group order against
// qsg), kMinFactor (tiled: s1 = I - kMinFactor M when nonzero, else fnmadd with dmin), start()
// (the dot products' integer start).
struct KRowsQ4K {  // the repacked GEMM's order
  using Block = quant::block_q4_K;
  static constexpr bool kMins = true, kTiled = false, kGroup16 = false;
  static constexpr int kMinFactor = 0;
  static __m512i start(const int32_t*) { return _mm512_setzero_si512(); }
  static void unpack4(const Block* const* blk, KQuad& u) { q4k_like_unpack4(blk, u); }
};

struct KRowsQ5K {  // the tiled order, with mins
  using Block = quant::block_q5_K;
  static constexpr bool kMins = true, kTiled = true, kGroup16 = false;
  static constexpr int kMinFactor = 0;
  static __m512i start(const int32_t*) { return _mm512_setzero_si512(); }
  static void unpack4(const Block* const* blk, KQuad& u) {
    q4k_like_unpack4(blk, u);
    const __m512i sixteen = _mm512_set1_epi8(16);
    for (int t = 0; t < 4; t++) {
      for (int v = 0; v < 4; v++) u.q[t][v] = _mm512_mask_add_epi8(u.q[t][v], q5k_high_bits(blk[t]->qh, v), u.q[t][v], sixteen);
    }
  }
};

struct KRowsQ6K {  // the tiled order; -32 as the integer start -32 * bsums
  using Block = quant::block_q6_K;
  static constexpr bool kMins = false, kTiled = true, kGroup16 = true;
  static constexpr int kMinFactor = 0;
  static __m512i start(const int32_t* osg16) { return _mm512_loadu_si512((const void*)osg16); }
  static void unpack4(const Block* const* blk, KQuad& u) {
    const __m128i sigma = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (int t = 0; t < 4; t++) {
      __m512i z[4];
      q6k_plain(*blk[t], z);
      to_group16_order(z, u.q[t]);
      u.sc[t] = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i*)blk[t]->scales), sigma));
    }
  }
};

struct KRowsQ3K {  // the tiled order; w = sc_g (u - 4), -4 as the integer start -4 * bsums
  using Block = quant::block_q3_K;
  static constexpr bool kMins = false, kTiled = true, kGroup16 = true;
  static constexpr int kMinFactor = 0;
  static __m512i start(const int32_t* osg16) { return _mm512_srai_epi32(_mm512_loadu_si512((const void*)osg16), 3); }
  static void unpack4(const Block* const* blk, KQuad& u) {
    const __m128i sigma = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i four = _mm512_set1_epi8(4);
    for (int t = 0; t < 4; t++) {
      __m512i z[4];
      low2_plain(blk[t]->qs, z);
      // element 32k + l has bit k of hmask[l]; z[c] holds chunks 2c, 2c + 1
      const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)blk[t]->hmask));
      for (int c = 0; c < 4; c++) {
        const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * c))), _mm256_set1_epi8((char)(2 << (2 * c))), 1);
        z[c] = _mm512_mask_add_epi8(z[c], _mm512_test_epi8_mask(hm, bit), z[c], four);
      }
      to_group16_order(z, u.q[t]);
      u.sc[t] = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(q3k_scales_v(blk[t]->scales), sigma));
    }
  }
};

struct KRowsIQ4XS {  // the tiled order; u = codebook value + 128, s1 = I - 128 M with M = sum ls bsum
  using Block = quant::block_iq4_xs;
  static constexpr bool kMins = true, kTiled = true, kGroup16 = false;
  static constexpr int kMinFactor = 128;
  static __m512i start(const int32_t*) { return _mm512_setzero_si512(); }
  static void unpack4(const Block* const* blk, KQuad& u) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    const __m512i table = _mm512_broadcast_i32x4(
        _mm_add_epi8(_mm_loadu_si128((const __m128i*)quant::kvalues_iq4nl), _mm_set1_epi8((char)128)));
    __m128i ls16[4];
    for (int t = 0; t < 4; t++) {
      const Block& b = *blk[t];
      const __m512i z0 = _mm512_loadu_si512((const void*)b.qs), z1 = _mm512_loadu_si512((const void*)(b.qs + 64));
      const __m512i lo0 = _mm512_and_si512(z0, m4), lo1 = _mm512_and_si512(z1, m4);
      const __m512i hi0 = _mm512_and_si512(_mm512_srli_epi16(z0, 4), m4), hi1 = _mm512_and_si512(_mm512_srli_epi16(z1, 4), m4);
      u.q[t][0] = _mm512_shuffle_epi8(table, _mm512_permutex2var_epi64(lo0, even, lo1));
      u.q[t][1] = _mm512_shuffle_epi8(table, _mm512_permutex2var_epi64(lo0, odd, lo1));
      u.q[t][2] = _mm512_shuffle_epi8(table, _mm512_permutex2var_epi64(hi0, even, hi1));
      u.q[t][3] = _mm512_shuffle_epi8(table, _mm512_permutex2var_epi64(hi0, odd, hi1));
      // ls_s - 32: nibble s % 2 of scales_l[s / 2], bits 2s, 2s + 1 of scales_h above it
      uint32_t l;
      std::memcpy(&l, b.scales_l, 4);
      const __m128i lo8 = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)(l & 0x0F0F0F0F)), _mm_cvtsi32_si128((int)((l >> 4) & 0x0F0F0F0F)));
      const __m128i hi16 = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16((short)b.scales_h), _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
                                         _mm_set1_epi16(3));
      ls16[t] = _mm_sub_epi16(_mm_or_si128(_mm_cvtepu8_epi16(lo8), _mm_slli_epi16(hi16, 4)), _mm_set1_epi16(32));
      // lanes 2s, 2s + 1: ls_s - 32 as int32
      u.sc[t] = _mm512_cvtepi16_epi32(_mm256_permutexvar_epi16(
          _mm256_setr_epi16(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), _mm256_castsi128_si256(ls16[t])));
    }
    // "mins": chunk t = row t's 8 scales as int16, against the sub-block sums
    u.mn = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(ls16[1], ls16[0])), _mm256_set_m128i(ls16[3], ls16[2]), 1);
  }
};

template <class K, int R>
void krows_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  using Block = typename K::Block;
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  for (int64_t rb = r0; rb < r1; rb += kRowLanes) {
    const int nr = (int)(r1 - rb < kRowLanes ? r1 - rb : kRowLanes);
    const Block* rows[kRowLanes];
    for (int i = 0; i < kRowLanes; i++) {  // past the end: the last row again (not stored)
      rows[i] = (const Block*)(w.data + (size_t)(rb + (i < nr ? i : nr - 1)) * w.row_bytes);
    }
    // The 16 rows are one contiguous stretch, read 16 ways at once, which the hardware prefetcher
    // does not follow. Each row's super-block kAhead ahead is prefetched into L1, and the next
    // block's stretch a slice per super-block: into L1 when it fits there (short rows), else L2.
    constexpr int64_t kAhead = 8;
    const uint8_t* here = w.data + (size_t)rb * w.row_bytes;
    const size_t span = (size_t)kRowLanes * w.row_bytes, slice = (span + nb - 1) / nb;
    const uint8_t* next = rb + kRowLanes < r1 ? here + span : nullptr;
    const bool next_to_l1 = span <= (24 << 10);
    if (rb == r0 || !next_to_l1) {
      for (int i = 0; i < nr; i++) prefetch_range((const uint8_t*)rows[i], kAhead * sizeof(Block));
    }
    __m512 acc[R], accm[R];
    for (int j = 0; j < R; j++) acc[j] = accm[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      if (next) {
        const uint8_t* p = next + b * slice;
        if (next_to_l1) {
          for (size_t o = 0; o < slice; o += 64) _mm_prefetch((const char*)(p + o), _MM_HINT_T0);
        } else {
          for (size_t o = 0; o < slice; o += 64) _mm_prefetch((const char*)(p + o), _MM_HINT_T1);
        }
      }
      if (!next_to_l1 && b + kAhead < nb) {
        for (int i = 0; i < nr; i++) prefetch_range((const uint8_t*)(rows[i] + b + kAhead), sizeof(Block));
      }
      alignas(32) uint16_t d16[kRowLanes], dmin16[kRowLanes];
      for (int i = 0; i < kRowLanes; i++) {
        d16[i] = rows[i][b].d;
        if constexpr (K::kMins && K::kMinFactor == 0) dmin16[i] = rows[i][b].dmin;
      }
      __m128i bs[R];  // Q4_K: the activations' sums over the 8 sub-blocks, int16
      if constexpr (K::kMins) {
        for (int j = 0; j < R; j++) {
          const __m256i b16 = _mm256_loadu_si256((const __m256i*)(x[j].bsums + 16 * b));
          const __m256i b32 = _mm256_madd_epi16(b16, _mm256_set1_epi16(1));
          bs[j] = _mm_packs_epi32(_mm256_castsi256_si128(b32), _mm256_extracti128_si256(b32, 1));
        }
      }
      __m512i wi[R][4], wm[R][4];
      for (int qd = 0; qd < 4; qd++) {
        KQuad u;
        const Block* quad[4] = {rows[4 * qd] + b, rows[4 * qd + 1] + b, rows[4 * qd + 2] + b, rows[4 * qd + 3] + b};
        K::unpack4(quad, u);
        for (int j = 0; j < R; j++) {
          const int8_t* xg = (K::kGroup16 ? x[j].qsg16 : x[j].qsg) + 256 * b;
          const __m512i start = K::start(x[j].osg16 + 16 * b);
          __m512i v[4];
          for (int t = 0; t < 4; t++) {
            __m512i sd = start;
            for (int k = 0; k < 4; k++) sd = _mm512_dpbusd_epi32(sd, u.q[t][k], _mm512_loadu_si512((const void*)(xg + 64 * k)));
            v[t] = _mm512_mullo_epi32(sd, u.sc[t]);
          }
          wi[j][qd] = quad_sums(v[0], v[1], v[2], v[3]);
          if constexpr (K::kMins) {  // row t's M_0..3 as chunk t, then chunk sb = rows 0..3's M_sb
            const __m512i m = _mm512_madd_epi16(u.mn, _mm512_broadcast_i32x4(bs[j]));
            wm[j][qd] = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), m);
          }
        }
      }
      const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)d16));
      for (int j = 0; j < R; j++) {
        __m512i ti[4];
        chunk_transpose(wi[j], ti);
        const __m512 dx = _mm512_set1_ps(x[j].d[b]);
        if constexpr (!K::kTiled) {  // per pair of sub-blocks, mins apart
          __m512i tm[4];
          chunk_transpose(wm[j], tm);
          const __m512 s = _mm512_mul_ps(dw, dx);
          const __m512 sm = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_load_si256((const __m256i*)dmin16)), dx);
          for (int k = 0; k < 4; k++) {
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ti[k]), s, acc[j]);
            accm[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tm[k]), sm, accm[j]);
          }
        } else {  // per super-block: (s1 d - dmin s2) d_x
          const __m512i s1 = _mm512_add_epi32(_mm512_add_epi32(ti[0], ti[1]), _mm512_add_epi32(ti[2], ti[3]));
          __m512 r;
          if constexpr (K::kMins) {
            __m512i tm[4];
            chunk_transpose(wm[j], tm);
            const __m512i s2 = _mm512_add_epi32(_mm512_add_epi32(tm[0], tm[1]), _mm512_add_epi32(tm[2], tm[3]));
            if constexpr (K::kMinFactor != 0) {  // an offset of the weights: exact, in integers
              r = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(s1, _mm512_mullo_epi32(s2, _mm512_set1_epi32(K::kMinFactor)))), dw);
            } else {
              r = _mm512_fnmadd_ps(_mm512_cvtph_ps(_mm256_load_si256((const __m256i*)dmin16)), _mm512_cvtepi32_ps(s2),
                                   _mm512_mul_ps(_mm512_cvtepi32_ps(s1), dw));
            }
          } else {
            r = _mm512_mul_ps(_mm512_cvtepi32_ps(s1), dw);
          }
          acc[j] = _mm512_fmadd_ps(r, dx, acc[j]);
        }
      }
    }
    const __mmask16 keep = (__mmask16)((1u << nr) - 1u);
    for (int j = 0; j < R; j++) {
      const __m512 out = K::kTiled ? acc[j] : _mm512_sub_ps(acc[j], accm[j]);
      _mm512_mask_storeu_ps(y + j * ldy + rb, keep, out);
    }
  }
}

template <class Tag, class K>
void krows_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    krows_tile<K, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

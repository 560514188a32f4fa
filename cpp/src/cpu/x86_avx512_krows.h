// AVX-512 VNNI kernels for Q4_K and Q6_K in the order llama.cpp's prompt path computes them on
// x86, so that models made of these types match it bit for bit:
//
//   Q4_K (ggml_gemm_q4_K_8x8_q8_K, the repacked GEMM): per super-block and pair of sub-blocks
//        sb = (2k, 2k + 1), the exact integers I = sc_2k dot_2k + sc_2k+1 dot_2k+1 and
//        M = m_2k bsum_2k + m_2k+1 bsum_2k+1, then
//          acc  = fma(float(I), d_w * d_x, acc),   accm = fma(float(M), dmin_w * d_x, accm)
//        and the output acc - accm.
//   Q6_K (the tiled K-quant matmul, taken from 8 rows up): per super-block the exact integer
//        s = sum_g sc_g (dot of group g of 16 with the weights minus 32), then
//          acc = fma(float(s) * d_w, d_x, acc).
//
// Vector lanes are weight rows (16 per block), as in llama.cpp's kernels: each row's weights are
// dotted with the activations in 32-bit lanes (group order, as in x86_avx512_grouped.h), and
// the lanes of four rows at a time are summed by a transposing reduction that leaves one row per
// lane. Every (row, column) sees the same operations whatever the tile height R and whichever
// rows share its block (batch invariance). Include only from kernels_isa_avx512.cpp.
#pragma once
#include "cpu/x86_avx512_grouped.h"

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

// One super-block of 16 weight rows, unpacked once for every activation row of the tile.
struct KRowsUnpacked {
  __m512i q[kRowLanes][4];  // weights, group order (Q4_K) or group-of-16 order (Q6_K)
  __m512i sc[kRowLanes];    // per lane: the integer scale of the lane's sub-block / group
  __m512i mn[kRowLanes];    // Q4_K: lane 2s the min of sub-block s, odd lanes 0
  __m512 d, dmin;           // lanes = rows
};

struct KRowsQ4K {
  using Block = quant::block_q4_K;
  static constexpr bool kMins = true;
  static void unpack(const Block& blk, int i, KRowsUnpacked& u, uint16_t* d, uint16_t* dmin) {
    const __m128i sm = q4k_scales_mins_v(blk.scales);  // bytes: scales 0..7, mins 0..7
    q4k_group_order(blk.qs, u.q[i]);
    u.sc[i] = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(sm, _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)));
    const char z = (char)0x80;  // pshufb: a zero byte
    u.mn[i] = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(sm, _mm_setr_epi8(8, z, 9, z, 10, z, 11, z, 12, z, 13, z, 14, z, 15, z)));
    d[i] = blk.d;
    dmin[i] = blk.dmin;
  }
};

struct KRowsQ6K {
  using Block = quant::block_q6_K;
  static constexpr bool kMins = false;
  static void unpack(const Block& blk, int i, KRowsUnpacked& u, uint16_t* d, uint16_t*) {
    __m512i z[4];
    q6k_plain(blk, z);
    to_group16_order(z, u.q[i]);
    const __m128i sigma = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    u.sc[i] = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i*)blk.scales), sigma));
    d[i] = blk.d;
  }
};

template <class K, int R>
void krows_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  using Block = typename K::Block;
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  alignas(64) static thread_local KRowsUnpacked u;
  for (int64_t rb = r0; rb < r1; rb += kRowLanes) {
    const int nr = (int)(r1 - rb < kRowLanes ? r1 - rb : kRowLanes);
    const Block* rows[kRowLanes];
    for (int i = 0; i < kRowLanes; i++) {  // past the end: the last row again (not stored)
      rows[i] = (const Block*)(w.data + (size_t)(rb + (i < nr ? i : nr - 1)) * w.row_bytes);
    }
    __m512 acc[R], accm[R];
    for (int j = 0; j < R; j++) acc[j] = accm[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      alignas(32) uint16_t d16[kRowLanes], dmin16[kRowLanes];
      for (int i = 0; i < kRowLanes; i++) {
        if (b + 2 < nb) prefetch_range((const uint8_t*)(rows[i] + b + 2), sizeof(Block));
        K::unpack(rows[i][b], i, u, d16, dmin16);
      }
      u.d = _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)d16));
      if constexpr (K::kMins) u.dmin = _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)dmin16));
      for (int j = 0; j < R; j++) {
        __m512i xv[4];
        const int8_t* xg = (K::kMins ? x[j].qsg : x[j].qsg16) + 256 * b;
        for (int v = 0; v < 4; v++) xv[v] = _mm512_loadu_si512((const void*)(xg + 64 * v));
        const __m512i start = K::kMins ? _mm512_setzero_si512() : _mm512_loadu_si512((const void*)(x[j].osg16 + 16 * b));
        [[maybe_unused]] __m512i bs32;
        if constexpr (K::kMins) {  // lane 2s: the activations' sum over sub-block s; odd lanes 0
          const __m512i bs = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i*)(x[j].bsums + 16 * b)));
          bs32 = _mm512_maskz_add_epi32(0x5555, bs, _mm512_srli_epi64(bs, 32));
        }
        __m512i wi[4], wm[4];
        for (int qd = 0; qd < 4; qd++) {
          __m512i v[4], m[4];
          for (int t = 0; t < 4; t++) {
            const int i = 4 * qd + t;
            __m512i s = start;
            for (int k = 0; k < 4; k++) s = _mm512_dpbusd_epi32(s, u.q[i][k], xv[k]);
            v[t] = _mm512_mullo_epi32(s, u.sc[i]);
            if constexpr (K::kMins) m[t] = _mm512_mullo_epi32(u.mn[i], bs32);
          }
          wi[qd] = quad_sums(v[0], v[1], v[2], v[3]);
          if constexpr (K::kMins) wm[qd] = quad_sums(m[0], m[1], m[2], m[3]);
        }
        __m512i ti[4];
        chunk_transpose(wi, ti);
        const __m512 dx = _mm512_set1_ps(x[j].d[b]);
        if constexpr (K::kMins) {
          __m512i tm[4];
          chunk_transpose(wm, tm);
          const __m512 s = _mm512_mul_ps(u.d, dx), sm = _mm512_mul_ps(u.dmin, dx);
          for (int k = 0; k < 4; k++) {
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ti[k]), s, acc[j]);
            accm[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tm[k]), sm, accm[j]);
          }
        } else {
          const __m512i s = _mm512_add_epi32(_mm512_add_epi32(ti[0], ti[1]), _mm512_add_epi32(ti[2], ti[3]));
          acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s), u.d), dx, acc[j]);
        }
      }
    }
    const __mmask16 keep = (__mmask16)((1u << nr) - 1u);
    for (int j = 0; j < R; j++) {
      const __m512 out = K::kMins ? _mm512_sub_ps(acc[j], accm[j]) : acc[j];
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

// After add_avx512_grouped_kernels: these types take llama.cpp's order instead.
template <class Tag>
void add_avx512_krows_kernels(KernelTable& t) {
  using quant::Type;
  t.gemm[(uint32_t)Type::Q4_K] = {krows_gemm<Tag, KRowsQ4K>, ActFormat::q8_K};
  t.gemm[(uint32_t)Type::Q6_K] = {krows_gemm<Tag, KRowsQ6K>, ActFormat::q8_K};
}

}  // namespace
}  // namespace qd::cpu

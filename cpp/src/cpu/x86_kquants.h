// x86 kernels for the K-quants used by real models (Q4_K, Q6_K) against Q8_K activations.
// Each 256-element weight super-block is unpacked ONCE (bytes + int16 scale vectors) and applied
// to all R activation rows of the tile. Integer sums inside a super-block are exact, so their
// order is free; the float order per (row, column) is one FMA per super-block, left to right,
// the same for every R. Include rules: see x86_common.h.
#pragma once
#include "cpu/act_layout.h"
#include "cpu/x86_common.h"
#include "quant/blocks.h"

namespace qd::cpu {
namespace {

// A super-block unpacked for reuse across rows: 8 chunks of 32 unsigned weights and, per chunk,
// the int16 scales that multiply the pairwise products of maddubs.
struct alignas(32) KUnpacked {
  __m256i q[8];
  __m256i sc[8];
};

// sum_k madd(sc[k], maddubs(q[k], x[32k..])) over the 8 chunks -> 8 x int32.
inline __m256i k_dot(const KUnpacked& u, const int8_t* xq) {
  __m256i sumi = _mm256_setzero_si256();
  for (int k = 0; k < 8; k++) {
    const __m256i p = _mm256_maddubs_epi16(u.q[k], _mm256_loadu_si256((const __m256i*)(xq + 32 * k)));
    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(u.sc[k], p));
  }
  return sumi;
}

// ---- Q4_K: w = d * sc_s * q - dmin * m_s, 8 sub-blocks of 32 with 6-bit sc, m --------------

// Scales to bytes 0..7 and mins to bytes 8..15 of out (ggml's kmask shuffle of the 12 bytes).
inline void q4k_scales_mins(const uint8_t* scales, uint8_t out[16]) {
  const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u[4];
  std::memcpy(u, scales, 12);
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t aux = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = aux;
  u[0] &= kmask1;
  std::memcpy(out, u, 16);
}

template <int R>
void q4k_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  const __m256i m4 = _mm256_set1_epi8(15);
  KUnpacked u;
  for (int64_t r = r0; r < r1; r++) {
    const quant::block_q4_K* wb = (const quant::block_q4_K*)(w.data + (size_t)r * w.row_bytes);
    __m256 acc[R];
    __m128 accm[R];
    for (int j = 0; j < R; j++) {
      acc[j] = _mm256_setzero_ps();
      accm[j] = _mm_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
      const quant::block_q4_K& blk = wb[b];
      uint8_t sm[16];
      q4k_scales_mins(blk.scales, sm);
      const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i*)(sm + 8)));
      for (int k = 0; k < 4; k++) {  // 64 elements: low nibbles = sub-block 2k, high = 2k + 1
        const __m256i bits = _mm256_loadu_si256((const __m256i*)(blk.qs + 32 * k));
        u.q[2 * k] = _mm256_and_si256(bits, m4);
        u.q[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        u.sc[2 * k] = _mm256_set1_epi16(sm[2 * k]);
        u.sc[2 * k + 1] = _mm256_set1_epi16(sm[2 * k + 1]);
      }
      const float dw = h2f(blk.d), dmw = h2f(blk.dmin);
      for (int j = 0; j < R; j++) {
        const __m256i sumi = k_dot(u, x[j].qs + 256 * b);
        const float dx = x[j].d[b];
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dx), _mm256_cvtepi32_ps(sumi), acc[j]);
        // sum over sub-blocks of m_s * (sum of x in the sub-block); bsums hold sums of 16
        const __m256i bs = _mm256_loadu_si256((const __m256i*)(x[j].bsums + 16 * b));
        const __m128i s32 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        const __m128i prod = _mm_madd_epi16(mins, s32);
        accm[j] = _mm_fmadd_ps(_mm_set1_ps(dmw * dx), _mm_cvtepi32_ps(prod), accm[j]);
      }
    }
    for (int j = 0; j < R; j++) y[j * ldy + r] = hsum(acc[j]) - hsum128(accm[j]);
  }
}

// ---- Q6_K: w = d * sc_g * (q - 32), 16 groups of 16 with int8 sc ---------------------------

template <int R>
void q6k_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
  KUnpacked u;
  for (int64_t r = r0; r < r1; r++) {
    const quant::block_q6_K* wb = (const quant::block_q6_K*)(w.data + (size_t)r * w.row_bytes);
    __m256 acc[R];
    for (int j = 0; j < R; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      const quant::block_q6_K& blk = wb[b];
      for (int h = 0; h < 2; h++) {  // 128 elements: chunks 4h..4h+3
        const __m256i l0 = _mm256_loadu_si256((const __m256i*)(blk.ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i*)(blk.ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i*)(blk.qh + 32 * h));
        // 2 high bits of chunk c sit at bits 2c, 2c+1 of qh; move them to bits 4, 5
        u.q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
        u.q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
        u.q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
        u.q[4 * h + 3] =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
      }
      for (int k = 0; k < 8; k++) {  // chunk k: 16 elements with scale 2k, then 16 with 2k + 1
        u.sc[k] = _mm256_set_m128i(_mm_set1_epi16(blk.scales[2 * k + 1]), _mm_set1_epi16(blk.scales[2 * k]));
      }
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)blk.scales));
      const float dw = h2f(blk.d);
      for (int j = 0; j < R; j++) {
        __m256i sumi = k_dot(u, x[j].qs + 256 * b);
        // the -32 offset: subtract 32 * sum_g sc_g * (sum of x in group g)
        const __m256i bs = _mm256_loadu_si256((const __m256i*)(x[j].bsums + 16 * b));
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5));
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[j].d[b]), _mm256_cvtepi32_ps(sumi), acc[j]);
      }
    }
    for (int j = 0; j < R; j++) y[j * ldy + r] = hsum(acc[j]);
  }
}

template <class Tag>
void q4k_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
              int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    q4k_tile<decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

template <class Tag>
void q6k_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
              int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    q6k_tile<decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

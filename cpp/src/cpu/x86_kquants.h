// x86 kernels for the K-quants used by real models (Q4_K, Q6_K) against Q8_K activations.
// Each 256-element weight super-block is unpacked ONCE (bytes + int16 scale vectors) and applied
// to all R activation rows of the tile. Integer sums inside a super-block are exact, so their
// order is free; the float order per (row, column) is one FMA per super-block, left to right,
// the same for every R, plus two FMAs per super-block into a second accumulator for the
// per-group offsets (Q4_K mins, Q6_K's -32) against the activations' d * bsums. Include rules: see x86_common.h.
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

// The same as a vector (scales in bytes 0..7, mins in 8..15), built in registers: a vector load
// of bytes just stored one word at a time would stall on store forwarding.
inline __m128i q4k_scales_mins_v(const uint8_t* scales) {
  const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, scales, 12);
  const uint32_t u3 = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t u2 = u[1] & kmask1;
  const uint32_t u1 = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  const uint32_t u0 = u[0] & kmask1;
  return _mm_setr_epi32((int)u0, (int)u1, (int)u2, (int)u3);
}

template <int R>
void q4k_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  const __m256i m4 = _mm256_set1_epi8(15);
  const __m128i pairs_hi = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  KUnpacked u;
  for (int64_t r = r0; r < r1; r++) {
    const quant::block_q4_K* wb = (const quant::block_q4_K*)(w.data + (size_t)r * w.row_bytes);
    const uint8_t* ahead = prefetch_row<R>(w, r);
    __m256 acc[R], accm[R];
    for (int j = 0; j < R; j++) acc[j] = accm[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      const quant::block_q4_K& blk = wb[b];
      if (ahead) prefetch_range(ahead + b * sizeof(blk), sizeof(blk));
      uint8_t sm[16];
      q4k_scales_mins(blk.scales, sm);
      for (int k = 0; k < 4; k++) {  // 64 elements: low nibbles = sub-block 2k, high = 2k + 1
        const __m256i bits = _mm256_loadu_si256((const __m256i*)(blk.qs + 32 * k));
        u.q[2 * k] = _mm256_and_si256(bits, m4);
        u.q[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        u.sc[2 * k] = _mm256_set1_epi16(sm[2 * k]);
        u.sc[2 * k + 1] = _mm256_set1_epi16(sm[2 * k + 1]);
      }
      // dmin * m_s for the 16 groups of 16 (two per sub-block), against the activations' d * bsums
      const __m128i mins2 = _mm_shuffle_epi8(q4k_scales_mins_v(blk.scales), pairs_hi);
      const __m256 dmin = _mm256_set1_ps(h2f(blk.dmin));
      const __m256 wmin0 = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mins2)));
      const __m256 wmin1 = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(mins2, 8))));
      const float dw = h2f(blk.d);
      for (int j = 0; j < R; j++) {
        const __m256i sumi = k_dot(u, x[j].qs + 256 * b);
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[j].d[b]), _mm256_cvtepi32_ps(sumi), acc[j]);
        accm[j] = _mm256_fmadd_ps(wmin0, _mm256_loadu_ps(x[j].dsums + 16 * b), accm[j]);
        accm[j] = _mm256_fmadd_ps(wmin1, _mm256_loadu_ps(x[j].dsums + 16 * b + 8), accm[j]);
      }
    }
    for (int j = 0; j < R; j++) y[j * ldy + r] = hsum(acc[j]) - hsum(accm[j]);
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
    const uint8_t* ahead = prefetch_row<R>(w, r);
    __m256 acc[R], acco[R];
    for (int j = 0; j < R; j++) acc[j] = acco[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      const quant::block_q6_K& blk = wb[b];
      if (ahead) prefetch_range(ahead + b * sizeof(blk), sizeof(blk));
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
      const __m128i sc8 = _mm_loadu_si128((const __m128i*)blk.scales);
      const float dw = h2f(blk.d);
      // the -32 offset: -32 * d * sc_g per group g, against the activations' d * bsums
      const __m256 m32d = _mm256_set1_ps(-32.f * dw);
      const __m256 woff0 = _mm256_mul_ps(m32d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8)));
      const __m256 woff1 = _mm256_mul_ps(m32d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8))));
      for (int j = 0; j < R; j++) {
        const __m256i sumi = k_dot(u, x[j].qs + 256 * b);
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[j].d[b]), _mm256_cvtepi32_ps(sumi), acc[j]);
        acco[j] = _mm256_fmadd_ps(woff0, _mm256_loadu_ps(x[j].dsums + 16 * b), acco[j]);
        acco[j] = _mm256_fmadd_ps(woff1, _mm256_loadu_ps(x[j].dsums + 16 * b + 8), acco[j]);
      }
    }
    for (int j = 0; j < R; j++) y[j * ldy + r] = hsum(acc[j]) + hsum(acco[j]);
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

// AVX-512 (BW + VNNI) kernels on 512-bit vectors: 64 weights per instruction, so twice the work
// per instruction of the 256-bit kernels. That matters for the skinny GEMM (n = 2..17), which is
// compute-bound once the weight block is unpacked.
//
// Order per (row, column), identical for every tile height R (batch invariance):
//   32-blocks: pairs of blocks (b, b+1) in one vector; per pair one FMA into a 16-lane float
//              accumulator; an odd last block goes alone (upper half zero); then a fixed
//              horizontal sum, plus the 2-lane "min" accumulator for the unsigned types.
//   K-quants:  exact integer dot per super-block, one FMA per super-block into one accumulator;
//              the per-group offsets (Q4_K mins, Q6_K's -32) as one FMA per super-block into a
//              second accumulator (weights' scale x activations' d * bsums).
// Include only from kernels_isa_avx512.cpp (rules in x86_common.h).
#pragma once
#include "cpu/x86_kquants.h"
#include "cpu/x86_q32.h"
#include "quant/quant_types.h"

namespace qd::cpu {
namespace {

inline __m512i join256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

inline float hsum512(__m512 v) {
  return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

// ---- 32-element block types, two blocks per vector ------------------------------------------

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
      const __m128 s2 = pair ? _mm_castpd_ps(_mm_load_sd((const double*)(x[j].s + b))) : _mm_load_ss(x[j].s + b);
      accm[j] = _mm_fmadd_ps(mw, s2, accm[j]);
    }
  }
}

template <class W, int R>
void q32x2_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 32;
  ActQ8_0 x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_0(act + (size_t)j * stride, w.cols);
  for (int64_t r = r0; r < r1; r++) {
    const typename W::block* wb = (const typename W::block*)(w.data + (size_t)r * w.row_bytes);
    __m512 acc[R];
    __m128 accm[R];
    for (int j = 0; j < R; j++) {
      acc[j] = _mm512_setzero_ps();
      accm[j] = _mm_setzero_ps();
    }
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) q32x2_step<W, R>(wb + b, b, true, x, acc, accm);
    if (b < nb) q32x2_step<W, R>(wb + b, b, false, x, acc, accm);
    for (int j = 0; j < R; j++) y[j * ldy + r] = hsum512(acc[j]) + hsum128(accm[j]);
  }
}

template <class Tag, class W>
void q32x2_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    q32x2_tile<W, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

// ---- K-quants, 64 weights per vector --------------------------------------------------------

struct alignas(64) KUnpacked512 {
  __m512i q[4];   // chunk m: weights 64m .. 64m + 63, unsigned
  __m512i sc[4];  // int16 scale of each maddubs pair
};

// sum_m dpwssd(sc[m], maddubs(q[m], x[64m..])) -> 16 x int32 (VNNI fuses madd + add).
inline __m512i k_dot512(const KUnpacked512& u, const int8_t* xq) {
  __m512i sumi = _mm512_setzero_si512();
  for (int m = 0; m < 4; m++) {
    const __m512i p = _mm512_maddubs_epi16(u.q[m], _mm512_loadu_si512((const void*)(xq + 64 * m)));
    sumi = _mm512_dpwssd_epi32(sumi, u.sc[m], p);
  }
  return sumi;
}

// 16 int8 scales, each repeated 8 times -> scale vector of chunk m (scales 4m .. 4m + 3).
inline __m512i repeat8_scales(__m256i scales_x2, int m) {
  const __m256i idx = _mm256_add_epi8(_mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                        0x0101010101010101, 0),
                                      _mm256_set1_epi8((char)(4 * m)));
  return _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(scales_x2, idx));
}

template <int R>
void q4k512_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  const __m256i m4 = _mm256_set1_epi8(15);
  KUnpacked512 u;
  for (int64_t r = r0; r < r1; r++) {
    const quant::block_q4_K* wb = (const quant::block_q4_K*)(w.data + (size_t)r * w.row_bytes);
    __m512 acc[R], accm[R];
    for (int j = 0; j < R; j++) {
      acc[j] = _mm512_setzero_ps();
      accm[j] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
      const quant::block_q4_K& blk = wb[b];
      alignas(16) uint8_t sm[16];
      q4k_scales_mins(blk.scales, sm);
      const __m128i sm128 = _mm_load_si128((const __m128i*)sm);
      // dmin * m_s for each group of 16 (two per sub-block), against the activations' d * bsums
      const __m128i mins2 = _mm_shuffle_epi8(sm128, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
      // scale s of sub-block s covers 32 weights = 16 maddubs pairs: repeat each scale 16 times
      const __m256i sc_x2 = _mm256_broadcastsi128_si256(sm128);
      for (int m = 0; m < 4; m++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i*)(blk.qs + 32 * m));
        u.q[m] = join256(_mm256_and_si256(bits, m4), _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4));
        const __m256i idx = _mm256_set_m128i(_mm_set1_epi8((char)(2 * m + 1)), _mm_set1_epi8((char)(2 * m)));
        u.sc[m] = _mm512_cvtepu8_epi16(_mm256_shuffle_epi8(sc_x2, idx));
      }
      const __m512 wmin = _mm512_mul_ps(_mm512_set1_ps(h2f(blk.dmin)), _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(mins2)));
      const __m512 dwv = _mm512_set1_ps(h2f(blk.d));
      for (int j = 0; j < R; j++) {
        const __m512i sumi = k_dot512(u, x[j].qs + 256 * b);
        acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(dwv, _mm512_set1_ps(x[j].d[b])), _mm512_cvtepi32_ps(sumi), acc[j]);
        accm[j] = _mm512_fmadd_ps(wmin, _mm512_loadu_ps(x[j].dsums + 16 * b), accm[j]);
      }
    }
    for (int j = 0; j < R; j++) y[j * ldy + r] = hsum512(acc[j]) - hsum512(accm[j]);
  }
}

template <int R>
void q6k512_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
  KUnpacked512 u;
  for (int64_t r = r0; r < r1; r++) {
    const quant::block_q6_K* wb = (const quant::block_q6_K*)(w.data + (size_t)r * w.row_bytes);
    __m512 acc[R], acco[R];
    for (int j = 0; j < R; j++) {
      acc[j] = _mm512_setzero_ps();
      acco[j] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
      const quant::block_q6_K& blk = wb[b];
      for (int h = 0; h < 2; h++) {  // 128 weights: 32-chunks 4h .. 4h + 3 (see x86_kquants.h)
        const __m256i l0 = _mm256_loadu_si256((const __m256i*)(blk.ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i*)(blk.ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i*)(blk.qh + 32 * h));
        const __m256i c0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
        const __m256i c1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
        const __m256i c2 =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
        const __m256i c3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
        u.q[2 * h] = join256(c0, c1);
        u.q[2 * h + 1] = join256(c2, c3);
      }
      const __m128i sc8 = _mm_loadu_si128((const __m128i*)blk.scales);
      const __m256i sc_x2 = _mm256_broadcastsi128_si256(sc8);
      for (int m = 0; m < 4; m++) u.sc[m] = repeat8_scales(sc_x2, m);
      const float dw = h2f(blk.d);
      const __m512 dwv = _mm512_set1_ps(dw);
      // the -32 offset: -32 * d * sc_g for each group of 16, against the activations' d * bsums
      const __m512 woff = _mm512_mul_ps(_mm512_set1_ps(-32.f * dw), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc8)));
      for (int j = 0; j < R; j++) {
        const __m512i sumi = k_dot512(u, x[j].qs + 256 * b);
        acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(dwv, _mm512_set1_ps(x[j].d[b])), _mm512_cvtepi32_ps(sumi), acc[j]);
        acco[j] = _mm512_fmadd_ps(woff, _mm512_loadu_ps(x[j].dsums + 16 * b), acco[j]);
      }
    }
    for (int j = 0; j < R; j++) y[j * ldy + r] = hsum512(acc[j]) + hsum512(acco[j]);
  }
}

template <class Tag>
void q4k512_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                 int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    q4k512_tile<decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

template <class Tag>
void q6k512_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                 int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    q6k512_tile<decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

template <class Tag>
void add_avx512_kernels(KernelTable& t) {
  using quant::Type;
  auto set = [&](Type type, GemmRowsFn fn, ActFormat act) { t.gemm[(uint32_t)type] = {fn, act}; };
  set(Type::Q4_0, q32x2_gemm<Tag, WQ4_0>, ActFormat::q8_0);
  set(Type::Q4_1, q32x2_gemm<Tag, WQ4_1>, ActFormat::q8_0);
  set(Type::Q5_0, q32x2_gemm<Tag, WQ5_0>, ActFormat::q8_0);
  set(Type::Q5_1, q32x2_gemm<Tag, WQ5_1>, ActFormat::q8_0);
  set(Type::Q8_0, q32x2_gemm<Tag, WQ8_0>, ActFormat::q8_0);
  set(Type::IQ4_NL, q32x2_gemm<Tag, WIQ4_NL>, ActFormat::q8_0);
  set(Type::Q4_K, q4k512_gemm<Tag>, ActFormat::q8_K);
  set(Type::Q6_K, q6k512_gemm<Tag>, ActFormat::q8_K);
}

}  // namespace
}  // namespace qd::cpu

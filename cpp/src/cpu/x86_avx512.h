// AVX-512 (BW + VNNI) helpers on 512-bit vectors, and the step that x86_avx512_grouped.h's
// 32-block kernels (Q4_0, IQ4_NL) take for the blocks after the last whole group of 8: pairs of
// blocks (b, b+1) in one vector, per pair one FMA into a 16-lane float accumulator, an odd last
// block alone (upper half zero), plus the 2-lane "min" accumulator for the unsigned types.
// Include only from kernels_isa_avx512.cpp (rules in x86_common.h).
#pragma once
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
      const __m128 s2 = pair ? _mm_castpd_ps(_mm_load_sd((const double*)(x[j].sm + b))) : _mm_load_ss(x[j].sm + b);
      accm[j] = _mm_fmadd_ps(mw, s2, accm[j]);
    }
  }
}

}  // namespace
}  // namespace qd::cpu

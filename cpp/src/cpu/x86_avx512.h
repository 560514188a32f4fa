// AVX-512 (BW + VNNI) kernels on 512-bit vectors: 64 weights per instruction, so twice the work
// per instruction of the 256-bit kernels. That matters for the skinny GEMM (n = 2..17), which is
// compute-bound once the weight block is unpacked.
//
// Order per (row, column), identical for every tile height R (batch invariance):
//   32-blocks: pairs of blocks (b, b+1) in one vector; per pair one FMA into a 16-lane float
//              accumulator; an odd last block goes alone (upper half zero); then a fixed
//              horizontal sum, plus the 2-lane "min" accumulator for the unsigned types.
// (The K-quants and whole groups of 32-blocks use x86_avx512_grouped.h; these pair kernels serve
// the blocks after the last whole group of 8.)
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
}

}  // namespace
}  // namespace qd::cpu

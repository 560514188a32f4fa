// AVX2 kernels for the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) against Q8_0
// activations. Each weight block is unpacked ONCE into 32 bytes and applied to all R activation
// rows of the tile (the skinny GEMM of speculative verification).
//
// Per (row, column) order, identical for every tile height R: integer dot of each block, scaled
// and added into one of two float accumulators (even blocks / odd blocks, two chains hide the FMA
// latency when R = 1), then acc_even + acc_odd summed horizontally in a fixed order, plus the
// scalar "min" term for the unsigned types. The dot products are the Tag's (x86/common.h
// dot_u8s8): the same integers on avx2 and avx2_vnni. Include rules: see x86/common.h.
#pragma once
#include "cpu/act_layout.h"
#include "cpu/x86/block32_weights.h"
#include "cpu/x86/common.h"

namespace qd::cpu {
namespace {

// One block b of one weight row into the R rows' accumulators.
template <class Tag, class W, int R>
inline void q32_block(const typename W::block& blk, int64_t b, const ActQ8_0* x, __m256* acc, float* summ) {
  const __m256i q = W::unpack(blk);
  const float dw = h2f(blk.d);
  if constexpr (W::kSigned) {
    // u8 x s8 dot products need an unsigned operand: |q| against x with q's sign.
    const __m256i aq = _mm256_sign_epi8(q, q);
    for (int j = 0; j < R; j++) {
      const __m256i xv = _mm256_loadu_si256((const __m256i*)(x[j].qs + 32 * b));
      const __m256i p = dot_u8s8<Tag>(aq, _mm256_sign_epi8(xv, q));
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[j].d[b]), _mm256_cvtepi32_ps(p), acc[j]);
    }
  } else {
    const float mw = W::m(blk);
    for (int j = 0; j < R; j++) {
      const __m256i xv = _mm256_loadu_si256((const __m256i*)(x[j].qs + 32 * b));
      const __m256i p = dot_u8s8<Tag>(q, xv);
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[j].d[b]), _mm256_cvtepi32_ps(p), acc[j]);
      summ[j] += mw * x[j].sm[b];
    }
  }
}

template <class Tag, class W, int R>
void q32_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 32;
  ActQ8_0 x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_0(act + (size_t)j * stride, w.cols);
  for (int64_t r = r0; r < r1; r++) {
    const typename W::block* wb = (const typename W::block*)(w.data + (size_t)r * w.row_bytes);
    const uint8_t* ahead = prefetch_row<R>(w, r);
    __m256 acc0[R], acc1[R];
    float summ[R];
    for (int j = 0; j < R; j++) {
      acc0[j] = _mm256_setzero_ps();
      acc1[j] = _mm256_setzero_ps();
      summ[j] = 0.f;
    }
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      if (ahead) prefetch_range(ahead + b * sizeof(*wb), 2 * sizeof(*wb));
      q32_block<Tag, W, R>(wb[b], b, x, acc0, summ);
      q32_block<Tag, W, R>(wb[b + 1], b + 1, x, acc1, summ);
    }
    if (b < nb) q32_block<Tag, W, R>(wb[b], b, x, acc0, summ);
    for (int j = 0; j < R; j++) y[j * ldy + r] = hsum(_mm256_add_ps(acc0[j], acc1[j])) + summ[j];
  }
}

template <class Tag, class W>
void q32_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
              int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    q32_tile<Tag, W, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

// AVX2 kernels for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS) against Q8_K activations.
// Each 256-element weight super-block is unpacked ONCE (bytes + int16 scale vectors) and applied
// to all R activation rows of the tile. Integer sums inside a super-block are exact, so their
// order is free; the float order per (row, column) is one FMA per super-block, left to right,
// the same for every R, plus two FMAs per super-block into a second accumulator for the
// per-group offsets (mins, Q6_K's -32, Q3_K's -4) against the activations' d * bsums. Include
// rules: see x86/common.h.
#pragma once
#include "cpu/act_layout.h"
#include "cpu/x86/common.h"
#include "cpu/x86/k_quant_weights.h"

namespace qd::cpu {
namespace {

// R activation rows against weight rows [r0, r1) of a K-quant type W. The float order per
// (row, column) is one FMA per super-block into acc and, for offset types, two into acco, left to
// right, the same for every R.
template <int R, class W>
void ksuper_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  KUnpacked u;
  for (int64_t r = r0; r < r1; r++) {
    const typename W::Block* wb = (const typename W::Block*)(w.data + (size_t)r * w.row_bytes);
    const uint8_t* ahead = prefetch_row<R>(w, r);
    __m256 acc[R], acco[R];
    for (int j = 0; j < R; j++) acc[j] = acco[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      const typename W::Block& blk = wb[b];
      if (ahead) prefetch_range(ahead + b * sizeof(blk), sizeof(blk));
      W::unpack(blk, u);
      for (int j = 0; j < R; j++) {
        const __m256i sumi = k_dot<W::kSigned>(u, x[j].qs + 256 * b);
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(u.d * x[j].d[b]), _mm256_cvtepi32_ps(sumi), acc[j]);
        if constexpr (W::kOffsets) {
          acco[j] = _mm256_fmadd_ps(u.off[0], _mm256_loadu_ps(x[j].dsums + 16 * b), acco[j]);
          acco[j] = _mm256_fmadd_ps(u.off[1], _mm256_loadu_ps(x[j].dsums + 16 * b + 8), acco[j]);
        }
      }
    }
    for (int j = 0; j < R; j++) y[j * ldy + r] = W::kOffsets ? hsum(acc[j]) + hsum(acco[j]) : hsum(acc[j]);
  }
}

template <class Tag, class W>
void ksuper_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                 int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    ksuper_tile<decltype(rc)::value, W>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

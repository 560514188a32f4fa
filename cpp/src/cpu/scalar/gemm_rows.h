// The scalar kernels' loop over weight rows and activation rows. Include only from cpu/scalar/.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu/matmul.h"

namespace qd::cpu::scalar {
namespace {

using DotFn = float (*)(const uint8_t* w, const uint8_t* a, int64_t cols);

// Row by row, activation by activation: the order of one (i, r) never depends on n.
template <DotFn Dot>
void gemm_rows(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t act_stride, int64_t n,
               float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t* wr = w.data + (size_t)r * w.row_bytes;
    for (int64_t i = 0; i < n; i++) y[i * ldy + r] = Dot(wr, act + (size_t)i * act_stride, w.cols);
  }
}

}  // namespace
}  // namespace qd::cpu::scalar

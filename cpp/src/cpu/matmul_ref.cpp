// Reference matmul: dequantize each weight row once, dot it with every activation row.
// Correct for every type with a to_float; the fast paths live beside it.
#include <algorithm>
#include <vector>

#include "common/error.h"
#include "cpu/matmul.h"
#include "quant/quant_types.h"

namespace qd::cpu {

namespace {

// Eight partial sums in a fixed order, then a fixed pairwise reduction.
float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; k++) acc[k] += a[i + k] * b[i + k];
  }
  for (; i < n; i++) acc[i & 7] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

constexpr int64_t kRowsPerTask = 16;

}  // namespace

void dequantize_row(const Matrix& w, int64_t r, float* dst) {
  const quant::TypeTraits* t = quant::type_traits(w.type);
  if (!t || !t->to_float) throw UnsupportedError("matmul: unsupported weight type " + std::to_string(w.type));
  t->to_float(w.data + (size_t)r * w.row_bytes, dst, w.cols);
}

void matmul(const Matrix& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  const quant::TypeTraits* t = quant::type_traits(w.type);
  if (!t || !t->to_float) throw UnsupportedError("matmul: unsupported weight type " + std::to_string(w.type));
  const int64_t n_tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  pool.run((int)n_tasks, [&](int task) {
    thread_local std::vector<float> row;
    row.resize((size_t)w.cols);
    const int64_t r0 = task * kRowsPerTask, r1 = std::min(w.rows, r0 + kRowsPerTask);
    for (int64_t r = r0; r < r1; r++) {
      t->to_float(w.data + (size_t)r * w.row_bytes, row.data(), w.cols);
      for (int64_t i = 0; i < n; i++) y[i * w.rows + r] = dot_f32(row.data(), x + i * w.cols, w.cols);
    }
  });
}

}  // namespace qd::cpu

#include "model/attention_ops.h"

namespace qd::model {

void half_to_float_rows(const uint16_t* src, size_t src_stride, float* dst, int rows, int n) {
  cpu::active_kernels().half_to_float_rows(src, src_stride, dst, rows, n);
}

void scaled_dots(const float* const* q, float* const* out, int nq, const float* k, int rows, int n, float scale) {
  cpu::active_kernels().scaled_dots(q, out, nq, k, rows, n, scale);
}

void scaled_dots(const float* const* q, float* const* out, int nq, const uint16_t* k, int rows, int n, float scale) {
  cpu::active_kernels().scaled_dots_f16(q, out, nq, k, rows, n, scale);
}

void softmax(float* x, int n, int phase) { cpu::active_kernels().softmax(x, n, phase); }

void weighted_rows_add(const float* const* w, float* const* partial, int nq, const float* v, int rows, int n,
                       int lane0) {
  cpu::active_kernels().weighted_rows_add(w, partial, nq, v, rows, n, lane0);
}

void weighted_rows_add(const float* const* w, float* const* partial, int nq, const uint16_t* v, int rows, int n,
                       int lane0) {
  cpu::active_kernels().weighted_rows_add_f16(w, partial, nq, v, rows, n, lane0);
}

void reduce_lanes(const float* partial, int n, float* out) { cpu::active_kernels().reduce_lanes(partial, n, out); }

}  // namespace qd::model

// Scalar kernels for the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) against Q8_0
// activations: per block the integer dot, times the weight's and the activations' scales, blocks
// summed left to right.
#include <cstring>

#include "cpu/act_layout.h"
#include "cpu/scalar/gemm_rows.h"
#include "cpu/scalar/kernels.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quant_types.h"

namespace qd::cpu::scalar {

namespace {

using namespace qd::quant;

inline float h2f(half h) { return fp16_to_f32(h); }

float dot_q4_0(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_q4_0* x = (const block_q4_0*)w;
  const ActQ8_0 y = act_q8_0(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 32; b++) {
    const int8_t* q = y.qs + b * 32;
    int isum = 0;
    for (int j = 0; j < 16; j++) {
      isum += ((x[b].qs[j] & 15) - 8) * q[j] + ((x[b].qs[j] >> 4) - 8) * q[j + 16];
    }
    sum += h2f(x[b].d) * y.d[b] * (float)isum;
  }
  return sum;
}

float dot_q4_1(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_q4_1* x = (const block_q4_1*)w;
  const ActQ8_0 y = act_q8_0(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 32; b++) {
    const int8_t* q = y.qs + b * 32;
    int isum = 0;
    for (int j = 0; j < 16; j++) isum += (x[b].qs[j] & 15) * q[j] + (x[b].qs[j] >> 4) * q[j + 16];
    // w = d * q + m, so sum w * x = d * dx * isum + m * (dx * sum qx) = ... + m * s
    sum += h2f(x[b].d) * y.d[b] * (float)isum + h2f(x[b].m) * y.sm[b];
  }
  return sum;
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 5-bit value of element j (0..31) of a Q5 block, before any offset.
int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int lo = j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
  return lo | (int)(((qh >> j) & 1) << 4);
}

float dot_q5_0(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_q5_0* x = (const block_q5_0*)w;
  const ActQ8_0 y = act_q8_0(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 32; b++) {
    const uint32_t qh = load_u32(x[b].qh);
    int isum = 0;
    for (int j = 0; j < 32; j++) isum += (q5_value(x[b].qs, qh, j) - 16) * y.qs[b * 32 + j];
    sum += h2f(x[b].d) * y.d[b] * (float)isum;
  }
  return sum;
}

float dot_q5_1(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_q5_1* x = (const block_q5_1*)w;
  const ActQ8_0 y = act_q8_0(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 32; b++) {
    const uint32_t qh = load_u32(x[b].qh);
    int isum = 0;
    for (int j = 0; j < 32; j++) isum += q5_value(x[b].qs, qh, j) * y.qs[b * 32 + j];
    sum += h2f(x[b].d) * y.d[b] * (float)isum + h2f(x[b].m) * y.sm[b];
  }
  return sum;
}

float dot_q8_0(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_q8_0* x = (const block_q8_0*)w;
  const ActQ8_0 y = act_q8_0(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 32; b++) {
    int isum = 0;
    for (int j = 0; j < 32; j++) isum += x[b].qs[j] * y.qs[b * 32 + j];
    sum += h2f(x[b].d) * y.d[b] * (float)isum;
  }
  return sum;
}

float dot_iq4_nl(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_iq4_nl* x = (const block_iq4_nl*)w;
  const ActQ8_0 y = act_q8_0(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 32; b++) {
    const int8_t* q = y.qs + b * 32;
    int isum = 0;
    for (int j = 0; j < 16; j++) {
      isum += kvalues_iq4nl[x[b].qs[j] & 15] * q[j] + kvalues_iq4nl[x[b].qs[j] >> 4] * q[j + 16];
    }
    sum += h2f(x[b].d) * y.d[b] * (float)isum;
  }
  return sum;
}

}  // namespace

void gemm_q4_0(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_q4_0>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q4_1(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_q4_1>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q5_0(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_q5_0>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q5_1(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_q5_1>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q8_0(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_q8_0>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_iq4_nl(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_iq4_nl>(w, r0, r1, a, s, n, y, ldy);
}

}  // namespace qd::cpu::scalar

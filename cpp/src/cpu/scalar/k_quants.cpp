// Scalar kernels for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and IQ4_XS against Q8_K
// activations: per super-block the exact integer sums (scales, mins), then its float expression,
// super-blocks summed left to right.
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

// 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block (ggml get_scale_min_k4).
void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

float dot_q4_K(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_q4_K* x = (const block_q4_K*)w;
  const ActQ8_K y = act_q8_K(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 256; b++) {
    const int8_t* q = y.qs + b * 256;
    int isum = 0, msum = 0;  // sum_s sc_s * (q4 . x)_s  and  sum_s m_s * (sum x)_s
    for (int s = 0; s < 8; s++) {
      int sc, m;
      scale_min_k4(s, x[b].scales, &sc, &m);
      // sub-block s: nibble (s & 1) of qs[32 * (s / 2) .. + 32]
      const uint8_t* qs = x[b].qs + 32 * (s / 2);
      int dot = 0;
      for (int l = 0; l < 32; l++) dot += ((s & 1) ? (qs[l] >> 4) : (qs[l] & 15)) * q[32 * s + l];
      isum += sc * dot;
      msum += m * (y.bsums[b * 16 + 2 * s] + y.bsums[b * 16 + 2 * s + 1]);
    }
    // w = d * sc * q - dmin * m
    sum += y.d[b] * (h2f(x[b].d) * (float)isum - h2f(x[b].dmin) * (float)msum);
  }
  return sum;
}

// Element h*128 + s*32 + l (h < 2, s < 4, l < 32) of a Q2_K/Q3_K super-block: its low 2 bits are
// field s of qs[32h + l], its group of 16 (scale index) is 8h + 2s + l / 16.
int low2(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3; }

float dot_q2_K(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_q2_K* x = (const block_q2_K*)w;
  const ActQ8_K y = act_q8_K(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 256; b++) {
    const int8_t* q = y.qs + b * 256;
    int isum = 0, msum = 0;  // sum_g sc_g * (q2 . x)_g  and  sum_g m_g * (sum x)_g
    for (int g = 0; g < 16; g++) {
      int dot = 0;
      for (int e = 16 * g; e < 16 * g + 16; e++) dot += low2(x[b].qs, e) * q[e];
      isum += (x[b].scales[g] & 15) * dot;
      msum += (x[b].scales[g] >> 4) * y.bsums[b * 16 + g];
    }
    // w = d * sc * q - dmin * m
    sum += y.d[b] * (h2f(x[b].d) * (float)isum - h2f(x[b].dmin) * (float)msum);
  }
  return sum;
}

float dot_q3_K(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_q3_K* x = (const block_q3_K*)w;
  const ActQ8_K y = act_q8_K(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 256; b++) {
    const int8_t* q = y.qs + b * 256;
    int isum = 0;
    for (int g = 0; g < 16; g++) {
      int dot = 0;
      for (int e = 16 * g; e < 16 * g + 16; e++) {
        // a CLEAR bit e / 32 of hmask[e % 32] subtracts 4
        const int high = (x[b].hmask[e % 32] >> (e / 32)) & 1;
        dot += (low2(x[b].qs, e) - 4 * (high ^ 1)) * q[e];
      }
      isum += q3_K_scale(x[b].scales, g) * dot;
    }
    sum += h2f(x[b].d) * y.d[b] * (float)isum;
  }
  return sum;
}

float dot_q5_K(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_q5_K* x = (const block_q5_K*)w;
  const ActQ8_K y = act_q8_K(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 256; b++) {
    const int8_t* q = y.qs + b * 256;
    int isum = 0, msum = 0;
    for (int s = 0; s < 8; s++) {
      int sc, m;
      scale_min_k4(s, x[b].scales, &sc, &m);
      // sub-block s: nibble (s & 1) of qs[32 * (s / 2) + l], fifth bit s of qh[l]
      const uint8_t* qs = x[b].qs + 32 * (s / 2);
      int dot = 0;
      for (int l = 0; l < 32; l++) {
        const int v = ((s & 1) ? (qs[l] >> 4) : (qs[l] & 15)) | (((x[b].qh[l] >> s) & 1) << 4);
        dot += v * q[32 * s + l];
      }
      isum += sc * dot;
      msum += m * (y.bsums[b * 16 + 2 * s] + y.bsums[b * 16 + 2 * s + 1]);
    }
    sum += y.d[b] * (h2f(x[b].d) * (float)isum - h2f(x[b].dmin) * (float)msum);
  }
  return sum;
}

float dot_iq4_xs(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_iq4_xs* x = (const block_iq4_xs*)w;
  const ActQ8_K y = act_q8_K(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 256; b++) {
    const int8_t* q = y.qs + b * 256;
    int isum = 0;
    for (int s = 0; s < 8; s++) {  // sub-block s: an IQ4_NL block with a signed 6-bit scale
      const int ls = ((x[b].scales_l[s / 2] >> (4 * (s % 2))) & 15) | (((x[b].scales_h >> (2 * s)) & 3) << 4);
      const uint8_t* qs = x[b].qs + 16 * s;
      int dot = 0;
      for (int j = 0; j < 16; j++) {
        dot += kvalues_iq4nl[qs[j] & 15] * q[32 * s + j] + kvalues_iq4nl[qs[j] >> 4] * q[32 * s + j + 16];
      }
      isum += (ls - 32) * dot;
    }
    sum += h2f(x[b].d) * y.d[b] * (float)isum;
  }
  return sum;
}

float dot_q6_K(const uint8_t* w, const uint8_t* a, int64_t cols) {
  const block_q6_K* x = (const block_q6_K*)w;
  const ActQ8_K y = act_q8_K(a, cols);
  float sum = 0.f;
  for (int64_t b = 0; b < cols / 256; b++) {
    const int8_t* q = y.qs + b * 256;
    int isum = 0;
    for (int half_ = 0; half_ < 2; half_++) {  // two halves of 128 elements
      const uint8_t* ql = x[b].ql + 64 * half_;
      const uint8_t* qh = x[b].qh + 32 * half_;
      const int8_t* sc = x[b].scales + 8 * half_;
      const int8_t* qq = q + 128 * half_;
      for (int l = 0; l < 32; l++) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        isum += sc[is + 0] * q1 * qq[l] + sc[is + 2] * q2 * qq[l + 32] + sc[is + 4] * q3 * qq[l + 64] +
                sc[is + 6] * q4 * qq[l + 96];
      }
    }
    sum += h2f(x[b].d) * y.d[b] * (float)isum;
  }
  return sum;
}

}  // namespace

void gemm_q2_K(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_q2_K>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q3_K(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_q3_K>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q4_K(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_q4_K>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q5_K(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_q5_K>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_q6_K(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_q6_K>(w, r0, r1, a, s, n, y, ldy);
}
void gemm_iq4_xs(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* a, size_t s, int64_t n, float* y, int64_t ldy) {
  gemm_rows<dot_iq4_xs>(w, r0, r1, a, s, n, y, ldy);
}

}  // namespace qd::cpu::scalar

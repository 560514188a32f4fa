// The scalar pieces of attention that the SIMD versions share for their tails: exact half ->
// float, the fixed 8-lane reduction, the exp of the softmax, the 16-lane reduction tree; and the
// F16 score and value entries of the ISAs whose kernels read converted floats only.
// Everything is in an anonymous namespace: each ISA file that includes this keeps its own copy.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/kernels.h"

namespace qd::cpu {
namespace {

// Exact IEEE half -> float without branches; agrees with qd::fp16_to_f32 on all 65,536 inputs
// (the method of Maratos' FP16 library).
inline float half_bits_to_float(uint16_t h) {
  const uint32_t w = (uint32_t)h << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t nbits = (two_w >> 4) + (0xE0u << 23);
  float normalized;
  std::memcpy(&normalized, &nbits, 4);
  normalized *= 0x1.0p-112f;
  const uint32_t dbits = (two_w >> 17) | (126u << 23);
  float denormalized;
  std::memcpy(&denormalized, &dbits, 4);
  denormalized -= 0.5f;
  uint32_t nb, db;
  std::memcpy(&nb, &normalized, 4);
  std::memcpy(&db, &denormalized, 4);
  const uint32_t bits = sign | (two_w < (1u << 27) ? db : nb);
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// The batched attention kernels (kernels.h) for an ISA whose single-query version serves each
// query in turn.
template <void (*Dots)(const float* q, const float* k, int rows, int n, float scale, float* out)>
void each_query_dots(const float* const* q, float* const* out, int nq, const float* k, int rows, int n, float scale) {
  for (int j = 0; j < nq; j++) Dots(q[j], k, rows, n, scale, out[j]);
}

template <void (*Add)(const float* w, const float* v, int rows, int n, int lane0, float* partial)>
void each_query_weighted_add(const float* const* w, float* const* partial, int nq, const float* v, int rows, int n,
                             int lane0) {
  for (int j = 0; j < nq; j++) Add(w[j], v, rows, n, lane0, partial[j]);
}

// The F16 entries (kernels.h) of an ISA whose score or value kernel reads converted floats only:
// 64 rows at a time converted by H into a thread's buffer, then the float kernel F. The same bits,
// since that is what F computes on.
template <HalfRowsFn H, class Fn>
void over_converted_rows(const uint16_t* src, int rows, int n, Fn&& fn) {
  thread_local std::vector<float> buf;
  buf.resize((size_t)64 * n);
  for (int r0 = 0; r0 < rows; r0 += 64) {
    const int m = rows - r0 < 64 ? rows - r0 : 64;
    H(src + (size_t)r0 * n, (size_t)n, buf.data(), m, n);
    fn(buf.data(), r0, m);
  }
}

template <HalfRowsFn H, ScaledDotsFn F>
void scaled_dots_converting(const float* const* q, float* const* out, int nq, const uint16_t* k, int rows, int n,
                            float scale) {
  thread_local std::vector<float*> outs;
  outs.resize((size_t)nq);
  over_converted_rows<H>(k, rows, n, [&](const float* kf, int r0, int m) {
    for (int j = 0; j < nq; j++) outs[(size_t)j] = out[j] + r0;
    F(q, outs.data(), nq, kf, m, n, scale);
  });
}

template <HalfRowsFn H, WeightedRowsAddFn F>
void weighted_rows_add_converting(const float* const* w, float* const* partial, int nq, const uint16_t* v, int rows,
                                  int n, int lane0) {
  thread_local std::vector<const float*> ws;
  ws.resize((size_t)nq);
  over_converted_rows<H>(v, rows, n, [&](const float* vf, int r0, int m) {
    for (int j = 0; j < nq; j++) ws[(size_t)j] = w[j] + r0;
    F(ws.data(), partial, nq, vf, m, n, (lane0 + r0) % kAttentionLanes);
  });
}

inline float reduce8(const float* acc) {
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// exp(x) for x in [-87, 0] (smaller x are clamped: their exp is below 2e-38) with a relative
// error of a few ulp: x = n ln2 + r, |r| <= ln2/2, e^r by Cephes' degree-6 polynomial, times 2^n.
// Plain multiplies and adds only, so the scalar and vector versions agree bit for bit.
constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f, kP3 = 4.1665795894e-2f,
                kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float n = (x * kLog2e + kRound) - kRound;
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  p = (p * (r * r) + r) + 1.0f;
  const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

// out[d] for d < m, lane l's partial sum of column d at partial[l * stride + d].
inline void reduce_lanes_strided(const float* partial, int m, int stride, float* out) {
  for (int d = 0; d < m; d++) {
    float t[8], u[4];
    for (int i = 0; i < 8; i++) t[i] = partial[(size_t)(i + 8) * stride + d] + partial[(size_t)i * stride + d];
    for (int i = 0; i < 4; i++) u[i] = t[i + 4] + t[i];
    out[d] = (u[0] + u[2]) + (u[1] + u[3]);
  }
}


}  // namespace
}  // namespace qd::cpu

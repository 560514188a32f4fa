// Activation quantization (scalar, used by every ISA so all ISAs see the same int8 activations).
#include <cmath>
#include <cstring>

#include "cpu/act_layout.h"

namespace qd::cpu {

namespace {

// Round to nearest, ties to even, for |v| < 2^22: exact and the same on every CPU.
inline int nearest_int(float v) {
  const float big = 12582912.f;  // 1.5 * 2^23
  float t = v + big;
  int32_t i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Quantizes one block of `len` floats to int8 with scale d = amax / 127; returns d.
float quantize_block(const float* x, int len, int8_t* q) {
  float amax = 0.f;
  for (int k = 0; k < len; k++) amax = std::fmax(amax, std::fabs(x[k]));
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  for (int k = 0; k < len; k++) {
    int v = nearest_int(x[k] * id);
    q[k] = (int8_t)(v > 127 ? 127 : (v < -127 ? -127 : v));
  }
  return d;
}

void quantize_q8_0(const float* x, int64_t cols, uint8_t* dst) {
  const ActQ8_0 v = act_q8_0(dst, cols);
  int8_t* qs = const_cast<int8_t*>(v.qs);
  float* d = const_cast<float*>(v.d);
  float* s = const_cast<float*>(v.s);
  float* d8 = const_cast<float*>(v.d8);
  float* d2 = const_cast<float*>(v.d2);
  for (int64_t b = 0; b < cols / 32; b++) {
    d[b] = quantize_block(x + b * 32, 32, qs + b * 32);
    int sum = 0;
    for (int k = 0; k < 32; k++) sum += qs[b * 32 + k];
    s[b] = d[b] * (float)sum;
    for (int k = 0; k < 8; k++) d8[8 * b + k] = d[b];
    d2[2 * b] = d2[2 * b + 1] = d[b];
  }
  act_fill_group_order(qs, cols, const_cast<int8_t*>(v.qsg));
}

void quantize_q8_K(const float* x, int64_t cols, uint8_t* dst) {
  const ActQ8_K v = act_q8_K(dst, cols);
  int8_t* qs = const_cast<int8_t*>(v.qs);
  float* d = const_cast<float*>(v.d);
  int16_t* bsums = const_cast<int16_t*>(v.bsums);
  float* dsums = const_cast<float*>(v.dsums);
  for (int64_t b = 0; b < cols / 256; b++) d[b] = quantize_block(x + b * 256, 256, qs + b * 256);
  for (int64_t g = 0; g < cols / 16; g++) {
    int sum = 0;
    for (int k = 0; k < 16; k++) sum += qs[g * 16 + k];
    bsums[g] = (int16_t)sum;
    dsums[g] = d[g / 16] * (float)sum;
  }
  act_fill_group_order(qs, cols, const_cast<int8_t*>(v.qsg));
  act_fill_group16_order(qs, cols, const_cast<int8_t*>(v.qsg16));
}

}  // namespace

void quantize_act_row(ActFormat f, const float* x, int64_t cols, uint8_t* dst) {
  switch (f) {
    case ActFormat::q8_0: quantize_q8_0(x, cols, dst); break;
    case ActFormat::q8_K: quantize_q8_K(x, cols, dst); break;
    case ActFormat::f32: std::memcpy(dst, x, (size_t)cols * 4); break;
  }
}

}  // namespace qd::cpu

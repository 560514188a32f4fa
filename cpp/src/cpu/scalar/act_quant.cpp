// Activation quantization, scalar: the values every ISA's quantizer reproduces bit for bit.
#include <cmath>
#include <cstring>

#include "cpu/act_layout.h"
#include "cpu/scalar/kernels.h"
#include "quant/fp16.h"

namespace qd::cpu {

namespace scalar {

namespace {

// Round to nearest, ties to even, for |v| < 2^22: exact and the same on every CPU.
inline int nearest_int(float v) {
  const float big = 12582912.f;  // 1.5 * 2^23
  float t = v + big;
  int32_t i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Quantizes one block of `len` floats to int8 the way llama.cpp's x86 quantize_row_q8_0/q8_1
// (and quantize_row_q8_K) do, so both engines pick the same int8 values: multiplier
// 127 / amax (not 1 / d), round half to even. Returns the unrounded scale amax / 127.
float quantize_block(const float* x, int len, int8_t* q, float* iscale_out) {
  float amax = 0.f;
  for (int k = 0; k < len; k++) amax = std::fmax(amax, std::fabs(x[k]));
  const float id = amax != 0.f ? 127.f / amax : 0.f;
  for (int k = 0; k < len; k++) {
    int v = nearest_int(x[k] * id);
    q[k] = (int8_t)(v > 127 ? 127 : (v < -127 ? -127 : v));
  }
  *iscale_out = id;
  return amax / 127.f;
}

inline float round_to_half(float v) { return fp16_to_f32(f32_to_fp16(v)); }

}  // namespace

// llama.cpp's block_q8_0 / block_q8_1 store d as FP16, and its dot products use the rounded d: so
// do we. s = d * sum (exact in float: 11-bit d times a sum below 2^12) is what the kernels need for
// the offsets of Q4_0/Q5_0/Q8_0/IQ4_NL; sm, for the mins of Q4_1/Q5_1, is block_q8_1's s exactly:
// the unrounded d times the sum, rounded to FP16.
void quantize_q8_0(const float* x, int64_t cols, uint8_t* dst) {
  const ActQ8_0 v = act_q8_0(dst, cols);
  int8_t* qs = const_cast<int8_t*>(v.qs);
  float* d = const_cast<float*>(v.d);
  float* s = const_cast<float*>(v.s);
  float* d8 = const_cast<float*>(v.d8);
  float* d2 = const_cast<float*>(v.d2);
  float* sm = const_cast<float*>(v.sm);
  for (int64_t b = 0; b < cols / 32; b++) {
    float id;
    const float d_exact = quantize_block(x + b * 32, 32, qs + b * 32, &id);
    int sum = 0;
    for (int k = 0; k < 32; k++) sum += qs[b * 32 + k];
    d[b] = round_to_half(d_exact);
    s[b] = d[b] * (float)sum;
    sm[b] = round_to_half(d_exact * (float)sum);
    for (int k = 0; k < 8; k++) d8[8 * b + k] = d[b];
    d2[2 * b] = d2[2 * b + 1] = d[b];
  }
  act_fill_group_order(qs, cols, const_cast<int8_t*>(v.qsg));
  act_fill_lane4_sums(qs, cols, const_cast<int32_t*>(v.a4));
}

// llama.cpp's block_q8_K keeps d in float, as d = 1 / iscale (its iscale is -127 / (signed
// max); the sign flip of q and d cancels in every product, so the values here are the same).
void quantize_q8_K(const float* x, int64_t cols, uint8_t* dst) {
  const ActQ8_K v = act_q8_K(dst, cols);
  int8_t* qs = const_cast<int8_t*>(v.qs);
  float* d = const_cast<float*>(v.d);
  int16_t* bsums = const_cast<int16_t*>(v.bsums);
  float* dsums = const_cast<float*>(v.dsums);
  for (int64_t b = 0; b < cols / 256; b++) {
    float id;
    quantize_block(x + b * 256, 256, qs + b * 256, &id);
    d[b] = id != 0.f ? 1.f / id : 0.f;
  }
  for (int64_t g = 0; g < cols / 16; g++) {
    int sum = 0;
    for (int k = 0; k < 16; k++) sum += qs[g * 16 + k];
    bsums[g] = (int16_t)sum;
    dsums[g] = d[g / 16] * (float)sum;
  }
  act_fill_group_order(qs, cols, const_cast<int8_t*>(v.qsg));
  act_fill_group16_order(qs, cols, const_cast<int8_t*>(v.qsg16));
  act_fill_k_sums(v, cols);
}

}  // namespace scalar

void quantize_act_row(ActFormat f, const float* x, int64_t cols, uint8_t* dst) {
  switch (f) {
    case ActFormat::q8_0: scalar::quantize_q8_0(x, cols, dst); break;
    case ActFormat::q8_K: scalar::quantize_q8_K(x, cols, dst); break;
    case ActFormat::f32: std::memcpy(dst, x, (size_t)cols * 4); break;
  }
}

}  // namespace qd::cpu

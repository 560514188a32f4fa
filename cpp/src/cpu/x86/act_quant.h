// Activation quantization with AVX2. Bit-identical to the scalar quantizer (cpu/scalar/act_quant.cpp:
// same amax, multiplier 127 / amax, round-half-even, llama.cpp's scales: Q8_0 d rounded to FP16,
// Q8_K d = 1 / multiplier), so every ISA feeds its kernels the same int8 activations. Include
// rules: see x86/common.h.
#pragma once
#include "cpu/act_layout.h"
#include "cpu/x86/common.h"

namespace qd::cpu {
namespace {

inline float round_to_half(float v) { return _cvtsh_ss(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT)); }

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline float amax_of(const float* x, int len) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < len; k += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)));
  return hmax(m);
}

// 32 floats * id -> 32 int8 (round half to even); i32[4] receives the four 8-lane int vectors.
inline void quantize32(const float* x, float id, int8_t* q, __m256i i32[4]) {
  const __m256 vid = _mm256_set1_ps(id);
  for (int k = 0; k < 4; k++) {
    const __m256 t = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vid),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    i32[k] = _mm256_cvtps_epi32(t);
  }
  const __m256i p16a = _mm256_packs_epi32(i32[0], i32[1]), p16b = _mm256_packs_epi32(i32[2], i32[3]);
  const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
  // packs work within 128-bit lanes: restore element order
  const __m256i ordered = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256((__m256i*)q, ordered);
}

void x86_quantize_q8_0(const float* x, int64_t cols, uint8_t* dst) {
  const ActQ8_0 v = act_q8_0(dst, cols);
  int8_t* qs = const_cast<int8_t*>(v.qs);
  float *d = const_cast<float*>(v.d), *s = const_cast<float*>(v.s), *d8 = const_cast<float*>(v.d8);
  float* sm = const_cast<float*>(v.sm);
  for (int64_t b = 0; b < cols / 32; b++) {
    const float amax = amax_of(x + 32 * b, 32);
    const float id = amax != 0.f ? 127.f / amax : 0.f;
    __m256i i32[4];
    quantize32(x + 32 * b, id, qs + 32 * b, i32);
    const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3])));
    const float db = round_to_half(amax / 127.f);
    d[b] = db;
    s[b] = db * (float)sum;
    sm[b] = round_to_half(amax / 127.f * (float)sum);
    _mm256_storeu_ps(d8 + 8 * b, _mm256_set1_ps(db));
    const_cast<float*>(v.d2)[2 * b] = const_cast<float*>(v.d2)[2 * b + 1] = db;
  }
  act_fill_group_order(qs, cols, const_cast<int8_t*>(v.qsg));
  act_fill_lane4_sums(qs, cols, const_cast<int32_t*>(v.a4));
}

void x86_quantize_q8_K(const float* x, int64_t cols, uint8_t* dst) {
  const ActQ8_K v = act_q8_K(dst, cols);
  int8_t* qs = const_cast<int8_t*>(v.qs);
  float *d = const_cast<float*>(v.d), *dsums = const_cast<float*>(v.dsums);
  int16_t* bsums = const_cast<int16_t*>(v.bsums);
  for (int64_t b = 0; b < cols / 256; b++) {
    const float amax = amax_of(x + 256 * b, 256);
    const float id = amax != 0.f ? 127.f / amax : 0.f;
    const float db = id != 0.f ? 1.f / id : 0.f;
    d[b] = db;
    for (int k = 0; k < 8; k++) {
      __m256i i32[4];
      quantize32(x + 256 * b + 32 * k, id, qs + 256 * b + 32 * k, i32);
      const int s0 = hsum_i32(_mm256_add_epi32(i32[0], i32[1])), s1 = hsum_i32(_mm256_add_epi32(i32[2], i32[3]));
      bsums[16 * b + 2 * k] = (int16_t)s0;
      bsums[16 * b + 2 * k + 1] = (int16_t)s1;
      dsums[16 * b + 2 * k] = db * (float)s0;
      dsums[16 * b + 2 * k + 1] = db * (float)s1;
    }
  }
  act_fill_group_order(qs, cols, const_cast<int8_t*>(v.qsg));
  act_fill_group16_order(qs, cols, const_cast<int8_t*>(v.qsg16));
  act_fill_k_sums(v, cols);
}

}  // namespace
}  // namespace qd::cpu

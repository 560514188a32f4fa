// AVX-512 helpers on 512-bit vectors, and the ISA tag of the AVX-512 kernel files. Include rules:
// see x86/common.h.
#pragma once
#include "cpu/x86/common.h"

namespace qd::cpu {
namespace {

struct Avx512Tag {
  static constexpr DotU8S8 kDot = DotU8S8::vnni_evex;
  // 32 vector registers: up to 2 accumulators per row + temporaries; 9 rows verify a draft of 8 in
  // one pass over the weights
  static constexpr int kMaxRows = 9;
};

inline __m512i join256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

inline float hsum512(__m512 v) {
  return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

}  // namespace
}  // namespace qd::cpu

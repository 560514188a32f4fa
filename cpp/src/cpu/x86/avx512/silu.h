// SwiGLU's silu(gate) * up on AVX-512 as ggml computes it. Include rules: see x86/common.h.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "cpu/x86/avx512/expf.h"

namespace qd::cpu::avx512 {
namespace {

// ggml's swiglu on this ISA: silu by ggml_v_silu on 16 values at a time, the tail by expf.
void silu_mul(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(gate + i);
    const __m512 e = ggml_expf512(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 s = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_storeu_ps(gate + i, _mm512_mul_ps(s, _mm512_loadu_ps(up + i)));
  }
  for (; i < n; i++) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace
}  // namespace qd::cpu::avx512

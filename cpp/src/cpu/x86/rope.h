// Rotary embedding with the FMA instruction (same bits as the scalar table's std::fma). Include
// rules: see x86/common.h.
#pragma once
#include <immintrin.h>

#include "cpu/scalar/rope.h"

namespace qd::cpu {
namespace {

void x86_rope(float* x, int n_rows, int n_heads, int head_dim, int n_rot, bool neox, const float* cos, const float* sin) {
  rope_rows(x, n_rows, n_heads, head_dim, n_rot, neox, cos, sin, [](float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
  });
}

}  // namespace
}  // namespace qd::cpu

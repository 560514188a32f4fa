// AVX-512 (F, VL, BW, DQ) attention over the F16 KV cache in llama.cpp's orders on this ISA:
// 16 lanes, its reduction trees and its exp. Include rules: see x86/common.h.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cpu/scalar/attention.h"
#include "cpu/x86/avx512/expf.h"
#include "cpu/x86/common.h"

namespace qd::cpu::avx512 {
namespace {

// 16 lanes -> 8 (the two 256-bit halves added).
inline __m256 fold16(__m512 v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }

// _mm512_reduce_add_ps's tree as GCC writes it (and ggml's tinyBLAS sums with): the 256-bit halves,
// then the 128-bit halves, then lanes (0 + 2) + (1 + 3). Four sums at once.
inline __m128 half4(__m512 v) {  // lanes 0 + 2 and 1 + 3 of the 4-lane stage
  const __m256 t = fold16(v);
  const __m128 u = _mm_add_ps(_mm256_extractf128_ps(t, 1), _mm256_castps256_ps128(t));
  return _mm_add_ps(u, _mm_movehl_ps(u, u));
}

inline __m128 reduce4(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  return _mm_hadd_ps(_mm_movelh_ps(half4(v0), half4(v1)), _mm_movelh_ps(half4(v2), half4(v3)));
}

// 16 lanes (i % 16), one FMA chain per key, the chains of four keys interleaved: llama.cpp's
// tinyBLAS order for F16 K against F16-rounded q (whose products are exact in float).
void scaled_dots_one(const float* q, const float* k, int rows, int n, float scale, float* out) {
  const int n16 = n / 16 * 16;
  auto tail = [&](float sum, const float* kr) {  // the elements past the last 16, then the scale
    for (int i = n16; i < n; i++) sum += q[i] * kr[i];
    return sum * scale;
  };
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float* k0 = k + (size_t)r * n;
    __m512 v[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int i = 0; i < n16; i += 16) {
      const __m512 qi = _mm512_loadu_ps(q + i);
      for (int t = 0; t < 4; t++) v[t] = _mm512_fmadd_ps(_mm512_loadu_ps(k0 + (size_t)t * n + i), qi, v[t]);
    }
    const __m128 sums = reduce4(v[0], v[1], v[2], v[3]);
    if (n16 == n) {
      _mm_storeu_ps(out + r, _mm_mul_ps(sums, _mm_set1_ps(scale)));
    } else {
      alignas(16) float s4[4];
      _mm_store_ps(s4, sums);
      for (int t = 0; t < 4; t++) out[r + t] = tail(s4[t], k0 + (size_t)t * n);
    }
  }
  for (; r < rows; r++) {
    const float* kr = k + (size_t)r * n;
    __m512 v = _mm512_setzero_ps();
    for (int i = 0; i < n16; i += 16) v = _mm512_fmadd_ps(_mm512_loadu_ps(kr + i), _mm512_loadu_ps(q + i), v);
    const __m512 z = _mm512_setzero_ps();
    out[r] = tail(_mm_cvtss_f32(reduce4(v, z, z, z)), kr);
  }
}

// ggml_compute_forward_soft_max_f32 on this ISA: exp(x - max) by 16-lane chunks aligned to key
// index 0 (x[0] sits in lane `phase`; lanes of keys a query does not see hold exact zeros, as
// llama.cpp's mask makes them), each chunk's sum in the reduce tree added into a double, then
// every value times (float)(1 / sum).
void softmax(float* x, int n, int phase) {
  __m512 vm = _mm512_set1_ps(x[0]);
  int j0 = 0;
  for (; j0 + 16 <= n; j0 += 16) vm = _mm512_max_ps(vm, _mm512_loadu_ps(x + j0));
  vm = _mm512_max_ps(vm, _mm512_mask_loadu_ps(vm, (__mmask16)((1u << (n - j0)) - 1u), x + j0));
  const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(vm));  // max: any order gives the same
  double sum = 0.0;
  // chunk c covers x[c - phase .. c - phase + 16), lanes outside [0, n) masked
  for (int c = 0; c < n + phase; c += 16) {
    const int lo = c - phase;
    const uint32_t first = lo < 0 ? (uint32_t)-lo : 0u, last = (uint32_t)std::min(16, n - lo);
    const __mmask16 k = (__mmask16)(((1u << last) - 1u) & ~((1u << first) - 1u));
    const float* src = x + lo;  // lanes outside k are neither read nor written
    const __m512 e = _mm512_maskz_mov_ps(k, ggml_expf512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, src), vmax)));
    _mm512_mask_storeu_ps(x + lo, k, e);
    const __m128 w = half4(e);
    sum += (double)(_mm_cvtss_f32(w) + _mm_cvtss_f32(_mm_movehdup_ps(w)));
  }
  const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
  int j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), inv));
  const __mmask16 k = (__mmask16)((1u << (n - j)) - 1u);
  _mm512_mask_storeu_ps(x + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), inv));
}

// reduce_lanes with 16 columns per step: the same tree, lane by lane.
void reduce_lanes(const float* partial, int n, float* out) {
  int d = 0;
  for (; d + 16 <= n; d += 16) {
    __m512 t[8];
    for (int i = 0; i < 8; i++) {
      t[i] = _mm512_add_ps(_mm512_loadu_ps(partial + (size_t)(i + 8) * n + d), _mm512_loadu_ps(partial + (size_t)i * n + d));
    }
    for (int i = 0; i < 4; i++) t[i] = _mm512_add_ps(t[i + 4], t[i]);
    _mm512_storeu_ps(out + d, _mm512_add_ps(_mm512_add_ps(t[0], t[2]), _mm512_add_ps(t[1], t[3])));
  }
  if (d < n) reduce_lanes_strided(partial + d, n - d, n, out + d);
}

// reduce4's sums of four 16-lane accumulators, each held as its 256-bit halves (lanes 0-7 in lo,
// 8-15 in hi): fold16, the 128-bit halves, then lanes (0 + 2) + (1 + 3). The same bits as reduce4.
inline __m128 reduce4_halves(const __m256* lo, const __m256* hi) {
  __m256 t[4];
  for (int i = 0; i < 4; i++) t[i] = _mm256_add_ps(lo[i], hi[i]);  // fold16
  // u_i = t_i + t_(i + 4), for [t0 | t1] and [t2 | t3], then reordered to u0, u2, u1, u3
  const __m256 u01 = _mm256_add_ps(_mm256_permute2f128_ps(t[0], t[1], 0x20), _mm256_permute2f128_ps(t[0], t[1], 0x31));
  const __m256 u23 = _mm256_add_ps(_mm256_permute2f128_ps(t[2], t[3], 0x20), _mm256_permute2f128_ps(t[2], t[3], 0x31));
  constexpr int k0213 = _MM_SHUFFLE(3, 1, 2, 0);
  const __m256 h = _mm256_hadd_ps(_mm256_permute_ps(u01, k0213), _mm256_permute_ps(u23, k0213));  // u0 + u2, u1 + u3
  const __m256 s = _mm256_hadd_ps(h, h);  // (u0 + u2) + (u1 + u3): [t0, t2, t0, t2 | t1, t3, t1, t3]
  return _mm_unpacklo_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// Q queries against keys [r, r + 4) (rows n floats apart, n a multiple of 16), each key loaded once
// for the Q queries. Every dot is scaled_dots_one's 16 FMA chains (as two 256-bit halves, 32
// registers hold the tile) and its tree. 256-bit halves measured faster than 512-bit tiles on Zen 4,
// which splits 512-bit FMAs in two.
template <int Q>
inline void dots_tile(const float* const* q, float* const* out, const float* k, int r, int n, float scale) {
  const float* k0 = k + (size_t)r * n;
  __m256 lo[Q][4], hi[Q][4];
  for (int j = 0; j < Q; j++) {
    for (int t = 0; t < 4; t++) lo[j][t] = hi[j][t] = _mm256_setzero_ps();
  }
  for (int i = 0; i < n; i += 16) {
    __m256 qlo[Q], qhi[Q];
    for (int j = 0; j < Q; j++) {
      qlo[j] = _mm256_loadu_ps(q[j] + i);
      qhi[j] = _mm256_loadu_ps(q[j] + i + 8);
    }
    for (int t = 0; t < 4; t++) {
      __m256 klo = _mm256_loadu_ps(k0 + (size_t)t * n + i), khi = _mm256_loadu_ps(k0 + (size_t)t * n + i + 8);
      __asm__("" : "+v"(klo), "+v"(khi));  // one load for the Q queries: GCC would fold a load into each FMA
      for (int j = 0; j < Q; j++) {
        lo[j][t] = _mm256_fmadd_ps(klo, qlo[j], lo[j][t]);
        hi[j][t] = _mm256_fmadd_ps(khi, qhi[j], hi[j][t]);
      }
    }
  }
  for (int j = 0; j < Q; j++) _mm_storeu_ps(out[j] + r, _mm_mul_ps(reduce4_halves(lo[j], hi[j]), _mm_set1_ps(scale)));
}

// Queries in tiles of kDotQueries: 16 accumulators, 4 query halves and a key's 2 fit the registers.
constexpr int kDotQueries = 2;

void scaled_dots(const float* const* q, float* const* out, int nq, const float* k, int rows, int n, float scale) {
  if (n % 16 != 0) {
    each_query_dots<scaled_dots_one>(q, out, nq, k, rows, n, scale);
    return;
  }
  query_key_tiles<kDotQueries>(
      nq, rows, [&](auto qc, int j, int r) { dots_tile<decltype(qc)::value>(q + j, out + j, k, r, n, scale); },
      [&](int j, int r0) { scaled_dots_one(q[j], k + (size_t)r0 * n, rows - r0, n, scale, out[j] + r0); });
}

}  // namespace
}  // namespace qd::cpu::avx512

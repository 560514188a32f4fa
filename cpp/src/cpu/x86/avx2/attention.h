// AVX2 + FMA + F16C attention over the F16 KV cache: 8 lanes, fused multiply-adds. Each result's
// order depends only on its inputs' lengths. Include rules: see x86/common.h.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cpu/scalar/attention.h"
#include "cpu/x86/common.h"

namespace qd::cpu::avx2 {
namespace {

// Rows this far ahead are prefetched into L2: a long context's cache streams from memory, row after
// row, and the rows of the next chunk of keys (model/kv_cache.cpp converts 64 at a time) arrive
// while the score and value kernels work on this one. 16 rows ahead into L1 left the conversion
// waiting on memory. Zen 4, 2 threads, the 1.5B's shape after 3000 positions, against 16 rows into
// L1 (medians of alternated rounds): attention alone (bench/attention.py) takes 0.83x the time for
// one row on forced AVX2 and 0.78x on AVX-512, 0.99x and 0.97x for 8 rows (128 rows ahead: 0.87x
// and 0.80x, 0.96x and 0.97x); the whole forward of one row 0.97-0.99x, of 8 rows 0.99x.
constexpr int kPrefetchRows = 64;

// 8 floats of a key or value row: loaded, or converted from the cache's F16 in the register. The
// conversion is exact, so every kernel below gives the same bits from either source; reading F16
// saves the converted copy where few queries share each row (a decode), converting once per tile
// of queries instead.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline float load1(float x) { return x; }
inline float load1(uint16_t h) { return half_bits_to_float(h); }

inline void half_to_float_rows(const uint16_t* src, size_t stride, float* dst, int rows, int n) {
  for (int r = 0; r < rows; r++) {
    const uint16_t* s = src + (size_t)r * stride;
    const char* ahead = reinterpret_cast<const char*>(s + kPrefetchRows * stride);  // never faults
    for (int b = 0; b < 2 * n; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T1);
    float* d = dst + (size_t)r * n;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
    }
    for (; i < n; i++) d[i] = half_bits_to_float(s[i]);
  }
}

// Four rows at a time: four independent FMA chains keep the unit busy (one chain waits on each
// FMA's latency); each row's lanes are summed in the same order as one row alone.
template <class T>
inline void scaled_dots_one(const float* q, const T* k, int rows, int n, float scale, float* out) {
  const int n8 = n / 8 * 8;
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    const T* k0 = k + (size_t)r * n;
    __m256 v[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < n8; i += 8) {
      const __m256 qi = _mm256_loadu_ps(q + i);
      for (int t = 0; t < 4; t++) v[t] = _mm256_fmadd_ps(qi, load8(k0 + (size_t)t * n + i), v[t]);
    }
    for (int t = 0; t < 4; t++) {
      alignas(32) float acc[8];
      _mm256_store_ps(acc, v[t]);
      for (int i = n8; i < n; i++) acc[i & 7] += q[i] * load1(k0[(size_t)t * n + i]);
      out[r + t] = scale * reduce8(acc);
    }
  }
  for (; r < rows; r++) {
    const T* kr = k + (size_t)r * n;
    __m256 v = _mm256_setzero_ps();
    for (int i = 0; i < n8; i += 8) v = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(kr + i), v);
    alignas(32) float acc[8];
    _mm256_store_ps(acc, v);
    for (int i = n8; i < n; i++) acc[i & 7] += q[i] * load1(kr[i]);
    out[r] = scale * reduce8(acc);
  }
}

// The sums of four 8-lane accumulators in reduce8's tree, ((a0 + a4) + (a1 + a5)) + ((a2 + a6) +
// (a3 + a7)), as the four lanes of the result: the same bits as reduce8 on each.
inline __m128 reduce8x4(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
  // a_i + a_(i + 4): [v0 | v1], [v2 | v3]
  const __m256 p01 = _mm256_add_ps(_mm256_permute2f128_ps(v0, v1, 0x20), _mm256_permute2f128_ps(v0, v1, 0x31));
  const __m256 p23 = _mm256_add_ps(_mm256_permute2f128_ps(v2, v3, 0x20), _mm256_permute2f128_ps(v2, v3, 0x31));
  const __m256 h = _mm256_hadd_ps(p01, p23);  // p0 + p1, p2 + p3 of [v0, v2 | v1, v3]
  const __m256 t = _mm256_hadd_ps(h, h);      // (p0 + p1) + (p2 + p3): [v0, v2, v0, v2 | v1, v3, v1, v3]
  return _mm_unpacklo_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

// Q queries against keys [r, r + 4) (rows n elements apart, n a multiple of 8): each key vector is
// loaded once for the Q queries. Each dot is scaled_dots_one's FMA chain and tree.
template <int Q, class T>
inline void dots_tile(const float* const* q, float* const* out, const T* k, int r, int n, float scale) {
  const T* k0 = k + (size_t)r * n;
  __m256 v[Q][4];
  for (int j = 0; j < Q; j++) {
    for (int t = 0; t < 4; t++) v[j][t] = _mm256_setzero_ps();
  }
  for (int i = 0; i < n; i += 8) {
    __m256 qi[Q];
    for (int j = 0; j < Q; j++) qi[j] = _mm256_loadu_ps(q[j] + i);
    for (int t = 0; t < 4; t++) {
      const __m256 kt = load8(k0 + (size_t)t * n + i);
      for (int j = 0; j < Q; j++) v[j][t] = _mm256_fmadd_ps(qi[j], kt, v[j][t]);
    }
  }
  for (int j = 0; j < Q; j++) {
    _mm_storeu_ps(out[j] + r, _mm_mul_ps(reduce8x4(v[j][0], v[j][1], v[j][2], v[j][3]), _mm_set1_ps(scale)));
  }
}

// Queries in tiles of kDotQueries (12 accumulators, 3 queries and a key fill the 16 registers),
// keys in tiles of 4.
constexpr int kDotQueries = 3;

template <class T>
inline void scaled_dots(const float* const* q, float* const* out, int nq, const T* k, int rows, int n, float scale) {
  if (n % 8 != 0) {
    for (int j = 0; j < nq; j++) scaled_dots_one(q[j], k, rows, n, scale, out[j]);
    return;
  }
  query_key_tiles<kDotQueries>(
      nq, rows, [&](auto qc, int j, int r) { dots_tile<decltype(qc)::value>(q + j, out + j, k, r, n, scale); },
      [&](int j, int r0) { scaled_dots_one(q[j], k + (size_t)r0 * n, rows - r0, n, scale, out[j] + r0); });
}

inline float exp_shift_sum(float* x, int n, float shift) {
  const __m256 vshift = _mm256_set1_ps(shift), lo = _mm256_set1_ps(-87.0f), round = _mm256_set1_ps(kRound);
  __m256 sum = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 t = _mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vshift), lo);
    const __m256 nf = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(t, _mm256_set1_ps(kLog2e)), round), round);
    __m256 r = _mm256_sub_ps(t, _mm256_mul_ps(nf, _mm256_set1_ps(kLn2Hi)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(nf, _mm256_set1_ps(kLn2Lo)));
    __m256 p = _mm256_set1_ps(kP0);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP1));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP2));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP3));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP4));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP5));
    p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r), _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nf), _mm256_set1_epi32(127)), 23);
    const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    _mm256_storeu_ps(x + i, y);
    sum = _mm256_add_ps(sum, y);
  }
  alignas(32) float acc[8];
  _mm256_store_ps(acc, sum);
  for (; i < n; i++) {
    x[i] = exp_nonpositive(x[i] - shift);
    acc[i & 7] += x[i];
  }
  return reduce8(acc);
}

inline void softmax(float* x, int n, int phase) {
  (void)phase;
  // The maximum in 8 lanes, then across them: any order gives the same value.
  __m256 vm = _mm256_set1_ps(x[0]);
  int j = 0;
  for (; j + 8 <= n; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + j));
  float mx = hmax(vm);
  for (; j < n; j++) mx = std::max(mx, x[j]);
  const float inv_sum = 1.0f / exp_shift_sum(x, n, mx);
  for (int j = 0; j < n; j++) x[j] *= inv_sum;
}

// Lane by lane (the rows r0, r0 + 16, ... of one lane), C x 8 columns in registers per pass: each
// row's weight is broadcast once for 8C columns, and the lane's partial sums are loaded and stored
// once per pass, not once per row. Every lane still adds its rows in row order: the same bits as
// one row at a time.
template <int C, class T>
inline void lane_columns(const float* w, const T* v, int r0, int rows, int n, float* o) {
  __m256 acc[C];
  for (int t = 0; t < C; t++) acc[t] = _mm256_loadu_ps(o + 8 * t);
  for (int r = r0; r < rows; r += kAttentionLanes) {
    const __m256 wr = _mm256_set1_ps(w[r]);
    const T* vr = v + (size_t)r * n;
    for (int t = 0; t < C; t++) acc[t] = _mm256_fmadd_ps(wr, load8(vr + 8 * t), acc[t]);
  }
  for (int t = 0; t < C; t++) _mm256_storeu_ps(o + 8 * t, acc[t]);
}

template <class T>
inline void weighted_rows_add_one(const float* w, const T* v, int rows, int n, int lane0, float* partial) {
  for (int r0 = 0; r0 < rows && r0 < kAttentionLanes; r0++) {
    float* o = partial + (size_t)((lane0 + r0) % kAttentionLanes) * n;
    int d = 0;
    for (; d + 64 <= n; d += 64) lane_columns<8, T>(w, v + d, r0, rows, n, o + d);
    for (; d + 8 <= n; d += 8) lane_columns<1, T>(w, v + d, r0, rows, n, o + d);
    for (; d < n; d++) {
      for (int r = r0; r < rows; r += kAttentionLanes) o[d] += w[r] * load1(v[(size_t)r * n + d]);
    }
  }
}

// lane_columns for Q queries and 4 x 8 columns: each row of values is loaded once for the Q queries.
// o[j] + d: query j's partial sums of the lane at column d. Every sum is lane_columns' chain.
template <int Q, class T>
inline void lane_columns_q(const float* const* w, const T* v, int r0, int rows, int n, float* const* o, int d) {
  __m256 acc[Q][4];
  for (int j = 0; j < Q; j++) {
    for (int t = 0; t < 4; t++) acc[j][t] = _mm256_loadu_ps(o[j] + d + 8 * t);
  }
  for (int r = r0; r < rows; r += kAttentionLanes) {
    __m256 wr[Q];
    for (int j = 0; j < Q; j++) wr[j] = _mm256_set1_ps(w[j][r]);
    const T* vr = v + (size_t)r * n + d;
    for (int t = 0; t < 4; t++) {
      __m256 vt = load8(vr + 8 * t);
      __asm__("" : "+x"(vt));  // one load for the Q queries: GCC would fold a load into each FMA
      for (int j = 0; j < Q; j++) acc[j][t] = _mm256_fmadd_ps(wr[j], vt, acc[j][t]);
    }
  }
  for (int j = 0; j < Q; j++) {
    for (int t = 0; t < 4; t++) _mm256_storeu_ps(o[j] + d + 8 * t, acc[j][t]);
  }
}

// Queries in tiles of kAddQueries (12 accumulators, 3 weights and a value row fill the 16 registers).
constexpr int kAddQueries = 3;

// Query tile by tile, then lane by lane: the chunk's value rows stay in L1 for all the tiles.
// (Lane by lane first measured 10 % slower for verify(8) at 3000 keys, AVX2 on Zen 4.)
template <class T>
inline void weighted_rows_add(const float* const* w, float* const* partial, int nq, const T* v, int rows, int n,
                              int lane0) {
  if (n % 32 != 0) {
    for (int j = 0; j < nq; j++) weighted_rows_add_one(w[j], v, rows, n, lane0, partial[j]);
    return;
  }
  for (int j = 0; j < nq; j += kAddQueries) {
    const int m = std::min(kAddQueries, nq - j);
    for (int r0 = 0; r0 < rows && r0 < kAttentionLanes; r0++) {
      const size_t lane = (size_t)((lane0 + r0) % kAttentionLanes) * n;
      float* o[kAddQueries];
      for (int jj = 0; jj < m; jj++) o[jj] = partial[j + jj] + lane;
      with_rows<1, kAddQueries>(m, [&](auto qc) {
        for (int d = 0; d < n; d += 32) lane_columns_q<decltype(qc)::value, T>(w + j, v, r0, rows, n, o, d);
      });
    }
  }
}

// reduce_lanes with 8 columns per step: the same tree, lane by lane.
inline void reduce_lanes(const float* partial, int n, float* out) {
  int d = 0;
  for (; d + 8 <= n; d += 8) {
    __m256 t[8];
    for (int i = 0; i < 8; i++) {
      t[i] = _mm256_add_ps(_mm256_loadu_ps(partial + (size_t)(i + 8) * n + d), _mm256_loadu_ps(partial + (size_t)i * n + d));
    }
    for (int i = 0; i < 4; i++) t[i] = _mm256_add_ps(t[i + 4], t[i]);
    _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(t[0], t[2]), _mm256_add_ps(t[1], t[3])));
  }
  if (d < n) reduce_lanes_strided(partial + d, n - d, n, out + d);
}

}  // namespace
}  // namespace qd::cpu::avx2

#include "model/attention_ops.h"

#include <algorithm>
#include <cmath>

#include "common/cpu_features.h"
#include "model/ops.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QD_ATTENTION_AVX2 1
#include <immintrin.h>
#endif

namespace qd::model {

namespace {

float reduce8(const float* acc) {
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

// ---- portable --------------------------------------------------------------------------------

void half_to_float_rows_portable(const uint16_t* src, size_t stride, float* dst, int rows, int n) {
  for (int r = 0; r < rows; r++) {
    const uint16_t* s = src + (size_t)r * stride;
    float* d = dst + (size_t)r * n;
    for (int i = 0; i < n; i++) d[i] = half_to_float(s[i]);
  }
}

void scaled_dots_portable(const float* q, const float* k, int rows, int n, float scale, float* out) {
  for (int r = 0; r < rows; r++) {
    const float* kr = k + (size_t)r * n;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int l = 0; l < 8; l++) acc[l] += q[i + l] * kr[i + l];
    }
    for (; i < n; i++) acc[i & 7] += q[i] * kr[i];
    out[r] = scale * reduce8(acc);
  }
}

float exp_shift_sum_portable(float* x, int n, float shift) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < n; i++) {
    x[i] = exp_nonpositive(x[i] - shift);
    acc[i & 7] += x[i];
  }
  return reduce8(acc);
}

void softmax_portable(float* x, int n, int phase) {
  (void)phase;
  float mx = x[0];
  for (int j = 1; j < n; j++) mx = std::max(mx, x[j]);
  const float inv_sum = 1.0f / exp_shift_sum_portable(x, n, mx);
  for (int j = 0; j < n; j++) x[j] *= inv_sum;
}

void weighted_rows_add_portable(const float* w, const float* v, int rows, int n, int lane0, float* partial) {
  for (int r = 0; r < rows; r++) {
    const float* vr = v + (size_t)r * n;
    float* o = partial + (size_t)((lane0 + r) % kLanes) * n;
    for (int d = 0; d < n; d++) o[d] += w[r] * vr[d];
  }
}

// out[d] for d < m, lane l's partial sum of column d at partial[l * stride + d].
void reduce_lanes_portable(const float* partial, int m, int stride, float* out) {
  for (int d = 0; d < m; d++) {
    float t[8], u[4];
    for (int i = 0; i < 8; i++) t[i] = partial[(size_t)(i + 8) * stride + d] + partial[(size_t)i * stride + d];
    for (int i = 0; i < 4; i++) u[i] = t[i + 4] + t[i];
    out[d] = (u[0] + u[2]) + (u[1] + u[3]);
  }
}

void reduce_lanes_full_portable(const float* partial, int n, float* out) { reduce_lanes_portable(partial, n, n, out); }

// ---- AVX2 + F16C -----------------------------------------------------------------------------

#ifdef QD_ATTENTION_AVX2
#define QD_AVX2 __attribute__((target("avx2,fma,f16c")))

// Rows this far ahead are prefetched: a long context's cache streams from memory, row after row.
constexpr int kPrefetchRows = 16;

QD_AVX2 void half_to_float_rows_avx2(const uint16_t* src, size_t stride, float* dst, int rows, int n) {
  for (int r = 0; r < rows; r++) {
    const uint16_t* s = src + (size_t)r * stride;
    const char* ahead = reinterpret_cast<const char*>(s + kPrefetchRows * stride);  // never faults
    for (int b = 0; b < 2 * n; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
    float* d = dst + (size_t)r * n;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
    }
    for (; i < n; i++) d[i] = half_to_float(s[i]);
  }
}

// Four rows at a time: four independent FMA chains keep the unit busy (one chain waits on each
// FMA's latency); each row's lanes are summed in the same order as one row alone.
QD_AVX2 void scaled_dots_avx2(const float* q, const float* k, int rows, int n, float scale, float* out) {
  const int n8 = n / 8 * 8;
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float* k0 = k + (size_t)r * n;
    __m256 v[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < n8; i += 8) {
      const __m256 qi = _mm256_loadu_ps(q + i);
      for (int t = 0; t < 4; t++) v[t] = _mm256_fmadd_ps(qi, _mm256_loadu_ps(k0 + (size_t)t * n + i), v[t]);
    }
    for (int t = 0; t < 4; t++) {
      alignas(32) float acc[8];
      _mm256_store_ps(acc, v[t]);
      for (int i = n8; i < n; i++) acc[i & 7] += q[i] * k0[(size_t)t * n + i];
      out[r + t] = scale * reduce8(acc);
    }
  }
  for (; r < rows; r++) {
    const float* kr = k + (size_t)r * n;
    __m256 v = _mm256_setzero_ps();
    for (int i = 0; i < n8; i += 8) v = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kr + i), v);
    alignas(32) float acc[8];
    _mm256_store_ps(acc, v);
    for (int i = n8; i < n; i++) acc[i & 7] += q[i] * kr[i];
    out[r] = scale * reduce8(acc);
  }
}

QD_AVX2 float exp_shift_sum_avx2(float* x, int n, float shift) {
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

QD_AVX2 void softmax_avx2(float* x, int n, int phase) {
  (void)phase;
  float mx = x[0];
  for (int j = 1; j < n; j++) mx = std::max(mx, x[j]);
  const float inv_sum = 1.0f / exp_shift_sum_avx2(x, n, mx);
  for (int j = 0; j < n; j++) x[j] *= inv_sum;
}

// One row at a time into its lane's partial sums, 32 columns per step.
QD_AVX2 void weighted_rows_add_avx2(const float* w, const float* v, int rows, int n, int lane0, float* partial) {
  for (int r = 0; r < rows; r++) {
    const __m256 wr = _mm256_set1_ps(w[r]);
    const float* vr = v + (size_t)r * n;
    float* o = partial + (size_t)((lane0 + r) % kLanes) * n;
    int d = 0;
    for (; d + 8 <= n; d += 8) _mm256_storeu_ps(o + d, _mm256_fmadd_ps(wr, _mm256_loadu_ps(vr + d), _mm256_loadu_ps(o + d)));
    for (; d < n; d++) o[d] += w[r] * vr[d];
  }
}

// ---- AVX-512 (F, VL, BW, DQ) + FMA + F16C: 16 lanes ---------------------------------------

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own masked builtins.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define QD_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")))

// 16 lanes -> 8 (the two 256-bit halves added).
QD_AVX512 inline __m256 fold16(__m512 v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }

// _mm512_reduce_add_ps's tree as GCC writes it (and ggml's tinyBLAS sums with): the 256-bit halves,
// then the 128-bit halves, then lanes (0 + 2) + (1 + 3). Four sums at once.
QD_AVX512 inline __m128 half4(__m512 v) {  // lanes 0 + 2 and 1 + 3 of the 4-lane stage
  const __m256 t = fold16(v);
  const __m128 u = _mm_add_ps(_mm256_extractf128_ps(t, 1), _mm256_castps256_ps128(t));
  return _mm_add_ps(u, _mm_movehl_ps(u, u));
}

QD_AVX512 inline __m128 reduce4(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  return _mm_hadd_ps(_mm_movelh_ps(half4(v0), half4(v1)), _mm_movelh_ps(half4(v2), half4(v3)));
}

// 16 lanes (i % 16), one FMA chain per key, the chains of four keys interleaved: llama.cpp's
// tinyBLAS order for F16 K against F16-rounded q (whose products are exact in float).
QD_AVX512 void scaled_dots_avx512(const float* q, const float* k, int rows, int n, float scale, float* out) {
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

// ggml's ggml_v_expf for AVX-512 (F + DQ), operation for operation (an ARM optimized-routines
// polynomial; flushes to 0 below about -104, to infinity above 88.4).
QD_AVX512 inline __m512 ggml_expf512(__m512 x) {
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 j = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
      u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 res = _mm512_scalef_ps(j, n);
  if (_mm512_kortestz(d, d)) return res;
  const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                          _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(d, res, alt);
}

// ggml_compute_forward_soft_max_f32 on this ISA: exp(x - max) by 16-lane chunks aligned to key
// index 0 (x[0] sits in lane `phase`; lanes of keys a query does not see hold exact zeros, as
// llama.cpp's mask makes them), each chunk's sum in the reduce tree added into a double, then
// every value times (float)(1 / sum).
QD_AVX512 void softmax_avx512(float* x, int n, int phase) {
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

// Lane by lane: the rows of one lane (key index mod 16) summed in registers, 16 columns at a time
// (up to 256 columns per pass), their partial sums loaded and stored once per call.
template <int C>
QD_AVX512 inline void lane_columns_avx512(const float* w, const float* v, int r0, int rows, int n, float* o) {
  __m512 acc[C];
  for (int t = 0; t < C; t++) acc[t] = _mm512_loadu_ps(o + 16 * t);
  for (int r = r0; r < rows; r += kLanes) {
    const __m512 wr = _mm512_set1_ps(w[r]);
    const float* vr = v + (size_t)r * n;
    for (int t = 0; t < C; t++) acc[t] = _mm512_fmadd_ps(wr, _mm512_loadu_ps(vr + 16 * t), acc[t]);
  }
  for (int t = 0; t < C; t++) _mm512_storeu_ps(o + 16 * t, acc[t]);
}

QD_AVX512 void weighted_rows_add_avx512(const float* w, const float* v, int rows, int n, int lane0, float* partial) {
  for (int r0 = 0; r0 < rows && r0 < kLanes; r0++) {
    float* o = partial + (size_t)((lane0 + r0) % kLanes) * n;
    int d = 0;
    for (; d + 128 <= n; d += 128) lane_columns_avx512<8>(w, v + d, r0, rows, n, o + d);
    if (d + 64 <= n) {
      lane_columns_avx512<4>(w, v + d, r0, rows, n, o + d);
      d += 64;
    }
    for (; d + 16 <= n; d += 16) lane_columns_avx512<1>(w, v + d, r0, rows, n, o + d);
    for (; d < n; d++) {
      for (int r = r0; r < rows; r += kLanes) o[d] += w[r] * v[(size_t)r * n + d];
    }
  }
}

// reduce_lanes with 16 columns per step: the same tree, lane by lane.
QD_AVX512 void reduce_lanes_avx512(const float* partial, int n, float* out) {
  int d = 0;
  for (; d + 16 <= n; d += 16) {
    __m512 t[8];
    for (int i = 0; i < 8; i++) {
      t[i] = _mm512_add_ps(_mm512_loadu_ps(partial + (size_t)(i + 8) * n + d), _mm512_loadu_ps(partial + (size_t)i * n + d));
    }
    for (int i = 0; i < 4; i++) t[i] = _mm512_add_ps(t[i + 4], t[i]);
    _mm512_storeu_ps(out + d, _mm512_add_ps(_mm512_add_ps(t[0], t[2]), _mm512_add_ps(t[1], t[3])));
  }
  if (d < n) reduce_lanes_portable(partial + d, n - d, n, out + d);
}

// ggml's swiglu on this ISA: silu by ggml_v_silu on 16 values at a time, the tail by expf.
QD_AVX512 void silu_mul_avx512(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(gate + i);
    const __m512 e = ggml_expf512(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 s = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_storeu_ps(gate + i, _mm512_mul_ps(s, _mm512_loadu_ps(up + i)));
  }
  for (; i < n; i++) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}
#endif

void silu_mul_portable(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

struct Table {
  void (*half_to_float_rows)(const uint16_t*, size_t, float*, int, int) = half_to_float_rows_portable;
  void (*scaled_dots)(const float*, const float*, int, int, float, float*) = scaled_dots_portable;
  void (*softmax)(float*, int, int) = softmax_portable;
  void (*weighted_rows_add)(const float*, const float*, int, int, int, float*) = weighted_rows_add_portable;
  void (*silu_mul)(float*, const float*, int64_t) = silu_mul_portable;
  void (*reduce_lanes)(const float*, int, float*) = reduce_lanes_full_portable;
};

// Chosen once from the active ISA (the CPU's best, or QD_FORCE_ISA): AVX-512, AVX2/FMA/F16C, portable.
const Table& table() {
  static const Table t = [] {
    Table r;
#ifdef QD_ATTENTION_AVX2
    const CpuFeatures& f = cpu_features();
    const Isa isa = active_isa();
    if (f.avx2 && f.fma && f.f16c && isa != Isa::scalar) {
      r.half_to_float_rows = half_to_float_rows_avx2;
      r.scaled_dots = scaled_dots_avx2;
      r.softmax = softmax_avx2;
      r.weighted_rows_add = weighted_rows_add_avx2;
    }
    if (isa == Isa::avx512) {  // the F16 conversion keeps AVX2's: it waits on memory, not on width
      r.scaled_dots = scaled_dots_avx512;
      r.softmax = softmax_avx512;
      r.weighted_rows_add = weighted_rows_add_avx512;
      r.silu_mul = silu_mul_avx512;
      r.reduce_lanes = reduce_lanes_avx512;
    }
#endif
    return r;
  }();
  return t;
}

}  // namespace

void half_to_float_rows(const uint16_t* src, size_t src_stride, float* dst, int rows, int n) {
  table().half_to_float_rows(src, src_stride, dst, rows, n);
}

void scaled_dots(const float* q, const float* k, int rows, int n, float scale, float* out) {
  table().scaled_dots(q, k, rows, n, scale, out);
}

void softmax(float* x, int n, int phase) { table().softmax(x, n, phase); }

void weighted_rows_add(const float* w, const float* v, int rows, int n, int lane0, float* partial) {
  table().weighted_rows_add(w, v, rows, n, lane0, partial);
}

void reduce_lanes(const float* partial, int n, float* out) { table().reduce_lanes(partial, n, out); }

void silu_mul(float* gate, const float* up, int64_t n) { table().silu_mul(gate, up, n); }

}  // namespace qd::model

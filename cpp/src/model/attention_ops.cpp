#include "model/attention_ops.h"

#include "common/cpu_features.h"

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

void weighted_rows_add_portable(const float* w, const float* v, int rows, int n, float* out) {
  for (int r = 0; r < rows; r++) {
    const float* vr = v + (size_t)r * n;
    for (int d = 0; d < n; d++) out[d] += w[r] * vr[d];
  }
}

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

// 32 columns at a time in four registers: four independent FMA chains across the rows (one chain
// would wait on each FMA's latency); each column adds its rows in order.
QD_AVX2 void weighted_rows_add_avx2(const float* w, const float* v, int rows, int n, float* out) {
  int d = 0;
  for (; d + 32 <= n; d += 32) {
    __m256 o[4];
    for (int t = 0; t < 4; t++) o[t] = _mm256_loadu_ps(out + d + 8 * t);
    for (int r = 0; r < rows; r++) {
      const __m256 wr = _mm256_set1_ps(w[r]);
      const float* vr = v + (size_t)r * n + d;
      for (int t = 0; t < 4; t++) o[t] = _mm256_fmadd_ps(wr, _mm256_loadu_ps(vr + 8 * t), o[t]);
    }
    for (int t = 0; t < 4; t++) _mm256_storeu_ps(out + d + 8 * t, o[t]);
  }
  for (; d + 8 <= n; d += 8) {
    __m256 o = _mm256_loadu_ps(out + d);
    for (int r = 0; r < rows; r++) {
      o = _mm256_fmadd_ps(_mm256_set1_ps(w[r]), _mm256_loadu_ps(v + (size_t)r * n + d), o);
    }
    _mm256_storeu_ps(out + d, o);
  }
  for (; d < n; d++) {
    for (int r = 0; r < rows; r++) out[d] += w[r] * v[(size_t)r * n + d];
  }
}

// ---- AVX-512 (F, VL, BW, DQ) + FMA + F16C: 16 lanes ---------------------------------------

#define QD_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")))

// 16 lanes -> 8 (the two 256-bit halves added).
QD_AVX512 inline __m256 fold16(__m512 v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }

// The lanes of four dots' accumulators to their four sums, one fixed tree for every dot (whatever
// the other three hold): 16 -> 8 lanes, two rounds of adjacent pairs, then the two 128-bit halves.
QD_AVX512 inline __m128 reduce4(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  const __m256 t01 = _mm256_hadd_ps(fold16(v0), fold16(v1)), t23 = _mm256_hadd_ps(fold16(v2), fold16(v3));
  const __m256 u = _mm256_hadd_ps(t01, t23);
  return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

// Like scaled_dots_avx2 with 16 lanes (i % 16); a lone row is reduced as the first of four.
QD_AVX512 void scaled_dots_avx512(const float* q, const float* k, int rows, int n, float scale, float* out) {
  const int n16 = n / 16 * 16;
  auto tail = [&](float sum, const float* kr) {  // the elements past the last 16, then the scale
    for (int i = n16; i < n; i++) sum += q[i] * kr[i];
    return scale * sum;
  };
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float* k0 = k + (size_t)r * n;
    __m512 v[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int i = 0; i < n16; i += 16) {
      const __m512 qi = _mm512_loadu_ps(q + i);
      for (int t = 0; t < 4; t++) v[t] = _mm512_fmadd_ps(qi, _mm512_loadu_ps(k0 + (size_t)t * n + i), v[t]);
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
    for (int i = 0; i < n16; i += 16) v = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), _mm512_loadu_ps(kr + i), v);
    const __m512 z = _mm512_setzero_ps();
    out[r] = tail(_mm_cvtss_f32(reduce4(v, z, z, z)), kr);
  }
}

// C registers of 16 columns from d, across all rows in order.
template <int C>
QD_AVX512 inline void weighted_columns_avx512(const float* w, const float* v, int rows, int n, float* out) {
  __m512 o[C];
  for (int t = 0; t < C; t++) o[t] = _mm512_loadu_ps(out + 16 * t);
  for (int r = 0; r < rows; r++) {
    const __m512 wr = _mm512_set1_ps(w[r]);
    const float* vr = v + (size_t)r * n;
    for (int t = 0; t < C; t++) o[t] = _mm512_fmadd_ps(wr, _mm512_loadu_ps(vr + 16 * t), o[t]);
  }
  for (int t = 0; t < C; t++) _mm512_storeu_ps(out + 16 * t, o[t]);
}

QD_AVX512 void weighted_rows_add_avx512(const float* w, const float* v, int rows, int n, float* out) {
  int d = 0;
  for (; d + 128 <= n; d += 128) weighted_columns_avx512<8>(w, v + d, rows, n, out + d);
  if (d + 64 <= n) {
    weighted_columns_avx512<4>(w, v + d, rows, n, out + d);
    d += 64;
  }
  for (; d + 16 <= n; d += 16) weighted_columns_avx512<1>(w, v + d, rows, n, out + d);
  for (; d < n; d++) {
    for (int r = 0; r < rows; r++) out[d] += w[r] * v[(size_t)r * n + d];
  }
}
#endif

struct Table {
  void (*half_to_float_rows)(const uint16_t*, size_t, float*, int, int) = half_to_float_rows_portable;
  void (*scaled_dots)(const float*, const float*, int, int, float, float*) = scaled_dots_portable;
  float (*exp_shift_sum)(float*, int, float) = exp_shift_sum_portable;
  void (*weighted_rows_add)(const float*, const float*, int, int, float*) = weighted_rows_add_portable;
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
      r.exp_shift_sum = exp_shift_sum_avx2;
      r.weighted_rows_add = weighted_rows_add_avx2;
    }
    if (isa == Isa::avx512) {  // the F16 conversion keeps AVX2's: it waits on memory, not on width
      r.scaled_dots = scaled_dots_avx512;
      r.weighted_rows_add = weighted_rows_add_avx512;
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

float exp_shift_sum(float* x, int n, float shift) { return table().exp_shift_sum(x, n, shift); }

void weighted_rows_add(const float* w, const float* v, int rows, int n, float* out) {
  table().weighted_rows_add(w, v, rows, n, out);
}

}  // namespace qd::model

// The inner loops of attention over an F16 KV cache, each with a portable version and AVX2/FMA
// and AVX-512 versions, one set chosen once at run time. The versions differ in the last bits
// (fused multiply-adds, 8 or 16 lanes); each one's order depends only on its inputs' lengths, so
// a query's result never depends on the batch or the thread count. (The dispatch table also holds
// ops.h's silu_mul, whose AVX-512 version shares the softmax's ggml_v_expf.)
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace qd::model {

// Exact IEEE half -> float without branches; agrees with qd::fp16_to_f32 on all 65,536 inputs
// (the method of Maratos' FP16 library).
inline float half_to_float(uint16_t h) {
  const uint32_t w = (uint32_t)h << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t nbits = (two_w >> 4) + (0xE0u << 23);
  float normalized;
  std::memcpy(&normalized, &nbits, 4);
  normalized *= 0x1.0p-112f;
  const uint32_t dbits = (two_w >> 17) | (126u << 23);
  float denormalized;
  std::memcpy(&denormalized, &dbits, 4);
  denormalized -= 0.5f;
  uint32_t nb, db;
  std::memcpy(&nb, &normalized, 4);
  std::memcpy(&db, &denormalized, 4);
  const uint32_t bits = sign | (two_w < (1u << 27) ? db : nb);
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// dst[r][0..n) = the n halves at src + r * src_stride, for r < rows.
void half_to_float_rows(const uint16_t* src, size_t src_stride, float* dst, int rows, int n);

// out[r] = scale * (q . k[r]) for r < rows; k rows are n floats apart. Each dot keeps 8 (16)
// partial sums (lane i % 8 or i % 16) reduced in a fixed order.
void scaled_dots(const float* q, const float* k, int rows, int n, float scale, float* out);

// Weighted values are summed in this many partial sums per query, by key index mod kLanes: the
// lanes of llama.cpp's F16 KQV matmul (tinyBLAS, 16 floats on AVX-512).
constexpr int kLanes = 16;

// x[0..n) -> softmax(x): exp(x - max) / sum. phase = the lane (key index mod 16) of x[0]: the
// AVX-512 version sums in llama.cpp's 16-lane chunks, aligned to key 0.
void softmax(float* x, int n, int phase);

// partial[(lane0 + r) % 16][d] += w[r] * v[r][d] for r = 0, 1, ... rows-1 in that order; v rows
// are n floats apart. Key j's weighted value goes to the partial sums of lane j mod 16 (lane0 =
// the first row's key index mod 16): llama.cpp's KQV matmul order. w and v hold halves, so each
// product is exact and every ISA gives the same bits.
void weighted_rows_add(const float* w, const float* v, int rows, int n, int lane0, float* partial);

// out[d] = the 16 partial sums partial[0..16)[d] in _mm512_reduce_add_ps's tree.
void reduce_lanes(const float* partial, int n, float* out);

}  // namespace qd::model

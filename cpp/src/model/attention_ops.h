// The inner loops of attention over an F16 KV cache, run by the active ISA's kernel table
// (cpu/kernels.h). The ISAs' versions differ in the last bits (fused multiply-adds, 8 or 16
// lanes); each one's order depends only on its inputs' lengths, so a query's result never depends
// on the batch or the thread count.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu/kernels.h"

namespace qd::model {

// dst[r][0..n) = the n halves at src + r * src_stride, for r < rows.
void half_to_float_rows(const uint16_t* src, size_t src_stride, float* dst, int rows, int n);

// out[j][r] = scale * (q[j] . k[r]) for each of nq queries and r < rows; k rows are n floats
// apart. Each dot keeps 8 (16) partial sums (lane i % 8 or i % 16) reduced in a fixed order, so a
// query's dots are the same bits whatever the other queries of the call (the kernels load each key
// once for a tile of queries).
void scaled_dots(const float* const* q, float* const* out, int nq, const float* k, int rows, int n, float scale);
// The same with k read from F16 rows (n halves apart): the same bits as on the converted rows.
void scaled_dots(const float* const* q, float* const* out, int nq, const uint16_t* k, int rows, int n, float scale);

// Weighted values are summed in this many partial sums per query, by key index mod kLanes: the
// lanes of llama.cpp's F16 KQV matmul (tinyBLAS, 16 floats on AVX-512).
constexpr int kLanes = cpu::kAttentionLanes;

// x[0..n) -> softmax(x): exp(x - max) / sum. phase = the lane (key index mod 16) of x[0]: the
// AVX-512 version sums in llama.cpp's 16-lane chunks, aligned to key 0.
void softmax(float* x, int n, int phase);

// partial[j][(lane0 + r) % 16][d] += w[j][r] * v[r][d] for each of nq queries and r = 0, 1, ...
// rows-1 in that order; v rows are n floats apart. Key j's weighted value goes to the partial sums
// of lane j mod 16 (lane0 = the first row's key index mod 16): llama.cpp's KQV matmul order. w and
// v hold halves, so each product is exact and every ISA gives the same bits, whatever the other
// queries of the call.
void weighted_rows_add(const float* const* w, float* const* partial, int nq, const float* v, int rows, int n,
                       int lane0);
// The same with v read from F16 rows (n halves apart): the same bits as on the converted rows.
void weighted_rows_add(const float* const* w, float* const* partial, int nq, const uint16_t* v, int rows, int n,
                       int lane0);

// out[d] = the 16 partial sums partial[0..16)[d] in _mm512_reduce_add_ps's tree.
void reduce_lanes(const float* partial, int n, float* out);

}  // namespace qd::model

// Quantized activation rows: each matmul input row is quantized on its own (per-row scales, so a
// row's result never depends on which rows share its batch). Split layout, so that SIMD loads
// can span several blocks:
//   Q8_0: qs[cols] int8 | d[cols/32] float | s[cols/32] float   (s = d * sum of the block's qs)
//         | d8[cols/32 * 8] float (each d repeated 8 times: one 512-bit load covers two blocks)
//   Q8_K: qs[cols] int8 | d[cols/256] float | bsums[cols/16] int16 (sum of each 16 qs)
//         | dsums[cols/16] float (d * bsums: lets kernels apply per-group offsets with one FMA)
// Each region starts on a 64-byte boundary relative to the row start.
//
// Everything here is `static inline`: this header is included by files compiled with different
// ISA flags, and internal linkage keeps the linker from sharing one ISA's copy with another.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu/kernels.h"

namespace qd::cpu {

struct ActQ8_0 {
  const int8_t* qs;  // [cols]
  const float* d;    // [cols / 32]
  const float* s;    // [cols / 32]
  const float* d8;   // [cols / 32 * 8]
};

struct ActQ8_K {
  const int8_t* qs;       // [cols]
  const float* d;         // [cols / 256]
  const int16_t* bsums;   // [cols / 16]
  const float* dsums;     // [cols / 16]
};

static inline size_t act_align64(size_t n) { return (n + 63) & ~(size_t)63; }

// Bytes of one activation row in format f (a multiple of 64).
static inline size_t act_row_bytes(ActFormat f, int64_t cols) {
  const size_t c = (size_t)cols;
  switch (f) {
    case ActFormat::q8_0: return act_align64(c) + 2 * act_align64(c / 32 * 4) + act_align64(c / 32 * 32);
    case ActFormat::q8_K: return act_align64(c) + act_align64(c / 256 * 4) + act_align64(c / 16 * 2) + act_align64(c / 16 * 4);
    case ActFormat::f32: return act_align64(c * 4);
  }
  return 0;
}

static inline ActQ8_0 act_q8_0(const uint8_t* row, int64_t cols) {
  const size_t c = (size_t)cols;
  const uint8_t* d = row + act_align64(c);
  const uint8_t* s = d + act_align64(c / 32 * 4);
  return {(const int8_t*)row, (const float*)d, (const float*)s, (const float*)(s + act_align64(c / 32 * 4))};
}

static inline ActQ8_K act_q8_K(const uint8_t* row, int64_t cols) {
  const size_t c = (size_t)cols;
  const uint8_t* d = row + act_align64(c);
  const uint8_t* bsums = d + act_align64(c / 256 * 4);
  return {(const int8_t*)row, (const float*)d, (const int16_t*)bsums, (const float*)(bsums + act_align64(c / 16 * 2))};
}

}  // namespace qd::cpu

// Quantized activation rows: each matmul input row is quantized on its own (per-row scales, so a
// row's result never depends on which rows share its batch). Split layout, so that SIMD loads
// can span several blocks:
//   Q8_0: qs[cols] int8 | d[cols/32] float | s[cols/32] float   (s = d * sum of the block's qs)
//         | d8[cols/32 * 8] float (each d repeated 8 times: one 512-bit load covers two blocks)
//         | d2[cols/32 * 2] float (each d repeated twice) | qsg[cols] int8 (qs, group order)
//         | sm[cols/32] float (llama.cpp's block_q8_1 s: FP16-rounded (amax / 127) * sum, the
//           min term of Q4_1 / Q5_1) | a4[cols/4] int32 (sum of each 4 consecutive qs: the
//           integer offset of signed weights in the lane-of-4 kernels)
//   Q8_K: qs[cols] int8 | d[cols/256] float | bsums[cols/16] int16 (sum of each 16 qs)
//         | dsums[cols/16] float (d * bsums: lets kernels apply per-group offsets with one FMA)
//         | qsg[cols] int8 (qs, group order) | qsg16[cols] int8 (qs, group-of-16 order)
//         | osg16[cols/16] int32 (-32 * bsums in group-of-16 lane order: Q6_K's offset as the
//           integer start of its dot products) | bsums32[cols/32] int16 (sum of each 32 qs: a
//           32-bit load holds the sums of two Q4_K / Q5_K sub-blocks, the pair their mins meet)
// "Group order" (qsg): each whole group of 256 values, seen as 8 blocks of 32, is stored as 4
// vectors of 64 bytes where vector v holds bytes 8v..8v+7 of block 0, then of block 1, ... of
// block 7: qsg[64v + 8b + t] = qs[32b + 8v + t]. With the weights in the same order, every
// 32-bit lane of a VNNI dot product stays within one block, so a whole group is 4 dot products
// and ONE scale multiply. Values past the last whole group keep the plain order.
// "Group-of-16 order" (qsg16, for Q6_K's 16 scales per 256): vector v holds bytes 4v..4v+3 of each
// 16-value group, lane p taking group sigma(p) = 4 (p % 4) + p / 4 (what a 4x4 transpose of 32-bit
// words inside 128-bit lanes produces): qsg16[64v + 4p + t] = qs[16 sigma(p) + 4v + t].
// Each region starts on a 64-byte boundary relative to the row start.
//
// Everything here is `static inline`: this header is included by files compiled with different
// ISA flags, and internal linkage keeps the linker from sharing one ISA's copy with another.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels.h"

namespace qd::cpu {

struct ActQ8_0 {
  const int8_t* qs;   // [cols]
  const float* d;     // [cols / 32]
  const float* s;     // [cols / 32]
  const float* d8;    // [cols / 32 * 8]
  const float* d2;    // [cols / 32 * 2]
  const int8_t* qsg;  // [cols], group order
  const float* sm;    // [cols / 32]
  const int32_t* a4;  // [cols / 4]
};

struct ActQ8_K {
  const int8_t* qs;       // [cols]
  const float* d;         // [cols / 256]
  const int16_t* bsums;   // [cols / 16]
  const float* dsums;     // [cols / 16]
  const int8_t* qsg;      // [cols], group order
  const int8_t* qsg16;    // [cols], group-of-16 order
  const int32_t* osg16;   // [cols / 16], group-of-16 lane order
  const int16_t* bsums32; // [cols / 32]
};

static inline size_t act_align64(size_t n) { return (n + 63) & ~(size_t)63; }

// Region sizes in order (bytes, before alignment); entries past a format's last region are 0.
static inline void act_regions(ActFormat f, int64_t cols, size_t out[8]) {
  const size_t c = (size_t)cols;
  for (int i = 0; i < 8; i++) out[i] = 0;
  if (f == ActFormat::q8_0) {
    const size_t r[] = {c, c / 32 * 4, c / 32 * 4, c / 32 * 32, c / 32 * 8, c, c / 32 * 4, c};
    for (int i = 0; i < 8; i++) out[i] = r[i];
  } else if (f == ActFormat::q8_K) {
    const size_t r[] = {c, c / 256 * 4, c / 16 * 2, c / 16 * 4, c, c, c / 16 * 4, c / 32 * 2};
    for (int i = 0; i < 8; i++) out[i] = r[i];
  } else {
    out[0] = c * 4;
  }
}

// Start of each region relative to the row; returns the row size (a multiple of 64).
static inline size_t act_offsets(ActFormat f, int64_t cols, size_t off[8]) {
  size_t sizes[8];
  act_regions(f, cols, sizes);
  size_t pos = 0;
  for (int i = 0; i < 8; i++) {
    off[i] = pos;
    pos += act_align64(sizes[i]);
  }
  return pos;
}

static inline size_t act_row_bytes(ActFormat f, int64_t cols) {
  size_t off[8];
  return act_offsets(f, cols, off);
}

static inline ActQ8_0 act_q8_0(const uint8_t* row, int64_t cols) {
  size_t o[8];
  act_offsets(ActFormat::q8_0, cols, o);
  return {(const int8_t*)row,         (const float*)(row + o[1]), (const float*)(row + o[2]),
          (const float*)(row + o[3]),   (const float*)(row + o[4]), (const int8_t*)(row + o[5]),
          (const float*)(row + o[6]),   (const int32_t*)(row + o[7])};
}

static inline ActQ8_K act_q8_K(const uint8_t* row, int64_t cols) {
  size_t o[8];
  act_offsets(ActFormat::q8_K, cols, o);
  return {(const int8_t*)row,         (const float*)(row + o[1]), (const int16_t*)(row + o[2]),
          (const float*)(row + o[3]),   (const int8_t*)(row + o[4]), (const int8_t*)(row + o[5]),
          (const int32_t*)(row + o[6]),  (const int16_t*)(row + o[7])};
}

// osg16 and bsums32 of a Q8_K row from its bsums (cols a multiple of 256).
static inline void act_fill_k_sums(const ActQ8_K& v, int64_t cols) {
  int32_t* osg16 = const_cast<int32_t*>(v.osg16);
  for (int64_t g = 0; g < cols / 16; g += 16) {
    for (int p = 0; p < 16; p++) osg16[g + p] = -32 * v.bsums[g + 4 * (p % 4) + p / 4];
  }
  int16_t* bsums32 = const_cast<int16_t*>(v.bsums32);  // |sum| <= 32 * 127: fits
  for (int64_t i = 0; i < cols / 32; i++) bsums32[i] = (int16_t)(v.bsums[2 * i] + v.bsums[2 * i + 1]);
}

// a4 from qs: the sum of each 4 consecutive values.
static inline void act_fill_lane4_sums(const int8_t* qs, int64_t cols, int32_t* a4) {
  for (int64_t i = 0; i < cols / 4; i++) a4[i] = qs[4 * i] + qs[4 * i + 1] + qs[4 * i + 2] + qs[4 * i + 3];
}

// qsg from qs (see "group order" above).
static inline void act_fill_group_order(const int8_t* qs, int64_t cols, int8_t* qsg) {
  const int64_t whole = cols / 256 * 256;
  for (int64_t g = 0; g < whole; g += 256) {
    for (int v = 0; v < 4; v++) {
      for (int b = 0; b < 8; b++) std::memcpy(qsg + g + 64 * v + 8 * b, qs + g + 32 * b + 8 * v, 8);
    }
  }
  std::memcpy(qsg + whole, qs + whole, (size_t)(cols - whole));
}

// qsg16 from qs (cols a multiple of 256; see "group-of-16 order" above).
static inline void act_fill_group16_order(const int8_t* qs, int64_t cols, int8_t* qsg16) {
  for (int64_t g = 0; g < cols; g += 256) {
    for (int v = 0; v < 4; v++) {
      for (int p = 0; p < 16; p++) {
        const int sigma = 4 * (p % 4) + p / 4;
        std::memcpy(qsg16 + g + 64 * v + 4 * p, qs + g + 16 * sigma + 4 * v, 4);
      }
    }
  }
}

}  // namespace qd::cpu

// The rows8 layouts (see repack.h), and the conversions from and to the GGUF layout.
//
// The order of the blocks: cpu/rows8_order.h. Per group of 8 rows and block b, with r the row within the group and "word c of row r" the 4
// bytes [4c, 4c + 4) of that row's quantized values (ggml's qs, in its own order):
//   Q4_0    d[8] f16 | qs: word c of row r at 16 + 32c + 4r                      (c < 4)
//   Q4_1    d[8] f16 | m[8] f16 | qs: word c of row r at 32 + 32c + 4r            (c < 4)
//   Q5_0    d[8] f16 | five planes P0-P4 of the 5-bit values v[k] at 16 + 32p: byte i of row r at
//           4r + i of P_p holds v[4p + i] in bits 0..4 and, in bits 5..7, three bits of
//           k-groups 5-7 (element 4q + i, q = 5, 6, 7): P0 / P2 / P4 bits 0..2 of q = 5 / 6 / 7,
//           P1 bits 3..4 of q = 5 and bit 3 of q = 7, P3 bits 3..4 of q = 6 and bit 4 of q = 7
//           (so that k-groups 0-4 are one AND each: p5_rows8_values)
//   Q5_1    d[8] f16 | m[8] f16 | the planes at 32, as Q5_0
//   Q8_0    d[8] f16 | qs: word c of row r at 16 + 32c + 4r                      (c < 8)
//   Q4_K    d[8] f16 | dmin[8] f16 | sc[8 sub-blocks][8 rows] u8 | m[8][8] u8 | qs: word c of
//           row r at 160 + 32c + 4r (c < 32)                                 (1184 bytes)
//   Q6_K    d[8] f16 | sc[8 pairs u][8 rows][2] i8 (scales 2u, 2u + 1) | 16 bytes of padding |
//           the values of group G (elements 16G .. 16G + 15, G < 16) at 160 + 96G as three
//           vectors X, Y, Z: byte i of row r at 4r + i of vector V holds, in bits 0..5, e of
//           k-group 0, 1, 2 of the group (X, Y, Z: element 16G + 4j + i, j = 0, 1, 2) and in bits
//           6..7 two bits of k-group 3's e[16G + 12 + i]: its bits 4..5 in X, 2..3 in Y, 0..1 in Z
//           (so that k-groups 0-2 are one AND each, and k-group 3 gathers its three fields)
//                                                                             (1696 bytes)
// where e[k] in [0, 64) is element k's 6-bit value (w = d * sc[k / 16] * (e[k] - 32)).
//   IQ4_NL  d[8] f16 | qs as Q4_0
//   Q5_K    Q4_K's d, dmin, sc and m (160 bytes) | sub-block s's 5-bit values (elements 32s ..
//           32s + 31) at 160 + 160s in five planes, as Q5_0's: k-group q of the sub-block in
//           the place of Q5_0's k-group q                                       (1440 bytes)
//   Q3_K    d[8] f16 | sc[8 pairs u][8 rows][2] i8 (signed scales 2u, 2u + 1) | the 3-bit values
//           q[k] (low 2 bits | hmask bit << 2) of chunk u (elements 32u .. 32u + 31) at 144 + 96u as
//           three vectors X, Y, Z: byte i of row r at 4r + i of each holds k-groups 0 and 1 of the
//           chunk (X), 2 and 3 (Y), 4 and 5 (Z) in bits 0..2 and 3..5 (element 32u + 4j + i), and in
//           bits 6..7 k-group 6's bits 0..1 (X), its bit 2 and k-group 7's bit 0 (Y), k-group 7's
//           bits 1..2 (Z) (so that k-groups 0-5 are one or two operations each)        (912 bytes)
//   Q2_K    d[8] f16 | dmin[8] f16 | scales[8 pairs u][8 rows][2] (bytes 2u, 2u + 1 of the row's
//           scales) | qs: word c of row r at 160 + 32c + 4r (c < 16)             (672 bytes)
//   IQ4_XS  d[8] f16 | sc[8 sub-blocks][8 rows] i8 (ls - 32) | qs: word c of row r at
//           80 + 32c + 4r (c < 32)                                               (1104 bytes)
#include "cpu/repack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/pages.h"
#include "cpu/kernels.h"
#include "cpu/rows8_order.h"
#include "quant/blocks.h"
#include "quant/quant_types.h"

namespace qd::cpu {

namespace {

using quant::Type;

// Block geometry of the 32-element types in rows8: f16 fields before the values, value bytes
// (nibble plane or int8 quads), the fifth-bit plane.
struct Q32Shape {
  int halves;       // d, or d and m
  int value_bytes;  // per row per block: 16 (nibbles) or 32 (Q8_0)
  bool fifth_bit;   // Q5_0 / Q5_1
};

bool q32_shape(uint32_t type, Q32Shape* s) {
  switch ((Type)type) {
    case Type::Q4_0: *s = {1, 16, false}; return true;
    case Type::Q4_1: *s = {2, 16, false}; return true;
    case Type::Q5_0: *s = {1, 16, true}; return true;
    case Type::Q5_1: *s = {2, 16, true}; return true;
    case Type::Q8_0: *s = {1, 32, false}; return true;
    case Type::IQ4_NL: *s = {1, 16, false}; return true;
    default: return false;
  }
}

size_t q32_group_bytes(const Q32Shape& s) { return 8 * (2 * s.halves + s.value_bytes + (s.fifth_bit ? 4 : 0)); }

// The 5-bit types' value planes (the layout above), one row at a time, byte by byte in 32-bit
// words: v[q] holds the values of k-group q (elements 4q .. 4q + 3, one per byte), p[0..4] the
// row's words of the five planes. Shifts cross bytes; each mask keeps a byte's own bits.
constexpr uint32_t kP5Bytes1 = 0x01010101u, kP5Bytes3 = 0x03030303u, kP5Bytes7 = 0x07070707u,
                   kP5Bytes31 = 0x1F1F1F1Fu;

void p5_pack(const uint32_t v[8], uint32_t p[5]) {
  const uint32_t top[5] = {v[5] & kP5Bytes7, ((v[5] >> 3) & kP5Bytes3) | ((v[7] >> 3) & kP5Bytes1) << 2,
                           v[6] & kP5Bytes7, ((v[6] >> 3) & kP5Bytes3) | ((v[7] >> 4) & kP5Bytes1) << 2,
                           v[7] & kP5Bytes7};
  for (int q = 0; q < 5; q++) p[q] = v[q] | top[q] << 5;
}

void p5_unpack(const uint32_t p[5], uint32_t v[8]) {
  for (int q = 0; q < 5; q++) v[q] = p[q] & kP5Bytes31;
  v[5] = ((p[0] >> 5) & kP5Bytes7) | ((p[1] >> 2) & (kP5Bytes3 << 3));
  v[6] = ((p[2] >> 5) & kP5Bytes7) | ((p[3] >> 2) & (kP5Bytes3 << 3));
  v[7] = ((p[4] >> 5) & kP5Bytes7) | ((p[1] >> 4) & (kP5Bytes1 << 3)) | ((p[3] >> 3) & (kP5Bytes1 << 4));
}

// GGUF block fields of the 32-element types: the f16 halves first, then qh (Q5), then qs.
void q32_pack_block(const Q32Shape& s, const uint8_t* const src[8], uint8_t* dst) {
  for (int r = 0; r < 8; r++) {
    const uint8_t* b = src[r];
    std::memcpy(dst + 2 * r, b, 2);                                   // d
    if (s.halves == 2) std::memcpy(dst + 16 + 2 * r, b + 2, 2);       // m
    const uint8_t* qs = b + 2 * s.halves + (s.fifth_bit ? 4 : 0);
    uint8_t* plane = dst + 16 * s.halves;
    if (!s.fifth_bit) {
      for (int c = 0; c < s.value_bytes / 4; c++) std::memcpy(plane + 32 * c + 4 * r, qs + 4 * c, 4);
      continue;
    }
    uint32_t qh, v[8], p[5];
    std::memcpy(&qh, b + 2 * s.halves, 4);
    for (int q = 0; q < 8; q++) {  // elements 4q .. 4q + 3: low nibbles of qs below 16, high ones above
      uint32_t w;
      std::memcpy(&w, qs + 4 * (q % 4), 4);
      // their 4 fifth bits spread to bit 4 of each byte: bit i of h to bit 8i (the product's shifted
      // copies of h do not overlap: no carries)
      const uint32_t h = (qh >> 4 * q) & 15;
      v[q] = ((q < 4 ? w : w >> 4) & 0x0F0F0F0Fu) | ((h * 0x00204081u) & kP5Bytes1) << 4;
    }
    p5_pack(v, p);
    for (int q = 0; q < 5; q++) std::memcpy(plane + 32 * q + 4 * r, &p[q], 4);
  }
}

void q32_unpack_block(const Q32Shape& s, const uint8_t* src, int r, uint8_t* b) {
  std::memcpy(b, src + 2 * r, 2);
  if (s.halves == 2) std::memcpy(b + 2, src + 16 + 2 * r, 2);
  uint8_t* qs = b + 2 * s.halves + (s.fifth_bit ? 4 : 0);
  const uint8_t* plane = src + 16 * s.halves;
  if (!s.fifth_bit) {
    for (int c = 0; c < s.value_bytes / 4; c++) std::memcpy(qs + 4 * c, plane + 32 * c + 4 * r, 4);
    return;
  }
  uint32_t qh = 0, v[8], p[5];
  for (int q = 0; q < 5; q++) std::memcpy(&p[q], plane + 32 * q + 4 * r, 4);
  p5_unpack(p, v);
  for (int q = 0; q < 8; q++) {
    // bit 4 of each byte gathered into 4 bits, byte i's to bit 24 + i (the inverse of q32_pack_block's
    // spread; again no two of the product's terms meet)
    qh |= ((((v[q] >> 4) & kP5Bytes1) * 0x01020408u) >> 24 & 15) << 4 * q;
  }
  for (int c = 0; c < 4; c++) {
    const uint32_t w = (v[c] & 0x0F0F0F0Fu) | (v[c + 4] & 0x0F0F0F0Fu) << 4;
    std::memcpy(qs + 4 * c, &w, 4);
  }
  std::memcpy(b + 2 * s.halves, &qh, 4);
}

// ---- Q4_K ----

constexpr size_t kQ4KGroup = 1184;

void q4k_scales(const uint8_t* q, uint8_t sc[8], uint8_t m[8]) {
  for (int j = 0; j < 8; j++) {
    if (j < 4) {
      sc[j] = q[j] & 63;
      m[j] = q[j + 4] & 63;
    } else {
      sc[j] = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
      m[j] = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
  }
}

void q4k_pack_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t* q) {
  for (int j = 0; j < 4; j++) {
    q[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
    q[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

// Row r's d, dmin, scales and mins (the first 160 bytes of Q4_K's and Q5_K's groups).
void q4k_pack_header(const quant::block_q4_K& b, int r, uint8_t* dst) {
  std::memcpy(dst + 2 * r, &b.d, 2);
  std::memcpy(dst + 16 + 2 * r, &b.dmin, 2);
  uint8_t sc[8], m[8];
  q4k_scales(b.scales, sc, m);
  for (int s = 0; s < 8; s++) {
    dst[32 + 8 * s + r] = sc[s];
    dst[96 + 8 * s + r] = m[s];
  }
}

void q4k_unpack_header(const uint8_t* src, int r, quant::block_q4_K& b) {
  std::memcpy(&b.d, src + 2 * r, 2);
  std::memcpy(&b.dmin, src + 16 + 2 * r, 2);
  uint8_t sc[8], m[8];
  for (int s = 0; s < 8; s++) {
    sc[s] = src[32 + 8 * s + r];
    m[s] = src[96 + 8 * s + r];
  }
  q4k_pack_scales(sc, m, b.scales);
}

void q4k_pack_block(const uint8_t* const src[8], uint8_t* dst) {
  for (int r = 0; r < 8; r++) {
    quant::block_q4_K b;
    std::memcpy(&b, src[r], sizeof b);
    q4k_pack_header(b, r, dst);
    for (int c = 0; c < 32; c++) std::memcpy(dst + 160 + 32 * c + 4 * r, b.qs + 4 * c, 4);
  }
}

void q4k_unpack_block(const uint8_t* src, int r, uint8_t* out) {
  quant::block_q4_K b;
  q4k_unpack_header(src, r, b);
  for (int c = 0; c < 32; c++) std::memcpy(b.qs + 4 * c, src + 160 + 32 * c + 4 * r, 4);
  std::memcpy(out, &b, sizeof b);
}

// ---- Q6_K ----

// e[k], the 6-bit value of element k (ggml's dequantize_row_q6_K order).
void q6k_values(const quant::block_q6_K& b, uint8_t e[256]) {
  for (int h = 0; h < 2; h++) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    for (int l = 0; l < 32; l++) {
      e[128 * h + l] = (uint8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
      e[128 * h + l + 32] = (uint8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      e[128 * h + l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      e[128 * h + l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
}

void q6k_from_values(const uint8_t e[256], quant::block_q6_K& b) {
  for (int h = 0; h < 2; h++) {
    uint8_t* ql = b.ql + 64 * h;
    uint8_t* qh = b.qh + 32 * h;
    for (int l = 0; l < 32; l++) {
      const uint8_t* v = e + 128 * h + l;
      ql[l] = (uint8_t)((v[0] & 0xF) | (v[64] & 0xF) << 4);
      ql[l + 32] = (uint8_t)((v[32] & 0xF) | (v[96] & 0xF) << 4);
      qh[l] = (uint8_t)((v[0] >> 4) | (v[32] >> 4) << 2 | (v[64] >> 4) << 4 | (v[96] >> 4) << 6);
    }
  }
}

void q6k_pack_block(const uint8_t* const src[8], uint8_t* dst) {
  std::memset(dst + 144, 0, kQ6KRows8Values - 144);  // the padding after the scales (16 + 128 bytes)
  for (int r = 0; r < 8; r++) {
    quant::block_q6_K b;
    std::memcpy(&b, src[r], sizeof b);
    std::memcpy(dst + 2 * r, &b.d, 2);
    for (int u = 0; u < 8; u++) {
      dst[16 + 16 * u + 2 * r] = (uint8_t)b.scales[2 * u];
      dst[16 + 16 * u + 2 * r + 1] = (uint8_t)b.scales[2 * u + 1];
    }
    uint8_t e[256];
    q6k_values(b, e);
    for (int G = 0; G < 16; G++) {
      uint8_t* xyz = dst + kQ6KRows8Values + 96 * G + 4 * r;
      for (int i = 0; i < 4; i++) {
        const uint8_t* v = e + 16 * G + i;  // k-group j's element at v[4j]
        xyz[i] = (uint8_t)(v[0] | (v[12] >> 4) << 6);
        xyz[32 + i] = (uint8_t)(v[4] | ((v[12] >> 2) & 3) << 6);
        xyz[64 + i] = (uint8_t)(v[8] | (v[12] & 3) << 6);
      }
    }
  }
}

void q6k_unpack_block(const uint8_t* src, int r, uint8_t* out) {
  quant::block_q6_K b;
  std::memcpy(&b.d, src + 2 * r, 2);
  for (int u = 0; u < 8; u++) {
    b.scales[2 * u] = (int8_t)src[16 + 16 * u + 2 * r];
    b.scales[2 * u + 1] = (int8_t)src[16 + 16 * u + 2 * r + 1];
  }
  uint8_t e[256];
  for (int G = 0; G < 16; G++) {
    const uint8_t* xyz = src + kQ6KRows8Values + 96 * G + 4 * r;
    for (int i = 0; i < 4; i++) {
      uint8_t* v = e + 16 * G + i;
      v[0] = xyz[i] & 63;
      v[4] = xyz[32 + i] & 63;
      v[8] = xyz[64 + i] & 63;
      v[12] = (uint8_t)((xyz[i] >> 6) << 4 | (xyz[32 + i] >> 6) << 2 | xyz[64 + i] >> 6);
    }
  }
  q6k_from_values(e, b);
  std::memcpy(out, &b, sizeof b);
}

// ---- word-interleaved planes ----

// n_words 4-byte words of one row's field `src` -> word c at dst + 32c + 4r.
void interleave_words(const uint8_t* src, int n_words, int r, uint8_t* dst) {
  for (int c = 0; c < n_words; c++) std::memcpy(dst + 32 * c + 4 * r, src + 4 * c, 4);
}

void gather_words(const uint8_t* src, int n_words, int r, uint8_t* dst) {
  for (int c = 0; c < n_words; c++) std::memcpy(dst + 4 * c, src + 32 * c + 4 * r, 4);
}

// ---- Q5_K: Q4_K's header, the values in Q5_0's planes ----

constexpr size_t kQ5KGroup = 1440;

// Sub-block s's k-group q (elements 32s + 4q .. + 3) is ggml's qs word 8 (s / 2) + q, its low
// nibbles for even s and high ones for odd, with bit s of each byte of qh's word q as bit 4.
void q5k_pack_block(const uint8_t* const src[8], uint8_t* dst) {
  for (int r = 0; r < 8; r++) {
    quant::block_q5_K b;
    std::memcpy(&b, src[r], sizeof b);
    quant::block_q4_K h;
    h.d = b.d;
    h.dmin = b.dmin;
    std::memcpy(h.scales, b.scales, sizeof h.scales);
    q4k_pack_header(h, r, dst);
    for (int s = 0; s < 8; s++) {
      uint32_t v[8], p[5];
      for (int q = 0; q < 8; q++) {
        uint32_t w, qh;
        std::memcpy(&w, b.qs + 32 * (s / 2) + 4 * q, 4);
        std::memcpy(&qh, b.qh + 4 * q, 4);
        v[q] = ((s & 1 ? w >> 4 : w) & 0x0F0F0F0Fu) | ((qh >> s) & kP5Bytes1) << 4;
      }
      p5_pack(v, p);
      for (int q = 0; q < 5; q++) std::memcpy(dst + 160 + 160 * s + 32 * q + 4 * r, &p[q], 4);
    }
  }
}

void q5k_unpack_block(const uint8_t* src, int r, uint8_t* out) {
  quant::block_q4_K h;
  q4k_unpack_header(src, r, h);
  quant::block_q5_K b;
  b.d = h.d;
  b.dmin = h.dmin;
  std::memcpy(b.scales, h.scales, sizeof b.scales);
  uint32_t qs[32] = {}, qh[8] = {};
  for (int s = 0; s < 8; s++) {
    uint32_t v[8], p[5];
    for (int q = 0; q < 5; q++) std::memcpy(&p[q], src + 160 + 160 * s + 32 * q + 4 * r, 4);
    p5_unpack(p, v);
    for (int q = 0; q < 8; q++) {
      qs[8 * (s / 2) + q] |= (v[q] & 0x0F0F0F0Fu) << (s & 1 ? 4 : 0);
      qh[q] |= ((v[q] >> 4) & kP5Bytes1) << s;
    }
  }
  std::memcpy(b.qs, qs, sizeof b.qs);
  std::memcpy(b.qh, qh, sizeof b.qh);
  std::memcpy(out, &b, sizeof b);
}

// ---- Q3_K ----

constexpr size_t kQ3KGroup = 912;

// The inverse of quant::q3_K_scale: the 16 signed 6-bit scales back into their 12 bytes.
void q3k_pack_scales(const int sc[16], uint8_t* s) {
  std::memset(s, 0, 12);
  for (int g = 0; g < 16; g++) {
    const int v = sc[g] + 32;
    if (g < 8) {
      s[g] |= (uint8_t)(v & 0x0F);
    } else {
      s[g - 8] |= (uint8_t)((v & 0x0F) << 4);
    }
    s[8 + g % 4] |= (uint8_t)(((v >> 4) & 3) << (2 * (g / 4)));
  }
}

// q[k] in [0, 8) of element k: ggml's dequantize_row_q3_K order, (qs >> 2j) & 3 of half n's byte
// l plus 4 where hmask bit 4n + j is set (k = 128n + 32j + l).
void q3k_values(const quant::block_q3_K& b, uint8_t q[256]) {
  for (int k = 0; k < 256; k++) {
    const int n = k / 128, j = k % 128 / 32, l = k % 32;
    q[k] = (uint8_t)(((b.qs[32 * n + l] >> 2 * j) & 3) | ((b.hmask[l] >> (4 * n + j)) & 1) << 2);
  }
}

void q3k_pack_block(const uint8_t* const src[8], uint8_t* dst) {
  for (int r = 0; r < 8; r++) {
    quant::block_q3_K b;
    std::memcpy(&b, src[r], sizeof b);
    std::memcpy(dst + 2 * r, &b.d, 2);
    for (int g = 0; g < 16; g++) dst[16 + 16 * (g / 2) + 2 * r + g % 2] = (uint8_t)(int8_t)quant::q3_K_scale(b.scales, g);
    uint8_t q[256];
    q3k_values(b, q);
    for (int u = 0; u < 8; u++) {
      uint8_t* xyz = dst + 144 + 96 * u + 4 * r;
      for (int i = 0; i < 4; i++) {
        const uint8_t* v = q + 32 * u + i;  // k-group j's element at v[4j]
        xyz[i] = (uint8_t)(v[0] | v[4] << 3 | (v[24] & 3) << 6);
        xyz[32 + i] = (uint8_t)(v[8] | v[12] << 3 | (v[24] >> 2) << 6 | (v[28] & 1) << 7);
        xyz[64 + i] = (uint8_t)(v[16] | v[20] << 3 | (v[28] >> 1) << 6);
      }
    }
  }
}

void q3k_unpack_block(const uint8_t* src, int r, uint8_t* out) {
  quant::block_q3_K b;
  std::memcpy(&b.d, src + 2 * r, 2);
  int sc[16];
  for (int g = 0; g < 16; g++) sc[g] = (int8_t)src[16 + 16 * (g / 2) + 2 * r + g % 2];
  q3k_pack_scales(sc, b.scales);
  uint8_t q[256];
  for (int u = 0; u < 8; u++) {
    const uint8_t* xyz = src + 144 + 96 * u + 4 * r;
    for (int i = 0; i < 4; i++) {
      uint8_t* v = q + 32 * u + i;
      const uint8_t x = xyz[i], y = xyz[32 + i], z = xyz[64 + i];
      v[0] = x & 7, v[4] = (x >> 3) & 7, v[8] = y & 7, v[12] = (y >> 3) & 7, v[16] = z & 7, v[20] = (z >> 3) & 7;
      v[24] = (uint8_t)(x >> 6 | (y >> 6 & 1) << 2);
      v[28] = (uint8_t)(y >> 7 | (z >> 6) << 1);
    }
  }
  std::memset(b.qs, 0, sizeof b.qs);
  std::memset(b.hmask, 0, sizeof b.hmask);
  for (int k = 0; k < 256; k++) {
    const int n = k / 128, j = k % 128 / 32, l = k % 32;
    b.qs[32 * n + l] |= (uint8_t)((q[k] & 3) << 2 * j);
    b.hmask[l] |= (uint8_t)((q[k] >> 2) << (4 * n + j));
  }
  std::memcpy(out, &b, sizeof b);
}

// ---- Q2_K ----

constexpr size_t kQ2KGroup = 672;

void q2k_pack_block(const uint8_t* const src[8], uint8_t* dst) {
  for (int r = 0; r < 8; r++) {
    quant::block_q2_K b;
    std::memcpy(&b, src[r], sizeof b);
    std::memcpy(dst + 2 * r, &b.d, 2);
    std::memcpy(dst + 16 + 2 * r, &b.dmin, 2);
    for (int u = 0; u < 8; u++) std::memcpy(dst + 32 + 16 * u + 2 * r, b.scales + 2 * u, 2);
    interleave_words(b.qs, 16, r, dst + 160);
  }
}

void q2k_unpack_block(const uint8_t* src, int r, uint8_t* out) {
  quant::block_q2_K b;
  std::memcpy(&b.d, src + 2 * r, 2);
  std::memcpy(&b.dmin, src + 16 + 2 * r, 2);
  for (int u = 0; u < 8; u++) std::memcpy(b.scales + 2 * u, src + 32 + 16 * u + 2 * r, 2);
  gather_words(src + 160, 16, r, b.qs);
  std::memcpy(out, &b, sizeof b);
}

// ---- IQ4_XS ----

constexpr size_t kIQ4XSGroup = 1104;

void iq4xs_pack_block(const uint8_t* const src[8], uint8_t* dst) {
  for (int r = 0; r < 8; r++) {
    quant::block_iq4_xs b;
    std::memcpy(&b, src[r], sizeof b);
    std::memcpy(dst + 2 * r, &b.d, 2);
    for (int s = 0; s < 8; s++) {
      const int ls = ((b.scales_l[s / 2] >> (4 * (s % 2))) & 15) | (((b.scales_h >> (2 * s)) & 3) << 4);
      dst[16 + 8 * s + r] = (uint8_t)(int8_t)(ls - 32);
    }
    interleave_words(b.qs, 32, r, dst + 80);
  }
}

void iq4xs_unpack_block(const uint8_t* src, int r, uint8_t* out) {
  quant::block_iq4_xs b;
  std::memcpy(&b.d, src + 2 * r, 2);
  b.scales_h = 0;
  std::memset(b.scales_l, 0, sizeof b.scales_l);
  for (int s = 0; s < 8; s++) {
    const int ls = (int8_t)src[16 + 8 * s + r] + 32;
    b.scales_l[s / 2] |= (uint8_t)((ls & 15) << (4 * (s % 2)));
    b.scales_h |= (uint16_t)(((ls >> 4) & 3) << (2 * s));
  }
  gather_words(src + 80, 32, r, b.qs);
  std::memcpy(out, &b, sizeof b);
}

// ---- dispatch over types ----

size_t group_block_bytes(uint32_t type) {
  Q32Shape s;
  if (q32_shape(type, &s)) return q32_group_bytes(s);
  if (type == (uint32_t)Type::Q4_K) return kQ4KGroup;
  if (type == (uint32_t)Type::Q6_K) return kQ6KRows8Block;
  if (type == (uint32_t)Type::Q5_K) return kQ5KGroup;
  if (type == (uint32_t)Type::Q3_K) return kQ3KGroup;
  if (type == (uint32_t)Type::Q2_K) return kQ2KGroup;
  if (type == (uint32_t)Type::IQ4_XS) return kIQ4XSGroup;
  return 0;
}

void pack_block(uint32_t type, const uint8_t* const src[8], uint8_t* dst) {
  Q32Shape s;
  if (q32_shape(type, &s)) return q32_pack_block(s, src, dst);
  switch ((Type)type) {
    case Type::Q4_K: return q4k_pack_block(src, dst);
    case Type::Q5_K: return q5k_pack_block(src, dst);
    case Type::Q3_K: return q3k_pack_block(src, dst);
    case Type::Q2_K: return q2k_pack_block(src, dst);
    case Type::IQ4_XS: return iq4xs_pack_block(src, dst);
    default: return q6k_pack_block(src, dst);
  }
}

void unpack_block(uint32_t type, const uint8_t* src, int r, uint8_t* out) {
  Q32Shape s;
  if (q32_shape(type, &s)) return q32_unpack_block(s, src, r, out);
  switch ((Type)type) {
    case Type::Q4_K: return q4k_unpack_block(src, r, out);
    case Type::Q5_K: return q5k_unpack_block(src, r, out);
    case Type::Q3_K: return q3k_unpack_block(src, r, out);
    case Type::Q2_K: return q2k_unpack_block(src, r, out);
    case Type::IQ4_XS: return iq4xs_unpack_block(src, r, out);
    default: return q6k_unpack_block(src, r, out);
  }
}

}  // namespace

bool rows8_supported(uint32_t type) { return group_block_bytes(type) != 0; }

void AlignedFree::operator()(uint8_t* p) const { std::free(p); }

Rows8Buffer rows8_alloc(const std::vector<size_t>& bytes, std::vector<size_t>* offsets) {
  constexpr size_t kLine = 64, kHuge = size_t(2) << 20;
  offsets->clear();
  size_t n = 0;
  for (size_t b : bytes) {
    offsets->push_back(n);
    n += (b + kLine - 1) / kLine * kLine;
  }
  const size_t align = n >= kHuge ? kHuge : kLine;
  n = std::max((n + align - 1) / align * align, align);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(align, n));
  if (!p) throw std::bad_alloc();
  advise_huge_pages(p, n);
  return Rows8Buffer(p);
}

Rows8Buffer rows8_alloc(const Matrix& w) {
  std::vector<size_t> offsets;
  return rows8_alloc({rows8_bytes(w)}, &offsets);
}

size_t rows8_group_block_bytes(uint32_t type) { return group_block_bytes(type); }

size_t rows8_bytes(const Matrix& w) {
  const quant::TypeTraits* t = quant::type_traits(w.type);
  return (size_t)(w.rows / 8) * (size_t)(w.cols / t->block_size) * group_block_bytes(w.type);
}

namespace {
// QD_WEIGHT_LAYOUT=gguf, read once.
bool weight_layout_kept() {
  static const bool kept = [] {
    const char* v = std::getenv("QD_WEIGHT_LAYOUT");
    return v && std::string(v) == "gguf";
  }();
  return kept;
}
}  // namespace

bool rows8_wanted(const Matrix& w, Isa isa) {
  return !weight_layout_kept() && w.layout == Layout::gguf && w.rows % 8 == 0 && rows8_supported(w.type) && w.type < kMaxTypeId &&
         kernel_table(isa).rows8[w.type].fn != nullptr;
}

namespace {
constexpr size_t kDropEvery = (size_t)4 << 20;  // source bytes consumed between page releases

// Row groups [g0, g1) of a matrix shaped like w (its type, columns and row_bytes) packed into
// dst block by block: group g's 8 rows (GGUF layout, row_bytes apart) read from rows(g), then
// after(g).
template <class Rows, class After>
void pack_groups(const Matrix& w, uint8_t* dst, int64_t g0, int64_t g1, Rows&& rows, After&& after) {
  const quant::TypeTraits* t = quant::type_traits(w.type);
  const int64_t nb = w.cols / t->block_size;
  const size_t gb = group_block_bytes(w.type);
  for (int64_t g = g0; g < g1; g++) {
    const uint8_t* first = rows(g);
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* src[8];
      for (int r = 0; r < 8; r++) src[r] = first + (size_t)r * w.row_bytes + (size_t)b * t->type_size;
      pack_block(w.type, src, dst + rows8_block_offset(rows8_chunk_groups(w.type), w.rows / 8, nb, gb, g, b));
    }
    after(g);
  }
}

// The source pages of the units (of unit_rows rows, row_bytes apart) consumed so far, handed
// back to the kernel every kDropEvery bytes and at the slice's end: whole pages only, so a
// slice's neighbours keep theirs. dropped starts at the slice's first unit.
struct SourceDrop {
  const uint8_t* data;
  size_t row_bytes;
  int64_t unit_rows;
  size_t dropped;
  void after_unit(int64_t u, bool last) {
    const size_t done = (size_t)(unit_rows * (u + 1)) * row_bytes;
    if (done - dropped >= kDropEvery || last) {
      release_pages(data + dropped, done - dropped);
      dropped = done;
    }
  }
};

// Row r of w through float32 into `to`'s bytes at dst (row: w.cols floats of scratch).
void requantize_row(const Matrix& w, const quant::TypeTraits& from, const quant::TypeTraits& to, int64_t r,
                    float* row, uint8_t* dst) {
  from.to_float(w.data + (size_t)r * w.row_bytes, row, w.cols);
  to.from_float(row, dst, w.cols);
}

// The type traits of a requantization of w to to_type, checked; w must be in the GGUF layout.
void requantize_traits(const Matrix& w, uint32_t to_type, const char* what, const quant::TypeTraits** from,
                       const quant::TypeTraits** to) {
  *from = quant::type_traits(w.type);
  *to = quant::type_traits(to_type);
  if (w.layout != Layout::gguf || !*from || !(*from)->to_float || !*to || !(*to)->from_float ||
      w.cols % (*to)->block_size != 0) {
    throw ArgError(std::string(what) + ": needs a GGUF-layout matrix readable as float32 and a type it can write "
                   "whose block divides its columns");
  }
}

// Runs slice(u0, u1) over the units [0, units) (row groups, or rows) in contiguous slices of at
// least slice_bytes of `bytes`, one thread each, up to max_threads (0: one per core); slice 0, and
// any whose thread cannot start, on the calling thread.
// Repacking at load: the packing and the first touch of the copy's new pages, which the kernel
// zeroes (most of a load's time), run on every core. Loading the 1.5B with the 0.5B draft, 2
// cores (Zen 4 VM, best of 5-11 alternated processes): 1.86 s in one thread, 1.65 s with slices
// of 8 MiB (the token embedding and the larger FFN matrices only), 1.51 s at 2 MiB (nearly every
// matrix), 1.53 s at 1 MiB. Requantizing costs far more per byte (through float32): its slices
// are smaller.
constexpr size_t kRepackSliceBytes = (size_t)2 << 20, kRequantizeSliceBytes = (size_t)64 << 10;
template <class Slice>
void run_slices(int64_t units, size_t bytes, size_t slice_bytes, int max_threads, Slice&& slice) {
  const int64_t most = max_threads > 0 ? max_threads : std::max(1u, std::thread::hardware_concurrency());
  const int64_t n_slices = std::max<int64_t>(1, std::min<int64_t>({(int64_t)(bytes / slice_bytes), units, most}));
  std::vector<std::thread> threads;
  int64_t started = 1;  // slices [1, started) run on their threads; slice 0 and any that could not start, here
  for (; started < n_slices; started++) {
    try {
      threads.emplace_back(slice, units * started / n_slices, units * (started + 1) / n_slices);
    } catch (const std::system_error&) {
      break;
    }
  }
  slice(0, units / n_slices);
  slice(units * started / n_slices, units);
  for (std::thread& t : threads) t.join();
}
}  // namespace

Matrix requantized_shape(const Matrix& w, uint32_t to_type) {
  const quant::TypeTraits* to = quant::type_traits(to_type);
  if (!to) throw ArgError("requantized_shape: unknown type " + std::to_string(to_type));
  Matrix out = w;
  out.type = to_type;
  out.row_bytes = (size_t)(w.cols / to->block_size * to->type_size);
  return out;
}

Matrix requantize(const Matrix& w, uint32_t to_type, uint8_t* dst, bool drop_source, int max_threads) {
  const quant::TypeTraits *from, *to;
  requantize_traits(w, to_type, "requantize", &from, &to);
  Matrix out = requantized_shape(w, to_type);
  run_slices(w.rows, (size_t)w.rows * w.row_bytes, kRequantizeSliceBytes, max_threads, [&](int64_t r0, int64_t r1) {
    std::vector<float> row((size_t)w.cols);
    SourceDrop drop{w.data, w.row_bytes, 1, (size_t)r0 * w.row_bytes};
    for (int64_t r = r0; r < r1; r++) {
      requantize_row(w, *from, *to, r, row.data(), dst + (size_t)r * out.row_bytes);
      if (drop_source) drop.after_unit(r, r + 1 == r1);
    }
  });
  out.data = dst;
  return out;
}

Matrix requantize_rows8(const Matrix& w, uint32_t to_type, uint8_t* dst, bool drop_source, int max_threads) {
  const quant::TypeTraits *from, *to;
  requantize_traits(w, to_type, "requantize_rows8", &from, &to);
  if (w.rows % 8 != 0 || !rows8_supported(to_type)) {
    throw ArgError("requantize_rows8: needs rows a multiple of 8 and a type with the rows8 layout");
  }
  Matrix out = requantized_shape(w, to_type);
  run_slices(w.rows / 8, (size_t)w.rows * w.row_bytes, kRequantizeSliceBytes, max_threads, [&](int64_t g0, int64_t g1) {
    std::vector<float> row((size_t)w.cols);
    std::vector<uint8_t> group(8 * out.row_bytes);
    SourceDrop drop{w.data, w.row_bytes, 8, (size_t)(8 * g0) * w.row_bytes};
    pack_groups(out, dst, g0, g1, [&](int64_t g) {
      for (int r = 0; r < 8; r++) requantize_row(w, *from, *to, 8 * g + r, row.data(), group.data() + (size_t)r * out.row_bytes);
      return (const uint8_t*)group.data();
    }, [&](int64_t g) {
      if (drop_source) drop.after_unit(g, g + 1 == g1);
    });
  });
  out.data = dst;
  out.layout = Layout::rows8;
  return out;
}

Matrix repack_rows8(const Matrix& w, uint8_t* dst, bool drop_source, int max_threads) {
  if (w.layout != Layout::gguf || w.rows % 8 != 0 || !rows8_supported(w.type)) {
    throw ArgError("repack_rows8: needs a GGUF-layout matrix of a rows8 type with rows a multiple of 8");
  }
  run_slices(w.rows / 8, (size_t)w.rows * w.row_bytes, kRepackSliceBytes, max_threads, [&](int64_t g0, int64_t g1) {
    SourceDrop drop{w.data, w.row_bytes, 8, (size_t)(8 * g0) * w.row_bytes};
    pack_groups(w, dst, g0, g1, [&](int64_t g) { return w.data + (size_t)(8 * g) * w.row_bytes; },
                [&](int64_t g) {
                  if (drop_source) drop.after_unit(g, g + 1 == g1);
                });
  });
  Matrix out = w;
  out.data = dst;
  out.layout = Layout::rows8;
  return out;
}

void copy_row(const Matrix& w, int64_t r, uint8_t* dst) {
  if (w.layout == Layout::gguf) {
    std::memcpy(dst, w.data + (size_t)r * w.row_bytes, w.row_bytes);
    return;
  }
  const quant::TypeTraits* t = quant::type_traits(w.type);
  const int64_t nb = w.cols / t->block_size;
  const size_t gb = group_block_bytes(w.type);
  for (int64_t b = 0; b < nb; b++) {
    unpack_block(w.type, w.data + rows8_block_offset(rows8_chunk_groups(w.type), w.rows / 8, nb, gb, r / 8, b), (int)(r % 8), dst + (size_t)b * t->type_size);
  }
}

}  // namespace qd::cpu

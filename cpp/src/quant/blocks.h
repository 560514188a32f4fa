// Block layouts of the GGML quantized types, byte-for-byte as stored in GGUF files.
// Multi-byte fields are little-endian; fp16 fields are IEEE half bit patterns (see fp16.h).
#pragma once
#include <cstdint>
#include <cstring>

namespace qd::quant {

using half = uint16_t;

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK8_1 = 32, QK4_NL = 32;
constexpr int QK_K = 256;       // super-block size of the K-quants
constexpr int K_SCALE_SIZE = 12;

struct block_q4_0 { half d; uint8_t qs[QK4_0 / 2]; };
struct block_q4_1 { half d; half m; uint8_t qs[QK4_1 / 2]; };
struct block_q5_0 { half d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };
struct block_q5_1 { half d; half m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; };
struct block_q8_0 { half d; int8_t qs[QK8_0]; };
struct block_q8_1 { half d; half s; int8_t qs[QK8_1]; };  // activations only (s = d * sum(qs))

struct block_q2_K { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; half d; half dmin; };
struct block_q3_K { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; half d; };
struct block_q4_K { half d; half dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; };
struct block_q5_K { half d; half dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };
struct block_q6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; half d; };
struct block_q8_K { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };

struct block_iq4_nl { half d; uint8_t qs[QK4_NL / 2]; };
struct block_iq4_xs { half d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; };

static_assert(sizeof(block_q4_0) == 2 + 16, "block_q4_0");
static_assert(sizeof(block_q4_1) == 4 + 16, "block_q4_1");
static_assert(sizeof(block_q5_0) == 2 + 4 + 16, "block_q5_0");
static_assert(sizeof(block_q5_1) == 4 + 4 + 16, "block_q5_1");
static_assert(sizeof(block_q8_0) == 2 + 32, "block_q8_0");
static_assert(sizeof(block_q8_1) == 4 + 32, "block_q8_1");
static_assert(sizeof(block_q2_K) == 16 + 64 + 4, "block_q2_K");
static_assert(sizeof(block_q3_K) == 32 + 64 + 12 + 2, "block_q3_K");
static_assert(sizeof(block_q4_K) == 4 + 12 + 128, "block_q4_K");
static_assert(sizeof(block_q5_K) == 4 + 12 + 32 + 128, "block_q5_K");
static_assert(sizeof(block_q6_K) == 128 + 64 + 16 + 2, "block_q6_K");
static_assert(sizeof(block_q8_K) == 4 + 256 + 32, "block_q8_K");
static_assert(sizeof(block_iq4_nl) == 2 + 16, "block_iq4_nl");
static_assert(sizeof(block_iq4_xs) == 2 + 2 + 4 + 128, "block_iq4_xs");

// The non-linear 4-bit codebook of IQ4_NL and IQ4_XS.
constexpr int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Scale g (0..15) of a Q3_K super-block, signed 6 bits: the low nibble is nibble g / 8 of byte
// g % 8, the 2 high bits are bits 2 * (g / 4) of byte 8 + g % 4 (ggml's kmask unpacking, one at a
// time). static: included by files compiled with different ISA flags.
static inline int q3_K_scale(const uint8_t* s, int g) {
  const int lo = g < 8 ? (s[g] & 0x0F) : (s[g - 8] >> 4);
  const int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
  return (lo | hi << 4) - 32;
}

// Block i of a byte stream that may be unaligned in the mapping (memcpy: no aligned loads).
template <typename Block>
inline Block load_block(const void* src, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(src) + i * (int64_t)sizeof(Block), sizeof(Block));
  return b;
}

}  // namespace qd::quant

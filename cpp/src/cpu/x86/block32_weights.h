// The 32-element block types' weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL), one block unpacked
// to 32 bytes with AVX2 instructions: signed (unpack) or unsigned plus an offset (unpack_u). Used
// by the AVX2 kernels (avx2/block32_quants.h) and the AVX-512 ones (avx512/). Include rules: see
// x86/common.h.
#pragma once
#include "cpu/act_layout.h"
#include "cpu/x86/common.h"
#include "quant/blocks.h"

namespace qd::cpu {
namespace {

// 16 bytes of packed nibbles -> 32 bytes: low nibbles first (elements 0..15), then high nibbles.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128((const __m128i*)qs);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
}

// Bit j of the 32-bit little-endian field -> byte j = 0xFF if set, else 0 (ggml bytes_from_bits_32).
inline __m256i bytes_from_bits_32(const uint8_t* x) {
  uint32_t x32;
  std::memcpy(&x32, x, 4);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  return _mm256_movm_epi8((__mmask32)x32);  // the AVX-512 file: one instruction
#endif
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x32), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

// Q5 weights as unsigned bytes: the nibble plus 16 where the high bit is set.
inline __m256i q5_unpack_u(const uint8_t* qs, const uint8_t* qh) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i nib = unpack_nibbles(qs);
  return _mm256_mask_add_epi8(nib, (__mmask32)h, nib, _mm256_set1_epi8(0x10));  // one op for the high bits
#else
  return _mm256_or_si256(unpack_nibbles(qs), _mm256_and_si256(bytes_from_bits_32(qh), _mm256_set1_epi8(0x10)));
#endif
}

// A weight format: block type, unpack to 32 int8 (signed) or uint8 (unsigned + min term).
struct WQ4_0 {
  using block = quant::block_q4_0;
  static constexpr bool kNibbles = true;  // the weights are qs's nibbles alone (split in bulk on AVX-512)
  static constexpr bool kSigned = true;
  static constexpr bool kHasM = false;      // offset c = m (field right after d) ...
  static constexpr float kOffset = -8.f;  // ... or c = kOffset * d
  static __m256i unpack(const block& b) { return _mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_set1_epi8(8)); }
  static float m(const block&) { return 0.f; }
  // Unsigned form u: w = d * u + c (c: kHasM / kOffset), for the grouped VNNI kernels.
  static __m256i unpack_u(const block& b) { return unpack_nibbles(b.qs); }
};

struct WQ4_1 {
  using block = quant::block_q4_1;
  static constexpr bool kNibbles = true;  // the weights are qs's nibbles alone (split in bulk on AVX-512)
  static constexpr bool kSigned = false;
  static constexpr bool kHasM = true;      // offset c = m (field right after d) ...
  static constexpr float kOffset = 0.f;  // ... or c = kOffset * d
  static __m256i unpack(const block& b) { return unpack_nibbles(b.qs); }
  static float m(const block& b) { return h2f(b.m); }
  // Unsigned form u: w = d * u + c (c: kHasM / kOffset), for the grouped VNNI kernels.
  static __m256i unpack_u(const block& b) { return unpack_nibbles(b.qs); }
};

struct WQ5_0 {
  using block = quant::block_q5_0;
  static constexpr bool kNibbles = false;  // qs plus a 5th bit from qh
  static constexpr bool kSigned = true;
  static constexpr bool kHasM = false;      // offset c = m (field right after d) ...
  static constexpr float kOffset = -16.f;  // ... or c = kOffset * d
  // (q | h << 4) - 16 == q | (h ? 0 : 0xF0) as int8
  static __m256i unpack(const block& b) {
    const __m256i hi = _mm256_andnot_si256(bytes_from_bits_32(b.qh), _mm256_set1_epi8((char)0xF0));
    return _mm256_or_si256(unpack_nibbles(b.qs), hi);
  }
  static float m(const block&) { return 0.f; }
  // Unsigned form u: w = d * u + c (c: kHasM / kOffset), for the grouped VNNI kernels.
  static __m256i unpack_u(const block& b) { return q5_unpack_u(b.qs, b.qh); }
};

struct WQ5_1 {
  using block = quant::block_q5_1;
  static constexpr bool kNibbles = false;  // qs plus a 5th bit from qh
  static constexpr bool kSigned = false;
  static constexpr bool kHasM = true;      // offset c = m (field right after d) ...
  static constexpr float kOffset = 0.f;  // ... or c = kOffset * d
  static __m256i unpack(const block& b) {
    const __m256i hi = _mm256_and_si256(bytes_from_bits_32(b.qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(unpack_nibbles(b.qs), hi);
  }
  static float m(const block& b) { return h2f(b.m); }
  // Unsigned form u: w = d * u + c (c: kHasM / kOffset), for the grouped VNNI kernels.
  static __m256i unpack_u(const block& b) { return q5_unpack_u(b.qs, b.qh); }
};

struct WQ8_0 {
  using block = quant::block_q8_0;
  static constexpr bool kNibbles = false;
  static constexpr bool kSigned = true;
  static constexpr bool kHasM = false;      // offset c = m (field right after d) ...
  static constexpr float kOffset = -128.f;  // ... or c = kOffset * d
  static __m256i unpack(const block& b) { return _mm256_loadu_si256((const __m256i*)b.qs); }
  static float m(const block&) { return 0.f; }
  // Unsigned form u: w = d * u + c (c: kHasM / kOffset), for the grouped VNNI kernels.
  static __m256i unpack_u(const block& b) { return _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)b.qs), _mm256_set1_epi8((char)0x80)); }
};

struct WIQ4_NL {
  using block = quant::block_iq4_nl;
  static constexpr bool kNibbles = false;
  static constexpr bool kSigned = true;
  static constexpr bool kHasM = false;      // offset c = m (field right after d) ...
  static constexpr float kOffset = -128.f;  // ... or c = kOffset * d
  static __m256i unpack(const block& b) {
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)quant::kvalues_iq4nl));
    return _mm256_shuffle_epi8(lut, unpack_nibbles(b.qs));
  }
  static float m(const block&) { return 0.f; }
  // Unsigned form u: w = d * u + c (c: kHasM / kOffset), for the grouped VNNI kernels.
  static __m256i unpack_u(const block& b) { return _mm256_xor_si256(unpack(b), _mm256_set1_epi8((char)0x80)); }
};

}  // namespace
}  // namespace qd::cpu

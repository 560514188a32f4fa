// The K-quants' weights (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and IQ4_XS, one 256-element super-block
// unpacked with AVX2 instructions into bytes and int16 scale vectors (KUnpacked) for the AVX2
// kernels (avx2/k_quants.h), and the scale unpacking the AVX-512 kernels share. Include rules:
// see x86/common.h.
#pragma once
#include "cpu/act_layout.h"
#include "cpu/x86/common.h"
#include "quant/blocks.h"

namespace qd::cpu {
namespace {

// A super-block unpacked for reuse across rows: 8 chunks of 32 weights as unsigned bytes and,
// per chunk, the int16 scales that multiply the pairwise products of maddubs. Types whose weights
// need an offset (mins, or a shift that makes them unsigned) carry it per group of 16 as off[],
// applied against the activations' d * bsums; types with signed weights keep |w| in q and w itself
// in sgn, whose signs move onto the activations (maddubs takes its unsigned operand first).
struct alignas(32) KUnpacked {
  __m256i q[8];
  __m256i sc[8];
  __m256i sgn[8];  // signed types only
  __m256 off[2];   // offset types only: groups 0..7, 8..15
  float d;         // the super-block's scale
};

// sum_k madd(sc[k], maddubs(q[k], x[32k..])) over the 8 chunks -> 8 x int32.
template <bool Signed>
inline __m256i k_dot(const KUnpacked& u, const int8_t* xq) {
  __m256i sumi = _mm256_setzero_si256();
  for (int k = 0; k < 8; k++) {
    __m256i x = _mm256_loadu_si256((const __m256i*)(xq + 32 * k));
    if constexpr (Signed) x = _mm256_sign_epi8(x, u.sgn[k]);
    const __m256i p = _mm256_maddubs_epi16(u.q[k], x);
    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(u.sc[k], p));
  }
  return sumi;
}

// u.sc from the 16 signed per-group scales in v16: chunk k's elements 0..15 take scale 2k, 16..31
// scale 2k + 1. Built in registers (a vector load of bytes just stored one at a time would stall
// on store forwarding).
inline void group_scales(__m128i v16, KUnpacked& u) {
  const __m256i s16 = _mm256_cvtepi8_epi16(v16);  // dword k = scales 2k, 2k + 1 as int16
  const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                          2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  for (int k = 0; k < 8; k++) {
    u.sc[k] = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(s16, _mm256_set1_epi32(k)), spread);
  }
}

// 16 per-group byte values (unsigned or signed) times f, as the two offset vectors.
inline void group_offsets(__m128i v16, bool is_signed, float f, __m256 off[2]) {
  const __m128i hi8 = _mm_srli_si128(v16, 8);
  const __m256i a = is_signed ? _mm256_cvtepi8_epi32(v16) : _mm256_cvtepu8_epi32(v16);
  const __m256i b = is_signed ? _mm256_cvtepi8_epi32(hi8) : _mm256_cvtepu8_epi32(hi8);
  off[0] = _mm256_mul_ps(_mm256_set1_ps(f), _mm256_cvtepi32_ps(a));
  off[1] = _mm256_mul_ps(_mm256_set1_ps(f), _mm256_cvtepi32_ps(b));
}

// 0x00 / `value` in each byte of bits whose bit `bit` is clear / set.
inline __m256i bit_to(__m256i bits, int bit, char value) {
  const __m256i m = _mm256_set1_epi8((char)(1 << bit));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bits, m), m), _mm256_set1_epi8(value));
}

// The low 2 bits of Q2_K/Q3_K: chunk 4h + s is 2-bit field s of qs[32h .. 32h + 31].
inline void unpack_low2(const uint8_t* qs, KUnpacked& u) {
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; h++) {
    const __m256i bits = _mm256_loadu_si256((const __m256i*)(qs + 32 * h));
    u.q[4 * h + 0] = _mm256_and_si256(bits, m3);
    u.q[4 * h + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 2), m3);
    u.q[4 * h + 2] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m3);
    u.q[4 * h + 3] = _mm256_and_si256(_mm256_srli_epi16(bits, 6), m3);
  }
}

// The 16 signed 6-bit scales of Q3_K as bytes (ggml's kmask unpacking: low nibbles in bytes 0..7,
// high bits in 8..11), built in registers.
inline __m128i q3k_scales_v(const uint8_t* scales) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t a[3];
  std::memcpy(a, scales, 12);
  return _mm_sub_epi8(
      _mm_setr_epi32((int)((a[0] & kmask2) | ((a[2] & kmask1) << 4)), (int)((a[1] & kmask2) | (((a[2] >> 2) & kmask1) << 4)),
                     (int)(((a[0] >> 4) & kmask2) | (((a[2] >> 4) & kmask1) << 4)),
                     (int)(((a[1] >> 4) & kmask2) | (((a[2] >> 6) & kmask1) << 4))),
      _mm_set1_epi8(32));
}

// ---- Q4_K: w = d * sc_s * q - dmin * m_s, 8 sub-blocks of 32 with 6-bit sc, m --------------

// Scales to bytes 0..7 and mins to bytes 8..15 of out (ggml's kmask shuffle of the 12 bytes).
inline void q4k_scales_mins(const uint8_t* scales, uint8_t out[16]) {
  const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u[4];
  std::memcpy(u, scales, 12);
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t aux = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = aux;
  u[0] &= kmask1;
  std::memcpy(out, u, 16);
}

// The same as a vector (scales in bytes 0..7, mins in 8..15), built in registers: a vector load
// of bytes just stored one word at a time would stall on store forwarding.
inline __m128i q4k_scales_mins_v(const uint8_t* scales) {
  const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, scales, 12);
  const uint32_t u3 = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t u2 = u[1] & kmask1;
  const uint32_t u1 = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  const uint32_t u0 = u[0] & kmask1;
  return _mm_setr_epi32((int)u0, (int)u1, (int)u2, (int)u3);
}

// Each weight type below: its Block, whether its weights are signed (kSigned) or carry per-group
// offsets (kOffsets), and unpack(), which fills a KUnpacked from one super-block.

// Q4_K and Q5_K share d, dmin, the 12 scale bytes and the nibbles (at another offset).
inline void q4k_like_unpack(uint16_t d, uint16_t dmin, const uint8_t* scales, const uint8_t* qs, KUnpacked& u) {
  const __m256i m4 = _mm256_set1_epi8(15);
  uint8_t sm[16];
  q4k_scales_mins(scales, sm);
  for (int k = 0; k < 4; k++) {  // 64 elements: low nibbles = sub-block 2k, high = 2k + 1
    const __m256i bits = _mm256_loadu_si256((const __m256i*)(qs + 32 * k));
    u.q[2 * k] = _mm256_and_si256(bits, m4);
    u.q[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
    u.sc[2 * k] = _mm256_set1_epi16(sm[2 * k]);
    u.sc[2 * k + 1] = _mm256_set1_epi16(sm[2 * k + 1]);
  }
  // -dmin * m_s for the 16 groups of 16 (two per sub-block)
  const __m128i pairs_hi = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  group_offsets(_mm_shuffle_epi8(q4k_scales_mins_v(scales), pairs_hi), false, -h2f(dmin), u.off);
  u.d = h2f(d);
}

struct KQ4 {  // w = d * sc_s * q - dmin * m_s, 8 sub-blocks of 32 with 6-bit sc, m
  using Block = quant::block_q4_K;
  static constexpr bool kSigned = false, kOffsets = true;
  static void unpack(const Block& blk, KUnpacked& u) { q4k_like_unpack(blk.d, blk.dmin, blk.scales, blk.qs, u); }
};

struct KQ5 {  // Q4_K plus a fifth bit: bit s of qh[l] for element 32s + l
  using Block = quant::block_q5_K;
  static constexpr bool kSigned = false, kOffsets = true;
  static void unpack(const Block& blk, KUnpacked& u) {
    q4k_like_unpack(blk.d, blk.dmin, blk.scales, blk.qs, u);
    const __m256i hb = _mm256_loadu_si256((const __m256i*)blk.qh);
    for (int s = 0; s < 8; s++) u.q[s] = _mm256_or_si256(u.q[s], bit_to(hb, s, 16));
  }
};

struct KQ6 {  // w = d * sc_g * (q - 32), 16 groups of 16 with int8 sc
  using Block = quant::block_q6_K;
  static constexpr bool kSigned = false, kOffsets = true;
  static void unpack(const Block& blk, KUnpacked& u) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {  // 128 elements: chunks 4h..4h+3
      const __m256i l0 = _mm256_loadu_si256((const __m256i*)(blk.ql + 64 * h));
      const __m256i l1 = _mm256_loadu_si256((const __m256i*)(blk.ql + 64 * h + 32));
      const __m256i hb = _mm256_loadu_si256((const __m256i*)(blk.qh + 32 * h));
      // 2 high bits of chunk c sit at bits 2c, 2c+1 of qh; move them to bits 4, 5
      u.q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
      u.q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
      u.q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
      u.q[4 * h + 3] =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
    }
    const __m128i sc = _mm_loadu_si128((const __m128i*)blk.scales);
    group_scales(sc, u);
    u.d = h2f(blk.d);
    group_offsets(sc, true, -32.f * u.d, u.off);  // the -32
  }
};

struct KQ2 {  // w = d * sc_g * q - dmin * m_g, 16 groups of 16 with 4-bit sc (low) and m (high)
  using Block = quant::block_q2_K;
  static constexpr bool kSigned = false, kOffsets = true;
  static void unpack(const Block& blk, KUnpacked& u) {
    unpack_low2(blk.qs, u);
    const __m128i m4 = _mm_set1_epi8(15), bytes = _mm_loadu_si128((const __m128i*)blk.scales);
    group_scales(_mm_and_si128(bytes, m4), u);
    group_offsets(_mm_and_si128(_mm_srli_epi16(bytes, 4), m4), false, -h2f(blk.dmin), u.off);
    u.d = h2f(blk.d);
  }
};

struct KQ3 {  // w = d * sc_g * (q - 4), q = low 2 bits | hmask bit << 2, 16 signed 6-bit sc
  using Block = quant::block_q3_K;
  static constexpr bool kSigned = false, kOffsets = true;
  static void unpack(const Block& blk, KUnpacked& u) {
    unpack_low2(blk.qs, u);
    const __m256i hm = _mm256_loadu_si256((const __m256i*)blk.hmask);
    for (int k = 0; k < 8; k++) u.q[k] = _mm256_or_si256(u.q[k], bit_to(hm, k, 4));  // bit k of hmask[l]
    const __m128i sc = q3k_scales_v(blk.scales);
    group_scales(sc, u);
    u.d = h2f(blk.d);
    group_offsets(sc, true, -4.f * u.d, u.off);  // the -4
  }
};

struct KIQ4XS {  // w = d * (ls_s - 32) * kvalues[nibble], 8 sub-blocks of 32 laid out as IQ4_NL blocks
  using Block = quant::block_iq4_xs;
  static constexpr bool kSigned = true, kOffsets = false;
  static void unpack(const Block& blk, KUnpacked& u) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)quant::kvalues_iq4nl));
    const __m128i m4 = _mm_set1_epi8(15);
    for (int s = 0; s < 8; s++) {
      const __m128i b = _mm_loadu_si128((const __m128i*)(blk.qs + 16 * s));
      const __m256i idx = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m4), _mm_and_si128(b, m4));
      u.sgn[s] = _mm256_shuffle_epi8(table, idx);
      u.q[s] = _mm256_abs_epi8(u.sgn[s]);
      const int ls = ((blk.scales_l[s / 2] >> (4 * (s % 2))) & 15) | (((blk.scales_h >> (2 * s)) & 3) << 4);
      u.sc[s] = _mm256_set1_epi16((short)(ls - 32));
    }
    u.d = h2f(blk.d);
  }
};

}  // namespace
}  // namespace qd::cpu

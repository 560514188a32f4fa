// AVX-512 VNNI kernels for Q4_1, Q5_0, Q5_1 and Q8_0 in llama.cpp's own order on x86, so that
// the logits of a model made of these types match its prompt path bit for bit
// (ggml_vec_dot_q4_1_q8_1 / _q5_1_q8_1, and tinyBLAS_Q0_AVX for Q5_0 / Q8_0):
//
//   per block b: 8 int32 lanes, lane l the exact dot of weights 4l..4l+3 with the activations;
//                acc[l] = fma(d_w * d_x, float(lane l), acc[l])        (one 8-lane chain)
//   result:      the hsum tree of hsum_float_8 (x86/common.h hsum), plus for Q4_1 / Q5_1 the
//                min term m * sm summed block by block in a scalar chain.
//
// Two weight rows share a 512-bit vector (row r in the low 256 bits, r + 1 in the high), each
// activation block broadcast to both halves. Signed weights go in as unsigned u = w - kOffset,
// their offset entering exactly as the integer start kOffset * a4 of each lane (a4: the
// activations' sums of 4). Every (row, column) sees the same operations whatever the tile
// height R and the row pairing (batch invariance). Include rules: see x86/common.h.
#pragma once
#include <type_traits>
#include <vector>

#include "cpu/act_layout.h"
#include "cpu/x86/avx512/common.h"
#include "cpu/x86/block32_weights.h"

namespace qd::cpu {
namespace {

template <class W, int R>
void lane8_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  using Block = typename W::block;
  const int64_t nb = w.cols / 32;
  ActQ8_0 x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_0(act + (size_t)j * stride, w.cols);
  // Signed weights: each lane's integer start kOffset * a4, once per activation row of the tile.
  thread_local std::vector<int32_t> starts;
  if constexpr (W::kOffset != 0.f) {
    starts.resize((size_t)R * (nb * 8));
    for (int j = 0; j < R; j++) {
      for (int64_t i = 0; i < nb * 8; i++) starts[(size_t)j * nb * 8 + i] = (int32_t)W::kOffset * x[j].a4[i];
    }
  }
  static_assert(offsetof(Block, d) == 0, "the gather reads d (and m) at the block start");
  const int bs = (int)sizeof(Block);
  const __m256i block_offsets = _mm256_setr_epi32(0, bs, 2 * bs, 3 * bs, 4 * bs, 5 * bs, 6 * bs, 7 * bs);
  // NP pairs of weight rows at a time: with one or two activation rows, two pairs give the FMA
  // chains (one per pair and activation row) enough independent work to hide their latency.
  constexpr int NP = R <= 2 ? 2 : 1;
  for (int64_t r = r0; r < r1; r += 2 * NP) {
    const int nr = (int)(r1 - r < 2 * NP ? r1 - r : 2 * NP);
    const Block* wr[2 * NP];  // past the end: the last row again (not stored)
    for (int i = 0; i < 2 * NP; i++) wr[i] = (const Block*)(w.data + (size_t)(r + (i < nr ? i : nr - 1)) * w.row_bytes);
    const uint8_t* ahead = prefetch_row<R, NP>(w, r);
    __m512 acc[NP][R];
    __m128 summ[R];  // lane i: the min term of row r + i (i < 2 NP)
    for (int p = 0; p < NP; p++) {
      for (int j = 0; j < R; j++) {
        acc[p][j] = _mm512_setzero_ps();
        summ[j] = _mm_setzero_ps();
      }
    }
    // Block b with, per pair p and activation row j, the scales sc[p][j] (lanes 0..7: the pair's
    // first row's d times the activations' d, 8..15: its second row's) and the rows' mins mw.
    auto block = [&](int64_t b, __m512 (*sc)[R], __m128 mw) {
      __m512i u[NP];
      if constexpr (W::kNibbles) {  // the rows' 16 bytes of nibbles in one vector, split once
        const __m512i m4 = _mm512_set1_epi8(15);
        __m512i t = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)wr[0][b].qs));
        t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i*)wr[1][b].qs), 1);
        if constexpr (NP == 2) {
          t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i*)wr[2][b].qs), 2);
          t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i*)wr[3][b].qs), 3);
        }
        const __m512i lo = _mm512_and_si512(t, m4), hi = _mm512_and_si512(_mm512_srli_epi16(t, 4), m4);
        // pair p: [low nibbles, high nibbles] of row 2p, then of row 2p + 1
        u[0] = _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), hi);
        if constexpr (NP == 2) u[1] = _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), hi);
      } else {
        for (int p = 0; p < NP; p++) u[p] = join256(W::unpack_u(wr[2 * p][b]), W::unpack_u(wr[2 * p + 1][b]));
      }
      for (int j = 0; j < R; j++) {
        const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)(x[j].qs + 32 * b)));
        __m512i start = _mm512_setzero_si512();
        if constexpr (W::kOffset != 0.f) {
          start = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)(starts.data() + (size_t)j * nb * 8 + 8 * b)));
        }
        [[maybe_unused]] const __m128 smb = W::kHasM ? _mm_set1_ps(x[j].sm[b]) : _mm_setzero_ps();
        for (int p = 0; p < NP; p++) {
          const __m512i d = _mm512_dpbusd_epi32(start, u[p], xv);
          acc[p][j] = _mm512_fmadd_ps(sc[p][j], _mm512_cvtepi32_ps(d), acc[p][j]);
        }
        if constexpr (W::kHasM) summ[j] = _mm_fmadd_ps(mw, smb, summ[j]);
      }
    };
    const int64_t ng = nb / 8;
    // Group g of up to 8 blocks: each row's d (and m) in one gather (masked past `count`), then
    // the blocks with their scales picked from the gathered products.
    auto group = [&](int64_t g, int count, auto full) {
      if (ahead) {
        for (int i = 0; i < 2 * NP; i++) prefetch_range(ahead + i * w.row_bytes + 8 * g * sizeof(Block), 8 * sizeof(Block));
      }
      if (g + 2 < ng) {  // this pass's rows two groups ahead
        for (int i = 0; i < 2 * NP; i++) prefetch_range((const uint8_t*)(wr[i] + 8 * (g + 2)), 8 * sizeof(Block));
      }
      const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const __mmask8 kx = (__mmask8)((1u << count) - 1u);
      __m512 prod[NP][R];  // d_w * d_x of the 8 blocks, the pair's two rows
      [[maybe_unused]] __m512 m16[NP];
      for (int p = 0; p < NP; p++) {
        __m256i dm0, dm1;
        if constexpr (decltype(full)::value) {
          dm0 = _mm256_i32gather_epi32((const int*)(wr[2 * p] + 8 * g), block_offsets, 1);
          dm1 = _mm256_i32gather_epi32((const int*)(wr[2 * p + 1] + 8 * g), block_offsets, 1);
        } else {
          const __m256i z = _mm256_setzero_si256();
          dm0 = _mm256_mask_i32gather_epi32(z, (const int*)(wr[2 * p] + 8 * g), block_offsets, live, 1);
          dm1 = _mm256_mask_i32gather_epi32(z, (const int*)(wr[2 * p + 1] + 8 * g), block_offsets, live, 1);
        }
        const __m512 d16 = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm0))),
                                              _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm1)), 1);
        if constexpr (W::kHasM) {
          m16[p] = _mm512_insertf32x8(
              _mm512_castps256_ps512(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm0, 16)))),
              _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm1, 16))), 1);
        }
        for (int j = 0; j < R; j++) {
          const __m256 dx = decltype(full)::value ? _mm256_loadu_ps(x[j].d + 8 * g) : _mm256_maskz_loadu_ps(kx, x[j].d + 8 * g);
          prod[p][j] = _mm512_mul_ps(d16, _mm512_broadcast_f32x8(dx));
        }
      }
      #pragma GCC unroll 8
      for (int k = 0; k < 8; k++) {
        if (!decltype(full)::value && k >= count) break;
        const __m512i lane = _mm512_setr_epi32(k, k, k, k, k, k, k, k, 8 + k, 8 + k, 8 + k, 8 + k, 8 + k, 8 + k, 8 + k, 8 + k);
        __m512 sc[NP][R];
        for (int p = 0; p < NP; p++) {
          for (int j = 0; j < R; j++) sc[p][j] = _mm512_permutexvar_ps(lane, prod[p][j]);
        }
        __m128 mw = _mm_setzero_ps();
        if constexpr (W::kHasM) {  // block k's m of rows r .. r + 2 NP - 1
          const __m512i pick = _mm512_setr_epi32(k, 8 + k, 16 + k, 24 + k, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
          mw = _mm512_castps512_ps128(_mm512_permutex2var_ps(m16[0], pick, m16[NP - 1]));
        }
        block(8 * g + k, sc, mw);
      }
    };
    for (int64_t g = 0; g < ng; g++) group(g, 8, std::true_type{});
    if (nb > 8 * ng) group(ng, (int)(nb - 8 * ng), std::false_type{});
    for (int j = 0; j < R; j++) {
      float m4[4];
      _mm_storeu_ps(m4, summ[j]);
      for (int p = 0; p < NP; p++) {
        if (2 * p < nr) y[j * ldy + r + 2 * p] = hsum(_mm512_castps512_ps256(acc[p][j])) + m4[2 * p];
        if (2 * p + 1 < nr) y[j * ldy + r + 2 * p + 1] = hsum(_mm512_extractf32x8_ps(acc[p][j], 1)) + m4[2 * p + 1];
      }
    }
  }
}

template <class Tag, class W>
void lane8_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
                int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    lane8_tile<W, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

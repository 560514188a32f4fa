// AVX-512 VNNI kernel for Q2_K against Q8_K activations: a super-block is one group of 16 x 16
// weights in group-of-16 order (group_order.h), its mins through the activations' dsums.
//
// Order per (row, column), identical for every tile height R (batch invariance): exact integer
// dot per super-block, one FMA of it and one of the mins per super-block, then a fixed horizontal
// sum. Include rules: see x86/common.h.
#pragma once
#include "cpu/act_layout.h"
#include "cpu/x86/avx512/group_order.h"

namespace qd::cpu {
namespace {

// The start and end of a K-quant body over NW weight rows from r: their blocks and prefetch
// pointers, accumulators from zero (first column block) or from the saved state; at the end the
// outputs (last column block) or the state.
template <class Block, int NW, int R>
inline void k_rows_start(const Matrix& w, int64_t r, bool first, __m512 (*st)[1][R], const Block* wb[NW],
                         const uint8_t* ahead[NW], __m512 acc[NW][R]) {
  #pragma GCC unroll 2
  for (int i = 0; i < NW; i++) {
    wb[i] = (const Block*)(w.data + (size_t)(r + i) * w.row_bytes);
    ahead[i] = prefetch_row<R, NW>(w, r + i);
    for (int j = 0; j < R; j++) acc[i][j] = first ? _mm512_setzero_ps() : st[i][0][j];
  }
}

template <int NW, int R>
inline void k_rows_finish(bool last, __m512 acc[NW][R], __m512 (*st)[1][R], float* y, int64_t ldy, int64_t r) {
  #pragma GCC unroll 2
  for (int i = 0; i < NW; i++) {
    for (int j = 0; j < R; j++) {
      if (last) {
        y[j * ldy + r + i] = hsum512(acc[i][j]);
      } else {
        st[i][0][j] = acc[i][j];
      }
    }
  }
}

struct G16Q2K {  // w = d sc_g u - dmin m_g
  using Block = quant::block_q2_K;
  static constexpr bool kMins = true;
  template <int R>
  static constexpr int kWeightRows = 1;
  static void unpack(const Block& blk, __m512i q[4], __m512& wsc, __m512& wmin) {
    __m512i z[4];
    low2_plain(blk.qs, z);
    to_group16_order(z, q);
    const __m128i m4 = _mm_set1_epi8(15), bytes = _mm_loadu_si128((const __m128i*)blk.scales);
    wsc = sigma_scales(_mm_and_si128(bytes, m4), h2f(blk.d));
    wmin = _mm512_mul_ps(_mm512_set1_ps(h2f(blk.dmin)),
                         _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(bytes, 4), m4))));
  }
  static __m512i offset(const int32_t*) { return _mm512_setzero_si512(); }
};

template <class W, int R>
void k16g_tile(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  using Block = typename W::Block;
  const int64_t nb = w.cols / 256;
  ActQ8_K x[R];
  for (int j = 0; j < R; j++) x[j] = act_q8_K(act + (size_t)j * stride, w.cols);
  auto body = [&](auto nw, int64_t r, int64_t b0, int64_t b1, bool first, bool last, __m512 (*st)[1][R]) {
    constexpr int NW = decltype(nw)::value;
    const Block* wb[NW];
    const uint8_t* ahead[NW];
    __m512 acc[NW][R];
    k_rows_start<Block, NW, R>(w, r, first, st, wb, ahead, acc);
    for (int64_t b = b0; b < b1; b++) {
      __m512i q[NW][4];
      __m512 wsc[NW], wmin[NW];
      #pragma GCC unroll 2
      for (int i = 0; i < NW; i++) {
        const Block& blk = wb[i][b];
        if (ahead[i]) prefetch_range(ahead[i] + b * sizeof(blk), sizeof(blk));
        W::unpack(blk, q[i], wsc[i], wmin[i]);
      }
      for (int j = 0; j < R; j++) {
        __m512i sumi[NW];
        group_dots<NW>(q, x[j].qsg16 + 256 * b, W::offset(x[j].osg16 + 16 * b), sumi);
        const __m512 dx = _mm512_set1_ps(x[j].d[b]);
        #pragma GCC unroll 2
        for (int i = 0; i < NW; i++) {
          acc[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(wsc[i], dx), _mm512_cvtepi32_ps(sumi[i]), acc[i][j]);
          if constexpr (W::kMins) acc[i][j] = _mm512_fnmadd_ps(wmin[i], _mm512_loadu_ps(x[j].dsums + 16 * b), acc[i][j]);
        }
      }
    }
    k_rows_finish<NW, R>(last, acc, st, y, ldy, r);
  };
  column_blocked<1, R, W::template kWeightRows<R>>(r0, r1, nb, body);
}

template <class Tag, class W>
void k16g_gemm(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t stride, int64_t n, float* y,
               int64_t ldy) {
  for_each_tile<Tag>(n, [&](auto rc, int64_t i0) {
    k16g_tile<W, decltype(rc)::value>(w, r0, r1, act + (size_t)i0 * stride, stride, y + i0 * ldy, ldy);
  });
}

}  // namespace
}  // namespace qd::cpu

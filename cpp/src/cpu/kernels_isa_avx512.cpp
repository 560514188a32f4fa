// AVX-512 (F/BW/VL/DQ + VNNI) kernels: 512-bit kernels for the types real models use -- in
// llama.cpp's own summation orders for Q4_1, Q5_1, Q5_0, Q8_0 (x86_avx512_lane8.h), Q4_K, Q5_K and
// Q6_K (x86_avx512_krows.h), grouped for the other block types (x86_avx512_grouped.h) -- and the
// 256-bit ones with VNNI dot products for the rest (compiled with -mavx512*; see CMakeLists.txt).
#include <immintrin.h>

#include "cpu/x86_avx512.h"
#include "cpu/x86_avx512_grouped.h"
#include "cpu/x86_avx512_krows.h"
#include "cpu/x86_avx512_lane8.h"
#include "cpu/x86_table.h"

namespace qd::cpu {

namespace {
struct Avx512Tag {
  static constexpr bool kVnni = true;
  // 32 vector registers: up to 2 accumulators per row + temporaries; 9 rows verify a draft of 8 in
  // one pass over the weights (a 1-row second tile cost 15 ms on the 1.5B)
  static constexpr int kMaxRows = 9;
};
}  // namespace

const KernelTable& kernels_avx512() {
  static const KernelTable t = [] {
    KernelTable k = make_x86_table<Avx512Tag>(Isa::avx512);
    add_avx512_grouped_kernels<Avx512Tag>(k);
    add_avx512_lane8_kernels<Avx512Tag>(k);
    add_avx512_krows_kernels<Avx512Tag>(k);
    return k;
  }();
  return t;
}

}  // namespace qd::cpu

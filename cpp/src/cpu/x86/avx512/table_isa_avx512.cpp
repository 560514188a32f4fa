// The avx512 kernel table (F, BW, VL, DQ + VNNI; compiled with the -mavx512* flags, see
// cpp/src/cpu/CMakeLists.txt): the rows8 kernels (x86/avx2/*_rows8.h, here with 32 vector
// registers) for weights repacked at load, 512-bit kernels for the quantized types in the GGUF
// layout (x86/avx512/kernels.h: matrices that are not repacked), the 256-bit x86 ones for float
// weights and activation quantization, AVX-512 attention scores and softmax in llama.cpp's orders,
// and AVX2's query-tiled weighted sums of values (their bits are the same on both ISAs; with 512-bit
// vectors, one query at a time, verify(8) after 3000 tokens spent 1.5x as long in attention).
//
// Why rows8 on AVX-512 too: measured on a Zen 4 VM (one thread, 16384 x 1536, n = 1 / 8, ms), the
// GGUF-layout 512-bit kernels stream weights at 7-10 GB/s where rows8 reaches 23-36 (Q8_0 2.77 /
// 4.65 against 0.75 / 3.62, Q5_0 1.67 / 6.13 against 0.57 / 2.85, Q4_K 1.46 / 3.53 against 0.47 /
// 2.16, Q6_K 3.03 / 5.71 against 0.89 / 3.63). Not profiled further (no PMU on that VM); the
// likely causes are the per-block scale gathers (slow on AMD) and the 2-4 interleaved row streams
// against rows8's one sequential, software-prefetched stream. QD_WEIGHT_LAYOUT=gguf
// (cpu/repack.h) keeps the GGUF-layout kernels for every matrix: llama.cpp's orders.
#include "cpu/table_builder.h"
#include "cpu/x86/act_quant.h"
#include "cpu/x86/avx2/attention.h"
#include "cpu/x86/avx2/rows8_table.h"
#include "cpu/x86/avx512/attention.h"
#include "cpu/x86/avx512/common.h"
#include "cpu/x86/avx512/kernels.h"
#include "cpu/x86/avx512/silu.h"
#include "cpu/x86/float_weights.h"
#include "cpu/x86/rope.h"

namespace qd::cpu {

namespace {

constexpr KernelTable make_table() {
  using quant::Type;
  KernelTable t{};
  t.isa = Isa::avx512;
  set_gemm(t, Type::F32, float_gemm<Avx512Tag, false>, ActFormat::f32);
  set_gemm(t, Type::F16, float_gemm<Avx512Tag, true>, ActFormat::f32);
  set_gemm(t, Type::BF16, scalar::gemm_dequant, ActFormat::f32);
  set_gemm(t, Type::Q4_0, avx512::gemm_q4_0, ActFormat::q8_0);
  set_gemm(t, Type::Q4_1, avx512::gemm_q4_1, ActFormat::q8_0);
  set_gemm(t, Type::Q5_0, avx512::gemm_q5_0, ActFormat::q8_0);
  set_gemm(t, Type::Q5_1, avx512::gemm_q5_1, ActFormat::q8_0);
  set_gemm(t, Type::Q8_0, avx512::gemm_q8_0, ActFormat::q8_0);
  set_gemm(t, Type::IQ4_NL, avx512::gemm_iq4_nl, ActFormat::q8_0);
  set_gemm(t, Type::Q2_K, avx512::gemm_q2_K, ActFormat::q8_K);
  set_gemm(t, Type::Q3_K, avx512::gemm_q3_K, ActFormat::q8_K);
  set_gemm(t, Type::Q4_K, avx512::gemm_q4_K, ActFormat::q8_K);
  set_gemm(t, Type::Q5_K, avx512::gemm_q5_K, ActFormat::q8_K);
  set_gemm(t, Type::Q6_K, avx512::gemm_q6_K, ActFormat::q8_K);
  set_gemm(t, Type::Q8_K, scalar::gemm_dequant, ActFormat::f32);
  set_gemm(t, Type::IQ4_XS, avx512::gemm_iq4_xs, ActFormat::q8_K);
  set_not_computable(t);
  set_rows8_kernels<Avx512Tag, 8>(t);
  set_quantize(t, ActFormat::q8_0, x86_quantize_q8_0);
  set_quantize(t, ActFormat::q8_K, x86_quantize_q8_K);
  t.half_to_float = x86_half_to_float;
  t.float_to_half = x86_float_to_half;
  t.half_to_float_rows = avx2::half_to_float_rows;  // waits on memory, not on vector width
  t.scaled_dots = avx512::scaled_dots;
  t.scaled_dots_f16 = scaled_dots_converting<avx2::half_to_float_rows, avx512::scaled_dots>;
  t.softmax = avx512::softmax;
  t.weighted_rows_add = avx2::weighted_rows_add<float>;
  t.weighted_rows_add_f16 = avx2::weighted_rows_add<uint16_t>;
  t.reduce_lanes = avx512::reduce_lanes;
  t.silu_mul = avx512::silu_mul;
  t.rope = x86_rope;
  return t;
}

constexpr KernelTable kTable = make_table();

}  // namespace

const KernelTable& kernels_avx512() { return kTable; }

}  // namespace qd::cpu

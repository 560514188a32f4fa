// The ONE kernel table: every CPU routine of the forward pass, per ISA. Each ISA's table is a list
// in its own table file, compiled with that ISA's flags:
//   scalar     cpu/scalar/table_isa_scalar.cpp          the reference every other table is tested against
//   avx2       cpu/x86/avx2/table_isa_avx2.cpp          (the list: cpu/x86/avx2/table.h)
//   avx2_vnni  cpu/x86/avx2_vnni/table_isa_avx2_vnni.cpp (the same list, VEX VNNI dot products)
//   avx512     cpu/x86/avx512/table_isa_avx512.cpp
//   neon       cpu/arm/neon/table_isa_neon.cpp          (the list: cpu/arm/neon/table.h)
//   neon_dot   cpu/arm/neon_dot/table_isa_neon_dot.cpp  (the same list, SDOT dot products)
// One table is chosen at run time (active_kernels(): common/cpu_features, QD_FORCE_ISA). Every
// entry is explicit: a routine without a SIMD version names the scalar one (cpu/scalar/kernels.h).
// _core.kernels.describe() prints the table.
//
// A matmul kernel computes a block of the output: y[i * ldy + r] for weight rows r in [r0, r1) and
// every activation row i < n. Batch invariance contract: the value written for (i, r) must be the
// same bits whatever n, r0, r1 are (one fixed reduction order per (row, column) pair).
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/cpu_features.h"
#include "cpu/matmul.h"

namespace qd::cpu {

// What the activations are turned into before the kernel runs (see act_layout.h).
enum class ActFormat : uint8_t { f32, q8_0, q8_K };

// act: n activation rows of format ActFormat, act_stride bytes apart. (GemmRows is the function
// type: `GemmRows gemm_q4_0;` declares a kernel.)
using GemmRows = void(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t act_stride, int64_t n,
                      float* y, int64_t ldy);
using GemmRowsFn = GemmRows*;

struct GemmKernel {
  GemmRowsFn fn;  // scalar::gemm_dequant: dequantize + f32 dot; scalar::gemm_unsupported: no kernel
  ActFormat act;
};

constexpr uint32_t kMaxTypeId = 48;

// Quantizes one activation row of `cols` floats into dst (layout: act_layout.h). Every ISA's
// version produces the scalar quantizer's bits, so every ISA sees the same int8 activations.
using QuantizeRowFn = void (*)(const float* x, int64_t cols, uint8_t* dst);

// IEEE half <-> float rows, bit-exact with quant/fp16.h (round to nearest even).
using HalfToFloatFn = void (*)(const uint16_t* src, float* dst, int64_t n);
using FloatToHalfFn = void (*)(const float* src, uint16_t* dst, int64_t n);

// Attention over the F16 KV cache (model/attention_ops.h says what each computes).
using HalfRowsFn = void (*)(const uint16_t* src, size_t src_stride, float* dst, int rows, int n);
using ScaledDotsFn = void (*)(const float* const* q, float* const* out, int nq, const float* k, int rows, int n,
                             float scale);
using SoftmaxFn = void (*)(float* x, int n, int phase);
using WeightedRowsAddFn = void (*)(const float* const* w, float* const* partial, int nq, const float* v, int rows, int n,
                                  int lane0);
using ReduceLanesFn = void (*)(const float* partial, int n, float* out);
// The score and value kernels over F16 rows (the cache's, n halves apart) instead of converted
// floats: the same bits as half_to_float_rows then ScaledDotsFn / WeightedRowsAddFn, without the
// converted copy (for a few queries per row, as in a decode, converting in registers per tile of
// queries costs less than writing and rereading the copy).
using ScaledDotsF16Fn = void (*)(const float* const* q, float* const* out, int nq, const uint16_t* k, int rows, int n,
                                float scale);
using WeightedRowsAddF16Fn = void (*)(const float* const* w, float* const* partial, int nq, const uint16_t* v,
                                     int rows, int n, int lane0);

// Weighted values are summed in this many partial sums per query, by key index mod kAttentionLanes:
// the lanes of llama.cpp's F16 KQV matmul (tinyBLAS, 16 floats on AVX-512).
constexpr int kAttentionLanes = 16;

// Row-wise ops of the forward pass (model/ops.h).
using SiluMulFn = void (*)(float* gate, const float* up, int64_t n);
using RopeFn = void (*)(float* x, int n_rows, int n_heads, int head_dim, int n_rot, bool neox, const float* cos,
                        const float* sin);

// Plain aggregates, constant-initialized in their table files: no code runs to build a table, so
// reading one (describe()) is safe on a CPU that cannot execute its kernels.
struct KernelTable {
  Isa isa;
  // matmul, by GGML type id: an entry for every type of quant/quant_types.cpp
  GemmKernel gemm[kMaxTypeId];
  // matmul over weights in the rows8 layout (cpu/repack.h), by type id; a type with an entry here
  // is repacked at load. Called with r0 a multiple of 8 (r1 may end inside a group of 8).
  GemmKernel rows8[kMaxTypeId];
  QuantizeRowFn quantize[3];  // by ActFormat: q8_0, q8_K (f32 activations are used as they are)
  HalfToFloatFn half_to_float;
  FloatToHalfFn float_to_half;
  // attention
  HalfRowsFn half_to_float_rows;
  ScaledDotsFn scaled_dots;
  SoftmaxFn softmax;
  WeightedRowsAddFn weighted_rows_add;
  ReduceLanesFn reduce_lanes;
  ScaledDotsF16Fn scaled_dots_f16;
  WeightedRowsAddF16Fn weighted_rows_add_f16;
  // row-wise ops
  SiluMulFn silu_mul;
  RopeFn rope;
};

const KernelTable& kernels_scalar();     // always built
const KernelTable& kernels_avx2();       // x86-64 builds
const KernelTable& kernels_avx2_vnni();  // x86-64 builds
const KernelTable& kernels_avx512();     // x86-64 builds
const KernelTable& kernels_neon();       // aarch64 builds
const KernelTable& kernels_neon_dot();   // aarch64 builds

// The table for `isa` (ArgError unless isa_available(isa)).
const KernelTable& kernel_table(Isa isa);

// The table of active_isa(), chosen once.
const KernelTable& active_kernels();

// The table for `isa` whether or not this CPU can run it (ArgError unless isa_built(isa)): for
// describe(), which reads entries and calls nothing.
const KernelTable& built_table(Isa isa);

// Activation quantization, one row on its own (per-row scales), scalar.
void quantize_act_row(ActFormat f, const float* x, int64_t cols, uint8_t* dst);

}  // namespace qd::cpu

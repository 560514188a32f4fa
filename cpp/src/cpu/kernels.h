// The per-ISA kernel tables behind matmul(). Each ISA's kernels live in their own *_isa_*.cpp
// file compiled with that ISA's flags; matmul.cpp picks one table at run time (common/cpu_features).
//
// A kernel computes a block of the output: y[i * ldy + r] for weight rows r in [r0, r1) and every
// activation row i < n. Batch invariance contract: the value written for (i, r) must be the same
// bits whatever n, r0, r1 are (one fixed reduction order per (row, column) pair).
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/cpu_features.h"
#include "cpu/matmul.h"

namespace qd::cpu {

// What the activations are turned into before the kernel runs (see act_layout.h).
enum class ActFormat : uint8_t { f32, q8_0, q8_K };

// act: n activation rows of format ActFormat, act_stride bytes apart.
using GemmRowsFn = void (*)(const Matrix& w, int64_t r0, int64_t r1, const uint8_t* act, size_t act_stride,
                            int64_t n, float* y, int64_t ldy);

// Tables are plain aggregates, value-initialized with {} (all null): no constructor function that
// an ISA file could emit with its own instructions for the linker to share with the others.
struct GemmKernel {
  GemmRowsFn fn;  // nullptr: this ISA has no kernel for the type
  ActFormat act;
};

constexpr uint32_t kMaxTypeId = 48;

// Quantizes one activation row of `cols` floats into dst (layout: act_layout.h).
using QuantizeRowFn = void (*)(const float* x, int64_t cols, uint8_t* dst);

using HalfToFloatFn = void (*)(const uint16_t* src, float* dst, int64_t n);
using FloatToHalfFn = void (*)(const float* src, uint16_t* dst, int64_t n);

struct KernelTable {
  Isa isa;
  HalfToFloatFn half_to_float;  // nullptr: scalar (quant/fp16.h)
  FloatToHalfFn float_to_half;
  GemmKernel gemm[kMaxTypeId];  // indexed by GGML type id, weights in the GGUF layout
  // Weights in the rows8 layout (cpu/repack.h); a type with an entry here is repacked at load.
  // The kernel is called with r0 a multiple of 8 (r1 may end inside a group of 8).
  GemmKernel rows8[kMaxTypeId];
  // By ActFormat; nullptr: use the scalar quantize_act_row. Must be bit-identical to it.
  QuantizeRowFn quantize[3];
};

const KernelTable& kernels_scalar();  // always built: the reference every SIMD kernel is tested against
const KernelTable& kernels_avx2();    // only when QD_HAVE_AVX2_KERNELS
const KernelTable& kernels_avx512();  // only when QD_HAVE_AVX512_KERNELS
const KernelTable& kernels_neon();    // only when QD_HAVE_NEON_KERNELS (aarch64)

// The table for `isa` (which must be available: see isa_available).
const KernelTable& kernel_table(Isa isa);

// Activation quantization, one row on its own (per-row scales), scalar. The SIMD versions in the
// tables produce the same bits, so every ISA sees the same activations.
void quantize_act_row(ActFormat f, const float* x, int64_t cols, uint8_t* dst);

}  // namespace qd::cpu

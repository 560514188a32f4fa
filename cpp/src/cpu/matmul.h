// Matrix products against weights viewed in place in the GGUF mapping.
//
// Contract (batch invariance, see DESIGN.md): y[i][r] depends only on x[i] and weight row r,
// computed in one fixed reduction order, whatever n and the thread count are (on a given ISA;
// ISAs differ in the last bits). On AVX-512 that order is llama.cpp's prompt path's for Q4_1,
// Q5_1, Q5_0, Q8_0 and the K-quants but Q2_K (x86/avx512/q4_1_q5_q8_0.h, x86/avx512/k_quants.h).
//
// Numerics: for quantized weights each activation row is first quantized to 8 bits per value,
// per block (Q8_0 blocks of 32 for the 32-element types, Q8_K blocks of 256 for the K-quants),
// as llama.cpp does; each value moves by at most amax(block) / 254. F32/F16/BF16 weights and
// types without an integer kernel use f32 activations. Kernels: the table of cpu/kernels.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/cpu_features.h"
#include "common/thread_pool.h"

namespace qd::cpu {

// How a matrix's bytes are arranged: as in the GGUF file (row after row), or repacked at load for
// kernels that read 8 rows at once (cpu/repack.h).
enum class Layout : uint8_t { gguf, rows8 };

// A 2-D weight: `rows` rows of `cols` elements of GGML type `type`. In the GGUF layout rows are
// `row_bytes` apart; in the rows8 layout row_bytes is still the size of one row as GGUF stores it.
struct Matrix {
  const uint8_t* data = nullptr;
  uint32_t type = 0;
  int64_t cols = 0;  // ne[0], the reduction dimension
  int64_t rows = 0;  // ne[1], the output dimension
  size_t row_bytes = 0;
  Layout layout = Layout::gguf;
};

// y[i * rows + r] = sum_c x[i * cols + c] * W[r][c]   for i < n, r < rows.
// Uses the process-wide ISA (active_isa(): best available, or QD_FORCE_ISA).
void matmul(const Matrix& w, const float* x, int64_t n, float* y, ThreadPool& pool);

// Same with an explicit ISA (tests and benchmarks); ArgError when `isa` is not available here.
void matmul(const Matrix& w, const float* x, int64_t n, float* y, ThreadPool& pool, Isa isa);

// Output rows ldy (>= rows) floats apart: y[i * ldy + r]. Row r's values are the same bits as in
// a product with any other row range of the same matrix (the kernels' contract).
void matmul(const Matrix& w, const float* x, int64_t n, float* y, int64_t ldy, ThreadPool& pool);

// ys[m] = the product of ws[m] with the same x, for 1 <= count <= 4 matrices of one width (q, k
// and v; gate and up): the input quantized once and one pool run over every product's rows.
// The same bits as count separate matmul() calls.
void matmul_group(const Matrix* const* ws, float* const* ys, int count, const float* x, int64_t n, ThreadPool& pool);

// Weight row r dequantized to cols floats (embedding lookup).
void dequantize_row(const Matrix& w, int64_t r, float* dst);

}  // namespace qd::cpu

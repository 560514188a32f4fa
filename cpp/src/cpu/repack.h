// Weights rearranged at load for kernels that read 8 weight rows at once ("rows8" layout).
//
// In the rows8 layout each group of 8 consecutive weight rows is stored in blocks: block b of the
// group holds block b of all 8 rows, with the quantized values interleaved in 4-byte
// k-groups, so that one 256-bit load carries 4 consecutive weights of each of the 8 rows and an
// integer dot product leaves one 32-bit lane per weight row. Scales are stored unpacked, one
// byte (or f16) per row, next to the values. The byte layout of each type is in repack.cpp; the
// order of the groups' blocks (chunks of 32 groups, block-major inside each) in rows8_order.h.
//
// A matrix is repacked only when the active ISA has a rows8 kernel for its type and its row count
// is a multiple of 8 (then the repacked copy replaces the mapped pages: see repack_matrix).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/cpu_features.h"
#include "cpu/matmul.h"

namespace qd::cpu {

// True when this type has a rows8 layout (and so a portable repack and row extraction).
bool rows8_supported(uint32_t type);

// Q6_K's rows8 block (repack.cpp): scales, then the values of its 16 groups of 16 weights, 96
// bytes each (X, Y, Z), from kQ6KRows8Values on, 32-byte aligned like the block so that no 32-byte
// load straddles a cache line.
constexpr size_t kQ6KRows8Block = 1696, kQ6KRows8Values = 160;

// Bytes of one block of a group of 8 rows in the rows8 layout (8 rows x 1 block).
size_t rows8_group_block_bytes(uint32_t type);

// Bytes of a whole matrix in the rows8 layout.
size_t rows8_bytes(const Matrix& w);

// True when `isa`'s kernel table serves `w` in the rows8 layout (so loading should repack it),
// unless QD_WEIGHT_LAYOUT=gguf keeps every matrix as stored: then the GGUF-layout kernels serve all
// (on avx512, llama.cpp's own summation orders: its logits bit for bit, at a cost in speed).
bool rows8_wanted(const Matrix& w, Isa isa);

// Storage for repacked matrices, uninitialized until repack_rows8 writes it: one allocation of
// bytes[i] for each matrix i, at (*offsets)[i], 64-byte aligned (the layouts keep their 32-byte
// loads inside cache lines). A buffer of 2 MiB or more starts on a 2 MiB boundary, is rounded up
// to whole 2 MiB pages and asks for transparent huge pages throughout, so that a model's weights
// in one buffer (repack_for_kernels) all stream from huge pages, its small matrices too: with 4
// KiB pages a stream misses the TLB every 4 KiB and the hardware prefetcher stops there. One
// buffer per matrix put only the aligned 2 MiB pages inside each in huge pages: 188 of the 0.5B
// draft's 400 MB (its 896-wide matrices are 0.06-2.5 MB), whose step then took 6-11 % longer
// (forced AVX2, Zen 4; docs/benchmarks.md).
struct AlignedFree {
  void operator()(uint8_t* p) const;
};
using Rows8Buffer = std::unique_ptr<uint8_t[], AlignedFree>;
Rows8Buffer rows8_alloc(const std::vector<size_t>& bytes, std::vector<size_t>* offsets);
Rows8Buffer rows8_alloc(const Matrix& w);  // one matrix: rows8_bytes(w) bytes

// Writes w (GGUF layout, rows a multiple of 8) in the rows8 layout to dst (rows8_bytes(w) bytes)
// and returns the matrix viewing dst. With drop_source, the pages of w's source bytes are handed
// back to the kernel as they are consumed (madvise), so the copy replaces them in memory.
// max_threads: at most this many threads, each a slice of at least 2 MiB of w (0: one per core;
// load time, where there is no thread pool yet); 1 where a generation repacks (no thread start
// on a step).
Matrix repack_rows8(const Matrix& w, uint8_t* dst, bool drop_source, int max_threads);

// w's shape as `to_type`: its type and row bytes (w.cols / block size * type size); data and
// layout as they are. The shape requantize and requantize_rows8 write.
Matrix requantized_shape(const Matrix& w, uint32_t to_type);

// w (GGUF layout, rows a multiple of 8) requantized to `to_type` through float32 row by row, the
// bytes to_type's from_float writes, packed into dst in the rows8 layout (rows8_bytes of the
// requantized matrix) without a requantized copy between: a draft model's weights requantized at
// load (model/requantize.cpp). drop_source and max_threads as for repack_rows8.
Matrix requantize_rows8(const Matrix& w, uint32_t to_type, uint8_t* dst, bool drop_source, int max_threads);

// The same requantization into dst in the GGUF layout (rows x the new row bytes), any row count:
// where the kernels read the requantized matrix as it is stored.
Matrix requantize(const Matrix& w, uint32_t to_type, uint8_t* dst, bool drop_source, int max_threads);

// Row r of w in the GGUF layout (w.row_bytes bytes), whatever w's layout.
void copy_row(const Matrix& w, int64_t r, uint8_t* dst);

}  // namespace qd::cpu

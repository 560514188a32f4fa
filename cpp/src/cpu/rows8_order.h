// The order of the rows8 layout's blocks (cpu/repack.h), shared by the repacking and every ISA's
// rows8 kernels. Portable: no SIMD here.
//
// The row groups (8 rows each) are stored in chunks of rows8_chunk_groups(type) groups, and inside
// a chunk block by block: block 0 of each of its groups, then block 1 of each, and so on. The last
// chunk holds the groups left over. With chunks of one group this is the group-by-group order:
// every block of group 0, then of group 1.
//
// Q4_K, Q5_K and Q6_K take chunks of 8 groups, for the AVX2 tall tiles (x86/avx2/rows8_common.h),
// which apply one block's broadcast activations to 32 row groups before the next block. In the
// group-by-group order they read block b of 32 groups 7-41 KB apart, which the hardware
// prefetcher does not follow; in chunks of 8 they read 4 sequential streams. Zen 4, forced AVX2,
// the 1.5B's forward of n tokens (bench/ab_builds.py, 20 pairs): n = 8 0.917 of the time
// (quartiles 0.901-0.940), n = 5 0.912. (Chunks of 32 groups read 0.90 at n = 8 but need the
// threads' row ranges in multiples of 256 rows, too coarse to balance the small matrices.) Their
// other tiles walk a chunk's groups in the same order (rows8_run_chunked on x86, rows8_walk on
// NEON), one float accumulator per group
// and row kept in memory between blocks. The other types keep chunks of one group: with blocks of
// 32 weights, the walk tiles' accumulators' trips through memory cost more than the order gains
// (AVX2 Q4_0, one row, in cache: 16 % slower). The 32-weight types' AVX2 tall tiles read runs of
// up to 10 consecutive blocks of each group there (rows8_tall), not measured in chunks of 8.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cpu/matmul.h"
#include "quant/quant_types.h"

namespace qd::cpu {

// Row groups per chunk of the rows8 layout for weights of this type: 1 or kRows8MaxChunkGroups.
constexpr int64_t kRows8MaxChunkGroups = 8;
constexpr int64_t rows8_chunk_groups(uint32_t type) {
  using quant::Type;
  return type == (uint32_t)Type::Q4_K || type == (uint32_t)Type::Q5_K || type == (uint32_t)Type::Q6_K ? kRows8MaxChunkGroups : 1;
}

// Rows per chunk: the unit that thread splits and views of the first rows keep whole.
constexpr int64_t rows8_chunk_rows(uint32_t type) { return 8 * rows8_chunk_groups(type); }

// Byte offset of block b of row group g, in a rows8 matrix of `groups` row groups of nb blocks,
// each group's block gb bytes, in chunks of `chunk` groups.
inline size_t rows8_block_offset(int64_t chunk, int64_t groups, int64_t nb, size_t gb, int64_t g, int64_t b) {
  const int64_t c0 = g / chunk * chunk;
  const int64_t ng = std::min(chunk, groups - c0);
  return ((size_t)c0 * (size_t)nb + (size_t)b * (size_t)ng + (size_t)(g - c0)) * gb;
}

// The row groups of one chunk that lie in a row range: block b of the span's group i (< ng) is at
// first + b * stride + i * gb; they hold rows [r0, r1).
struct Rows8Span {
  const uint8_t* first;
  size_t stride;  // bytes from one block of a group to its next: the chunk's groups x gb
  int64_t r0, r1;
  int ng;
};

// Calls fn(span) for each chunk's share of rows [r0, r1) (r0 a multiple of 8), in order. w is in
// the rows8 layout with nb blocks a row, a group's block gb bytes; its rows, if not a multiple of 8,
// end inside their last group (a view of the rows that matter of a layout padded with zero rows).
template <class Fn>
inline void rows8_spans(const Matrix& w, int64_t nb, size_t gb, int64_t r0, int64_t r1, Fn&& fn) {
  const int64_t chunk = rows8_chunk_groups(w.type), groups = (w.rows + 7) / 8, g_end = (r1 + 7) / 8;
  for (int64_t g = r0 / 8; g < g_end;) {
    const int64_t c0 = g / chunk * chunk;
    const int64_t c1 = std::min(c0 + chunk, groups), g1 = std::min(c1, g_end);
    fn(Rows8Span{w.data + rows8_block_offset(chunk, groups, nb, gb, g, 0), (size_t)(c1 - c0) * gb, 8 * g,
                 std::min(8 * g1, r1), (int)(g1 - g)});
    g = g1;
  }
}

// A view of w's first `rows` rows or more that the kernels can read: in the rows8 layout, rounded
// up to whole chunks (a chunk cut short would take its groups' blocks at another stride), at most
// all of w. Its outputs past `rows` are the matrix's own.
inline Matrix rows8_prefix(const Matrix& w, int64_t rows) {
  Matrix v = w;
  if (w.layout == Layout::rows8) {
    const int64_t chunk_rows = rows8_chunk_rows(w.type);
    rows = (rows + chunk_rows - 1) / chunk_rows * chunk_rows;
  }
  v.rows = std::min(rows, w.rows);
  return v;
}

}  // namespace qd::cpu

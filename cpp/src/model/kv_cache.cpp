#include "model/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "cpu/convert.h"
#include "model/attention_ops.h"
#include "model/ops.h"

namespace qd {

KvCache::KvCache(int n_layer, int n_ctx, int n_head_kv, int head_dim)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      n_head_kv_(n_head_kv),
      head_dim_(head_dim),
      size_((size_t)n_layer * n_ctx * n_head_kv * head_dim),
      k_(new uint16_t[size_]),
      v_(new uint16_t[size_]) {}

void KvCache::store(int il, int pos0, int n, const float* k, const float* v) {
  const size_t kv_dim = (size_t)n_head_kv_ * head_dim_;  // floats per input row
  for (int i = 0; i < n; i++) {
    for (int h = 0; h < n_head_kv_; h++) {
      const size_t src = (size_t)i * kv_dim + (size_t)h * head_dim_;
      cpu::fp32_to_fp16_row(k + src, k_.get() + offset(il, h, pos0 + i), head_dim_);
      cpu::fp32_to_fp16_row(v + src, v_.get() + offset(il, h, pos0 + i), head_dim_);
    }
  }
}

namespace {

// Keys (then values) are converted from F16 this many at a time into a small float buffer that
// stays in L1 (64 rows of 128: 32 KB): the batched kernels read it once per tile of queries.
// Larger chunks leave L1 (at 256 rows a lane's value rows, 8 KB apart, also collide in L1's sets:
// verify(8) at 3000 keys, AVX2 on Zen 4, spent 20 % more time in the value pass); smaller ones load
// and store each lane's weighted values more often. The chunking never changes a result bit.
// A score pass that reads the cache's F16 rows directly (below) takes them in the same chunks, the
// value pass in chunks of kDirectValueChunk.
constexpr int kKeyChunk = 64;

// A block of at most kDirectQueries queries per KV head (a decode's G heads) with heads of at
// least kDirectHeadDim reads the cache's F16 rows directly: the score and value kernels convert
// each row once per tile of queries, in registers, instead of writing a converted chunk that fills
// L1 (64 rows of 128 floats) and reading it back. The same bits either way. Zen 4, 2 threads, one
// row after 3000 positions, attention alone (bench/attention.py, medians of alternated rounds):
// forced AVX2 0.90x the time at the 1.5B's shape (G = 6, 128), 0.86x at Gemma-3's (4, 256), 0.76x
// at G = 2; AVX-512 0.85x (its scores convert a chunk still); but 1.02-1.04x at 64 (the 0.5B,
// SmolLM2: their chunk of 16 KB stays in L1), and 1.02-1.05x for 8-12 queries. The 1.5B's decode
// after 3000 tokens: 0.94x on forced AVX2, 0.98x on AVX-512 (after 1000: 0.98x; after 100: 1.00x).
//
// The value pass reads them directly at any number of queries (heads of kDirectHeadDim or more):
// its tiles load each value row once per 3 queries, and reading half the bytes from L2 pays for
// the conversion in registers (the converted chunk of 32 KB, it seems, does not stay in L1 beside
// the lanes' partial sums). The 1.5B's shape after 3000 positions, attention alone, medians of
// alternated rounds: forced AVX2 0.94-0.96x the time for 2 and 4 rows, 0.92x for 8 and 16, 0.94x
// for 8 rows after 500; Gemma-3's shape 0.88x for 8 rows; AVX-512 0.93x and 0.91x for 2 and 8
// rows. In the model (forced AVX2, after 3000 tokens) a forward of 2 / 4 / 8 rows takes 0.96x /
// 0.95x / 1.00x the time. Heads of 64 gain nothing: the 0.5B's shape 1.01x for one row and 0.94x
// for 8, SmolLM2's 1.13x and 1.02x.
constexpr int kDirectQueries = 6;
constexpr int kDirectHeadDim = 128;

// The value pass, reading F16 directly, takes its keys in chunks of this many: each lane's partial
// sums (key index mod 16) are loaded and stored once per 6 of its rows instead of 4. Larger chunks
// lose: past 128 a lane's rows (16 rows apart, 4 KiB at heads of 128) outnumber L1's 8 ways. Zen 4,
// 2 threads, after 3000 positions, attention alone (bench/attention.py's hook, 64 and 96 alternated
// in one process, medians of 6-8 rounds): the 1.5B's shape on forced AVX2 0.92x the time for 1 and
// 4 rows, 0.94x for 8 (after 500: 0.96x for 1 and 8); on AVX-512 0.93x for 1 and 2 rows, 0.94x for
// 8; Gemma-3's shape (heads of 256) on forced AVX2 0.93x for 1 and 8 rows. 112 and 128 measured
// within 2.5 % of 96 either way, 192 5 % slower than 64. The same bits at any chunk.
constexpr int kDirectValueChunk = 96;

// Query rows [i0, i1) (at positions pos0 + i) against one KV head: the G query heads of each row
// that share it, and all the block's rows, read each cached key and value row from memory once (a
// verify batch of 8 would otherwise stream a long context's cache 8 times), and they are one batch
// of queries for the score and value kernels, which load each row once per tile of queries:
// converted from F16 into a chunk buffer, or read as F16 and converted in registers (kDirectQueries,
// kDirectHeadDim). Two passes:
// scores and their softmax over each query's visible keys, then the weighted sum of values into 16
// partial sums by key index mod 16 (in position order within each), reduced by
// _mm512_reduce_add_ps's tree: llama.cpp's order for its F16 KQV matmul. Each (query, head) sees
// exactly the operations it would alone: the blocks and the conversion chunks never change a bit.
void attend_block(const KvCache& kv, int il, const float* q, size_t q_row, int i0, int i1, int pos0, int g,
                  const AttentionShape& sh, float* out) {
  const int hd = sh.head_dim;
  const int G = sh.n_head / sh.n_head_kv;
  const size_t stride = kv.pos_stride();
  auto first_key = [&](int pos) { return sh.window > 0 ? std::max(0, pos - sh.window + 1) : 0; };
  const int lo = first_key(pos0 + i0), hi = pos0 + i1 - 1;  // the keys any row of the block sees

  // Per worker thread, grown to the longest context seen, never shrunk: no allocation per token.
  // scores: row i's G score vectors of its nk(i) keys, rows one after another.
  thread_local std::vector<float> buf;
  thread_local std::vector<size_t> score_at;
  score_at.resize((size_t)(i1 - i0) + 1);
  score_at[0] = 0;
  for (int i = i0; i < i1; i++) {
    const int p = pos0 + i;
    score_at[(size_t)(i - i0) + 1] = score_at[(size_t)(i - i0)] + (size_t)G * (p - first_key(p) + 1);
  }
  const size_t need = score_at.back() + (size_t)kKeyChunk * hd;
  if (buf.size() < need) buf.resize(need);
  float* rows = buf.data() + score_at.back();  // [kKeyChunk][hd]

  // Per (row, head): its score vector's start, and 16 partial sums of weighted values by key index
  // mod 16 (see weighted_rows_add).
  auto scores_at = [&](int i, int h) {
    const int p = pos0 + i;
    return buf.data() + score_at[(size_t)(i - i0)] + (size_t)h * (p - first_key(p) + 1);
  };
  thread_local std::vector<float> part;
  const size_t part_size = (size_t)model::kLanes * hd;
  part.assign((size_t)(i1 - i0) * G * part_size, 0.0f);
  auto part_at = [&](int i, int h) { return part.data() + ((size_t)(i - i0) * G + h) * part_size; };
  auto q_at = [&](int i, int h) { return q + (size_t)i * q_row + (size_t)(g * G + h) * hd; };
  auto out_at = [&](int i, int h) { return out + (size_t)i * q_row + (size_t)(g * G + h) * hd; };

  // For each chunk of keys [c0, c0 + m) of `cache`: the rows that see part of it, in runs of rows
  // that see the same keys [a, b] (all of the chunk, but for the chunks holding a row's own
  // position or its window's start). use(i, e, a, b, kv) takes rows [i, e), whose G heads each are
  // a query of one batched kernel call, with kv = key a's row: converted, or the cache's F16 row
  // when the pass reads it directly (kDirectQueries, kDirectHeadDim).
  const bool direct_values = hd >= kDirectHeadDim && stride == (size_t)hd;
  const bool direct_keys = direct_values && (i1 - i0) * G <= kDirectQueries;
  auto over_chunks = [&](const uint16_t* (KvCache::*cache)(int, int, int) const, auto&& use) {
    const bool direct = cache == &KvCache::v ? direct_values : direct_keys;
    const int chunk = cache == &KvCache::v && direct ? kDirectValueChunk : kKeyChunk;  // converted: <= kKeyChunk
    for (int c0 = lo; c0 <= hi; c0 += chunk) {
      const int m = std::min(chunk, hi - c0 + 1);
      const uint16_t* src = (kv.*cache)(il, g, c0);
      if (!direct) model::half_to_float_rows(src, stride, rows, m, hd);
      auto seen = [&](int i) {
        const int p = pos0 + i;
        return std::pair<int, int>(std::max(c0, first_key(p)), std::min(c0 + m - 1, p));
      };
      for (int i = i0; i < i1;) {
        const auto [a, b] = seen(i);
        int e = i + 1;
        while (e < i1 && seen(e) == std::pair<int, int>(a, b)) e++;
        if (a <= b) {
          if (direct) {
            use(i, e, a, b, src + (size_t)(a - c0) * stride);
          } else {
            use(i, e, a, b, rows + (size_t)(a - c0) * hd);
          }
        }
        i = e;
      }
    }
  };
  // Rows [i, e)'s G heads as one batch: in_of(r, h) and out_of(r, h, offset of key a in the row's
  // scores) into the pointer arrays; returns the batch's size.
  thread_local std::vector<const float*> in_ptrs;
  thread_local std::vector<float*> out_ptrs;
  in_ptrs.resize((size_t)(i1 - i0) * G);
  out_ptrs.resize((size_t)(i1 - i0) * G);
  auto gather = [&](int i, int e, int a, auto&& in_of, auto&& out_of) {
    int nq = 0;
    for (int r = i; r < e; r++) {
      const int at = a - first_key(pos0 + r);
      for (int h = 0; h < G; h++, nq++) {
        in_ptrs[(size_t)nq] = in_of(r, h, at);
        out_ptrs[(size_t)nq] = out_of(r, h, at);
      }
    }
    return nq;
  };
  over_chunks(&KvCache::k, [&](int i, int e, int a, int b, const auto* k) {
    const int nq = gather(
        i, e, a, [&](int r, int h, int) { return q_at(r, h); }, [&](int r, int h, int at) { return scores_at(r, h) + at; });
    model::scaled_dots(in_ptrs.data(), out_ptrs.data(), nq, k, b - a + 1, hd, sh.scale);
  });
  for (int i = i0; i < i1; i++) {
    const int p = pos0 + i, j0 = first_key(p), nk = p - j0 + 1;
    for (int h = 0; h < G; h++) {
      float* s = scores_at(i, h);
      // Rounded to half before weighting the values, as llama.cpp's softmax followed by its KQV
      // matmul against F16 values does.
      model::softmax(s, nk, j0 % model::kLanes);
      model::round_to_half(s, nk);
    }
  }
  over_chunks(&KvCache::v, [&](int i, int e, int a, int b, const auto* v) {
    const int nq = gather(
        i, e, a, [&](int r, int h, int at) { return scores_at(r, h) + at; }, [&](int r, int h, int) { return part_at(r, h); });
    model::weighted_rows_add(in_ptrs.data(), out_ptrs.data(), nq, v, b - a + 1, hd, a % model::kLanes);
  });
  for (int i = i0; i < i1; i++) {
    for (int h = 0; h < G; h++) model::reduce_lanes(part_at(i, h), hd, out_at(i, h));
  }
}

}  // namespace

void attention(const KvCache& kv, int il, const float* q, int n, int pos0, const AttentionShape& sh, float* out,
               ThreadPool& pool) {
  const size_t q_row = (size_t)sh.n_head * sh.head_dim;
  // Query rows per task: a task for every thread (blocks per KV head), at most 16 rows sharing a
  // conversion.
  const int blocks_per_head = std::max(1, (pool.size() + sh.n_head_kv - 1) / sh.n_head_kv);
  const int per_task = std::clamp((n + blocks_per_head - 1) / blocks_per_head, 1, 16);
  const int blocks = (n + per_task - 1) / per_task;
  pool.run(blocks * sh.n_head_kv, [&](int task) {
    const int blk = task / sh.n_head_kv, g = task % sh.n_head_kv;
    const int i0 = blk * per_task, i1 = std::min(n, i0 + per_task);
    attend_block(kv, il, q, q_row, i0, i1, pos0, g, sh, out);
  });
}

}  // namespace qd

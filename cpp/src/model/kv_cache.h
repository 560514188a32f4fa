// The KV cache of one context: keys and values of every layer, KV head and position, stored in F16.
// Positions past n_past are stale and simply overwritten later, so truncation is free.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "common/thread_pool.h"

namespace qd {

class KvCache {
 public:
  KvCache(int n_layer, int n_ctx, int n_head_kv, int head_dim);

  int n_ctx() const { return n_ctx_; }
  // Elements from one position's row of a head to the next position's: a head's positions are
  // contiguous, so attention streams each KV head's keys and values sequentially.
  size_t pos_stride() const { return (size_t)head_dim_; }
  size_t bytes() const { return 2 * size_ * sizeof(uint16_t); }

  // Writes n rows of keys and values ([n][kv_dim] floats) at positions pos0..pos0+n-1.
  void store(int il, int pos0, int n, const float* k, const float* v);

  const uint16_t* k(int il, int h, int pos) const { return k_.get() + offset(il, h, pos); }
  const uint16_t* v(int il, int h, int pos) const { return v_.get() + offset(il, h, pos); }

 private:
  size_t offset(int il, int h, int pos) const {
    return (((size_t)il * n_head_kv_ + (size_t)h) * n_ctx_ + (size_t)pos) * head_dim_;
  }

  int n_layer_, n_ctx_, n_head_kv_, head_dim_;
  size_t size_;
  // Left uninitialised so the OS commits pages only as positions are written; a position is
  // never read before it is written (attention reads positions < n_past only).
  std::unique_ptr<uint16_t[]> k_;  // [n_layer][n_head_kv][n_ctx][head_dim]
  std::unique_ptr<uint16_t[]> v_;  // [n_layer][n_head_kv][n_ctx][head_dim]
};

struct AttentionShape {
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  float scale = 1.0f;  // multiplies q.k
  int window = 0;      // > 0: a query at p sees keys p-window+1..p only (sliding window)
};

// Causal attention of n query rows at positions pos0.. against layer il of the cache (which
// already holds those rows' keys and values). q, out: [n][n_head * head_dim].
// Each (row, head) reduces over its keys in position order: the result does not depend on n
// or on the thread count.
void attention(const KvCache& kv, int il, const float* q, int n, int pos0, const AttentionShape& shape, float* out,
               ThreadPool& pool);

}  // namespace qd

#include "model/kv_cache.h"

#include <algorithm>
#include <cmath>

#include "cpu/convert.h"
#include "model/attention_ops.h"
#include "model/ops.h"

namespace qd {

KvCache::KvCache(int n_layer, int n_ctx, int kv_dim)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      kv_dim_(kv_dim),
      size_((size_t)n_layer * n_ctx * kv_dim),
      k_(new uint16_t[size_]),
      v_(new uint16_t[size_]) {}

void KvCache::store(int il, int pos0, int n, const float* k, const float* v) {
  for (int i = 0; i < n; i++) {
    cpu::fp32_to_fp16_row(k + (size_t)i * kv_dim_, k_.get() + offset(il, pos0 + i), kv_dim_);
    cpu::fp32_to_fp16_row(v + (size_t)i * kv_dim_, v_.get() + offset(il, pos0 + i), kv_dim_);
  }
}

namespace {

// Keys (then values) are converted from F16 this many at a time into a small float buffer that
// stays in L1 (32 rows of 128: 16 KB; 128 rows measured 1-2 ms slower a token at 3500 positions
// of context on the 1.5B). The chunking never changes a result bit.
constexpr int kKeyChunk = 32;

// One query row against one KV head: the G query heads that share it are done together so each
// cached key and value row is converted from F16 once. Two passes: scores and their softmax
// over all visible keys, then the weighted sum of values, each in position order.
void attend_group(const KvCache& kv, int il, const float* q, int pos, int g, const AttentionShape& sh, float* out) {
  const int hd = sh.head_dim;
  const int G = sh.n_head / sh.n_head_kv;
  const int j0 = sh.window > 0 ? std::max(0, pos - sh.window + 1) : 0;
  const int nk = pos - j0 + 1;
  const size_t stride = (size_t)kv.kv_dim();

  // Per worker thread, grown to the longest context seen, never shrunk: no allocation per token.
  thread_local std::vector<float> buf;
  const size_t need = (size_t)G * nk + (size_t)kKeyChunk * hd;
  if (buf.size() < need) buf.resize(need);
  float* scores = buf.data();  // [G][nk]
  float* rows = scores + (size_t)G * nk;  // [kKeyChunk][hd]

  for (int c0 = 0; c0 < nk; c0 += kKeyChunk) {
    const int m = std::min(kKeyChunk, nk - c0);
    model::half_to_float_rows(kv.k(il, j0 + c0) + (size_t)g * hd, stride, rows, m, hd);
    for (int h = 0; h < G; h++) model::scaled_dots(q + (size_t)h * hd, rows, m, hd, sh.scale, scores + (size_t)h * nk + c0);
  }
  for (int h = 0; h < G; h++) {
    float* s = scores + (size_t)h * nk;
    float mx = s[0];
    for (int j = 1; j < nk; j++) mx = std::max(mx, s[j]);
    // Normalised, then rounded to half before weighting the values, as llama.cpp's softmax
    // followed by its KQV matmul against F16 values does.
    const float inv_sum = 1.0f / model::exp_shift_sum(s, nk, mx);
    for (int j = 0; j < nk; j++) s[j] *= inv_sum;
    model::round_to_half(s, nk);
    std::fill(out + (size_t)h * hd, out + (size_t)(h + 1) * hd, 0.0f);
  }
  for (int c0 = 0; c0 < nk; c0 += kKeyChunk) {
    const int m = std::min(kKeyChunk, nk - c0);
    model::half_to_float_rows(kv.v(il, j0 + c0) + (size_t)g * hd, stride, rows, m, hd);
    for (int h = 0; h < G; h++) model::weighted_rows_add(scores + (size_t)h * nk + c0, rows, m, hd, out + (size_t)h * hd);
  }
}

}  // namespace

void attention(const KvCache& kv, int il, const float* q, int n, int pos0, const AttentionShape& sh, float* out,
               ThreadPool& pool) {
  const size_t q_row = (size_t)sh.n_head * sh.head_dim;
  const size_t group = (size_t)sh.head_dim * (sh.n_head / sh.n_head_kv);
  pool.run(n * sh.n_head_kv, [&](int task) {
    const int i = task / sh.n_head_kv, g = task % sh.n_head_kv;
    const size_t off = i * q_row + g * group;
    attend_group(kv, il, q + off, pos0 + i, g, sh, out + off);
  });
}

}  // namespace qd

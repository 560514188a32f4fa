#include "model/kv_cache.h"

#include <algorithm>
#include <cmath>

#include "model/ops.h"

namespace qd {

KvCache::KvCache(int n_layer, int n_ctx, int kv_dim)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      kv_dim_(kv_dim),
      k_((size_t)n_layer * n_ctx * kv_dim),
      v_((size_t)n_layer * n_ctx * kv_dim) {}

void KvCache::store(int il, int pos0, int n, const float* k, const float* v) {
  for (int i = 0; i < n; i++) {
    model::float_to_half_row(k + (size_t)i * kv_dim_, k_.data() + offset(il, pos0 + i), kv_dim_);
    model::float_to_half_row(v + (size_t)i * kv_dim_, v_.data() + offset(il, pos0 + i), kv_dim_);
  }
}

namespace {

// One query row against one KV head: the G query heads that share it are done together so each
// cached key and value row is converted from F16 once.
void attend_group(const KvCache& kv, int il, const float* q, int pos, int g, const AttentionShape& sh, float* out) {
  const int hd = sh.head_dim;
  const int G = sh.n_head / sh.n_head_kv;
  const int j0 = sh.window > 0 ? std::max(0, pos - sh.window + 1) : 0;
  const int nk = pos - j0 + 1;

  // Per worker thread, grown to the longest context seen, never shrunk: no allocation per token.
  thread_local std::vector<float> buf;
  if (buf.size() < (size_t)G * nk + hd) buf.resize((size_t)G * nk + hd);
  float* scores = buf.data();  // [G][nk]
  float* row = scores + (size_t)G * nk;

  for (int jj = 0; jj < nk; jj++) {
    model::half_to_float_row(kv.k(il, j0 + jj) + (size_t)g * hd, row, hd);
    for (int h = 0; h < G; h++) scores[(size_t)h * nk + jj] = sh.scale * model::dot(q + (size_t)h * hd, row, hd);
  }
  float sums[256];  // G <= n_head / n_head_kv, checked at load (<= 256)
  for (int h = 0; h < G; h++) {
    float* s = scores + (size_t)h * nk;
    float mx = s[0];
    for (int jj = 1; jj < nk; jj++) mx = std::max(mx, s[jj]);
    float sum = 0.0f;
    for (int jj = 0; jj < nk; jj++) {
      s[jj] = std::exp(s[jj] - mx);
      sum += s[jj];
    }
    sums[h] = sum;
    std::fill(out + (size_t)h * hd, out + (size_t)(h + 1) * hd, 0.0f);
  }
  for (int jj = 0; jj < nk; jj++) {
    model::half_to_float_row(kv.v(il, j0 + jj) + (size_t)g * hd, row, hd);
    for (int h = 0; h < G; h++) {
      const float w = scores[(size_t)h * nk + jj];
      float* o = out + (size_t)h * hd;
      for (int d = 0; d < hd; d++) o[d] += w * row[d];
    }
  }
  for (int h = 0; h < G; h++) model::scale(out + (size_t)h * hd, 1.0f / sums[h], hd);
}

}  // namespace

void attention(const KvCache& kv, int il, const float* q, int n, int pos0, const AttentionShape& sh, float* out,
               ThreadPool& pool) {
  const int G = sh.n_head / sh.n_head_kv;
  const size_t q_row = (size_t)sh.n_head * sh.head_dim;
  const size_t group = (size_t)G * sh.head_dim;
  pool.run(n * sh.n_head_kv, [&](int task) {
    const int i = task / sh.n_head_kv, g = task % sh.n_head_kv;
    attend_group(kv, il, q + i * q_row + g * group, pos0 + i, g, sh, out + i * q_row + g * group);
  });
}

}  // namespace qd

#include "model/recurrent_state.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/thread_pool.h"

namespace qd::model {

namespace {

constexpr int kLanes = 8;  // partial sums of each dot product, reduced in one fixed order

float reduce(const float* acc) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// One position of the gated delta rule for one head, as llama.cpp's ggml_gated_delta_net computes
// it (M = the head's S x S state, row j over k-index i):
//   M *= exp(g);  d_j = (v_j - M_j . k) * beta;  M_j += d_j k;  out_j = (M_j . q) / sqrt(S)
// src -> dst (they may be the same buffer). Every row j is independent and reduced in one order,
// so the result depends on nothing but this head's inputs.
void delta_rule_row(const float* src, float* dst, const float* q, const float* k, const float* v, float g, float beta,
                    int S, float* out) {
  const float e = std::exp(g);
  const float scale = 1.0f / std::sqrt((float)S);
  for (int j = 0; j < S; j++) {
    const float* a = src + (size_t)j * S;
    float* b = dst + (size_t)j * S;
    float acc[kLanes] = {};
    for (int i = 0; i < S; i += kLanes) {
      for (int l = 0; l < kLanes; l++) {
        const float x = a[i + l] * e;
        b[i + l] = x;
        acc[l] += x * k[i + l];
      }
    }
    const float d = (v[j] - reduce(acc)) * beta;
    float acc2[kLanes] = {};
    for (int i = 0; i < S; i += kLanes) {
      for (int l = 0; l < kLanes; l++) {
        const float x = b[i + l] + d * k[i + l];
        b[i + l] = x;
        acc2[l] += x * q[i + l];
      }
    }
    if (out) out[j] = reduce(acc2) * scale;
  }
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

RecurrentState::RecurrentState(const Hparams& hp, Context::Rollback mode, int window)
    : mode_(mode), window_(window) {
  if (window < 1 || window > 256) throw ArgError("rollback window must be in [1, 256], got " + std::to_string(window));
  S_ = hp.ssm_d_state;
  H_ = hp.ssm_n_v_heads;
  Hk_ = hp.ssm_n_k_heads;
  C_ = 2 * Hk_ * S_ + H_ * S_;
  d_conv_ = hp.ssm_d_conv;
  ring_ = window + d_conv_;
  n_slots_ = mode == Context::Rollback::snapshot ? window + 1 : 2;
  state_floats_ = (size_t)H_ * S_ * S_;
  index_.assign((size_t)hp.n_layer, -1);
  for (int il = 0; il < hp.n_layer; il++)
    if (hp.recurrent_layers[(size_t)il]) index_[(size_t)il] = n_r_++;
  state_.assign((size_t)n_r_ * n_slots_ * state_floats_, 0.0f);
  conv_.assign((size_t)n_r_ * ring_ * C_, 0.0f);
  if (mode == Context::Rollback::recompute) {
    rec_qkv_.assign((size_t)n_r_ * window * C_, 0.0f);
    rec_gb_.assign((size_t)n_r_ * window * 2 * H_, 0.0f);
  }
}

size_t RecurrentState::bytes() const {
  return (state_.size() + conv_.size() + rec_qkv_.size() + rec_gb_.size()) * sizeof(float);
}

void RecurrentState::reset() {
  lo_ = 0;
  live_ = start_ = 0;
  rec_n_ = 0;
  n_ = 0;
  for (int r = 0; r < n_r_; r++) std::memset(slot(r, 0), 0, state_floats_ * sizeof(float));
}

int RecurrentState::slot_after(int pos) const { return (pos + 1) % n_slots_; }

void RecurrentState::begin_ubatch(int pos0, int n) {
  pos0_ = pos0;
  n_ = n;
  recorded_ = mode_ == Context::Rollback::recompute && n <= window_;
  if (mode_ == Context::Rollback::recompute) start_ = live_;
  if (!recorded_) {
    tmp_qkv_.resize(std::max(tmp_qkv_.size(), (size_t)n * C_));
    tmp_gb_.resize(std::max(tmp_gb_.size(), (size_t)n * 2 * H_));
  }
}

void RecurrentState::end_ubatch() {
  const int end = pos0_ + n_;
  if (mode_ == Context::Rollback::snapshot) {
    lo_ = std::max(lo_, end - window_);
    return;
  }
  live_ = 1 - start_;
  rec_pos0_ = pos0_;
  rec_n_ = recorded_ ? n_ : 0;
  lo_ = recorded_ ? pos0_ : end;
}

void RecurrentState::truncate(int n_past_now, int n_past) {
  if (n_past == n_past_now || mode_ == Context::Rollback::snapshot) return;  // a snapshot: the slot of n_past
  const int k = n_past - rec_pos0_;  // rows of the recorded eval to keep, 0 <= k < rec_n_
  if (k == 0) {
    live_ = start_;
    return;
  }
  for (int r = 0; r < n_r_; r++) {
    const float* qkv = rec_qkv_.data() + (size_t)r * window_ * C_;
    const float* gb = rec_gb_.data() + (size_t)r * window_ * 2 * H_;
    run_rows(r, qkv, gb, rec_pos0_, k, nullptr, nullptr);
  }
  live_ = 1 - start_;
}

float* RecurrentState::qkv_rows(int r) {
  return recorded_ ? rec_qkv_.data() + (size_t)r * window_ * C_ : tmp_qkv_.data();
}

float* RecurrentState::gb_rows(int r) {
  return recorded_ ? rec_gb_.data() + (size_t)r * window_ * 2 * H_ : tmp_gb_.data();
}

void RecurrentState::conv_silu(int r, const float* mix, const float* w) {
  float* ring = conv_.data() + (size_t)r * ring_ * C_;
  float* out = qkv_rows(r);
  const int K = d_conv_;
  for (int t = 0; t < n_; t++) {
    const float* taps[16];
    for (int k = 0; k < K; k++) {  // the input rows of positions p - K + 1 .. p
      const int p = pos0_ + t - (K - 1) + k;
      taps[k] = p >= pos0_ ? mix + (size_t)(p - pos0_) * C_ : p < 0 ? nullptr : ring + (size_t)(p % ring_) * C_;
    }
    float* o = out + (size_t)t * C_;
    for (int c = 0; c < C_; c++) {
      float sum = 0.0f;  // in tap order, as ggml_ssm_conv
      for (int k = 0; k < K; k++) sum += (taps[k] ? taps[k][c] : 0.0f) * w[(size_t)c * K + k];
      o[c] = silu(sum);
    }
  }
  for (int t = std::max(0, n_ - ring_); t < n_; t++) {
    std::memcpy(ring + (size_t)((pos0_ + t) % ring_) * C_, mix + (size_t)t * C_, (size_t)C_ * sizeof(float));
  }
}

void RecurrentState::run_rows(int r, const float* qkv, const float* gb, int pos0, int n, float* out, ThreadPool* pool) {
  const int S = S_, H = H_, Hk = Hk_, C = C_;
  const int key_dim = Hk * S;
  const bool snap = mode_ == Context::Rollback::snapshot;
  // recompute: the first row reads the state at pos0 (slot start_) and writes the other slot,
  // later rows update that one in place. snapshot: row p reads slot p and writes slot p + 1.
  auto head = [&](int h) {
    const size_t off = (size_t)h * S * S;
    for (int t = 0; t < n; t++) {
      const int p = pos0 + t;
      const int from = snap ? p % n_slots_ : (t == 0 ? start_ : 1 - start_);
      const int to = snap ? slot_after(p) : 1 - start_;
      const float* row = qkv + (size_t)t * C;
      // v head h reads q / k head h % Hk: llama.cpp's broadcast when there are more v heads.
      const float* q = row + (size_t)(h % Hk) * S;
      const float* k = row + key_dim + (size_t)(h % Hk) * S;
      const float* v = row + 2 * key_dim + (size_t)h * S;
      const float* g = gb + (size_t)t * 2 * H;
      delta_rule_row(slot(r, from) + off, slot(r, to) + off, q, k, v, g[h], g[H + h], S,
                     out ? out + (size_t)t * H * S + (size_t)h * S : nullptr);
    }
  };
  if (pool && pool->size() > 1) {
    pool->run(H, head);
  } else {
    for (int h = 0; h < H; h++) head(h);
  }
}

void RecurrentState::delta_rule(int r, float* out, ThreadPool& pool) {
  run_rows(r, qkv_rows(r), gb_rows(r), pos0_, n_, out, &pool);
}

}  // namespace qd::model

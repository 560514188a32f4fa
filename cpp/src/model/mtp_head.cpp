#include "model/mtp_head.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "common/thread_pool.h"
#include "model/kv_cache.h"
#include "model/ops.h"
#include "model/rope_freqs.h"
#include "model/transformer.h"

namespace qd::model {

namespace {

constexpr int kMaxRows = 128;  // rows per pass; longer evals are split (results do not depend on it)

const TransformerModel& mtp_model(const std::shared_ptr<const Model>& m) {
  const auto* t = dynamic_cast<const TransformerModel*>(m.get());
  if (!t) throw ArgError("MtpHead: model was not created by Model::load");
  if (t->weights().mtp.empty())
    throw UnsupportedError(m->file().path() + ": the file has no multi-token-prediction (nextn) layers");
  return *t;
}

double matrix_bytes(const cpu::Matrix& m) { return m.data ? (double)m.rows * (double)m.row_bytes : 0.0; }

}  // namespace

struct MtpHead::Impl {
  const TransformerModel& m;
  const Hparams& hp;
  const LayerWeights& L;
  std::shared_ptr<ThreadPool> pool;
  KvCache kv;
  RopeFreqs freq;
  std::vector<float> emb, cat, x, xn, tmp, q, k, v, att, gate, up, qgate, cos, sin, hn;

  Impl(const TransformerModel& model, int n_ctx, std::shared_ptr<ThreadPool> p)
      : m(model),
        hp(model.hparams()),
        L(model.weights().mtp[0]),
        pool(std::move(p)),
        kv(1, n_ctx, hp.n_head_kv, hp.head_dim),
        freq((float)hp.rope_base, (float)hp.rope_freq_scale, nullptr, hp) {
    const size_t n = kMaxRows, E = hp.n_embd, Q = (size_t)hp.n_head * hp.head_dim;
    const size_t KV = (size_t)hp.n_head_kv * hp.head_dim, F = hp.n_ff, R = (size_t)hp.n_rot / 2;
    for (auto* b : {&emb, &x, &xn, &tmp, &hn}) b->resize(n * E);
    cat.resize(n * 2 * E);
    for (auto* b : {&q, &att}) b->resize(n * Q);
    qgate.resize(n * 2 * Q);
    for (auto* b : {&k, &v}) b->resize(n * KV);
    for (auto* b : {&gate, &up}) b->resize(n * F);
    for (auto* b : {&cos, &sin}) b->resize(n * R);
  }

  // Rows [0, n) at positions pos0..: leaves head_norm(x) in hn.
  void forward(const int32_t* ids, const float* h, int n, int pos0) {
    const Weights& w = m.weights();
    const size_t E = hp.n_embd;
    const cpu::Matrix& embd = L.mtp_embd.data ? L.mtp_embd : w.token_embd;
    for (int i = 0; i < n; i++) cpu::dequantize_row(embd, ids[i], emb.data() + i * E);
    for (int i = 0; i < n; i++) {  // [enorm(e) | hnorm(h)]
      rmsnorm(emb.data() + i * E, L.mtp_enorm, 1, hp.n_embd, hp.rms_eps, cat.data() + i * 2 * E);
      rmsnorm(h + i * E, L.mtp_hnorm, 1, hp.n_embd, hp.rms_eps, cat.data() + i * 2 * E + E);
    }
    cpu::matmul(L.eh_proj, cat.data(), n, x.data(), *pool);
    Step s(hp, *pool, kv);
    s.n = n;
    s.pos0 = pos0;
    s.x = x.data(), s.xn = xn.data(), s.tmp = tmp.data();
    s.q = q.data(), s.k = k.data(), s.v = v.data(), s.att = att.data();
    s.gate = gate.data(), s.up = up.data(), s.qgate = qgate.data();
    s.kv_layer = 0;
    rope_rows(freq, hp, pos0, n, cos.data(), sin.data());
    s.rope_global = {cos.data(), sin.data()};
    m.mtp_layer(s, 0);
    rmsnorm(x.data(), L.mtp_head_norm ? L.mtp_head_norm : w.output_norm, n, hp.n_embd, hp.rms_eps, hn.data());
  }

  const cpu::Matrix& head() const { return L.mtp_head.data ? L.mtp_head : m.weights().output; }
};

MtpHead::MtpHead(std::shared_ptr<const Model> model, int n_ctx, std::shared_ptr<ThreadPool> pool)
    : model_(std::move(model)) {
  const TransformerModel& m = mtp_model(model_);
  if (n_ctx < 1) throw ArgError("MtpHead: n_ctx must be at least 1, got " + std::to_string(n_ctx));
  if (!pool) throw ArgError("MtpHead: thread pool is null");
  n_ctx_ = n_ctx;
  impl_ = std::make_unique<Impl>(m, n_ctx, std::move(pool));
}

MtpHead::~MtpHead() = default;

void MtpHead::truncate(int n_past) {
  if (n_past < 0 || n_past > n_past_)
    throw ArgError("MtpHead::truncate: n_past " + std::to_string(n_past) + " is outside [0, " + std::to_string(n_past_) + "]");
  n_past_ = n_past;
}

void MtpHead::eval(const int32_t* ids, const float* h, int n, float* logits, bool last_only, float* h_out) {
  if (n <= 0) throw ArgError("MtpHead::eval: no rows");
  if (n > n_ctx_ - n_past_) throw ArgError("MtpHead::eval: " + std::to_string(n) + " rows exceed n_ctx " + std::to_string(n_ctx_));
  const int V = model_->n_vocab();
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= V) throw ArgError("MtpHead::eval: token id " + std::to_string(ids[i]) + " is outside the vocabulary");
  Impl& d = *impl_;
  const size_t E = d.hp.n_embd;
  for (int done = 0; done < n;) {
    const int rows = std::min(kMaxRows, n - done);
    d.forward(ids + done, h + done * E, rows, n_past_);
    n_past_ += rows;
    done += rows;
    if (h_out) std::copy(d.hn.begin(), d.hn.begin() + rows * E, h_out + (done - rows) * E);
    if (!logits) continue;
    if (!last_only) {
      cpu::matmul(d.head(), d.hn.data(), rows, logits + (size_t)(done - rows) * V, *d.pool);
    } else if (done == n) {
      cpu::matmul(d.head(), d.hn.data() + (size_t)(rows - 1) * E, 1, logits, *d.pool);
    }
  }
}

double MtpHead::weight_bytes() const {
  const LayerWeights& L = impl_->L;
  double b = matrix_bytes(L.eh_proj) + matrix_bytes(impl_->head());
  for (const cpu::Matrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_gate, &L.ffn_up, &L.ffn_down}) b += matrix_bytes(*w);
  return b;
}

}  // namespace qd::model
